// Type-graphql's decorators need the metadata polyfill before any resolver class is loaded.
import 'reflect-metadata';
import { execFileSync, fork, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import WebSocket, { WebSocketServer } from 'ws';
import { SUBSCRIPTIONS_PATH } from '../src/graphql/subscriptions';
import { prepareDatabase } from './database';
import { forkServer, listen, serveInChild, type BenchServer, type ServerProcess } from './processes';
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
 * - `shared`: every subscriber on one result (`live_items_by_pk(id: 1)` as the admin: one cohort);
 * - `ws-floor` and `shared-ws-floor`: the floor of the same two runs, a bare `ws` server (see
 *   startFloor) that on the same NOTIFY runs one statement for all its subscribers and sends each
 *   whose result changed the same message.
 *
 *   npm run bench:live-queries
 *
 * Each event commits one changed row (an UPDATE through pg, autocommit) and measures from just
 * before it to the client receiving the new result: the one subscriber whose row it is (per-user
 * sides) or all of them (shared). Printed per side: commit-to-delivery p50/p99/max, statements
 * per refetch (plinth_live_query_statements_total over the refetch histogram's count, read before
 * and after the events), refetch duration, server CPU per event (less its idle rate with everyone
 * connected), PostgreSQL CPU per event (the CPU time, from /proc/<pid>/stat, of every backend
 * connected to the database but the bench's own: the server's pool and its LISTEN connection; NaN
 * when PostgreSQL runs on another machine), and resident memory idle, connected and after the
 * subscribers left. Then the ratios: multiplexed to naive and to its floor, shared to its floor,
 * and the statements (and PostgreSQL CPU) per second of Hasura-style polling, a statement per
 * subscriber every second, against Plinth's at one change a second.
 *
 * Environment: BENCH_SUBSCRIBERS (2000), BENCH_CLIENT_PROCESSES (2), BENCH_EVENTS (20),
 * BENCH_SIDES (naive,multiplexed,shared,ws-floor,shared-ws-floor), BENCH_LOG_LEVEL (warn), BENCH_DATABASE_URL or
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
const SIDES = ['naive', 'multiplexed', 'shared', 'ws-floor', 'shared-ws-floor'] as const;
type Side = (typeof SIDES)[number];
/** The forked server's name for the floor (`serve live-floor`); Plinth's is `plinth`. */
const FLOOR_ROLE = 'live-floor';
/** Plinth's defaults, for the polling comparison: the fallback interval and the cohorts per refetch statement. */
const DEFAULT_FALLBACK_SECONDS = 10;
const DEFAULT_BATCH_SIZE = 1000;
const isFloor = (side: Side) => side === 'ws-floor' || side === 'shared-ws-floor';
const isShared = (side: Side) => side === 'shared' || side === 'shared-ws-floor';
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

// --- The floor ---------------------------------------------------------------------------------

/**
 * The floor: a bare `ws` server (the library graphql-ws runs on) speaking just enough
 * graphql-transport-ws for the clients (acknowledges connection_init, reads the user id from the
 * bearer token's claims without verifying it, answers ping) and, on each NOTIFY of the table's
 * trigger (the same channel and payload as Plinth's), runs one statement for all its subscribers:
 * every user's rows grouped by owner (per-user subscribers) or row 1 (shared), refetches coalesced
 * as Plinth's; then sends every subscriber whose result text changed its `next` message (the same
 * bytes Plinth sends) with WebSocket.send. No GraphQL, no permissions, no limits, no keep-alive.
 * It answers GET /metrics with Plinth's statement and refetch counters, so the run reads both alike.
 */
async function startFloor(): Promise<BenchServer> {
  const databaseUrl = process.env.BENCH_DATABASE_URL;
  if (!databaseUrl) throw new Error('BENCH_DATABASE_URL is not set for the floor');
  const pool = new pg.Pool({ connectionString: databaseUrl, max: 2 });
  const listener = new pg.Client({ connectionString: databaseUrl });
  await listener.connect();
  /** Subscribers by user ('' for the shared result): socket and message prefix. */
  const subscribers = new Map<string, Map<WebSocket, string>>();
  /** Each user's last result text. */
  const last = new Map<string, string>();
  const counters = { statements: 0, refetches: 0, seconds: 0 };
  const refetch = async () => {
    const started = process.hrtime.bigint();
    const perUser = [...subscribers.keys()].some((user) => user !== '');
    const shared = subscribers.has('');
    const texts = new Map<string, string>();
    if (perUser) {
      counters.statements++;
      const { rows } = await pool.query<{ owner: string; j: string }>(
        `SELECT owner, json_agg(json_build_object('id', id, 'label', label) ORDER BY id)::text AS j FROM live_items GROUP BY owner`,
      );
      for (const row of rows) texts.set(row.owner, `{"data":{"live_items":${row.j}}}`);
    }
    if (shared) {
      counters.statements++;
      const { rows } = await pool.query<{ j: string }>(`SELECT json_build_object('id', id, 'label', label)::text AS j FROM live_items WHERE id = 1`);
      texts.set('', `{"data":{"live_items_by_pk":${rows[0]?.j ?? 'null'}}}`);
    }
    for (const [user, text] of texts) {
      if (last.get(user) === text) continue;
      last.set(user, text);
      for (const [socket, prefix] of subscribers.get(user) ?? []) socket.send(`${prefix}${text}}`);
    }
    counters.refetches++;
    counters.seconds += Number(process.hrtime.bigint() - started) / 1e9;
  };
  let running = false;
  let again = false;
  const schedule = () => {
    if (running) return void (again = true);
    running = true;
    void (async () => {
      do {
        again = false;
        await refetch().catch((error: unknown) => process.stderr.write(`floor: refetch failed: ${String(error)}\n`));
        await sleep(10);
      } while (again);
      running = false;
    })();
  };
  listener.on('notification', schedule);
  await listener.query('LISTEN plinth_live');

  const httpServer = http.createServer((request, response) => {
    if (request.url !== '/metrics') return void response.writeHead(404).end();
    response.end(
      `plinth_live_query_statements_total ${counters.statements}\nplinth_live_query_refetch_duration_seconds_count ${counters.refetches}\n` +
        `plinth_live_query_refetch_duration_seconds_sum ${counters.seconds}\n`,
    );
  });
  const wss = new WebSocketServer({ server: httpServer, path: SUBSCRIPTIONS_PATH, perMessageDeflate: false });
  wss.on('connection', (socket) => {
    let user = '';
    socket.on('close', () => subscribers.get(user)?.delete(socket));
    socket.on('message', (data) => {
      const message = JSON.parse(String(data)) as { type: string; id?: string; payload?: { headers?: Record<string, string>; query?: string } };
      if (message.type === 'connection_init') {
        const token = message.payload?.headers?.authorization?.replace(/^Bearer /, '');
        user = token ? (JSON.parse(Buffer.from(token.split('.')[1], 'base64url').toString()) as { sub: string }).sub : '';
        socket.send('{"type":"connection_ack"}');
      } else if (message.type === 'ping') socket.send('{"type":"pong"}');
      else if (message.type === 'subscribe' && message.id) {
        const prefix = `{"id":${JSON.stringify(message.id)},"type":"next","payload":`;
        let own = subscribers.get(user);
        if (!own) subscribers.set(user, (own = new Map()));
        own.set(socket, prefix);
        const current = last.get(user);
        if (current) socket.send(`${prefix}${current}}`);
        else schedule();
      } else if (message.type === 'complete') subscribers.get(user)?.delete(socket);
    });
  });
  const server = await listen(httpServer);
  return {
    url: server.url,
    close: async () => {
      wss.close();
      await server.close();
      await listener.end();
      await pool.end();
    },
  };
}

// --- PostgreSQL's CPU ---------------------------------------------------------------------------

/** Clock ticks per second of /proc/<pid>/stat's times. */
const CLOCK_TICKS = (() => {
  try {
    return Number(execFileSync('getconf', ['CLK_TCK']).toString().trim()) || 100;
  } catch {
    return 100;
  }
})();

/** CPU time (µs) of each backend connected to the bench's database but `db` itself; empty when /proc has none of them (PostgreSQL elsewhere). */
async function backendCpu(db: pg.Client): Promise<Map<number, number>> {
  const { rows } = await db.query<{ pid: number }>('SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()');
  const times = new Map<number, number>();
  for (const { pid } of rows) {
    try {
      const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      // utime and stime: fields 14 and 15 of the line, 12 and 13 after "pid (comm) ".
      times.set(pid, ((Number(fields[11]) + Number(fields[12])) / CLOCK_TICKS) * 1e6);
    } catch {
      // Gone, or not on this machine.
    }
  }
  return times;
}

/** The CPU the backends used between two readings (a backend that connected between them counts whole). */
function cpuBetween(before: Map<number, number>, after: Map<number, number>): number {
  let micros = 0;
  for (const [pid, time] of after) micros += time - (before.get(pid) ?? 0);
  return micros;
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
  /** NaN when no backend's CPU could be read. */
  postgresCpuMsPerEvent: number;
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
async function prepareTable(db: pg.Client, base: string, subscribers: number, floor: boolean): Promise<void> {
  if (!floor) {
    await fetch(`${base}/v1/metadata`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-gql-admin-secret': ADMIN_SECRET },
      body: JSON.stringify({ type: 'pg_untrack_table', args: { table: 'live_items', cascade: true } }),
    });
  }
  await db.query(`DROP TABLE IF EXISTS live_items;
    CREATE TABLE live_items (id int PRIMARY KEY, owner text NOT NULL, label text NOT NULL);
    CREATE INDEX ON live_items (owner);
    INSERT INTO live_items SELECT n, 'user-' || n, 'initial' FROM generate_series(1, ${subscribers}) AS n;
    ANALYZE live_items`);
  if (floor) {
    // The floor's trigger: Plinth's (migration LiveQueryNotify), without needing Plinth's migrations.
    await db.query(`CREATE OR REPLACE FUNCTION bench_live_floor_changed() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN PERFORM pg_notify('plinth_live', json_build_array(TG_TABLE_SCHEMA, TG_TABLE_NAME)::text); RETURN NULL; END $$;
      CREATE TRIGGER bench_live_floor AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON live_items FOR EACH STATEMENT EXECUTE FUNCTION bench_live_floor_changed()`);
    return;
  }
  await metadata(base, { type: 'pg_track_table', args: { table: 'live_items' } });
  await metadata(base, {
    type: 'pg_create_select_permission',
    args: { table: 'live_items', role: 'user', permission: { columns: ['id', 'owner', 'label'], filter: { owner: { _eq: 'X-Hasura-User-Id' } } } },
  });
}

async function measureSide(side: Side, clients: ChildProcess[], databaseUrl: string, settings: Settings, seq: { next: number }): Promise<SideResult> {
  process.stderr.write(`starting ${side}...\n`);
  const floor = isFloor(side);
  const shared = isShared(side);
  const server: ServerProcess<string> = await forkServer(__filename, floor ? FLOOR_ROLE : 'plinth', {
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
    await prepareTable(db, base, settings.subscribers, floor);
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
          shared,
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
    let postgresMicros = 0;
    let postgresRead = false;
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
    const expected = shared ? settings.subscribers - failed : 1;
    for (let event = 0; event < settings.events; event++) {
      const number = seq.next++;
      const id = shared ? 1 : 1 + Math.floor(Math.random() * settings.subscribers);
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
      const backendsBefore = await backendCpu(db);
      const usageBefore = await server.usage();
      const committedFrom = now();
      await db.query('UPDATE live_items SET label = $1 WHERE id = $2', [`bench-${number}`, id]);
      if (!(await delivered)) lost++;
      for (const at of times) latencies.push(at - committedFrom);
      // The refetch may go on after the delivery (later batches): the next event waits for it.
      await sleep(SETTLE_MS);
      cpuMicros += (await server.usage()).micros - usageBefore.micros - idleMicrosPerMs * (now() - committedFrom);
      const backendsAfter = await backendCpu(db);
      postgresRead ||= backendsAfter.size > 0;
      postgresMicros += cpuBetween(backendsBefore, backendsAfter);
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
      postgresCpuMsPerEvent: postgresRead ? postgresMicros / settings.events / 1000 : NaN,
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
        `server CPU ${r.serverCpuMsPerEvent.toFixed(1)} ms, PostgreSQL CPU ${r.postgresCpuMsPerEvent.toFixed(1)} ms per event; RSS idle/connected/after leaving ${r.rssMiB.idle.toFixed(0)}/${r.rssMiB.connected.toFixed(0)}/${r.rssMiB.afterLeaving.toFixed(0)} MiB`,
    );
  }
  const bySide = new Map(results.map((r) => [r.side, r]));
  // A PostgreSQL CPU of 0 is under /proc's 10 ms tick over the whole run: no ratio to it.
  const ratio = (a: number, b: number) => (b > 0 && Number.isFinite(a / b) ? `${(a / b).toFixed(2)}x` : 'n/a');
  const compare = (label: string, a: SideResult | undefined, b: SideResult | undefined) => {
    if (!a || !b) return;
    lines.push(
      `  ${label}: p50 ${ratio(a.deliveryMs.p50, b.deliveryMs.p50)}, refetch ${ratio(a.refetchMs, b.refetchMs)}, server CPU per event ${ratio(a.serverCpuMsPerEvent, b.serverCpuMsPerEvent)}, ` +
        `PostgreSQL CPU per event ${ratio(a.postgresCpuMsPerEvent, b.postgresCpuMsPerEvent)}, RSS growth with the subscribers connected ${ratio(a.rssMiB.connected - a.rssMiB.idle, b.rssMiB.connected - b.rssMiB.idle)}`,
    );
  };
  compare('multiplexed/naive', bySide.get('multiplexed'), bySide.get('naive'));
  compare('multiplexed/ws-floor', bySide.get('multiplexed'), bySide.get('ws-floor'));
  compare('shared/shared-ws-floor', bySide.get('shared'), bySide.get('shared-ws-floor'));
  // Polling every subscriber every second (Hasura's interval, a statement per subscriber) against
  // Plinth at one change a second: its refetch, plus the fallback interval's refetch of every cohort.
  const multiplexed = bySide.get('multiplexed');
  if (multiplexed) {
    const subscribers = multiplexed.subscribers;
    const fallback = Math.ceil(subscribers / DEFAULT_BATCH_SIZE) / DEFAULT_FALLBACK_SECONDS;
    const plinth = multiplexed.statementsPerRefetch + fallback;
    const naive = bySide.get('naive');
    // A naive refetch runs one statement per subscriber: its PostgreSQL CPU per statement prices the polling.
    const perStatement = naive ? naive.postgresCpuMsPerEvent / naive.statementsPerRefetch : NaN;
    const plinthCpu = multiplexed.postgresCpuMsPerEvent * (1 + fallback / multiplexed.statementsPerRefetch);
    lines.push(
      `  statements per second: polling each subscriber every second ${subscribers}, Plinth at one change a second ${plinth.toFixed(1)} ` +
        `(${multiplexed.statementsPerRefetch.toFixed(1)} per refetch + ${fallback.toFixed(1)} for the ${DEFAULT_FALLBACK_SECONDS} s fallback): ${ratio(subscribers, plinth)} fewer; ` +
        `PostgreSQL CPU per second: polling ${(perStatement * subscribers).toFixed(0)} ms (naive's ${perStatement.toFixed(2)} ms per statement), Plinth ${plinthCpu.toFixed(1)} ms`,
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
  const [role, served] = process.argv.slice(2);
  if (role === 'serve') return served === FLOOR_ROLE ? serveInChild(startFloor) : runServerRole('plinth');
  if (role === 'clients') return Promise.resolve(runClientRole());
  return runBenchmark();
}

main().catch((error: unknown) => {
  console.error(`bench failed: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}`);
  process.exit(1);
});
