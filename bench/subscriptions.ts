// Type-graphql's decorators need the metadata polyfill before any resolver class is loaded.
import 'reflect-metadata';
import { fork, type ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import pino from 'pino';
import pg from 'pg';
import WebSocket, { WebSocketServer } from 'ws';
import { PostgresPubSub } from '../src/platform/pubsub';
import { SUBSCRIPTIONS_PATH } from '../src/graphql/subscriptions';
import { USER_REGISTERED } from '../src/modules/users/users.service';
import { DEFAULT_SOURCE_ACCOUNT } from '../src/platform/row-filter';
import { prepareDatabase } from './database';
import { forkServer, listen, serveInChild, type BenchServer, type ServerProcess } from './processes';
import { runServerRole } from './servers';
import { positiveInteger } from './settings';
import { ADMIN_SECRET } from './shared';

/**
 * Subscription fan-out: BENCH_SUBSCRIBERS graphql-ws subscribers to userRegistered on one Plinth
 * instance, each on its own connection, opened by client processes other than the server's;
 * events are published through the PubSub (as registerUser publishes them, without the
 * registration's own cost). The same run measures three servers (sides):
 *
 * - `ws`: the floor, a bare `ws` server that only relays each event (see startBareWs);
 * - `off`: Plinth with subscription multiplexing off (every subscriber's own execution and message);
 * - `on`: Plinth as it ships, multiplexing on.
 *
 *   npm run bench:subscriptions
 *
 * Printed per side: connect time (all acknowledged, and a first event received by all), fan-out per event (publish
 * to the last subscriber receiving it) at p50/p99/max, every delivery's latency at p50/p99,
 * server CPU per event (the server's CPU time over the events, less its idle rate with the
 * subscribers connected), resident memory idle, with the subscribers connected, and
 * BENCH_SETTLE_SECONDS after they left; then the ratios of `on` to the others, and the load average.
 *
 * Environment: BENCH_SUBSCRIBERS (10000), BENCH_CLIENT_PROCESSES (2), BENCH_EVENTS (20),
 * BENCH_EVENT_INTERVAL_MS (1000), BENCH_SETTLE_SECONDS (30), BENCH_SIDES (ws,off,on), BENCH_CPU_PROF
 * (sides to profile, e.g. on), BENCH_LOG_LEVEL (warn), BENCH_DATABASE_URL or DATABASE_URL. Sockets per process need
 * `ulimit -n` above BENCH_SUBSCRIBERS (server) and above BENCH_SUBSCRIBERS / processes (clients).
 */

const ROOT = path.resolve(__dirname, '..', '..');
const RESULTS_DIR = path.join(ROOT, 'bench', 'results');
const RESULTS_FILE = path.join(RESULTS_DIR, 'subscriptions-latest.json');
const MIB = 1024 * 1024;
const QUERY = 'subscription { userRegistered { id email name email_verified } }';
/** Sockets a client process opens at once. */
const CONNECT_CONCURRENCY = 200;
/** How long an event may take to reach everyone before the run counts it as lost. */
const EVENT_TIMEOUT_MS = 20_000;
/** Between warm-up events, until one reaches every subscriber (all subscribed). */
const WARM_UP_RETRY_MS = 3000;

const SIDES = ['ws', 'off', 'on'] as const;
type Side = (typeof SIDES)[number];
/** The forked server's name for the bare server (`serve ws-floor`); Plinth's is `plinth`. */
const BARE_WS_ROLE = 'ws-floor';
const SIDE_LABELS: Record<Side, string> = { ws: 'bare ws', off: 'Plinth off', on: 'Plinth on' };

/** Parent → client process. */
type ClientCommand = { type: 'open'; url: string; count: number; localAddress: string } | { type: 'times'; seq: number } | { type: 'close' };
/** Client process → parent. */
type ClientReport =
  { type: 'opened'; failed: number } | { type: 'delivered'; seq: number } | { type: 'times'; seq: number; times: number[] } | { type: 'closed' };

/** Milliseconds since the epoch with sub-millisecond precision, comparable across processes. */
const now = () => performance.timeOrigin + performance.now();

// --- Client processes --------------------------------------------------------------------------

/**
 * One client process: opens `count` graphql-transport-ws connections (connection_init with the
 * admin secret, then one subscribe each) and records when each event reaches each socket.
 */
function runClientRole(): void {
  const sockets: WebSocket[] = [];
  const received = new Map<number, number[]>();
  const send = (report: ClientReport) => process.send!(report);
  const eventPattern = /bench-event-(\d+)/;

  async function open(command: Extract<ClientCommand, { type: 'open' }>): Promise<void> {
    let failed = 0;
    let next = 0;
    const openOne = () =>
      new Promise<void>((resolve) => {
        const socket = new WebSocket(command.url, 'graphql-transport-ws', { localAddress: command.localAddress, perMessageDeflate: false });
        socket.on('open', () => socket.send(JSON.stringify({ type: 'connection_init', payload: { headers: { 'x-gql-admin-secret': ADMIN_SECRET } } })));
        socket.on('message', (data) => {
          const text = String(data);
          const event = eventPattern.exec(text);
          if (event) {
            const seq = Number(event[1]);
            let times = received.get(seq);
            if (!times) received.set(seq, (times = []));
            times.push(now());
            if (times.length === sockets.length) send({ type: 'delivered', seq });
            return;
          }
          if (text.includes('"connection_ack"')) {
            socket.send(JSON.stringify({ id: randomUUID(), type: 'subscribe', payload: { query: QUERY } }));
            sockets.push(socket);
            resolve();
          } else if (!text.includes('"pong"') && !text.includes('"ping"')) {
            process.stderr.write(`client: unexpected message ${text.slice(0, 300)}\n`);
          }
        });
        socket.on('error', () => {
          failed++;
          resolve();
        });
        socket.on('close', (code) => {
          if (code !== 1000) process.stderr.write(`client: a socket closed with ${code}\n`);
        });
      });
    const worker = async () => {
      while (next < command.count) {
        next++;
        await openOne();
      }
    };
    await Promise.all(Array.from({ length: CONNECT_CONCURRENCY }, worker));
    send({ type: 'opened', failed });
  }

  process.on('message', (command: ClientCommand) => {
    if (command.type === 'open') return void open(command);
    if (command.type === 'times') {
      const times = received.get(command.seq) ?? [];
      received.delete(command.seq);
      return send({ type: 'times', seq: command.seq, times });
    }
    for (const socket of sockets.splice(0)) socket.close(1000, 'done');
    received.clear();
    send({ type: 'closed' });
  });
  process.on('disconnect', () => process.exit(0));
}

interface ClientProcess {
  child: ChildProcess;
  request<T extends ClientReport['type']>(
    command: ClientCommand,
    reply: T,
    match?: (report: ClientReport) => boolean,
  ): Promise<Extract<ClientReport, { type: T }>>;
}

function startClient(): ClientProcess {
  const child = fork(__filename, ['clients'], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
  return {
    child,
    request(command, reply, match) {
      return new Promise((resolve) => {
        const onMessage = (report: ClientReport) => {
          if (report.type !== reply || (match && !match(report))) return;
          child.off('message', onMessage);
          resolve(report as never);
        };
        child.on('message', onMessage);
        child.send(command);
      });
    },
  };
}

/** Resolves once every client process reported event `seq` delivered to all its sockets. */
function allDelivered(clients: ClientProcess[], seq: number, timeoutMs = EVENT_TIMEOUT_MS): Promise<boolean> {
  return new Promise((resolve) => {
    let pending = clients.length;
    const listeners: [ChildProcess, (report: ClientReport) => void][] = [];
    const finish = (complete: boolean) => {
      clearTimeout(timer);
      for (const [child, listener] of listeners) child.off('message', listener);
      resolve(complete);
    };
    const timer = setTimeout(() => finish(false), timeoutMs);
    for (const { child } of clients) {
      const listener = (report: ClientReport) => {
        if (report.type === 'delivered' && report.seq === seq && --pending === 0) finish(true);
      };
      listeners.push([child, listener]);
      child.on('message', listener);
    }
  });
}

/** Plinth's PubSub on the benchmark's database, as the publisher and the bare server use it. */
function connectPubSub(databaseUrl: string): { pubSub: PostgresPubSub; close(): Promise<void> } {
  const pool = new pg.Pool({ connectionString: databaseUrl, max: 2 });
  const shutdown = new AbortController();
  const pubSub = new PostgresPubSub({
    url: databaseUrl,
    query: async (sql, parameters) => (await pool.query(sql, parameters)).rows,
    logger: pino({ level: 'warn' }),
    shutdown: shutdown.signal,
  });
  return {
    pubSub,
    close: async () => {
      shutdown.abort();
      await pubSub.close();
      await pool.end();
    },
  };
}

// --- The floor -------------------------------------------------------------------------------

/**
 * The floor: a bare `ws` server (the WebSocket library graphql-ws runs on) that speaks just enough
 * graphql-transport-ws for the clients (acknowledges connection_init without checking it, keeps
 * each subscribe's id, answers ping, forgets on complete or close) and, for each event from the
 * same PostgreSQL channel, serialises the result once and sends every subscriber its `next`
 * message with WebSocket.send. No GraphQL execution, no session, no limits, no keep-alive: what
 * one message per subscriber through ws's own API costs on this machine. Plinth can spend a little
 * less (its members' frames go to the socket in one write, where WebSocket.send writes two parts);
 * the kernel's send, which both pay per subscriber, is most of either figure.
 */
async function startBareWs(): Promise<BenchServer> {
  const databaseUrl = process.env.BENCH_DATABASE_URL;
  if (!databaseUrl) throw new Error('BENCH_DATABASE_URL is not set for the bare ws server');
  const { pubSub, close: closePubSub } = connectPubSub(databaseUrl);
  await pubSub.start();
  /** Per socket: subscription id → its `next` message up to the payload. */
  const subscriptions = new Map<WebSocket, Map<string, string>>();
  const httpServer = http.createServer();
  const wss = new WebSocketServer({ server: httpServer, path: SUBSCRIPTIONS_PATH, perMessageDeflate: false });
  wss.on('connection', (socket) => {
    const own = new Map<string, string>();
    subscriptions.set(socket, own);
    socket.on('close', () => subscriptions.delete(socket));
    socket.on('message', (data) => {
      const message = JSON.parse(String(data)) as { type: string; id?: string };
      if (message.type === 'connection_init') socket.send('{"type":"connection_ack"}');
      else if (message.type === 'ping') socket.send('{"type":"pong"}');
      else if (message.type === 'subscribe' && message.id) own.set(message.id, `{"id":${JSON.stringify(message.id)},"type":"next","payload":`);
      else if (message.type === 'complete' && message.id) own.delete(message.id);
    });
  });
  const events = pubSub.subscribe(USER_REGISTERED)[Symbol.asyncIterator]();
  void (async () => {
    for (let next = await events.next(); !next.done; next = await events.next()) {
      const { id, email, name, email_verified } = next.value as ReturnType<typeof event>;
      const payload = JSON.stringify({ data: { userRegistered: { id, email, name, email_verified } } });
      for (const [socket, own] of subscriptions) for (const prefix of own.values()) socket.send(`${prefix}${payload}}`);
    }
  })();
  const server = await listen(httpServer);
  return {
    url: server.url,
    close: async () => {
      await events.return?.();
      wss.close();
      await server.close();
      await closePubSub();
    },
  };
}

// --- The measurement ----------------------------------------------------------------------------

interface SideResult {
  side: Side;
  subscribers: number;
  /** Until every connection was acknowledged and had sent its subscribe message. */
  connectSeconds: number;
  /** Until a first event reached every subscriber. */
  subscribedSeconds: number;
  /** Per event: publish to the last subscriber receiving it. */
  fanoutMs: { p50: number; p99: number; max: number };
  /** Every delivery: publish to one subscriber receiving it. */
  deliveryMs: { p50: number; p99: number };
  lostEvents: number;
  serverCpuMsPerEvent: number;
  rssMiB: { idle: number; connected: number; afterEvents: number; afterLeaving: number };
  /** V8's heap at the same moments: the rest of the resident memory is native (sockets, buffers, code). */
  heapMiB: { idle: number; connected: number; afterEvents: number; afterLeaving: number };
}

function percentile(sorted: number[], fraction: number): number {
  if (sorted.length === 0) return Number.NaN;
  return sorted[Math.min(sorted.length - 1, Math.floor(fraction * sorted.length))];
}

/**
 * A loopback address per side and client process: the ports the side before left in TIME_WAIT
 * would otherwise slow every connect() of the next.
 */
function localAddress(side: Side, clientIndex: number): string {
  return `127.0.${SIDES.indexOf(side) + 1}.${clientIndex + 2}`;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

function event(seq: number) {
  return {
    id: randomUUID(),
    email: `bench-event-${seq}@example.com`,
    name: `bench-event-${seq}`,
    email_verified: false,
    source_account_id: DEFAULT_SOURCE_ACCOUNT,
  };
}

async function measureSide(side: Side, clients: ClientProcess[], pubSub: PostgresPubSub, databaseUrl: string, settings: Settings): Promise<SideResult> {
  process.stderr.write(`starting ${SIDE_LABELS[side]}...\n`);
  const server: ServerProcess<string> = await forkServer(__filename, side === 'ws' ? BARE_WS_ROLE : 'plinth', {
    execArgv: settings.profiled.includes(side)
      ? ['--cpu-prof', `--cpu-prof-dir=${path.join(RESULTS_DIR, 'profiles')}`, `--cpu-prof-name=subscriptions-${side}-${Date.now()}.cpuprofile`]
      : [],
    env: {
      ...process.env,
      NODE_ENV: 'production',
      BENCH_DATABASE_URL: databaseUrl,
      BENCH_LOG_LEVEL: settings.logLevel,
      GQL_GRAPHQL_SUBSCRIPTION_MULTIPLEXING: String(side === 'on'),
      // The server's CPU with everyone connected is measured and subtracted from the events' CPU: the
      // start-up's two full collections would fall in that window and count as idle cost.
      PLINTH_STARTUP_COLLECTION: 'false',
    },
    logFile: path.join(RESULTS_DIR, `subscriptions-${side}.log`),
  });
  const memory = async () => {
    const usage = await server.usage();
    return { rss: usage.rssBytes / MIB, heap: (usage.heapBytes ?? 0) / MIB };
  };
  try {
    await sleep(2000);
    const idle = await memory();
    const url = `${server.url.replace(/^http/, 'ws')}/subscriptions`;
    if (!url.endsWith(SUBSCRIPTIONS_PATH)) throw new Error(`unexpected subscriptions URL ${url}`);

    process.stderr.write(`opening ${settings.subscribers} subscribers from ${clients.length} processes...\n`);
    const connectStart = now();
    const share = Math.ceil(settings.subscribers / clients.length);
    const opened = await Promise.all(
      clients.map((client, index) =>
        client.request({ type: 'open', url, count: Math.min(share, settings.subscribers - index * share), localAddress: localAddress(side, index) }, 'opened'),
      ),
    );
    const connectSeconds = (now() - connectStart) / 1000;
    const failed = opened.reduce((sum, report) => sum + report.failed, 0);
    if (failed > 0) throw new Error(`${failed} subscribers could not connect`);
    // Subscribed once a first event reaches every socket; it is not measured.
    let seq = 0;
    for (;;) {
      const delivered = allDelivered(clients, seq, WARM_UP_RETRY_MS);
      pubSub.publish(USER_REGISTERED, event(seq));
      if (await delivered) break;
      if (now() - connectStart > 120_000) throw new Error('the subscribers did not all receive a first event within 2 minutes');
      seq++;
    }
    const subscribedSeconds = (now() - connectStart) / 1000;
    for (let warm = 0; warm <= seq; warm++)
      for (const client of clients) await client.request({ type: 'times', seq: warm }, 'times', (r) => r.type === 'times' && r.seq === warm);
    await sleep(1000);
    const connected = await memory();

    // The server's CPU while idle with everyone connected (keep-alive pings), to subtract.
    const idleStart = await server.usage();
    const idleStartedAt = now();
    await sleep(3000);
    const idleRate = ((await server.usage()).micros - idleStart.micros) / (now() - idleStartedAt);

    process.stderr.write(`publishing ${settings.events} events...\n`);
    const fanouts: number[] = [];
    const deliveries: number[] = [];
    let lostEvents = 0;
    const cpuStart = await server.usage();
    const eventsStartedAt = now();
    for (let index = 0; index < settings.events; index++) {
      seq++;
      const delivered = allDelivered(clients, seq);
      const publishedAt = now();
      pubSub.publish(USER_REGISTERED, event(seq));
      if (!(await delivered)) lostEvents++;
      const times = (await Promise.all(clients.map((client) => client.request({ type: 'times', seq }, 'times', (r) => r.type === 'times' && r.seq === seq))))
        .flatMap((report) => report.times)
        .map((time) => time - publishedAt);
      if (times.length > 0) fanouts.push(Math.max(...times));
      deliveries.push(...times);
      await sleep(settings.eventIntervalMs);
    }
    const cpuEnd = await server.usage();
    const eventsMs = now() - eventsStartedAt;
    const serverCpuMsPerEvent = (cpuEnd.micros - cpuStart.micros - idleRate * eventsMs) / 1000 / settings.events;
    const afterEvents = { rss: cpuEnd.rssBytes / MIB, heap: (cpuEnd.heapBytes ?? 0) / MIB };

    process.stderr.write(`closing the subscribers, then waiting ${settings.settleSeconds} s...\n`);
    await Promise.all(clients.map((client) => client.request({ type: 'close' }, 'closed')));
    await sleep(settings.settleSeconds * 1000);
    const afterLeaving = await memory();

    fanouts.sort((a, b) => a - b);
    deliveries.sort((a, b) => a - b);
    return {
      side,
      subscribers: settings.subscribers,
      connectSeconds,
      subscribedSeconds,
      fanoutMs: { p50: percentile(fanouts, 0.5), p99: percentile(fanouts, 0.99), max: fanouts[fanouts.length - 1] },
      deliveryMs: { p50: percentile(deliveries, 0.5), p99: percentile(deliveries, 0.99) },
      lostEvents,
      serverCpuMsPerEvent,
      rssMiB: { idle: idle.rss, connected: connected.rss, afterEvents: afterEvents.rss, afterLeaving: afterLeaving.rss },
      heapMiB: { idle: idle.heap, connected: connected.heap, afterEvents: afterEvents.heap, afterLeaving: afterLeaving.heap },
    };
  } finally {
    await server.stop();
  }
}

interface Settings {
  subscribers: number;
  clientProcesses: number;
  events: number;
  eventIntervalMs: number;
  settleSeconds: number;
  sides: Side[];
  /** Sides whose server runs under --cpu-prof (profiles in bench/results/profiles/). */
  profiled: Side[];
  logLevel: string;
}

function readSettings(): Settings {
  const sideList = (name: string, fallback: string) => {
    const sides = (process.env[name] ?? fallback)
      .split(',')
      .map((side) => side.trim())
      .filter(Boolean);
    for (const side of sides) if (!(SIDES as readonly string[]).includes(side)) throw new Error(`${name} takes ${SIDES.join(', ')} (got "${side}")`);
    return sides as Side[];
  };
  return {
    subscribers: positiveInteger('BENCH_SUBSCRIBERS', 10_000),
    clientProcesses: positiveInteger('BENCH_CLIENT_PROCESSES', 2),
    events: positiveInteger('BENCH_EVENTS', 20),
    eventIntervalMs: positiveInteger('BENCH_EVENT_INTERVAL_MS', 1000),
    settleSeconds: positiveInteger('BENCH_SETTLE_SECONDS', 30),
    sides: sideList('BENCH_SIDES', SIDES.join(',')),
    profiled: sideList('BENCH_CPU_PROF', ''),
    logLevel: process.env.BENCH_LOG_LEVEL || 'warn',
  };
}

function printReport(results: SideResult[], loadBefore: number[], loadAfter: number[]): void {
  const fixed = (value: number, digits = 1) => value.toFixed(digits).padStart(8);
  const lines = [
    `${results[0]?.subscribers} graphql-ws subscribers to userRegistered, one server; load average before ${loadBefore.map((v) => v.toFixed(2)).join(' ')}, after ${loadAfter.map((v) => v.toFixed(2)).join(' ')}`,
    'server        connect s (subscribed)  fan-out p50    p99     max ms  delivery p50   p99 ms  CPU/event ms  RSS idle  connected  after events  after leaving MiB  lost',
    ...results.map(
      (r) =>
        `${SIDE_LABELS[r.side].padEnd(12)}${fixed(r.connectSeconds)} (${r.subscribedSeconds.toFixed(1).padStart(5)})   ${fixed(r.fanoutMs.p50)}${fixed(r.fanoutMs.p99)}${fixed(r.fanoutMs.max)}   ${fixed(r.deliveryMs.p50)}${fixed(r.deliveryMs.p99)}   ${fixed(r.serverCpuMsPerEvent)}     ` +
        `${fixed(r.rssMiB.idle, 0)}${fixed(r.rssMiB.connected, 0)}${fixed(r.rssMiB.afterEvents, 0)}   ${fixed(r.rssMiB.afterLeaving, 0)} (${(r.rssMiB.afterLeaving / r.rssMiB.idle).toFixed(2)}x idle)  ${r.lostEvents}`,
    ),
    ...results.map(
      (r) =>
        `  V8 heap of those (${r.side}): ${[r.heapMiB.idle, r.heapMiB.connected, r.heapMiB.afterEvents, r.heapMiB.afterLeaving].map((v) => v.toFixed(0)).join(' / ')} MiB`,
    ),
  ];
  const on = results.find((r) => r.side === 'on');
  if (on) {
    for (const other of results) {
      if (other === on) continue;
      lines.push(
        `on/${other.side}: fan-out max ${(on.fanoutMs.max / other.fanoutMs.max).toFixed(2)}x, p50 ${(on.fanoutMs.p50 / other.fanoutMs.p50).toFixed(2)}x, ` +
          `CPU per event ${(on.serverCpuMsPerEvent / other.serverCpuMsPerEvent).toFixed(3)}x, RSS connected ${(on.rssMiB.connected / other.rssMiB.connected).toFixed(2)}x`,
      );
    }
    lines.push(
      `targets (on): fan-out max under 250 ms: ${on.fanoutMs.max < 250 ? 'yes' : 'no'}; CPU per event under 100 ms: ${on.serverCpuMsPerEvent < 100 ? 'yes' : 'no'}; ` +
        `RSS connected under 250 MB: ${on.rssMiB.connected * MIB < 250e6 ? 'yes' : 'no'}; back under 1.5x idle after leaving: ${on.rssMiB.afterLeaving < 1.5 * on.rssMiB.idle ? 'yes' : 'no'}`,
    );
  }
  console.log(lines.join('\n'));
}

async function runBenchmark(): Promise<void> {
  const settings = readSettings();
  fs.mkdirSync(RESULTS_DIR, { recursive: true });
  const databaseUrl = await prepareDatabase();
  const loadBefore = os.loadavg();
  const { pubSub, close: closePubSub } = connectPubSub(databaseUrl);
  const clients = Array.from({ length: settings.clientProcesses }, startClient);
  const results: SideResult[] = [];
  try {
    for (const side of settings.sides) results.push(await measureSide(side, clients, pubSub, databaseUrl, settings));
  } finally {
    for (const { child } of clients) child.kill();
    await closePubSub();
  }
  const loadAfter = os.loadavg();
  printReport(results, loadBefore, loadAfter);
  fs.writeFileSync(RESULTS_FILE, `${JSON.stringify({ finishedAt: new Date().toISOString(), settings, loadBefore, loadAfter, results }, null, 2)}\n`);
}

function main(): Promise<void> {
  const [role, served] = process.argv.slice(2);
  if (role === 'serve') return served === BARE_WS_ROLE ? serveInChild(startBareWs) : runServerRole('plinth');
  if (role === 'clients') return Promise.resolve(runClientRole());
  return runBenchmark();
}

main().catch((error: unknown) => {
  console.error(`bench failed: ${error instanceof Error ? error.message : String(error)}`);
  process.exit(1);
});
