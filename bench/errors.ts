import { fork, type ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import autocannon from 'autocannon';
import Fastify from 'fastify';
import pg from 'pg';
import { loadConfig } from '../src/config';
import { createDataSource, runMigrations } from '../src/db/data-source';
import { startServer } from '../src/main';
import { normalizeEvent } from '../src/modules/errortracking/event';
import { EVENT_ITEM_TYPE, keyFromSentryAuth, parseEnvelope } from '../src/modules/errortracking/sentry-protocol';
import { DEFAULT_DATABASE_URL } from './database';
import { positiveInteger } from './settings';
import { STORAGE_URL_SIGNING_SECRET, type ChildMessage, type ParentMessage } from './shared';

/**
 * Error ingestion and the `errors` query, against baselines measured in the same run:
 *
 *   npm run bench:errors
 *
 * 1. Sustained ingestion: autocannon posts Sentry envelopes (what @sentry/node sends: a 5 KB
 *    event with a 15-frame stack trace, breadcrumbs and contexts, 200 kinds of error, each
 *    request a new event id) over two DSN keys (100 connections) to Plinth, in a child process whose CPU time is
 *    read before and after. Baseline: the same route, envelope parser and event checks, writing
 *    each event in its own transaction (upsert of the error, insert of the event) with the key
 *    looked up on every request: the straightforward design, GlitchTip's shape.
 * 2. The `errors` query, 100 nodes with their project, stack trace and source, answered
 *    one after the other: p50 against the floor of the same data read straight from PostgreSQL
 *    with the three statements Plinth's DataLoaders send.
 *
 * Settings: BENCH_DURATION (10 s a slot), BENCH_ROUNDS (3 slots each, alternating), BENCH_WARMUP (2 s),
 * BENCH_CONNECTIONS (100: many SDK clients), BENCH_QUERIES (200),
 * BENCH_CPU_PROF (plinth or baseline: that server's CPU profile), BENCH_SKIP_QUERY=1 (ingestion only).
 * The database is plinth_bench_errors on BENCH_DATABASE_URL's server, created anew each run.
 */

const ADMIN_SECRET = 'bench-admin-secret-0123456789abcdef';
const KINDS = 200;

function environment(databaseUrl: string): Record<string, string> {
  return {
    NODE_ENV: 'production',
    HOST: '127.0.0.1',
    PORT: '0',
    LOG_LEVEL: process.env.BENCH_LOG_LEVEL ?? 'warn',
    DATABASE_URL: databaseUrl,
    GQL_GRAPHQL_ADMIN_SECRET: ADMIN_SECRET,
    GQL_GRAPHQL_JWT_SECRET: JSON.stringify({ type: 'HS256', key: 'bench-jwt-signing-key-of-at-least-32-bytes!' }),
    STORAGE_URL_SIGNING_SECRET,
    PLINTH_PROCESS_ROLES: 'api',
    ERRORS_INGEST_RATE_LIMIT_PER_MINUTE: '100000000',
  };
}

// ---------------------------------------------------------------- the servers (child processes)

async function serve(role: string): Promise<void> {
  const send = (message: ChildMessage) => process.send?.(message);
  const databaseUrl = process.env.BENCH_DATABASE_URL!;
  let close: () => Promise<void>;
  let url: string;
  try {
    if (role === 'plinth') {
      const server = await startServer(loadConfig(environment(databaseUrl)));
      url = server.url;
      close = async () => void (await server.close());
    } else {
      ({ url, close } = await startBaseline(databaseUrl));
    }
  } catch (error) {
    send({ type: 'failed', error: error instanceof Error ? (error.stack ?? error.message) : String(error) });
    process.exit(1);
  }
  process.on('message', (message: ParentMessage) => {
    if (message.type === 'stop') {
      void close().finally(() => process.exit(0));
      return;
    }
    const { user, system } = process.cpuUsage();
    send({ type: 'cpu-usage', micros: user + system, rssBytes: process.memoryUsage.rss() });
  });
  process.on('disconnect', () => process.exit(0));
  send({ type: 'ready', url });
}

/** The baseline: the same parsing and checks, one transaction per event, the key read on every request. */
async function startBaseline(databaseUrl: string): Promise<{ url: string; close: () => Promise<void> }> {
  const pool = new pg.Pool({ connectionString: databaseUrl, max: 10 });
  const app = Fastify({ bodyLimit: 1024 * 1024 });
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('*', { parseAs: 'buffer' }, (_request, body, done) => done(null, body));
  app.post('/api/:projectId/envelope/', async (request, reply) => {
    const key = keyFromSentryAuth(request.headers['x-sentry-auth'] as string | undefined) ?? '';
    const token = await pool.query('SELECT project_id FROM error_tokens WHERE id = $1 AND revoked_at IS NULL', [key.split('_')[1] ?? '']);
    if (token.rowCount === 0) return reply.code(401).send({ error: 'unknown key' });
    const projectId = token.rows[0].project_id as number;
    const envelope = parseEnvelope(request.body as Buffer);
    const events = envelope.items.filter((item) => item.type === EVENT_ITEM_TYPE).map((item) => normalizeEvent(JSON.parse(item.payload.toString('utf8'))));
    for (const event of events) {
      const client = await pool.connect();
      try {
        await client.query('BEGIN');
        const group = await client.query(
          `INSERT INTO error_groups (project_id, fingerprint, type, message, level, first_seen, last_seen, occurrence_count, last_event_id)
           VALUES ($1, $2, $3, $4, $5, $6, $6, 1, $7)
           ON CONFLICT (project_id, fingerprint) DO UPDATE SET occurrence_count = error_groups.occurrence_count + 1,
             last_seen = GREATEST(error_groups.last_seen, EXCLUDED.last_seen), last_event_id = EXCLUDED.last_event_id
           RETURNING id`,
          [projectId, event.fingerprint, event.type, event.message, event.level, event.occurredAt, event.eventId],
        );
        await client.query(
          `INSERT INTO error_events (project_id, event_id, group_id, occurred_at, level, message, environment, release, frames)
           VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) ON CONFLICT DO NOTHING`,
          [
            projectId,
            event.eventId,
            group.rows[0].id,
            event.occurredAt,
            event.level,
            event.message,
            event.environment,
            event.release,
            JSON.stringify(event.frames),
          ],
        );
        await client.query('COMMIT');
      } catch (error) {
        await client.query('ROLLBACK');
        throw error;
      } finally {
        client.release();
      }
    }
    return { id: events[0]?.eventId.replace(/-/g, '') };
  });
  await app.listen({ host: '127.0.0.1', port: 0 });
  return {
    url: `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`,
    close: async () => {
      await app.close();
      await pool.end();
    },
  };
}

// ---------------------------------------------------------------- the load

interface ServerProcess {
  url: string;
  cpuMicros(): Promise<number>;
  stop(): Promise<void>;
}

function startChild(role: string, databaseUrl: string): Promise<ServerProcess> {
  // BENCH_CPU_PROF=plinth (or baseline) writes the server's V8 profile to bench/results/profiles (bench/cpu-profile.ts reads it).
  const execArgv =
    process.env.BENCH_CPU_PROF === role
      ? ['--cpu-prof', '--cpu-prof-dir=bench/results/profiles', `--cpu-prof-name=errors-${role}-${Date.now()}.cpuprofile`]
      : [];
  const child = fork(__filename, ['serve', role], {
    execArgv,
    env: { ...process.env, NODE_ENV: 'production', BENCH_DATABASE_URL: databaseUrl },
    stdio: ['ignore', 'ignore', 'inherit', 'ipc'],
  });
  return new Promise((resolve, reject) => {
    child.once('exit', (code) => reject(new Error(`${role} exited (code ${code}) before it was ready`)));
    child.once('message', (message: ChildMessage) => {
      if (message.type !== 'ready') return reject(new Error(`${role} failed: ${message.type === 'failed' ? message.error : message.type}`));
      resolve({ url: message.url, cpuMicros: () => cpuOf(child), stop: () => stopChild(child) });
    });
  });
}

function cpuOf(child: ChildProcess): Promise<number> {
  return new Promise((resolve) => {
    const listener = (message: ChildMessage) => {
      if (message.type !== 'cpu-usage') return;
      child.off('message', listener);
      resolve(message.micros);
    };
    child.on('message', listener);
    child.send({ type: 'cpu-usage' } satisfies ParentMessage);
  });
}

function stopChild(child: ChildProcess): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(() => child.kill('SIGKILL'), 15_000);
    child.once('exit', () => {
      clearTimeout(timer);
      resolve();
    });
    child.send({ type: 'stop' } satisfies ParentMessage);
  });
}

const lines = (count: number, prefix: string) =>
  Array.from({ length: count }, (_, index) => `  ${prefix} line ${index}: const value = compute(input, ${index});`);

/** What @sentry/node sends for a captured exception, with EVENT_ID and TIMESTAMP to fill in. */
function envelopeTemplate(kind: number): string {
  const frames = Array.from({ length: 15 }, (_, index) => {
    const library = index < 8;
    const file = library
      ? `/srv/app/node_modules/${['express', 'router', 'body-parser', 'pg'][index % 4]}/lib/index.js`
      : `/srv/app/src/${['orders', 'payments', 'users', 'cart'][kind % 4]}/handler${index}.js`;
    return {
      filename: file,
      module: library ? undefined : `src.${['orders', 'payments', 'users', 'cart'][kind % 4]}:handler${index}`,
      function: library ? `Layer.handle${index}` : `step${index}_kind${kind}`,
      lineno: 10 + index * 7,
      colno: 5 + index,
      in_app: !library,
      pre_context: lines(3, 'pre'),
      context_line: `  throw new ${['TypeError', 'RangeError', 'DatabaseError', 'ValidationError'][kind % 4]}(message);`,
      post_context: lines(3, 'post'),
    };
  });
  const event = {
    event_id: 'EVENT_ID',
    timestamp: 0.5,
    platform: 'node',
    level: kind % 10 === 0 ? 'fatal' : 'error',
    release: `shop@1.${kind % 5}.0`,
    environment: 'production',
    server_name: 'web-1',
    sdk: { name: 'sentry.javascript.node', version: '11.12.0', integrations: ['InboundFilters', 'FunctionToString', 'LinkedErrors', 'Http'] },
    contexts: {
      os: { name: 'Linux', version: '6.1.0', kernel_version: '6.1.0-13-amd64' },
      runtime: { name: 'node', version: 'v20.20.2' },
      app: { app_start_time: '2030-01-01T00:00:00.000Z', app_memory: 123456789 },
      trace: { trace_id: 'a'.repeat(32), span_id: 'b'.repeat(16) },
    },
    tags: { region: 'eu-west-1', shard: String(kind % 7) },
    breadcrumbs: Array.from({ length: 10 }, (_, index) => ({
      timestamp: 0.5,
      category: 'http',
      type: 'http',
      data: { method: 'GET', url: `https://api.example.com/items/${index}`, status_code: 200 },
    })),
    exception: {
      values: [
        {
          type: ['TypeError', 'RangeError', 'DatabaseError', 'ValidationError'][kind % 4],
          value: `Failure of kind ${kind} for order 12345`,
          mechanism: { type: 'onuncaughtexception', handled: false },
          stacktrace: { frames },
        },
      ],
    },
  };
  const payload = JSON.stringify(event).replace('"timestamp":0.5', '"timestamp":TIMESTAMP');
  return (
    [JSON.stringify({ event_id: 'EVENT_ID', sent_at: '2030-01-01T00:00:00.000Z', sdk: event.sdk }), JSON.stringify({ type: 'event' }), payload].join('\n') +
    '\n'
  );
}

interface LoadResult {
  eventsPerSecond: number;
  cpuMicrosPerEvent: number;
  p50Ms: number;
  events: number;
  seconds: number;
  cpuMicros: number;
}

/** Several slots as one: events and CPU summed, p50 the median of the slots'. */
function combined(runs: LoadResult[]): LoadResult {
  const events = runs.reduce((sum, run) => sum + run.events, 0);
  const seconds = runs.reduce((sum, run) => sum + run.seconds, 0);
  const cpuMicros = runs.reduce((sum, run) => sum + run.cpuMicros, 0);
  const p50s = runs.map((run) => run.p50Ms).sort((a, b) => a - b);
  return { events, seconds, cpuMicros, eventsPerSecond: events / seconds, cpuMicrosPerEvent: cpuMicros / events, p50Ms: p50s[Math.floor(p50s.length / 2)] };
}

async function ingest(server: ServerProcess, projectId: number, keys: string[], seconds: number, connections: number): Promise<LoadResult> {
  const templates = Array.from({ length: KINDS }, (_, kind) => envelopeTemplate(kind));
  let sent = 0;
  const before = await server.cpuMicros();
  const latencies: number[] = [];
  const result = await new Promise<autocannon.Result>((resolve, reject) => {
    const instance = autocannon(
      {
        url: server.url,
        connections,
        duration: seconds,
        requests: [
          {
            method: 'POST',
            path: `/api/${projectId}/envelope/`,
            setupRequest: (request) => {
              sent++;
              // A few kinds are common, most are rare, as in production.
              const kind = Math.floor(KINDS * Math.random() ** 3);
              const id = randomUUID().replace(/-/g, '');
              return {
                ...request,
                headers: { 'x-sentry-auth': `Sentry sentry_version=7, sentry_client=sentry.javascript.node/11.12.0, sentry_key=${keys[sent % keys.length]}` },
                body: templates[kind].replaceAll('EVENT_ID', id).replace('TIMESTAMP', String(Date.now() / 1000)),
              };
            },
          },
        ],
      },
      (error, outcome) => (error ? reject(error) : resolve(outcome)),
    );
    instance.on('response', (_client, _status, _bytes, time) => latencies.push(time));
  });
  const cpu = (await server.cpuMicros()) - before;
  if (result.non2xx !== 0 || result.errors !== 0) throw new Error(`${result.non2xx} non-2xx answers and ${result.errors} errors: the measurement is not valid`);
  latencies.sort((a, b) => a - b);
  return {
    eventsPerSecond: result['2xx'] / result.duration,
    cpuMicrosPerEvent: cpu / result['2xx'],
    p50Ms: latencies[Math.floor(latencies.length / 2)],
    events: result['2xx'],
    seconds: result.duration,
    cpuMicros: cpu,
  };
}

/** The spec's node (§2.5) with every nested field: the project, the stack trace, the source. */
const ERRORS_QUERY = `query ($project: Int!) { errors(first: 100, filter: { project: $project }) { edges { node {
  id message severity status occurrenceCount firstSeen lastSeen service
  project { id name slug } stackTrace sourceMap { filename source } } } } }`;

async function timed(run: () => Promise<void>, count: number): Promise<number> {
  if (count === 0) return Number.NaN;
  for (let warm = 0; warm < 20; warm++) await run();
  const samples: number[] = [];
  for (let index = 0; index < count; index++) {
    const start = performance.now();
    await run();
    samples.push(performance.now() - start);
  }
  samples.sort((a, b) => a - b);
  return samples[Math.floor(samples.length / 2)];
}

async function admin<T>(url: string, query: string, variables: Record<string, unknown> = {}): Promise<T> {
  const response = await fetch(`${url}/v1/graphql`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-gql-admin-secret': ADMIN_SECRET },
    body: JSON.stringify({ query, variables }),
  });
  const body = (await response.json()) as { data?: T; errors?: unknown };
  if (!body.data) throw new Error(`GraphQL failed: ${JSON.stringify(body.errors)}`);
  return body.data;
}

async function freshDatabase(): Promise<string> {
  const server = new URL(process.env.BENCH_DATABASE_URL || process.env.DATABASE_URL || DEFAULT_DATABASE_URL);
  server.pathname = '/postgres';
  const client = new pg.Client({ connectionString: server.toString() });
  await client.connect();
  await client.query('DROP DATABASE IF EXISTS plinth_bench_errors WITH (FORCE)');
  await client.query('CREATE DATABASE plinth_bench_errors');
  await client.end();
  server.pathname = '/plinth_bench_errors';
  return server.toString();
}

async function main(): Promise<void> {
  const seconds = positiveInteger('BENCH_DURATION', 10);
  const warmup = positiveInteger('BENCH_WARMUP', 2);
  const connections = positiveInteger('BENCH_CONNECTIONS', 100);
  const queries = positiveInteger('BENCH_QUERIES', 200);
  const rounds = positiveInteger('BENCH_ROUNDS', 3);
  const databaseUrl = await freshDatabase();
  const dataSource = createDataSource(databaseUrl, 2);
  await dataSource.initialize();
  await runMigrations(dataSource);
  await dataSource.destroy();

  const plinth = await startChild('plinth', databaseUrl);
  const { createErrorProject: project } = await admin<{ createErrorProject: { id: number } }>(
    plinth.url,
    'mutation { createErrorProject(input: {name: "Shop", slug: "shop", service: "shop-api"}) { id } }',
  );
  const keys: string[] = [];
  for (const name of ['web', 'worker']) {
    const { createErrorToken } = await admin<{ createErrorToken: { token: string } }>(
      plinth.url,
      'mutation ($input: CreateErrorTokenInput!) { createErrorToken(input: $input) { token } }',
      { input: { project: String(project.id), kind: 'DSN', name } },
    );
    keys.push(createErrorToken.token);
  }

  // Both servers run throughout; their slots alternate, so that the machine's load (shared with
  // others) weighs on both alike.
  const baseline = await startChild('baseline', databaseUrl);
  await ingest(plinth, project.id, keys, warmup, connections);
  await ingest(baseline, project.id, keys, warmup, connections);
  const oursRuns: LoadResult[] = [];
  const theirRuns: LoadResult[] = [];
  for (let round = 0; round < rounds; round++) {
    oursRuns.push(await ingest(plinth, project.id, keys, seconds, connections));
    theirRuns.push(await ingest(baseline, project.id, keys, seconds, connections));
  }
  await baseline.stop();
  const ours = combined(oursRuns);
  const theirs = combined(theirRuns);
  const stored = await new pg.Client({ connectionString: databaseUrl });
  await stored.connect();
  const [{ count }] = (await stored.query('SELECT count(*)::int AS count FROM error_events')).rows as { count: number }[];

  // The errors query: Plinth over HTTP and GraphQL, and the floor of the same reads.
  const skipQuery = process.env.BENCH_SKIP_QUERY === '1';
  const graphqlP50 = await timed(
    async () => {
      const response = await fetch(`${plinth.url}/v1/graphql`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-gql-admin-secret': ADMIN_SECRET },
        body: JSON.stringify({ query: ERRORS_QUERY, variables: { project: project.id } }),
      });
      const body = (await response.json()) as { data: { errors: { edges: unknown[] } } };
      if (body.data.errors.edges.length !== 100) throw new Error('the errors query did not answer 100 nodes');
    },
    skipQuery ? 0 : queries,
  );
  const floorP50 = await timed(
    async () => {
      const page = await stored.query('SELECT * FROM error_groups WHERE project_id = $1 AND status <> $2 ORDER BY id DESC LIMIT 101', [project.id, 'merged']);
      await stored.query('SELECT * FROM error_projects WHERE id = ANY($1::int[])', [[project.id]]);
      await stored.query(
        'SELECT e.project_id, e.event_id, e.frames FROM error_events e JOIN unnest($1::int[], $2::uuid[]) AS k (project_id, event_id) USING (project_id, event_id)',
        [page.rows.map(() => project.id), page.rows.map((row) => row.last_event_id)],
      );
    },
    skipQuery ? 0 : queries,
  );
  await plinth.stop();
  await stored.end();

  const row = (label: string, result: LoadResult) =>
    `${label.padEnd(58)} ${result.eventsPerSecond.toFixed(0).padStart(6)} events/s  ${(result.cpuMicrosPerEvent / 1000).toFixed(3)} ms CPU/event  p50 ${result.p50Ms.toFixed(1)} ms`;
  process.stdout.write(
    [
      `Error ingestion: ${rounds} alternating rounds of ${seconds} s each, ${connections} connections, 2 DSN keys, ${KINDS} kinds of error, ~5 KB Sentry envelopes (load generator on the same cores)`,
      row('Plinth (batched group commit)', ours),
      row('baseline: one transaction per event, key read per request', theirs),
      `Plinth ingests ${(ours.eventsPerSecond / theirs.eventsPerSecond).toFixed(2)}x the baseline's events/s at ${(theirs.cpuMicrosPerEvent / ours.cpuMicrosPerEvent).toFixed(2)}x less CPU per event; ${(ours.eventsPerSecond / 295).toFixed(1)}x GlitchTip's published 295/s (targets: 2000 events/s, under 1 ms CPU/event)`,
      `(${count} events stored by Plinth)`,
      '',
      `errors(first: 100) with project, stackTrace and sourceMap, ${queries} sequential queries:`,
      `  Plinth over HTTP and GraphQL   p50 ${graphqlP50.toFixed(2)} ms (target: under 20 ms)`,
      `  floor: the 3 statements alone  p50 ${floorP50.toFixed(2)} ms`,
      `  Plinth takes ${(graphqlP50 / floorP50).toFixed(1)}x the floor's time`,
      '',
    ].join('\n'),
  );
}

if (require.main === module) {
  const [command, role] = process.argv.slice(2);
  (command === 'serve' ? serve(role) : main()).catch((error: unknown) => {
    process.stderr.write(`${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
    process.exit(1);
  });
}
