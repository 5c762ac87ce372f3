import type { EntityManager } from 'typeorm';

/**
 * Background jobs: pg-boss in the project's database (schema `pgboss`). This file is the
 * contract modules code against; `JobQueue` (job-queue.ts) implements it.
 */

/**
 * Per-queue settings. Each has a default (JOBS_DEFAULT_<SETTING>); a module's JobDefinition
 * overrides it for its queue, and JOBS_<QUEUE>_<SETTING> overrides both (README, Jobs).
 */
export interface QueueSettings {
  /** Jobs of this queue one process runs at once. */
  concurrency: number;
  /** Retries after the first attempt fails (a timeout or a crash counts as a failed attempt). */
  retryLimit: number;
  /** Seconds before the first retry. */
  retryDelaySeconds: number;
  /** Doubles the delay at each retry (with up to as much again of random jitter). */
  retryBackoff: boolean;
  /**
   * A job running longer than this is aborted (its signal fires) and fails. It is also the
   * lease: after a crash, the job is taken back and retried once this (plus a two-second margin)
   * has passed since it started, at the next maintenance (JOBS_MAINTENANCE_INTERVAL_SECONDS).
   */
  timeoutSeconds: number;
}

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
