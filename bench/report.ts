import 'reflect-metadata';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import pg from 'pg';
import { csvCell } from '../src/modules/reports/report-runner.service';
import { DEFAULT_DATABASE_URL } from './database';
import { positiveInteger } from './settings';

/**
 * generateReport over BENCH_REPORT_ROWS users (100,000) against the real server, run as its own
 * process (`plinth start`, api and worker) so its memory is its own: the time from the mutation
 * to COMPLETED, the rows per second, and the server's peak resident memory (VmHWM) before and
 * after, against a baseline measured in the same run: the same CSV built the naive way, every
 * row read into memory with one SELECT and joined into one string (in this process).
 *
 *   npm run bench:report
 *
 * It runs on a database of its own (plinth_bench_report on the local PostgreSQL, or
 * BENCH_REPORT_DATABASE_URL), dropped and created anew.
 */

const ADMIN_SECRET = 'bench-admin-secret-0123456789';
const CLI = path.join(__dirname, '..', 'src', 'cli', 'main.js');
const COLUMNS = ['id', 'email', 'name', 'company', 'email_verified', 'created_at'];

/** Peak and current resident memory of a process, in MiB, from /proc. */
function memoryOf(pid: number): { peak: number; current: number } {
  const status = fs.readFileSync(`/proc/${pid}/status`, 'utf8');
  const kib = (field: string) => Number(new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(status)?.[1] ?? NaN);
  return { peak: kib('VmHWM') / 1024, current: kib('VmRSS') / 1024 };
}

async function freshDatabase(): Promise<string> {
  const url = new URL(process.env.BENCH_REPORT_DATABASE_URL ?? DEFAULT_DATABASE_URL.replace(/plinth_bench$/, 'plinth_bench_report'));
  const name = url.pathname.slice(1);
  const admin = new URL(url);
  admin.pathname = '/postgres';
  const client = new pg.Client({ connectionString: admin.toString() });
  await client.connect();
  try {
    await client.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
    await client.query(`CREATE DATABASE ${name}`);
  } finally {
    await client.end();
  }
  return url.toString();
}

function startServer(databaseUrl: string): Promise<{ url: string; pid: number; stop(): Promise<void> }> {
  const child = spawn(process.execPath, [CLI, 'start'], {
    env: {
      PATH: process.env.PATH,
      HOME: process.env.HOME,
      NODE_ENV: 'development',
      HOST: '127.0.0.1',
      PORT: '0',
      LOG_LEVEL: 'info',
      LOG_FORMAT: 'json',
      DATABASE_URL: databaseUrl,
      GQL_GRAPHQL_ADMIN_SECRET: ADMIN_SECRET,
      JOBS_POLL_INTERVAL_SECONDS: '1',
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  return new Promise((resolve, reject) => {
    child.stderr.on('data', (chunk) => (output += chunk));
    child.stdout.on('data', (chunk: Buffer) => {
      output += chunk;
      for (const line of chunk.toString().split('\n')) {
        if (!line.includes('Plinth is ready')) continue;
        resolve({
          url: (JSON.parse(line) as { url: string }).url,
          pid: child.pid!,
          stop: () =>
            new Promise((done) => {
              child.on('exit', () => done());
              child.kill('SIGTERM');
            }),
        });
      }
    });
    child.on('exit', (code) => reject(new Error(`the server exited (${code}) before it was ready:\n${output}`)));
  });
}

async function graphql<T>(url: string, query: string, variables: Record<string, unknown>): Promise<T> {
  const response = await fetch(`${url}/v1/graphql`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-gql-admin-secret': ADMIN_SECRET },
    body: JSON.stringify({ query, variables }),
  });
  const body = (await response.json()) as { data?: T; errors?: unknown };
  if (!body.data) throw new Error(JSON.stringify(body.errors));
  return body.data;
}

async function main(): Promise<void> {
  const rows = positiveInteger('BENCH_REPORT_ROWS', 100_000);
  const databaseUrl = await freshDatabase();
  const server = await startServer(databaseUrl);
  const db = new pg.Client({ connectionString: databaseUrl });
  await db.connect();
  try {
    await db.query(
      `INSERT INTO users (email, name, company, created_at)
       SELECT 'bench' || n || '@example.com', 'Bench User ' || n, 'Company ' || (n % 100), now() - n * interval '1 second'
       FROM generate_series(1, $1) AS n`,
      [rows],
    );
    await db.query('ANALYZE users');
    const before = memoryOf(server.pid);

    const start = performance.now();
    const { generateReport } = await graphql<{ generateReport: { job_id: string; estimated_duration: number } }>(
      server.url,
      'mutation ($input: ReportInput!) { generateReport(input: $input) { job_id estimated_duration } }',
      { input: { kind: 'USERS', format: 'CSV' } },
    );
    let peakDuring = before.peak;
    let job: { status: string; rows_written: number; result_size: number | null };
    for (;;) {
      ({ reportJob: job } = await graphql<{ reportJob: typeof job }>(
        server.url,
        'query ($id: UUID!) { reportJob(job_id: $id) { status rows_written result_size } }',
        { id: generateReport.job_id },
      ));
      peakDuring = Math.max(peakDuring, memoryOf(server.pid).peak);
      if (job.status !== 'QUEUED' && job.status !== 'RUNNING') break;
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    const reportMs = performance.now() - start;
    if (job.status !== 'COMPLETED' || job.rows_written !== rows) throw new Error(`the report ended ${JSON.stringify(job)}`);

    // Baseline: every row in memory at once, then one string.
    const baselineBefore = memoryOf(process.pid);
    const naiveStart = performance.now();
    const all = await db.query(`SELECT ${COLUMNS.join(', ')} FROM users ORDER BY created_at, id`);
    const csv = [COLUMNS.join(','), ...all.rows.map((row: Record<string, unknown>) => COLUMNS.map((column) => csvCell(row[column])).join(','))].join('\r\n');
    const naiveMs = performance.now() - naiveStart;
    const baselineAfter = memoryOf(process.pid);

    const streamedGrowth = peakDuring - before.current;
    const naiveGrowth = baselineAfter.peak - baselineBefore.current;
    const line = (name: string, value: string) => `${name.padEnd(52)} ${value}`;
    process.stdout.write(
      [
        `generateReport, ${rows} users as CSV (${((job.result_size ?? 0) / 1024 / 1024).toFixed(1)} MiB; naive CSV ${(csv.length / 1024 / 1024).toFixed(1)} MiB)`,
        line('estimated_duration', `${generateReport.estimated_duration} s`),
        line('streamed report, mutation to COMPLETED', `${reportMs.toFixed(0)} ms (${Math.round(rows / (reportMs / 1000))} rows/s)`),
        line(
          'server resident memory before / peak during',
          `${before.current.toFixed(0)} MiB / ${peakDuring.toFixed(0)} MiB (+${streamedGrowth.toFixed(0)} MiB)`,
        ),
        line('baseline: all rows in memory, one string', `${naiveMs.toFixed(0)} ms, +${naiveGrowth.toFixed(0)} MiB resident`),
        line('memory growth, streamed / baseline', `${(streamedGrowth / naiveGrowth).toFixed(2)}`),
        line('time, streamed (with queue and storage) / baseline', `${(reportMs / naiveMs).toFixed(2)}`),
        '',
      ].join('\n'),
    );
  } finally {
    await db.end();
    await server.stop();
  }
}

main().catch((error: unknown) => {
  process.stderr.write(`${(error as Error).stack ?? String(error)}\n`);
  process.exit(1);
});
