import PgBoss from 'pg-boss';
import pg from 'pg';
import pino from 'pino';
import { loadConfig } from '../src/config';
import { createDataSource } from '../src/db/data-source';
import { JobQueue } from '../src/platform/job-queue';

/**
 * The job benchmark's worker side (run in a child process, `work <target>`) and what both sides
 * agree on: the targets, their queues, the messages.
 */

export const JOB_TARGETS = ['plinth', 'bare', 'pg-boss'] as const;
export type JobTarget = (typeof JOB_TARGETS)[number];

export const JOB_TARGET_LABELS: Record<JobTarget, string> = {
  plinth: 'Plinth JobQueue (pg-boss, NOTIFY wake)',
  bare: '(a) bare SKIP LOCKED table, NOTIFY wake',
  'pg-boss': '(b) stock pg-boss work(), 2 s polling',
};

/** Jobs one worker process runs at once, for every target. */
export const CONCURRENCY = 4;
export const PLINTH_QUEUE = 'bench_plinth';
export const STOCK_QUEUE = 'bench_stock';
export const BARE_TABLE = 'bench_bare_jobs';
export const BARE_CHANNEL = 'bench_bare';
/** The bare queue's poll, as pg-boss's default (and JOBS_POLL_INTERVAL_SECONDS'). */
const BARE_POLL_MS = 2000;

/** A job's data: latency probes carry the time they were sent and report when they start. */
export interface BenchJob {
  sentAt?: number;
}

/** Parent -> child. */
export interface StopMessage {
  type: 'stop';
}

/** Child -> parent. */
export type WorkerMessage = { type: 'ready' } | { type: 'failed'; error: string } | { type: 'started'; sentAt: number; startedAt: number };

/** Milliseconds since the epoch with sub-millisecond precision, comparable across processes. */
export function now(): number {
  return performance.timeOrigin + performance.now();
}

export async function createBareTable(client: pg.ClientBase | pg.Pool): Promise<void> {
  await client.query(`CREATE TABLE IF NOT EXISTS ${BARE_TABLE} (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    data jsonb NOT NULL,
    state text NOT NULL DEFAULT 'created',
    started_on timestamptz,
    completed_on timestamptz)`);
  await client.query(`CREATE INDEX IF NOT EXISTS ${BARE_TABLE}_created ON ${BARE_TABLE} (id) WHERE state = 'created'`);
}

/** Child-process side: starts the target's workers, reports ready, and stops on request. */
export async function runWorkerRole(target: JobTarget, url: string): Promise<void> {
  const send = (message: WorkerMessage) => process.send?.(message);
  const onJob = async (data: BenchJob) => {
    if (data.sentAt !== undefined) send({ type: 'started', sentAt: data.sentAt, startedAt: now() });
  };
  let stop: () => Promise<void>;
  try {
    stop = await startWorkers(target, url, onJob);
  } catch (error) {
    send({ type: 'failed', error: error instanceof Error ? (error.stack ?? error.message) : String(error) });
    process.exit(1);
  }
  let stopping = false;
  const exit = () => {
    if (stopping) return;
    stopping = true;
    // The process ends whether or not the stop finished cleanly.
    void stop().finally(() => process.exit(0));
  };
  process.on('message', (message: StopMessage) => message.type === 'stop' && exit());
  process.on('disconnect', exit);
  send({ type: 'ready' });
}

async function startWorkers(target: JobTarget, url: string, onJob: (data: BenchJob) => Promise<void>): Promise<() => Promise<void>> {
  const logger = pino({ level: process.env.BENCH_LOG_LEVEL ?? 'warn' });
  switch (target) {
    case 'plinth': {
      const dataSource = createDataSource(url, 10);
      await dataSource.initialize();
      const queue = new JobQueue({ dataSource, url, config: loadConfig({}).jobs, logger, supervise: true, shutdown: new AbortController().signal });
      await queue.start();
      await queue.declare([{ queue: PLINTH_QUEUE, settings: { concurrency: CONCURRENCY }, work: onJob }]);
      await queue.work();
      return async () => {
        await queue.stop();
        await dataSource.destroy();
      };
    }
    case 'pg-boss': {
      // pg-boss's defaults, and its documented way to run several jobs at once in v10: a batch.
      const boss = new PgBoss({ connectionString: url, max: 10 });
      boss.on('error', (error) => logger.warn({ err: error }, 'pg-boss error'));
      await boss.start();
      await boss.createQueue(STOCK_QUEUE);
      await boss.work<BenchJob>(STOCK_QUEUE, { batchSize: CONCURRENCY }, async (jobs) => {
        await Promise.all(jobs.map((job) => onJob(job.data)));
      });
      return () => boss.stop({ graceful: false });
    }
    case 'bare':
      return startBareWorkers(url, onJob);
  }
}

/**
 * The least a durable queue with the same guarantees does: claim one row (FOR UPDATE SKIP
 * LOCKED), run it, mark it done; woken by NOTIFY, polling every 2 s otherwise.
 */
async function startBareWorkers(url: string, onJob: (data: BenchJob) => Promise<void>): Promise<() => Promise<void>> {
  const pool = new pg.Pool({ connectionString: url, max: 10 });
  const listener = new pg.Client({ connectionString: url });
  await listener.connect();
  await listener.query(`LISTEN ${BARE_CHANNEL}`);
  let stopped = false;
  let waiting: (() => void)[] = [];
  const wakeAll = () => {
    const woken = waiting;
    waiting = [];
    for (const wake of woken) wake();
  };
  listener.on('notification', wakeAll);

  const loop = async () => {
    while (!stopped) {
      const { rows } = await pool.query<{ id: string; data: BenchJob }>(
        `UPDATE ${BARE_TABLE} SET state = 'active', started_on = now()
         WHERE id = (SELECT id FROM ${BARE_TABLE} WHERE state = 'created' ORDER BY id FOR UPDATE SKIP LOCKED LIMIT 1)
         RETURNING id, data`,
      );
      if (rows.length === 0) {
        await new Promise<void>((resolve) => {
          const timer = setTimeout(resolve, BARE_POLL_MS);
          waiting.push(() => {
            clearTimeout(timer);
            resolve();
          });
        });
        continue;
      }
      await onJob(rows[0].data);
      await pool.query(`UPDATE ${BARE_TABLE} SET state = 'completed', completed_on = now() WHERE id = $1`, [rows[0].id]);
    }
  };
  const loops = Array.from({ length: CONCURRENCY }, loop);
  return async () => {
    stopped = true;
    wakeAll();
    await Promise.allSettled(loops);
    await listener.end();
    await pool.end();
  };
}
