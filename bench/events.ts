import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import pg from 'pg';
import { positiveInteger } from './settings';
import { STORAGE_URL_SIGNING_SECRET } from './shared';

/**
 * Event trigger benchmark: from the commit of a row change to the webhook receiving it, and
 * sustained deliveries per second, for Plinth (capture trigger + NOTIFY + SKIP LOCKED dispatcher,
 * `plinth start` in a child process) against a baseline measured in the same run: a poller of
 * the kind Hasura runs (every 1 s it claims up to 100 due events with FOR UPDATE SKIP LOCKED and
 * POSTs them, claiming again at once when the batch was full), over an event table of the same
 * shape filled by a trigger of the same shape, delivering to the same receiver.
 *
 *   npm run bench:events
 *   BENCH_EVENTS=5000 BENCH_LATENCY_SAMPLES=100 npm run bench:events
 *
 * Latency: BENCH_LATENCY_SAMPLES (60; 20 for the poller) single-row INSERTs, each after a
 * random pause (up to 200 ms; up to 1 s for the poller, so samples fall anywhere in its cycle),
 * timed from before the INSERT to the receiver reading the event. Throughput: BENCH_EVENTS
 * (3000) rows inserted by one statement, timed to the last event received. The receiver answers
 * 200 at once. Environment: BENCH_DATABASE_URL (postgres://postgres@127.0.0.1:5432/plinth_bench_events,
 * created when missing). Output: the table on stdout and bench/results/events-latest.json.
 */

const ROOT = path.resolve(__dirname, '..', '..');
const RESULTS_FILE = path.join(ROOT, 'bench', 'results', 'events-latest.json');
const CLI = path.join(ROOT, 'dist', 'src', 'cli', 'main.js');
const DEFAULT_URL = 'postgres://postgres@127.0.0.1:5432/plinth_bench_events';
const ADMIN_SECRET = 'bench-admin-secret-0123456789abcdef';
const POLL_INTERVAL_MS = 1000;
const POLL_BATCH = 100;

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const percentile = (values: number[], p: number) => {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)];
};

async function prepareDatabase(): Promise<string> {
  const url = process.env.BENCH_DATABASE_URL ?? DEFAULT_URL;
  const admin = new URL(url);
  const name = admin.pathname.slice(1);
  admin.pathname = '/postgres';
  const client = new pg.Client({ connectionString: admin.toString() });
  await client.connect();
  try {
    // A fresh database each run: Plinth migrates it on start.
    await client.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
    await client.query(`CREATE DATABASE ${name}`);
  } finally {
    await client.end();
  }
  return url;
}

/** The receiver: calls `onEvent` with each event's row id as the request arrives. */
async function startReceiver(onEvent: (path: string, rowId: number) => void): Promise<{ url: string; close(): Promise<void> }> {
  const server = http.createServer((request, response) => {
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', () => {
      const body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as { event: { data: { new: { id: number } } } };
      onEvent(request.url ?? '/', body.event.data.new.id);
      response.writeHead(200, { 'content-type': 'application/json' });
      response.end('{"status":"ok"}');
    });
  });
  server.keepAliveTimeout = 60_000;
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/** `plinth start` (api and worker) on the database, until it logs that it is ready. */
async function startPlinth(url: string): Promise<{ child: ChildProcess; base: string }> {
  const child = spawn(process.execPath, [CLI, 'start'], {
    env: {
      PATH: process.env.PATH,
      NODE_ENV: 'production',
      LOG_LEVEL: 'info',
      LOG_FORMAT: 'json',
      HOST: '127.0.0.1',
      PORT: '0',
      DATABASE_URL: url,
      DATABASE_POOL_SIZE: '20',
      GQL_GRAPHQL_ADMIN_SECRET: ADMIN_SECRET,
      GQL_GRAPHQL_JWT_SECRET: JSON.stringify({ type: 'HS256', key: 'bench-jwt-key-of-at-least-32-bytes-long!' }),
      STORAGE_URL_SIGNING_SECRET,
      EVENTS_CONCURRENCY: process.env.BENCH_CONCURRENCY ?? '100',
      EVENTS_TRIGGER_CONCURRENCY: process.env.BENCH_CONCURRENCY ?? '100',
      OUTBOUND_HTTP_MAX_CONNECTIONS_PER_ORIGIN: process.env.BENCH_CONCURRENCY ?? '100',
    },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error('plinth did not start within 60 s')), 60_000);
    let buffered = '';
    child.stdout!.on('data', (chunk: Buffer) => {
      buffered += chunk.toString();
      for (const line of buffered.split('\n')) {
        if (!line.includes('Plinth is ready')) continue;
        clearTimeout(timer);
        resolve({ child, base: (JSON.parse(line) as { url: string }).url });
      }
      buffered = buffered.slice(buffered.lastIndexOf('\n') + 1);
    });
    child.on('exit', (code) => reject(new Error(`plinth exited with ${code} before it was ready`)));
  });
}

/**
 * The baseline: Hasura's delivery loop as its documentation describes it (fetch interval 1 s,
 * batch 100), over `bench_poll_log`, filled in the change's transaction by a trigger like
 * Plinth's (without the NOTIFY, which a poller does not listen to).
 */
async function startPoller(url: string, webhook: string): Promise<{ stop(): Promise<void> }> {
  const pool = new pg.Pool({ connectionString: url, max: 4 });
  await pool.query(`
    CREATE TABLE bench_poll_log (id bigserial PRIMARY KEY, payload jsonb NOT NULL, delivered boolean NOT NULL DEFAULT false, locked timestamptz);
    CREATE INDEX ON bench_poll_log (id) WHERE NOT delivered;
    CREATE TABLE bench_poll_invocations (id bigserial PRIMARY KEY, event_id bigint NOT NULL, status integer, request jsonb NOT NULL, response jsonb NOT NULL, created_at timestamptz NOT NULL DEFAULT now());
    CREATE FUNCTION bench_poll_capture() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      INSERT INTO bench_poll_log (payload) VALUES (jsonb_build_object('op', TG_OP, 'data', jsonb_build_object('old', NULL, 'new', to_jsonb(NEW))));
      RETURN NULL;
    END $$;
    CREATE TRIGGER bench_poll_capture AFTER INSERT ON bench_rows_poll FOR EACH ROW EXECUTE FUNCTION bench_poll_capture();`);
  const agent = new http.Agent({ keepAlive: true, maxSockets: 100 });
  let stopped = false;
  const post = (body: string) =>
    new Promise<{ status: number; body: string }>((resolve, reject) => {
      const request = http.request(webhook, { method: 'POST', agent, headers: { 'content-type': 'application/json' } }, (response) => {
        let text = '';
        response.on('data', (chunk: Buffer) => (text += chunk));
        response.on('end', () => resolve({ status: response.statusCode ?? 0, body: text }));
      });
      request.on('error', reject);
      request.end(body);
    });
  const loop = (async () => {
    while (!stopped) {
      const { rows } = await pool.query<{ id: string; payload: unknown }>(
        `UPDATE bench_poll_log SET locked = now() WHERE id IN (
           SELECT id FROM bench_poll_log WHERE NOT delivered AND locked IS NULL ORDER BY id LIMIT $1 FOR UPDATE SKIP LOCKED)
         RETURNING id, payload`,
        [POLL_BATCH],
      );
      const bodies = rows.map((row) => JSON.stringify({ id: row.id, event: row.payload }));
      const answers = await Promise.all(bodies.map(post));
      if (rows.length > 0) {
        // Delivered, and each invocation logged, as Hasura does (one statement each per batch).
        await pool.query('UPDATE bench_poll_log SET delivered = true WHERE id = ANY ($1)', [rows.map((row) => row.id)]);
        await pool.query(
          'INSERT INTO bench_poll_invocations (event_id, status, request, response) SELECT * FROM unnest($1::bigint[], $2::int[], $3::jsonb[], $4::jsonb[])',
          [rows.map((row) => row.id), answers.map((answer) => answer.status), bodies, answers.map((answer) => JSON.stringify({ body: answer.body }))],
        );
      }
      if (rows.length < POLL_BATCH) await sleep(POLL_INTERVAL_MS);
    }
  })();
  return {
    stop: async () => {
      stopped = true;
      await loop;
      agent.destroy();
      await pool.end();
    },
  };
}

interface Result {
  latencySamples: number;
  latencyP50Ms: number;
  latencyP99Ms: number;
  events: number;
  eventsPerSecond: number;
}

async function measure(
  db: pg.Pool,
  table: string,
  path: string,
  waiters: Map<string, (at: number) => void>,
  arrivals: Map<string, number>,
  counts: Map<string, number>,
  settings: { samples: number; maxPauseMs: number; events: number },
): Promise<Result> {
  const latencies: number[] = [];
  for (let sample = 0; sample < settings.samples; sample += 1) {
    await sleep(Math.random() * settings.maxPauseMs);
    const started = performance.now();
    const { rows } = await db.query<{ id: number }>(`INSERT INTO ${table} (label) VALUES ('latency') RETURNING id`);
    const key = `${path}:${rows[0].id}`;
    // The webhook may be called before the INSERT's answer is read here.
    const arrived = arrivals.get(key) ?? (await new Promise<number>((resolve) => waiters.set(key, resolve)));
    waiters.delete(key);
    arrivals.delete(key);
    latencies.push(arrived - started);
  }
  counts.set(path, 0);
  const started = performance.now();
  await db.query(`INSERT INTO ${table} (label) SELECT 'throughput' FROM generate_series(1, $1)`, [settings.events]);
  while ((counts.get(path) ?? 0) < settings.events) await sleep(5);
  const seconds = (performance.now() - started) / 1000;
  return {
    latencySamples: latencies.length,
    latencyP50Ms: Math.round(percentile(latencies, 50) * 10) / 10,
    latencyP99Ms: Math.round(percentile(latencies, 99) * 10) / 10,
    events: settings.events,
    eventsPerSecond: Math.round(settings.events / seconds),
  };
}

async function main(): Promise<void> {
  const events = positiveInteger('BENCH_EVENTS', 3000);
  const samples = positiveInteger('BENCH_LATENCY_SAMPLES', 60);
  const url = await prepareDatabase();
  const waiters = new Map<string, (at: number) => void>();
  const arrivals = new Map<string, number>();
  const counts = new Map<string, number>();
  const receiver = await startReceiver((path, rowId) => {
    const at = performance.now();
    counts.set(path, (counts.get(path) ?? 0) + 1);
    const key = `${path}:${rowId}`;
    const waiter = waiters.get(key);
    if (waiter) waiter(at);
    else if (counts.get(path)! <= samples + 1) arrivals.set(key, at);
  });
  const db = new pg.Pool({ connectionString: url, max: 2 });
  const plinth = await startPlinth(url);
  let poller: { stop(): Promise<void> } | undefined;
  try {
    await db.query(
      'CREATE TABLE bench_rows (id serial PRIMARY KEY, label text NOT NULL); CREATE TABLE bench_rows_poll (id serial PRIMARY KEY, label text NOT NULL)',
    );
    const created = await fetch(`${plinth.base}/v1/metadata`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-gql-admin-secret': ADMIN_SECRET },
      body: JSON.stringify({
        type: 'pg_create_event_trigger',
        args: { name: 'bench', table: 'bench_rows', webhook: `${receiver.url}/plinth`, insert: { columns: '*' } },
      }),
    });
    if (!created.ok) throw new Error(`creating the trigger failed: ${await created.text()}`);
    poller = await startPoller(url, `${receiver.url}/poller`);

    const results = {
      plinth: await measure(db, 'bench_rows', '/plinth', waiters, arrivals, counts, { samples, maxPauseMs: 200, events }),
      poller: await measure(db, 'bench_rows_poll', '/poller', waiters, arrivals, counts, {
        samples: Math.min(samples, 20),
        maxPauseMs: POLL_INTERVAL_MS,
        events,
      }),
    };
    const rows = [
      ['target', 'latency p50 ms', 'latency p99 ms', 'events/s'],
      ['plinth (NOTIFY + SKIP LOCKED)', results.plinth.latencyP50Ms, results.plinth.latencyP99Ms, results.plinth.eventsPerSecond],
      ['1 s poller, batch 100 (Hasura-like)', results.poller.latencyP50Ms, results.poller.latencyP99Ms, results.poller.eventsPerSecond],
    ].map((row) => row.map(String));
    const widths = rows[0].map((_, column) => Math.max(...rows.map((row) => row[column].length)));
    process.stdout.write(`${rows.map((row) => row.map((cell, column) => cell.padEnd(widths[column])).join('  ')).join('\n')}\n`);
    const latencyRatio = results.poller.latencyP50Ms / results.plinth.latencyP50Ms;
    const throughputRatio = results.plinth.eventsPerSecond / results.poller.eventsPerSecond;
    process.stdout.write(
      `p50 latency: plinth ${latencyRatio.toFixed(1)}x lower than the poller (target: under 50 ms, 20x better than a 1 s poll)\n` +
        `throughput: plinth ${throughputRatio.toFixed(2)}x the poller's (target: 1000 events/s or more)\n`,
    );
    fs.mkdirSync(path.dirname(RESULTS_FILE), { recursive: true });
    fs.writeFileSync(RESULTS_FILE, `${JSON.stringify({ at: new Date().toISOString(), events, samples, results, latencyRatio, throughputRatio }, null, 2)}\n`);
  } finally {
    await poller?.stop();
    plinth.child.kill('SIGTERM');
    await new Promise((resolve) => plinth.child.once('exit', resolve));
    await db.end();
    await receiver.close();
  }
}

main().catch((error: unknown) => {
  process.stderr.write(`bench:events failed: ${error instanceof Error ? error.stack : String(error)}\n`);
  process.exit(1);
});
