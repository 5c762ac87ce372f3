import type { EntityManager } from 'typeorm';

/**
 * Background jobs (pg-boss in the project's database). This file holds the contract modules and
 * platform services code against; the queue itself is built in the jobs work of issue 5.
 */

/** Per-queue settings, each with a named default in src/config. */
export interface QueueSettings {
  /** Jobs of this queue one process runs at once. */
  concurrency: number;
  /** Retries after the first attempt fails. */
  retryLimit: number;
  /** Seconds before the first retry. */
  retryDelaySeconds: number;
  /** Doubles the delay at each retry. */
  retryBackoff: boolean;
  /** A job running longer than this fails (and is retried) — also the lease after a crash. */
  timeoutSeconds: number;
}

/** What a worker is handed. */
export interface JobContext {
  id: string;
  queue: string;
  /** 0 on the first attempt. */
  retryCount: number;
  /** Aborted when the job times out or the process stops. */
  signal: AbortSignal;
}

/** A queue a module declares, with its worker. */
export interface JobDefinition<Data = unknown> {
  queue: string;
  settings?: Partial<QueueSettings>;
  work(data: Data, job: JobContext): Promise<void>;
}

export interface SendOptions {
  /** Sends inside the caller's transaction: a rolled-back change sends nothing. */
  transaction?: EntityManager;
  /** At most one queued job with this key per queue. */
  singletonKey?: string;
  startAfter?: Date;
}

/** What services need to send jobs. */
export interface JobSender {
  /** Resolves with the job id once the job is committed (or part of `transaction`). */
  send<Data extends object>(queue: string, data: Data, options?: SendOptions): Promise<string>;
}
