import { setTimeout as sleep } from 'node:timers/promises';
import type { DataSource } from 'typeorm';
import type { QueueSettings } from '../../src/platform/jobs';
import type { PlinthModule } from '../../src/platform/module';
import type { TestDatabase } from './database';

/** The queue of the recorder module; its settings variables are JOBS_TEST_RECORD_*. */
export const RECORDER_QUEUE = 'test_record';

/** What a recorder job is told to do. */
export interface RecorderJob {
  /** How long each attempt takes. */
  sleepMs?: number;
  /** How long the first attempt takes, instead (a job to kill or interrupt). */
  firstAttemptMs?: number;
  /** Every attempt throws an Error with this message, after sleeping. */
  fail?: string;
}

/** One attempt at a job, as the recorder wrote it. */
export interface RecordedRun {
  job_id: string;
  pid: number;
  attempt: number;
  started_at: Date;
  /** Null when the attempt was aborted or its process died. */
  ended_at: Date | null;
}

/** The table every attempt is recorded in; create it once per test database. */
export async function createRunsTable(database: TestDatabase): Promise<void> {
  await database.query(`
    CREATE TABLE IF NOT EXISTS job_runs (
      id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
      job_id uuid NOT NULL,
      pid int NOT NULL,
      attempt int NOT NULL,
      started_at timestamptz NOT NULL DEFAULT clock_timestamp(),
      ended_at timestamptz
    )`);
}

export async function runsOf(database: TestDatabase, jobId: string): Promise<RecordedRun[]> {
  return database.query<RecordedRun>('SELECT job_id, pid, attempt, started_at, ended_at FROM job_runs WHERE job_id = $1 ORDER BY id', [jobId]);
}

/**
 * A module with one queue whose worker records each attempt (start, end, process) in job_runs:
 * what the tests give the real server to run. It is test code; the product declares no such queue.
 */
export function recorderModule(settings?: Partial<QueueSettings>): PlinthModule<{ dataSource: DataSource }> {
  return {
    name: 'test-recorder',
    create: ({ dataSource }) => ({ dataSource }),
    jobs: ({ dataSource }) => [
      {
        queue: RECORDER_QUEUE,
        settings,
        async work(data: RecorderJob, job) {
          const [{ id }] = (await dataSource.query('INSERT INTO job_runs (job_id, pid, attempt) VALUES ($1, $2, $3) RETURNING id', [
            job.id,
            process.pid,
            job.retryCount,
          ])) as { id: string }[];
          const duration = job.retryCount === 0 ? (data.firstAttemptMs ?? data.sleepMs) : data.sleepMs;
          if (duration) await sleep(duration, undefined, { signal: job.signal });
          await dataSource.query('UPDATE job_runs SET ended_at = clock_timestamp() WHERE id = $1', [id]);
          if (data.fail) throw new Error(data.fail);
          return { pid: process.pid };
        },
      },
    ],
  };
}

/** Polls `check` every 50 ms until it returns something truthy, or fails after `timeoutMs`. */
export async function eventually<T>(check: () => Promise<T>, timeoutMs = 20_000, what = 'the condition'): Promise<NonNullable<T>> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const result = await check();
    if (result) return result as NonNullable<T>;
    if (Date.now() > deadline) throw new Error(`${what} did not hold within ${timeoutMs} ms`);
    await sleep(50);
  }
}

/** A job's row in pg-boss's table. */
export async function jobRow(database: TestDatabase, id: string) {
  const [row] = await database.query<{ state: string; retry_count: number; output: Record<string, unknown> | null; started_on: Date | null }>(
    'SELECT state, retry_count, output, started_on FROM pgboss.job WHERE id = $1',
    [id],
  );
  return row;
}
