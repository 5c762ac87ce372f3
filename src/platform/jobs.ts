import type { EntityManager } from 'typeorm';
import type { QueueSettings } from '../config';

/**
 * Background jobs: pg-boss in the project's database (schema `pgboss`). This file is the
 * contract modules code against; `JobQueue` (job-queue.ts) implements it.
 */

/** Per-queue settings: config/index.ts defines them with their variables. */
export type { QueueSettings };

/** What a worker is handed. */
export interface JobContext {
  id: string;
  queue: string;
  /** 0 on the first attempt. */
  retryCount: number;
  /** Aborted when the job times out, or when the process stops before the job finished. */
  signal: AbortSignal;
}

/** A queue a module declares, with its worker. */
// eslint-disable-next-line @typescript-eslint/no-explicit-any -- a list holds queues of every data type; each worker states its own
export interface JobDefinition<Data = any> {
  /**
   * Lower-case letters, digits, `_` and `-`, starting with a letter. Its settings' variables
   * upper-case it and write `-` as `_`: queue `report-render` -> JOBS_REPORT_RENDER_CONCURRENCY.
   */
  queue: string;
  settings?: Partial<QueueSettings>;
  /**
   * Runs one job. What it resolves with is kept as the job's output; what it throws fails the
   * attempt and is kept as the job's error (its name and message; the stack goes to the log).
   */
  work(data: Data, job: JobContext): Promise<Record<string, unknown> | void>;
}

export interface SendOptions {
  /**
   * Sends inside the caller's transaction (the EntityManager that dataSource.transaction()
   * hands its callback): a rolled-back change sends nothing, and workers are woken on commit.
   */
  transaction?: EntityManager;
  /** Not before this time. */
  startAfter?: Date;
}

/** What services need to send jobs. */
export interface JobSender {
  /**
   * Queues a job on a queue some module declares, and resolves with its id once the job is
   * committed (or is part of `transaction`). `data` must be a JSON object.
   */
  send<Data extends object>(queue: string, data: Data, options?: SendOptions): Promise<string>;
}

/** pg-boss's job states, in their order. */
export const JOB_STATES = ['created', 'retry', 'active', 'completed', 'cancelled', 'failed'] as const;
export type JobState = (typeof JOB_STATES)[number];
