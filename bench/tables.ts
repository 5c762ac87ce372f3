import { randomUUID } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { isDeepStrictEqual } from 'node:util';
import { buildSchema, execute, parse } from 'graphql';
import pg from 'pg';
import { createDataSource } from '../src/db/data-source';
import { one } from '../src/db/sql';
import { readCatalog, tableKey } from '../src/modules/tables/tables.catalog';
import { StatementCompiler, type Reader } from '../src/modules/tables/tables.compiler';
import { boundValues, type CompiledStatement } from '../src/modules/tables/tables.sql';
import type { TrackedTableEntry } from '../src/modules/tables/tables.metadata';
import { resolveTables } from '../src/modules/tables/tables.model';
import { extendWithTables } from '../src/modules/tables/tables.schema';
import { prepareDatabase } from './database';
import { reportRuns, runSlice, runTurns, verifyAnswer, type BenchRequest, type LoadResult, type LoadSettings, type RatioTarget } from './load';
import { benchEntry, forkServer, type ServerProcess } from './processes';
import { ADMIN_SECRET, baselineConfig, signUserToken } from './shared';
import { nameList, positiveInteger } from './settings';
import type { FloorStatement } from './tables-floor';

/**
 * The generated API over tracked tables: one nested query (100 orders, each with its customer, an
 * object relationship, and its items, an array relationship) served by Plinth, against (a) the
 * floor, a bare node:http server running the very statement Plinth's compiler emits through pg and
 * writing PostgreSQL's JSON as it comes (bench/tables-floor.ts), and (b) type-graphql resolvers over
 * TypeORM with DataLoaders on Apollo Server and Fastify (bench/tables-typeorm.ts). Two queries, the
 * same document with a variable: `admin` (the admin secret, every row) and `user` (a user's token;
 * the role's select permission keeps the orders whose user_id is the token's user). Targets:
 * Plinth at 0.8x the floor's requests per second or more, and 3x (b)'s or more.
 *
 *   npm run bench:tables
 *   BENCH_ROUNDS=5 BENCH_DURATION=10 npm run bench:tables
 *
 * Environment: BENCH_DURATION (s, 10), BENCH_WARMUP (s, 3), BENCH_CONNECTIONS (10), BENCH_ROUNDS
 * (3; medians reported), BENCH_SLICES (5 turns per round, server after server), BENCH_QUERIES
 * (admin,user), BENCH_LOG_LEVEL (warn), BENCH_CPU_PROF (comma list of targets run under
 * --cpu-prof), BENCH_DATABASE_URL or DATABASE_URL (else postgres://postgres@127.0.0.1:5432/plinth_bench).
 *
 * The seed replaces the tables shop_customers, shop_orders and shop_order_items (and ANALYZEs
 * them); Plinth tracks them through POST /v1/metadata. Before any load, every server's answer
 * must equal the floor's, and Plinth must be seen (pg_stat_activity) running the floor's statement
 * text. Output: the table on stdout, bench/results/tables-latest.json, server stdout in
 * bench/results/tables-<target>.log, profiles in bench/results/profiles/.
 */

const TARGETS = ['plinth', 'floor', 'typeorm'] as const;
type Target = (typeof TARGETS)[number];
const LABELS: Record<Target, string> = {
  plinth: 'Plinth (generated API)',
  floor: '(a) floor: node:http + pg, same statement',
  typeorm: '(b) type-graphql + TypeORM + DataLoader',
};
const RATIO_TARGETS: RatioTarget<Target>[] = [
  { name: 'plinth/floor', baseline: 'floor', minimum: 0.8 },
  { name: 'plinth/(b)', baseline: 'typeorm', minimum: 3 },
];
const QUERIES = ['admin', 'user'] as const;
type QueryName = (typeof QUERIES)[number];

const ROOT = path.resolve(__dirname, '..', '..');
const RESULTS_DIR = path.join(ROOT, 'bench', 'results');
const RESULTS_FILE = path.join(RESULTS_DIR, 'tables-latest.json');

const ROOT_FIELD = 'shop_orders';
const PAGE = 100;
const ITEMS_PER_ORDER = 3;
const CUSTOMERS = 500;
const ORDER_OWNERS = 50;
/** Each owner has PAGE orders, so the `user` query returns a full page too. */
const ORDERS = ORDER_OWNERS * PAGE;
const DOCUMENT = `query Orders($limit: Int!) {
  ${ROOT_FIELD}(order_by: {id: asc}, limit: $limit) {
    id status placed_on total_cents
    customer { id name email vip }
    items(order_by: {id: asc}) { id sku quantity price_cents }
  }
}`;
const VARIABLES = { limit: PAGE };

interface Settings extends LoadSettings {
  queries: QueryName[];
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
    queries: nameList('BENCH_QUERIES', QUERIES, QUERIES),
    logLevel: process.env.BENCH_LOG_LEVEL || 'warn',
    profiled: nameList('BENCH_CPU_PROF', TARGETS, []),
  };
}

/** The three tables, replaced: customers, their orders (ORDER_OWNERS users own PAGE each) and ITEMS_PER_ORDER items per order. */
async function seed(databaseUrl: string, owners: string[]): Promise<void> {
  const client = new pg.Client({ connectionString: databaseUrl });
  await client.connect();
  try {
    await client.query(`
      DROP TABLE IF EXISTS shop_order_items, shop_orders, shop_customers;
      CREATE TABLE shop_customers (id serial PRIMARY KEY, name text NOT NULL, email text NOT NULL, vip boolean NOT NULL);
      CREATE TABLE shop_orders (
        id serial PRIMARY KEY, customer_id int NOT NULL REFERENCES shop_customers (id), user_id uuid NOT NULL,
        status text NOT NULL, placed_on date NOT NULL, total_cents int NOT NULL);
      CREATE INDEX ON shop_orders (user_id);
      CREATE TABLE shop_order_items (
        id serial PRIMARY KEY, order_id int NOT NULL REFERENCES shop_orders (id), sku text NOT NULL, quantity int NOT NULL, price_cents int NOT NULL);
      CREATE INDEX ON shop_order_items (order_id);
      INSERT INTO shop_customers (name, email, vip)
        SELECT 'Customer ' || n, 'customer' || n || '@example.com', n % 7 = 0 FROM generate_series(1, ${CUSTOMERS}) AS n;
    `);
    await client.query(
      `INSERT INTO shop_orders (customer_id, user_id, status, placed_on, total_cents)
         SELECT 1 + n % ${CUSTOMERS}, ($1::uuid[])[1 + n % ${ORDER_OWNERS}], (ARRAY['placed', 'paid', 'shipped'])[1 + n % 3],
                DATE '2026-01-01' + n % 365, 100 + n * 37 % 90000
           FROM generate_series(1, ${ORDERS}) AS n`,
      [owners],
    );
    await client.query(`
      INSERT INTO shop_order_items (order_id, sku, quantity, price_cents)
        SELECT o, 'SKU-' || (o * ${ITEMS_PER_ORDER} + i) % 1000, 1 + i, 250 + (o + i) * 13 % 5000
          FROM generate_series(1, ${ORDERS}) AS o, generate_series(1, ${ITEMS_PER_ORDER}) AS i ORDER BY o, i;
      ANALYZE shop_customers, shop_orders, shop_order_items;
    `);
  } finally {
    await client.end();
  }
}

/** Tracks the tables (after untracking what an earlier run tracked), their two relationships and the `user` role's permissions. */
async function trackTables(plinth: ServerProcess<Target>): Promise<void> {
  const metadata = async (body: unknown) => {
    const response = await fetch(new URL('/v1/metadata', plinth.url), {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-gql-admin-secret': ADMIN_SECRET },
      body: JSON.stringify(body),
    });
    return { status: response.status, text: await response.text() };
  };
  for (const table of ['shop_order_items', 'shop_orders', 'shop_customers']) {
    const untracked = await metadata({ type: 'pg_untrack_table', args: { table, cascade: true } });
    if (untracked.status !== 200 && !untracked.text.includes('not-exists')) throw new Error(`untracking ${table}: ${untracked.text}`);
  }
  const everything = { columns: '*', filter: {} };
  const tracked = await metadata({
    type: 'bulk',
    args: [
      ...['shop_customers', 'shop_orders', 'shop_order_items'].map((table) => ({ type: 'pg_track_table', args: { table } })),
      { type: 'pg_create_object_relationship', args: { table: 'shop_orders', name: 'customer', using: { foreign_key_constraint_on: 'customer_id' } } },
      {
        type: 'pg_create_array_relationship',
        args: { table: 'shop_orders', name: 'items', using: { foreign_key_constraint_on: { table: 'shop_order_items', column: 'order_id' } } },
      },
      {
        type: 'pg_create_select_permission',
        args: { table: 'shop_orders', role: 'user', permission: { columns: '*', filter: { user_id: { _eq: 'X-Gql-User-Id' } } } },
      },
      { type: 'pg_create_select_permission', args: { table: 'shop_customers', role: 'user', permission: everything } },
      { type: 'pg_create_select_permission', args: { table: 'shop_order_items', role: 'user', permission: everything } },
    ],
  });
  if (tracked.status !== 200) throw new Error(`tracking the tables failed: ${tracked.text}`);
}

/**
 * The statement Plinth's compiler emits for the document's root field as `reader`, from the
 * tracked tables as stored and the catalog (what each Plinth instance serves), bound with the
 * session variables given.
 */
async function compiledStatement(databaseUrl: string, reader: Reader, variables: Record<string, string>): Promise<FloorStatement> {
  const dataSource = await createDataSource(databaseUrl, 1).initialize();
  try {
    const { tables: entries } = (await one<{ tables: TrackedTableEntry[] }>(dataSource, 'SELECT tables FROM tables_metadata WHERE id = 1'))!;
    const { tables } = resolveTables(
      entries,
      await readCatalog(
        dataSource,
        entries.map((entry) => entry.table),
      ),
    );
    const byKey = new Map(tables.map((table) => [tableKey(table.table), table]));
    let statement: CompiledStatement | undefined;
    const schema = extendWithTables(buildSchema('type Query { ping: Int }'), tables, {
      select: async (table, kind, info) => {
        statement = new StatementCompiler(reader, byKey, info).compile(table, kind);
        return [];
      },
    });
    const result = await execute({ schema, document: parse(DOCUMENT), variableValues: VARIABLES });
    if (result.errors || !statement) throw new Error(`the compiler refused the document: ${JSON.stringify(result.errors)}`);
    return { text: statement.text, values: boundValues(statement, variables, VARIABLES) };
  } finally {
    await dataSource.destroy();
  }
}

/** Attempts at catching Plinth's statement: its pool may run other work (the metadata poll) on the connection in between. */
const STATEMENT_SIGHTINGS = 5;

/**
 * Asks Plinth `request` until one of its connections shows `text` as its last statement in
 * pg_stat_activity (compared as far as track_activity_query_size keeps it, 1 kB by default), or
 * refuses: the floor must run what Plinth runs.
 */
async function checkPlinthRuns(plinth: ServerProcess<Target>, request: BenchRequest, databaseUrl: string, text: string): Promise<void> {
  const client = new pg.Client({ connectionString: databaseUrl });
  await client.connect();
  try {
    let seen: string[] = [];
    for (let attempt = 0; attempt < STATEMENT_SIGHTINGS; attempt++) {
      await verifyAnswer(plinth, request);
      const { rows } = await client.query<{ query: string }>(
        "SELECT query FROM pg_stat_activity WHERE datname = current_database() AND application_name = 'plinth' AND query LIKE '%shop_orders%'",
      );
      if (rows.some((row) => row.query === text || (row.query.length >= 1000 && text.startsWith(row.query)))) return;
      seen = rows.map((row) => row.query);
    }
    throw new Error(
      `Plinth did not run the floor's statement for the ${request.query} query:\n${text}\nits statements on the tables:\n${seen.join('\n') || 'none'}`,
    );
  } finally {
    await client.end();
  }
}

interface OrdersAnswer {
  data?: { shop_orders?: { customer: unknown; items: unknown[] }[] };
}

/** The floor's answer to `request`, which the others must equal: a full page, each order with its customer and items. */
async function expectedAnswer(floor: ServerProcess<Target>, request: Omit<BenchRequest, 'check'>): Promise<unknown> {
  const response = await fetch(floor.url, { method: 'POST', headers: request.headers, body: request.body });
  const answer = (await response.json()) as OrdersAnswer;
  const orders = answer.data?.shop_orders;
  if (response.status !== 200 || !orders) throw new Error(`the floor answered the ${request.query} query wrongly: ${JSON.stringify(answer).slice(0, 500)}`);
  if (orders.length !== PAGE || orders.some((order) => order.customer === null || order.items.length !== ITEMS_PER_ORDER)) {
    throw new Error(`the ${request.query} query answered ${orders.length} orders, not ${PAGE} each with a customer and ${ITEMS_PER_ORDER} items`);
  }
  return answer;
}

function startServerProcess(target: Target, settings: Settings, databaseUrl: string, floor?: string): Promise<ServerProcess<Target>> {
  const profileArgs = settings.profiled.includes(target)
    ? ['--cpu-prof', `--cpu-prof-dir=${path.join(RESULTS_DIR, 'profiles')}`, `--cpu-prof-name=tables-${target}-${Date.now()}.cpuprofile`]
    : [];
  return forkServer(__filename, target, {
    execArgv: profileArgs,
    env: {
      ...process.env,
      NODE_ENV: 'production',
      BENCH_DATABASE_URL: databaseUrl,
      BENCH_LOG_LEVEL: settings.logLevel,
      ...(floor ? { BENCH_TABLES_FLOOR: floor } : {}),
    },
    logFile: path.join(RESULTS_DIR, `tables-${target}.log`),
  });
}

async function runBenchmark(): Promise<void> {
  const settings = readSettings();
  fs.mkdirSync(RESULTS_DIR, { recursive: true });
  const databaseUrl = await prepareDatabase();
  const owners = Array.from({ length: ORDER_OWNERS }, () => randomUUID());
  // The first owner's orders are those n % ORDER_OWNERS = 0.
  const userId = owners[0];
  const token = signUserToken(userId, 3600 + settings.rounds * settings.queries.length * 3 * (settings.durationSeconds + 60));
  const loadAverageBefore = os.loadavg();
  process.stderr.write('seeding...\n');
  await seed(databaseUrl, owners);

  const servers: ServerProcess<Target>[] = [];
  const runs = new Map<QueryName, Map<Target, LoadResult[]>>(settings.queries.map((query) => [query, new Map(TARGETS.map((target) => [target, []]))]));
  const statements = new Map<QueryName, FloorStatement>();
  try {
    process.stderr.write('starting plinth...\n');
    const plinth = await startServerProcess('plinth', settings, databaseUrl);
    servers.push(plinth);
    await trackTables(plinth);
    statements.set('admin', await compiledStatement(databaseUrl, { role: 'admin', admin: true }, {}));
    statements.set('user', await compiledStatement(databaseUrl, { role: 'user', admin: false }, { 'x-gql-user-id': userId }));
    const floorStatements = JSON.stringify({ admin: statements.get('admin'), user: statements.get('user') });
    for (const target of ['floor', 'typeorm'] as const) {
      process.stderr.write(`starting ${target}...\n`);
      servers.push(await startServerProcess(target, settings, databaseUrl, floorStatements));
    }
    const body = JSON.stringify({ query: DOCUMENT, variables: VARIABLES, operationName: 'Orders' });
    const headers = { 'content-type': 'application/json', accept: 'application/json' };
    const requests: (BenchRequest & { query: QueryName })[] = [];
    for (const query of settings.queries) {
      const request = {
        query,
        headers: { ...headers, ...(query === 'admin' ? { 'x-gql-admin-secret': ADMIN_SECRET } : { authorization: `Bearer ${token}` }) },
        body,
      };
      const expected = await expectedAnswer(servers[1], request);
      const checked = { ...request, check: (answer: unknown) => (isDeepStrictEqual(answer, expected) ? null : 'not the floor’s answer') };
      for (const server of servers) await verifyAnswer(server, checked);
      await checkPlinthRuns(plinth, checked, databaseUrl, statements.get(query)!.text);
      requests.push(checked);
    }
    for (const server of servers) {
      for (const request of requests) {
        process.stderr.write(`warming up ${server.target} on ${request.query} (${settings.warmupSeconds} s)...\n`);
        await runSlice(server, request, settings.connections, settings.warmupSeconds);
      }
    }
    for (let round = 0; round < settings.rounds; round++) {
      for (const request of requests) {
        process.stderr.write(`measuring ${request.query}, round ${round + 1}/${settings.rounds}...\n`);
        for (const [target, run] of await runTurns(servers, request, settings)) runs.get(request.query)!.get(target)!.push(run);
      }
    }
  } finally {
    await Promise.all(servers.map((server) => server.stop()));
  }

  reportRuns({
    runs,
    subject: 'plinth',
    labels: LABELS,
    ratioTargets: RATIO_TARGETS,
    settings,
    loadAverageBefore,
    recorded: { document: DOCUMENT, variables: VARIABLES, statements: Object.fromEntries(statements), settings },
    file: RESULTS_FILE,
  });
}

/** The server of `target`, in this child process. */
async function startTarget(target: Target): Promise<{ url: string; close(): Promise<void> }> {
  const logLevel = process.env.BENCH_LOG_LEVEL ?? 'warn';
  if (target === 'plinth') {
    const { startPlinth } = require('./servers') as typeof import('./servers');
    return startPlinth(logLevel);
  }
  const { databaseUrl, config, sessionSettings } = baselineConfig(logLevel);
  // Each target's modules are required by its own process: (b)'s type-graphql classes and Plinth's must not meet in one.
  if (target === 'typeorm') {
    const { startTypeormBaseline } = require('./tables-typeorm') as typeof import('./tables-typeorm');
    return startTypeormBaseline(databaseUrl, config.database.poolSize, sessionSettings);
  }
  const { startFloor } = require('./tables-floor') as typeof import('./tables-floor');
  const statements = JSON.parse(process.env.BENCH_TABLES_FLOOR ?? 'null') as Parameters<typeof startFloor>[3] | null;
  if (!statements) throw new Error('BENCH_TABLES_FLOOR is not set for the floor');
  return startFloor(databaseUrl, config.database.poolSize, ROOT_FIELD, statements);
}

benchEntry(TARGETS, startTarget, runBenchmark);
