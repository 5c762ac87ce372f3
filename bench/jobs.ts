// The job queue's modules use decorators (TypeORM) that need the metadata polyfill first.
import 'reflect-metadata';
import { fork, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import PgBoss from 'pg-boss';
import pg from 'pg';
import pino from 'pino';
import { loadConfig } from '../src/config';
import { createDataSource } from '../src/db/data-source';
import { JobQueue, JOBS_SCHEMA } from '../src/platform/job-queue';
import { prepareDatabase } from './database';
import {
  BARE_CHANNEL,
  BARE_TABLE,
  CONCURRENCY,
  createBareTable,
  JOB_TARGET_LABELS,
  JOB_TARGETS,
  now,
  PLINTH_QUEUE,
  runWorkerRole,
  STOCK_QUEUE,
  type BenchJob,
  type JobTarget,
  type StopMessage,
  type WorkerMessage,
} from './job-workers';
import { positiveInteger } from './settings';

/**
 * Job queue benchmark: Plinth's JobQueue (pg-boss, its runner woken by NOTIFY) against
 * (a) a bare queue table claimed with FOR UPDATE SKIP LOCKED and woken the same way (the least
 * a durable queue does: a ceiling) and (b) stock pg-boss 10, work() with its default 2 s
 * polling and no wake (what the wake buys). Every target runs 4 jobs at once in one worker
 * process (a child of this script); this process sends and measures.
 *
 *   npm run bench:jobs
 *   BENCH_JOBS=5000 BENCH_LATENCY_SAMPLES=100 npm run bench:jobs
 *
 * Throughput: BENCH_JOBS jobs (2000; 40 for (b), which runs 4 jobs per 2 s poll) sent with 8
 * sends in flight, timed from the first send to the last completion recorded in the database.
 * Latency: BENCH_LATENCY_SAMPLES jobs (40) sent one at a time to an idle queue, each after a
 * random pause of up to 2 s (so that samples fall anywhere in a polling cycle), timed from
 * before the send to the worker's first line. The jobs themselves do nothing.
 *
 * Environment: BENCH_TARGETS (comma list of plinth,bare,pg-boss), BENCH_LOG_LEVEL (warn),
 * BENCH_DATABASE_URL or DATABASE_URL (else postgres://postgres@127.0.0.1:5432/plinth_bench).
 * Output: the table on stdout and bench/results/jobs-latest.json.
 */

const ROOT = path.resolve(__dirname, '..', '..');
const RESULTS_FILE = path.join(ROOT, 'bench', 'results', 'jobs-latest.json');
const SENDS_IN_FLIGHT = 8;
const STOCK_THROUGHPUT_JOBS = 40;
const WARMUP_JOBS = 100;
const MAX_PAUSE_MS = 2000;
const WORKER_START_TIMEOUT_MS = 60_000;

interface Settings {
  jobs: number;
  latencySamples: number;
  targets: JobTarget[];
}

interface TargetResult {
  jobs: number;
  jobsPerSecond: number;
  latencyP50Ms: number;
  latencyP99Ms: number;
  latencySamples: number;
}

/** Sends a target's jobs and reads how many completed. */
interface Sender {
  send(data: BenchJob): Promise<unknown>;
  completed(): Promise<number>;
  /**
   * Removes the target's jobs, so that each measurement counts its own, and vacuums its table:
   * every target starts without the dead rows of the previous measurement, whatever autovacuum
   * has managed by then.
   */
  clear(): Promise<void>;
  close(): Promise<void>;
}

function readSettings(): Settings {
  const targets = (process.env.BENCH_TARGETS ?? JOB_TARGETS.join(','))
    .split(',')
    .map((target) => target.trim())
    .filter(Boolean);
  const unknown = targets.filter((target) => !(JOB_TARGETS as readonly string[]).includes(target));
  if (unknown.length > 0 || targets.length === 0) throw new Error(`BENCH_TARGETS must list some of ${JOB_TARGETS.join(', ')}`);
  return {
    jobs: positiveInteger('BENCH_JOBS', 2000),
    latencySamples: positiveInteger('BENCH_LATENCY_SAMPLES', 40),
    targets: targets as JobTarget[],
  };
}

/** Counts by a query on one connection of its own. */
async function counter(url: string, sql: string, parameters: unknown[]): Promise<Pick<Sender, 'completed' | 'close'>> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  return {
    completed: async () => (await client.query<{ n: number }>(sql, parameters)).rows[0].n,
    close: () => client.end(),
  };
}

async function createSender(target: JobTarget, url: string): Promise<Sender> {
  switch (target) {
    case 'plinth': {
      const dataSource = createDataSource(url, 10);
      await dataSource.initialize();
      const queue = new JobQueue({
        dataSource,
        url,
        config: loadConfig({}).jobs,
        logger: pino({ level: 'warn' }),
        supervise: false,
        shutdown: new AbortController().signal,
      });
      await queue.start();
      await queue.declare([{ queue: PLINTH_QUEUE, work: async () => undefined }]);
      const count = await counter(url, `SELECT count(*)::int AS n FROM ${JOBS_SCHEMA}.job WHERE name = $1 AND state = 'completed'`, [PLINTH_QUEUE]);
      return {
        send: (data) => queue.send(PLINTH_QUEUE, data),
        completed: count.completed,
        clear: async () => {
          await dataSource.query(`DELETE FROM ${JOBS_SCHEMA}.job WHERE name = $1`, [PLINTH_QUEUE]);
          await dataSource.query(`VACUUM ANALYZE ${JOBS_SCHEMA}.job`);
        },
        close: async () => {
          await count.close();
          await queue.stop();
          await dataSource.destroy();
        },
      };
    }
    case 'pg-boss': {
      const boss = new PgBoss({ connectionString: url, max: 10, supervise: false, schedule: false });
      await boss.start();
      await boss.createQueue(STOCK_QUEUE);
      const count = await counter(url, `SELECT count(*)::int AS n FROM pgboss.job WHERE name = $1 AND state = 'completed'`, [STOCK_QUEUE]);
      return {
        send: (data) => boss.send(STOCK_QUEUE, data),
        completed: count.completed,
        clear: async () => {
          await boss.getDb().executeSql('DELETE FROM pgboss.job WHERE name = $1', [STOCK_QUEUE]);
          await boss.getDb().executeSql('VACUUM ANALYZE pgboss.job', []);
        },
        close: async () => {
          await count.close();
          await boss.stop({ graceful: false });
        },
      };
    }
    case 'bare': {
      const pool = new pg.Pool({ connectionString: url, max: 10 });
      await createBareTable(pool);
      const count = await counter(url, `SELECT count(*)::int AS n FROM ${BARE_TABLE} WHERE state = 'completed'`, []);
      return {
        // The same two statements as a send outside a transaction: the insert, then the wake.
        send: async (data) => {
          await pool.query(`INSERT INTO ${BARE_TABLE} (data) VALUES ($1)`, [data]);
          await pool.query('SELECT pg_notify($1, $2)', [BARE_CHANNEL, '']);
        },
        completed: count.completed,
        clear: async () => void (await pool.query(`TRUNCATE ${BARE_TABLE}`)), // leaves no dead rows
        close: async () => {
          await count.close();
          await pool.end();
        },
      };
    }
  }
}

interface WorkerProcess {
  child: ChildProcess;
  /** Resolves with the next job start the worker reports. */
  nextStart(): Promise<{ sentAt: number; startedAt: number }>;
  stop(): Promise<void>;
}

function startWorkerProcess(target: JobTarget, url: string): Promise<WorkerProcess> {
  const child = fork(__filename, ['work', target], {
    env: { ...process.env, BENCH_DATABASE_URL: url },
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  const starts: ((start: { sentAt: number; startedAt: number }) => void)[] = [];
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => fail(new Error(`the ${target} worker did not start within ${WORKER_START_TIMEOUT_MS} ms`)), WORKER_START_TIMEOUT_MS);
    function fail(error: Error) {
      clearTimeout(timer);
      child.kill('SIGKILL');
      reject(error);
    }
    child.on('exit', (code) => fail(new Error(`the ${target} worker exited (code ${code})`)));
    child.on('message', (message: WorkerMessage) => {
      if (message.type === 'failed') return fail(new Error(`the ${target} worker failed to start:\n${message.error}`));
      if (message.type === 'started') return starts.shift()?.(message);
      clearTimeout(timer);
      resolve({
        child,
        nextStart: () => new Promise((done) => starts.push(done)),
        stop: () =>
          new Promise<void>((done) => {
            child.removeAllListeners('exit');
            child.once('exit', () => done());
            child.send({ type: 'stop' } satisfies StopMessage);
          }),
      });
    });
  });
}

async function waitForCompleted(sender: Sender, count: number): Promise<void> {
  while ((await sender.completed()) < count) await new Promise((resolve) => setTimeout(resolve, 5));
}

/** Sends `count` jobs, `SENDS_IN_FLIGHT` at a time, and resolves with jobs per second until the last completes. */
async function measureThroughput(sender: Sender, count: number): Promise<number> {
  await sender.clear();
  const started = now();
  let next = 0;
  await Promise.all(
    Array.from({ length: SENDS_IN_FLIGHT }, async () => {
      while (next < count) {
        next += 1;
        await sender.send({});
      }
    }),
  );
  await waitForCompleted(sender, count);
  return count / ((now() - started) / 1000);
}

/** Send-to-start times of jobs sent one at a time to an idle queue, sorted. */
async function measureLatency(sender: Sender, worker: WorkerProcess, samples: number): Promise<number[]> {
  await sender.clear();
  const latencies: number[] = [];
  for (let sample = 0; sample < samples; sample++) {
    await new Promise((resolve) => setTimeout(resolve, Math.random() * MAX_PAUSE_MS));
    const started = worker.nextStart();
    await sender.send({ sentAt: now() });
    const { sentAt, startedAt } = await started;
    latencies.push(startedAt - sentAt);
  }
  return latencies.sort((a, b) => a - b);
}

function percentile(sorted: number[], fraction: number): number {
  return sorted[Math.min(sorted.length - 1, Math.ceil(fraction * sorted.length) - 1)];
}

async function benchmarkTarget(target: JobTarget, url: string, settings: Settings): Promise<TargetResult> {
  const sender = await createSender(target, url);
  const worker = await startWorkerProcess(target, url);
  try {
    const jobs = target === 'pg-boss' ? Math.min(settings.jobs, STOCK_THROUGHPUT_JOBS) : settings.jobs;
    if (target !== 'pg-boss') {
      process.stderr.write(`warming up ${target} (${WARMUP_JOBS} jobs)...\n`);
      await measureThroughput(sender, WARMUP_JOBS);
    }
    process.stderr.write(`measuring ${target}: throughput (${jobs} jobs)...\n`);
    const jobsPerSecond = await measureThroughput(sender, jobs);
    process.stderr.write(`measuring ${target}: send-to-start latency (${settings.latencySamples} jobs, one at a time)...\n`);
    const latencies = await measureLatency(sender, worker, settings.latencySamples);
    return {
      jobs,
      jobsPerSecond,
      latencyP50Ms: percentile(latencies, 0.5),
      latencyP99Ms: percentile(latencies, 0.99),
      latencySamples: latencies.length,
    };
  } finally {
    await worker.stop();
    await sender.close();
  }
}

function printReport(results: Map<JobTarget, TargetResult>): { name: string; value: number }[] {
  const rows = [...results].map(([target, result]) => [
    JOB_TARGET_LABELS[target],
    String(result.jobs),
    result.jobsPerSecond.toFixed(0),
    result.latencyP50Ms.toFixed(1),
    result.latencyP99Ms.toFixed(1),
    String(result.latencySamples),
  ]);
  const header = ['queue', 'jobs', 'jobs/s', 'start p50 ms', 'start p99 ms', 'samples'];
  const widths = header.map((title, column) => Math.max(title.length, ...rows.map((row) => row[column].length)));
  const line = (cells: string[]) => cells.map((cell, column) => (column === 0 ? cell.padEnd(widths[0]) : cell.padStart(widths[column]))).join('   ');
  const rule = '-'.repeat(line(header).length);
  console.log(`\n${CONCURRENCY} jobs at once in one worker process; jobs do nothing; latency on an idle queue`);
  console.log([rule, line(header), rule, ...rows.map(line), rule].join('\n'));

  const plinth = results.get('plinth');
  const ratios: { name: string; value: number }[] = [];
  if (plinth) {
    const bare = results.get('bare');
    const stock = results.get('pg-boss');
    if (bare) ratios.push({ name: 'throughput, Plinth / (a) bare (ceiling)', value: plinth.jobsPerSecond / bare.jobsPerSecond });
    if (stock) {
      ratios.push({ name: 'throughput, Plinth / (b) stock pg-boss', value: plinth.jobsPerSecond / stock.jobsPerSecond });
      ratios.push({ name: 'start p50, (b) stock pg-boss / Plinth (what the wake buys)', value: stock.latencyP50Ms / plinth.latencyP50Ms });
    }
  }
  for (const ratio of ratios) console.log(`${ratio.name.padEnd(60)} ${ratio.value.toFixed(2)}x`);
  return ratios;
}

async function runBenchmark(): Promise<void> {
  const settings = readSettings();
  const url = await prepareDatabase();
  const loadAverageBefore = os.loadavg();
  const results = new Map<JobTarget, TargetResult>();
  for (const target of settings.targets) results.set(target, await benchmarkTarget(target, url, settings));
  const ratios = printReport(results);

  fs.mkdirSync(path.dirname(RESULTS_FILE), { recursive: true });
  const report = {
    finishedAt: new Date().toISOString(),
    settings: { ...settings, concurrency: CONCURRENCY, sendsInFlight: SENDS_IN_FLIGHT, stockThroughputJobs: STOCK_THROUGHPUT_JOBS },
    machine: { node: process.version, cpus: os.cpus().length, loadAverageBefore, loadAverageAfter: os.loadavg() },
    results: Object.fromEntries(results),
    ratios,
  };
  fs.writeFileSync(RESULTS_FILE, `${JSON.stringify(report, null, 2)}\n`);
  console.log(`\nresults written to ${path.relative(process.cwd(), RESULTS_FILE) || RESULTS_FILE}`);
}

function main(): Promise<void> {
  const [role, target] = process.argv.slice(2);
  if (role === 'work') {
    if (!(JOB_TARGETS as readonly string[]).includes(target)) throw new Error(`unknown target "${target}"`);
    return runWorkerRole(target as JobTarget, process.env.BENCH_DATABASE_URL!);
  }
  return runBenchmark();
}

main().catch((error: unknown) => {
  console.error(`bench failed: ${error instanceof Error ? error.message : String(error)}`);
  process.exit(1);
});
