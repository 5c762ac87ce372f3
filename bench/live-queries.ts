// Type-graphql's decorators need the metadata polyfill before any resolver class is loaded.
import 'reflect-metadata';
import { fork, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import WebSocket from 'ws';
import { SUBSCRIPTIONS_PATH } from '../src/graphql/subscriptions';
import { prepareDatabase } from './database';
import { forkServer, type ServerProcess } from './processes';
import { runServerRole } from './servers';
import { nameList, positiveInteger } from './settings';
import { ADMIN_SECRET, signUserToken } from './shared';

/**
 * Live queries of the generated API: BENCH_SUBSCRIBERS graphql-ws subscribers, each on its own
 * connection, opened by client processes other than the server's, on a tracked table whose
 * select permission filters by `X-Hasura-User-Id`. Sides, in one run:
 *
 * - `naive`: a cohort per user (up to BENCH_SUBSCRIBERS cohorts), refetched one statement per
 *   cohort (GQL_GRAPHQL_LIVE_QUERIES_BATCH_SIZE=1);
 * - `multiplexed`: the same, as Plinth ships (batches of 1000 cohorts per statement);
 * - `shared`: every subscriber on one result (`live_items_by_pk(id: 1)` as the admin: one cohort).
 *
 *   npm run bench:live-queries
 *
 * Each event commits one changed row (an UPDATE through pg, autocommit) and measures from just
 * before it to the client receiving the new result: the one subscriber whose row it is (per-user
 * sides) or all of them (shared). Printed per side: commit-to-delivery p50/p99/max, statements
 * per refetch (plinth_live_query_statements_total over the refetch histogram's count, read before
 * and after the events), refetch duration, server CPU per event (less its idle rate with everyone
 * connected), and resident memory idle, connected and after the subscribers left.
 *
 * Environment: BENCH_SUBSCRIBERS (2000), BENCH_CLIENT_PROCESSES (2), BENCH_EVENTS (20),
 * BENCH_SIDES (naive,multiplexed,shared), BENCH_LOG_LEVEL (warn), BENCH_DATABASE_URL or
 * DATABASE_URL. `ulimit -n` must exceed BENCH_SUBSCRIBERS.
 */

const ROOT = path.resolve(__dirname, '..', '..');
const RESULTS_DIR = path.join(ROOT, 'bench', 'results');
const RESULTS_FILE = path.join(RESULTS_DIR, 'live-queries-latest.json');
const MIB = 1024 * 1024;
const CONNECT_CONCURRENCY = 100;
const EVENT_TIMEOUT_MS = 20_000;
/** After an event's delivery, before the next: the refetch's later batches finish. */
const SETTLE_MS = 1000;
/** How long the server's idle CPU (subscribers connected, nothing changing) is measured. */
const IDLE_WINDOW_MS = 2000;
const SIDES = ['naive', 'multiplexed', 'shared'] as const;
type Side = (typeof SIDES)[number];
const PER_USER_QUERY = 'subscription { live_items { id label } }';
const SHARED_QUERY = 'subscription { live_items_by_pk(id: 1) { id label } }';

/** Parent → client process. */
type ClientCommand = { type: 'open'; url: string; from: number; count: number; shared: boolean } | { type: 'close' };
/** Client process → parent. */
type ClientReport = { type: 'opened'; failed: number } | { type: 'delivered'; seq: number; at: number } | { type: 'closed' };

const now = () => performance.timeOrigin + performance.now();
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

// --- Client processes --------------------------------------------------------------------------

/** Opens one connection per user (user-<from> on), each subscribing once; reports each changed result's arrival. */
function runClientRole(): void {
  const sockets: WebSocket[] = [];
  const send = (report: ClientReport) => process.send!(report);
  const eventPattern = /bench-(\d+)/;

  async function open(command: Extract<ClientCommand, { type: 'open' }>): Promise<void> {
    let failed = 0;
    let next = 0;
    const openOne = (user: number) =>
      new Promise<void>((resolve) => {
        const socket = new WebSocket(command.url, 'graphql-transport-ws', { perMessageDeflate: false });
        const headers = command.shared ? { 'x-gql-admin-secret': ADMIN_SECRET } : { authorization: `Bearer ${signUserToken(`user-${user}`, 3600)}` };
        let first = true;
        socket.on('open', () => socket.send(JSON.stringify({ type: 'connection_init', payload: { headers } })));
        socket.on('message', (data) => {
          const text = String(data);
          if (text.includes('"connection_ack"')) {
            socket.send(JSON.stringify({ id: '1', type: 'subscribe', payload: { query: command.shared ? SHARED_QUERY : PER_USER_QUERY } }));
            return;
          }
          if (text.includes('"next"')) {
            if (first) {
              first = false;
              sockets.push(socket);
              return resolve();
            }
            const event = eventPattern.exec(text);
            if (event) send({ type: 'delivered', seq: Number(event[1]), at: now() });
            return;
          }
          if (!text.includes('"ping"') && !text.includes('"pong"')) process.stderr.write(`client: unexpected message ${text.slice(0, 300)}\n`);
          if (first) {
            failed++;
            resolve();
          }
        });
        socket.on('error', () => {
          failed++;
          resolve();
        });
      });
    const worker = async () => {
      while (next < command.count) await openOne(command.from + next++);
    };
    await Promise.all(Array.from({ length: CONNECT_CONCURRENCY }, worker));
    send({ type: 'opened', failed });
  }

  process.on('message', (command: ClientCommand) => {
    if (command.type === 'open') return void open(command);
    for (const socket of sockets.splice(0)) socket.close(1000, 'done');
    send({ type: 'closed' });
  });
  process.on('disconnect', () => process.exit(0));
}

function startClient(): ChildProcess {
  return fork(__filename, ['clients'], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
}

function reply<T extends ClientReport['type']>(child: ChildProcess, type: T, command?: ClientCommand): Promise<Extract<ClientReport, { type: T }>> {
  return new Promise((resolve) => {
    const onMessage = (report: ClientReport) => {
      if (report.type !== type) return;
      child.off('message', onMessage);
      resolve(report as never);
    };
    child.on('message', onMessage);
    if (command) child.send(command);
  });
}

// --- The run -----------------------------------------------------------------------------------

interface Settings {
  subscribers: number;
  clientProcesses: number;
  events: number;
  sides: Side[];
  logLevel: string;
}

interface SideResult {
  side: Side;
  subscribers: number;
  failed: number;
  connectSeconds: number;
  deliveryMs: { p50: number; p99: number; max: number };
  lost: number;
  statementsPerRefetch: number;
  refetchMs: number;
  serverCpuMsPerEvent: number;
  rssMiB: { idle: number; connected: number; afterLeaving: number };
}

function quantile(sorted: number[], q: number): number {
  if (sorted.length === 0) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))];
}

async function metric(base: string, name: string): Promise<number> {
  const text = await (await fetch(`${base}/metrics`)).text();
  const line = text.split('\n').find((candidate) => candidate.startsWith(`${name} `));
  return line ? Number(line.split(' ')[1]) : 0;
}

async function metadata(base: string, body: unknown): Promise<void> {
  const response = await fetch(`${base}/v1/metadata`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-gql-admin-secret': ADMIN_SECRET },
    body: JSON.stringify(body),
  });
  if (response.status !== 200) throw new Error(`metadata ${JSON.stringify(body)}: ${response.status} ${await response.text()}`);
}

/** The table (one row per user, indexed by owner), tracked, with the per-user select permission. */
async function prepareTable(db: pg.Client, base: string, subscribers: number): Promise<void> {
  await fetch(`${base}/v1/metadata`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-gql-admin-secret': ADMIN_SECRET },
    body: JSON.stringify({ type: 'pg_untrack_table', args: { table: 'live_items', cascade: true } }),
  });
  await db.query(`DROP TABLE IF EXISTS live_items;
    CREATE TABLE live_items (id int PRIMARY KEY, owner text NOT NULL, label text NOT NULL);
    CREATE INDEX ON live_items (owner);
    INSERT INTO live_items SELECT n, 'user-' || n, 'initial' FROM generate_series(1, ${subscribers}) AS n;
    ANALYZE live_items`);
  await metadata(base, { type: 'pg_track_table', args: { table: 'live_items' } });
  await metadata(base, {
    type: 'pg_create_select_permission',
    args: { table: 'live_items', role: 'user', permission: { columns: ['id', 'owner', 'label'], filter: { owner: { _eq: 'X-Hasura-User-Id' } } } },
  });
}

async function measureSide(side: Side, clients: ChildProcess[], databaseUrl: string, settings: Settings, seq: { next: number }): Promise<SideResult> {
  process.stderr.write(`starting ${side}...\n`);
  const server: ServerProcess<string> = await forkServer(__filename, 'plinth', {
    execArgv: [],
    env: {
      ...process.env,
      BENCH_DATABASE_URL: databaseUrl,
      BENCH_LOG_LEVEL: settings.logLevel,
      GQL_GRAPHQL_LIVE_QUERIES_BATCH_SIZE: side === 'naive' ? '1' : '1000',
      GQL_GRAPHQL_LIVE_QUERIES_FALLBACK_INTERVAL_MS: '0',
      PLINTH_STARTUP_COLLECTION: 'false',
    },
    logFile: path.join(RESULTS_DIR, `live-queries-${side}.log`),
  });
  const base = server.url.replace(/\/v1\/graphql$/, '');
  const db = new pg.Client({ connectionString: databaseUrl });
  await db.connect();
  try {
    await prepareTable(db, base, settings.subscribers);
    const rss = async () => (await server.usage()).rssBytes / MIB;
    const idle = await rss();
    const started = now();
    const perClient = Math.ceil(settings.subscribers / clients.length);
    const wsUrl = `${base.replace(/^http/, 'ws')}${SUBSCRIPTIONS_PATH}`;
    const opened = await Promise.all(
      clients.map((child, index) =>
        reply(child, 'opened', {
          type: 'open',
          url: wsUrl,
          from: 1 + index * perClient,
          count: Math.max(0, Math.min(perClient, settings.subscribers - index * perClient)),
          shared: side === 'shared',
        }),
      ),
    );
    const connectSeconds = (now() - started) / 1000;
    const failed = opened.reduce((sum, report) => sum + report.failed, 0);
    await sleep(1000);
    const connected = await rss();

    const latencies: number[] = [];
    let lost = 0;
    let cpuMicros = 0;
    // The server's CPU with everyone connected and nothing changing, subtracted from each event's.
    const idleFrom = await server.usage();
    await sleep(IDLE_WINDOW_MS);
    const idleMicrosPerMs = ((await server.usage()).micros - idleFrom.micros) / IDLE_WINDOW_MS;
    const counters = () =>
      Promise.all(
        ['plinth_live_query_statements_total', 'plinth_live_query_refetch_duration_seconds_count', 'plinth_live_query_refetch_duration_seconds_sum'].map(
          (name) => metric(base, name),
        ),
      );
    const [statementsBefore, refetchesBefore, secondsBefore] = await counters();
    const expected = side === 'shared' ? settings.subscribers - failed : 1;
    for (let event = 0; event < settings.events; event++) {
      const number = seq.next++;
      const id = side === 'shared' ? 1 : 1 + Math.floor(Math.random() * settings.subscribers);
      const times: number[] = [];
      const delivered = new Promise<boolean>((resolve) => {
        const timer = setTimeout(() => finish(false), EVENT_TIMEOUT_MS);
        const listener = (report: ClientReport) => {
          if (report.type === 'delivered' && report.seq === number && times.push(report.at) === expected) finish(true);
        };
        const finish = (complete: boolean) => {
          clearTimeout(timer);
          for (const child of clients) child.off('message', listener);
          resolve(complete);
        };
        for (const child of clients) child.on('message', listener);
      });
      const usageBefore = await server.usage();
      const committedFrom = now();
      await db.query('UPDATE live_items SET label = $1 WHERE id = $2', [`bench-${number}`, id]);
      if (!(await delivered)) lost++;
      for (const at of times) latencies.push(at - committedFrom);
      // The refetch may go on after the delivery (later batches): the next event waits for it.
      await sleep(SETTLE_MS);
      cpuMicros += (await server.usage()).micros - usageBefore.micros - idleMicrosPerMs * (now() - committedFrom);
    }
    const [statementsAfter, refetchesAfter, secondsAfter] = await counters();
    const refetches = refetchesAfter - refetchesBefore;
    const statements = statementsAfter - statementsBefore;
    const refetchSeconds = secondsAfter - secondsBefore;
    for (const child of clients) await reply(child, 'closed', { type: 'close' });
    await sleep(5000);
    const afterLeaving = await rss();
    latencies.sort((a, b) => a - b);
    return {
      side,
      subscribers: settings.subscribers,
      failed,
      connectSeconds,
      deliveryMs: { p50: quantile(latencies, 0.5), p99: quantile(latencies, 0.99), max: latencies.at(-1) ?? NaN },
      lost,
      statementsPerRefetch: refetches ? statements / refetches : NaN,
      refetchMs: refetches ? (refetchSeconds / refetches) * 1000 : NaN,
      serverCpuMsPerEvent: cpuMicros / settings.events / 1000,
      rssMiB: { idle, connected, afterLeaving },
    };
  } finally {
    await db.end();
    await server.stop();
  }
}

function printReport(results: SideResult[], loadBefore: number[], loadAfter: number[]): void {
  const lines = [
    `live queries: ${results[0]?.subscribers} subscribers, ${os.cpus().length} CPUs, load ${loadBefore[0].toFixed(2)} -> ${loadAfter[0].toFixed(2)}`,
  ];
  for (const r of results) {
    lines.push(
      `  ${r.side.padEnd(12)} connect ${r.connectSeconds.toFixed(1)} s (${r.failed} failed); commit-to-delivery p50 ${r.deliveryMs.p50.toFixed(1)} ms, p99 ${r.deliveryMs.p99.toFixed(1)} ms, ` +
        `max ${r.deliveryMs.max.toFixed(1)} ms (${r.lost} lost); statements per refetch ${r.statementsPerRefetch.toFixed(1)}, refetch ${r.refetchMs.toFixed(1)} ms; ` +
        `server CPU ${r.serverCpuMsPerEvent.toFixed(1)} ms per event; RSS idle/connected/after leaving ${r.rssMiB.idle.toFixed(0)}/${r.rssMiB.connected.toFixed(0)}/${r.rssMiB.afterLeaving.toFixed(0)} MiB`,
    );
  }
  const naive = results.find((r) => r.side === 'naive');
  const multiplexed = results.find((r) => r.side === 'multiplexed');
  if (naive && multiplexed) {
    lines.push(
      `  multiplexed/naive: p50 ${(multiplexed.deliveryMs.p50 / naive.deliveryMs.p50).toFixed(2)}x, refetch ${(multiplexed.refetchMs / naive.refetchMs).toFixed(2)}x, ` +
        `CPU per event ${(multiplexed.serverCpuMsPerEvent / naive.serverCpuMsPerEvent).toFixed(2)}x`,
    );
  }
  console.log(lines.join('\n'));
}

async function runBenchmark(): Promise<void> {
  const settings: Settings = {
    subscribers: positiveInteger('BENCH_SUBSCRIBERS', 2000),
    clientProcesses: positiveInteger('BENCH_CLIENT_PROCESSES', 2),
    events: positiveInteger('BENCH_EVENTS', 20),
    sides: nameList('BENCH_SIDES', SIDES, SIDES),
    logLevel: process.env.BENCH_LOG_LEVEL ?? 'warn',
  };
  fs.mkdirSync(RESULTS_DIR, { recursive: true });
  const databaseUrl = await prepareDatabase();
  const loadBefore = os.loadavg();
  const clients = Array.from({ length: settings.clientProcesses }, startClient);
  const results: SideResult[] = [];
  const seq = { next: 1 };
  try {
    for (const side of settings.sides) results.push(await measureSide(side, clients, databaseUrl, settings, seq));
  } finally {
    for (const child of clients) child.kill();
  }
  const loadAfter = os.loadavg();
  printReport(results, loadBefore, loadAfter);
  fs.writeFileSync(RESULTS_FILE, `${JSON.stringify({ finishedAt: new Date().toISOString(), settings, loadBefore, loadAfter, results }, null, 2)}\n`);
}

function main(): Promise<void> {
  const [role] = process.argv.slice(2);
  if (role === 'serve') return runServerRole('plinth');
  if (role === 'clients') return Promise.resolve(runClientRole());
  return runBenchmark();
}

main().catch((error: unknown) => {
  console.error(`bench failed: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}`);
  process.exit(1);
});
