import http from 'node:http';
import type { AddressInfo } from 'node:net';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { randomUUID } from 'node:crypto';
import pg from 'pg';
import { prepareDatabase } from './database';
import { reportRuns, runSlice, runTurns, verifyAnswer, type BenchRequest, type LoadResult, type LoadSettings, type RatioTarget } from './load';
import { benchEntry, forkServer, type BenchServer, type ServerProcess } from './processes';
import { ADMIN_SECRET, baselineConfig, GRAPHQL_PATH, signUserToken } from './shared';
import { nameList, positiveInteger } from './settings';

/**
 * Mutation throughput (issue 32): `insert_<table>_one` through the generated API, as a user whose
 * insert permission presets the owner from the token and checks the row, on a table with an event
 * trigger, against the floor: a bare Fastify server that checks the same token (the same session
 * code) and runs the same insert through pg, on a table of the same shape with the same event
 * trigger. Target: Plinth at 0.7x the floor's requests per second or more.
 *
 *   npm run bench:tables-writes
 *   BENCH_ROUNDS=5 BENCH_DURATION=10 npm run bench:tables-writes
 *
 * Both tables' event triggers are created through Plinth's metadata API and deliver to one
 * receiver in this process, which answers 200 at once: Plinth delivers both tables' events (the
 * floor has no dispatcher), so the delivery load falls on both turns alike. Each target inserts
 * into its own table. Environment: BENCH_DURATION (s, 10), BENCH_WARMUP (s, 3), BENCH_CONNECTIONS
 * (10), BENCH_ROUNDS (3; medians), BENCH_SLICES (5), BENCH_LOG_LEVEL (warn), BENCH_CPU_PROF (targets
 * run under --cpu-prof), BENCH_DATABASE_URL or DATABASE_URL. Output: the table on stdout,
 * bench/results/tables-writes-latest.json, server stdout in bench/results/tables-writes-<target>.log.
 */

const TARGETS = ['plinth', 'floor'] as const;
type Target = (typeof TARGETS)[number];
const LABELS: Record<Target, string> = {
  plinth: 'Plinth (insert_<table>_one)',
  floor: 'floor: Fastify + pg, same insert and trigger',
};
const RATIO_TARGETS: RatioTarget<Target>[] = [{ name: 'plinth/floor', baseline: 'floor', minimum: 0.7 }];

const ROOT = path.resolve(__dirname, '..', '..');
const RESULTS_DIR = path.join(ROOT, 'bench', 'results');
const RESULTS_FILE = path.join(RESULTS_DIR, 'tables-writes-latest.json');

const TABLES: Record<Target, string> = { plinth: 'bench_writes_plinth', floor: 'bench_writes_floor' };
const DOCUMENT = `mutation Write($title: String!, $n: Int!) {
  insert_${TABLES.plinth}_one(object: {title: $title, n: $n}) { id title n owner }
}`;
const VARIABLES = { title: 'a written row', n: 7 };
/** The floor's statement: the insert Plinth's compiler writes comes down to this, and its answer. */
const FLOOR_INSERT = `INSERT INTO ${TABLES.floor} (title, n, owner) VALUES ($1, $2, $3) RETURNING id, title, n, owner`;

interface Settings extends LoadSettings {
  logLevel: string;
  profiled: Target[];
}

function readSettings(): Settings {
  return {
    durationSeconds: positiveInteger('BENCH_DURATION', 10),
    warmupSeconds: positiveInteger('BENCH_WARMUP', 3),
    connections: positiveInteger('BENCH_CONNECTIONS', 10),
    rounds: positiveInteger('BENCH_ROUNDS', 3),
    slices: positiveInteger('BENCH_SLICES', 5),
    logLevel: process.env.BENCH_LOG_LEVEL || 'warn',
    profiled: nameList('BENCH_CPU_PROF', TARGETS, []),
  };
}

async function seed(databaseUrl: string): Promise<void> {
  const client = new pg.Client({ connectionString: databaseUrl });
  await client.connect();
  try {
    for (const table of Object.values(TABLES)) {
      await client.query(
        `DROP TABLE IF EXISTS ${table}; CREATE TABLE ${table} (id serial PRIMARY KEY, title text NOT NULL, n int NOT NULL, owner uuid NOT NULL)`,
      );
    }
  } finally {
    await client.end();
  }
}

/** The receiver of both event triggers: counts deliveries, answers 200. */
async function startReceiver(): Promise<{ url: string; received(): number; close(): Promise<void> }> {
  let received = 0;
  const server = http.createServer((request, response) => {
    request.resume();
    request.on('end', () => {
      received++;
      response.writeHead(200, { 'content-type': 'application/json' }).end('{}');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/events`,
    received: () => received,
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}

/** Tracks both tables (after dropping what an earlier run left), the user's permissions on Plinth's, and an insert event trigger on each. */
async function setUpMetadata(plinth: ServerProcess<Target>, webhook: string): Promise<void> {
  const metadata = async (body: unknown) => {
    const response = await fetch(new URL('/v1/metadata', plinth.url), {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-gql-admin-secret': ADMIN_SECRET },
      body: JSON.stringify(body),
    });
    return { status: response.status, text: await response.text() };
  };
  for (const target of TARGETS) {
    const dropped = await metadata({ type: 'pg_delete_event_trigger', args: { name: `bench_${target}` } });
    if (dropped.status !== 200 && !dropped.text.includes('not-exists')) throw new Error(`dropping the event trigger bench_${target}: ${dropped.text}`);
    const untracked = await metadata({ type: 'pg_untrack_table', args: { table: TABLES[target], cascade: true } });
    if (untracked.status !== 200 && !untracked.text.includes('not-exists')) throw new Error(`untracking ${TABLES[target]}: ${untracked.text}`);
  }
  const table = TABLES.plinth;
  const set = await metadata({
    type: 'bulk',
    args: [
      ...TARGETS.map((target) => ({ type: 'pg_track_table', args: { table: TABLES[target] } })),
      { type: 'pg_create_select_permission', args: { table, role: 'user', permission: { columns: '*', filter: { owner: { _eq: 'X-Gql-User-Id' } } } } },
      {
        type: 'pg_create_insert_permission',
        args: { table, role: 'user', permission: { columns: ['title', 'n'], set: { owner: 'X-Gql-User-Id' }, check: { n: { _gte: 0 } } } },
      },
      ...TARGETS.map((target) => ({
        type: 'pg_create_event_trigger',
        args: { name: `bench_${target}`, table: TABLES[target], webhook, insert: { columns: '*' } },
      })),
    ],
  });
  if (set.status !== 200) throw new Error(`setting up the metadata failed: ${set.text}`);
}

/** The floor: Fastify, the session from the same token check, one INSERT through pg. */
async function startFloor(): Promise<BenchServer> {
  // Required here: the Plinth process should not hold the floor's modules.
  const Fastify = require('fastify') as typeof import('fastify').default;
  const { resolveSession } = require('../src/platform/session') as typeof import('../src/platform/session');
  const { databaseUrl, config, sessionSettings } = baselineConfig(process.env.BENCH_LOG_LEVEL ?? 'warn');
  const pool = new pg.Pool({ connectionString: databaseUrl, max: config.database.poolSize, application_name: 'plinth-bench-writes-floor' });
  const app = Fastify();
  const field = `insert_${TABLES.plinth}_one`;
  app.post(GRAPHQL_PATH, async (request) => {
    const session = resolveSession(request.headers, sessionSettings);
    const { variables } = request.body as { variables: { title: string; n: number } };
    const { rows } = await pool.query(FLOOR_INSERT, [variables.title, variables.n, session.variables['x-gql-user-id']]);
    return { data: { [field]: rows[0] } };
  });
  await app.listen({ host: '127.0.0.1', port: 0 });
  const { port } = app.server.address() as AddressInfo;
  return { url: `http://127.0.0.1:${port}${GRAPHQL_PATH}`, close: () => app.close().finally(() => pool.end()) };
}

function startServerProcess(target: Target, settings: Settings, databaseUrl: string): Promise<ServerProcess<Target>> {
  const profileArgs = settings.profiled.includes(target)
    ? ['--cpu-prof', `--cpu-prof-dir=${path.join(RESULTS_DIR, 'profiles')}`, `--cpu-prof-name=tables-writes-${target}-${Date.now()}.cpuprofile`]
    : [];
  return forkServer(__filename, target, {
    execArgv: profileArgs,
    env: { ...process.env, NODE_ENV: 'production', BENCH_DATABASE_URL: databaseUrl, BENCH_LOG_LEVEL: settings.logLevel },
    logFile: path.join(RESULTS_DIR, `tables-writes-${target}.log`),
  });
}

async function runBenchmark(): Promise<void> {
  const settings = readSettings();
  fs.mkdirSync(RESULTS_DIR, { recursive: true });
  const databaseUrl = await prepareDatabase();
  const userId = randomUUID();
  const token = signUserToken(userId, 3600 + settings.rounds * 2 * (settings.durationSeconds + 60));
  const loadAverageBefore = os.loadavg();
  process.stderr.write('seeding...\n');
  await seed(databaseUrl);
  const receiver = await startReceiver();
  const servers: ServerProcess<Target>[] = [];
  const runs = new Map<Target, LoadResult[]>(TARGETS.map((target) => [target, []]));
  try {
    process.stderr.write('starting plinth...\n');
    const plinth = await startServerProcess('plinth', settings, databaseUrl);
    servers.push(plinth);
    await setUpMetadata(plinth, receiver.url);
    process.stderr.write('starting floor...\n');
    servers.push(await startServerProcess('floor', settings, databaseUrl));
    const request: BenchRequest = {
      query: 'insert_one',
      headers: { 'content-type': 'application/json', accept: 'application/json', authorization: `Bearer ${token}` },
      body: JSON.stringify({ query: DOCUMENT, variables: VARIABLES, operationName: 'Write' }),
      check: (answer) => {
        const row = (answer as { data?: Record<string, { id?: unknown; title?: unknown; n?: unknown; owner?: unknown } | null> }).data?.[
          `insert_${TABLES.plinth}_one`
        ];
        return row && typeof row.id === 'number' && row.title === VARIABLES.title && row.n === VARIABLES.n && row.owner === userId
          ? null
          : 'not the row written';
      },
    };
    for (const server of servers) await verifyAnswer(server, request);
    // Every target's insert fires its trigger: both rows' events reach the receiver.
    const deadline = Date.now() + 10_000;
    while (receiver.received() < servers.length && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 50));
    if (receiver.received() < servers.length) throw new Error(`the event triggers delivered ${receiver.received()} of ${servers.length} events`);
    for (const server of servers) {
      process.stderr.write(`warming up ${server.target} (${settings.warmupSeconds} s)...\n`);
      await runSlice(server, request, settings.connections, settings.warmupSeconds);
    }
    for (let round = 0; round < settings.rounds; round++) {
      process.stderr.write(`measuring, round ${round + 1}/${settings.rounds}...\n`);
      for (const [target, run] of await runTurns(servers, request, settings)) runs.get(target)!.push(run);
    }
  } finally {
    await Promise.all(servers.map((server) => server.stop()));
    await receiver.close();
  }
  reportRuns({
    runs: new Map([['insert_one', runs]]),
    subject: 'plinth',
    labels: LABELS,
    ratioTargets: RATIO_TARGETS,
    settings,
    loadAverageBefore,
    recorded: { document: DOCUMENT, variables: VARIABLES, floorStatement: FLOOR_INSERT, deliveries: receiver.received(), settings },
    file: RESULTS_FILE,
  });
}

async function startTarget(target: Target): Promise<BenchServer> {
  if (target === 'floor') return startFloor();
  const { startPlinth } = require('./servers') as typeof import('./servers');
  return startPlinth(process.env.BENCH_LOG_LEVEL ?? 'warn');
}

benchEntry(TARGETS, startTarget, runBenchmark);
