import type PgBoss from 'pg-boss';
import type { Logger } from 'pino';
import type { JobContext, JobDefinition, QueueSettings } from './jobs';
import { settlesWithin } from './settles-within';

export interface RunnerOptions {
  boss: PgBoss;
  definition: JobDefinition;
  settings: QueueSettings;
  pollIntervalMs: number;
  logger: Logger;
  /** Puts jobs this process gives up at shutdown back in the queue, for any worker to take. */
  release(ids: string[]): Promise<void>;
}

interface RunningJob {
  controller: AbortController;
  done: Promise<void>;
  /** The attempt's outcome is being recorded, or the job was released: nothing else may record one. */
  settled: boolean;
}

export class JobTimeoutError extends Error {
  override name = 'JobTimeoutError';
}

/**
 * Runs one queue's jobs in this process, up to `concurrency` at once. When woken (a NOTIFY from
 * a send, a job of its own finishing) and every poll interval otherwise, it claims as many jobs
 * as it has free slots through pg-boss's fetch (FOR UPDATE SKIP LOCKED, so no two workers claim
 * one job), and records each outcome with pg-boss's complete or fail (which schedules retries).
 *
 * pg-boss's own work() is not used: in v10 a worker waits out its whole polling interval after
 * every fetch, even a fruitful one, and a batch handler completes or fails its batch as a whole.
 */
export class QueueRunner {
  private readonly running = new Map<string, RunningJob>();
  private fetching: Promise<void> | undefined;
  private wokenWhileFetching = false;
  private pollTimer: NodeJS.Timeout | undefined;
  private stopped = false;
  private paused = false;

  constructor(private readonly options: RunnerOptions) {}

  /** Whether it claims jobs (false once paused or stopped), and how many of its jobs run now. */
  state(): { claiming: boolean; running: number } {
    return { claiming: !this.paused && !this.stopped, running: this.running.size };
  }

  /**
   * Stops claiming jobs (the admin API's stop): running ones finish, and the queue's jobs wait
   * for another process's workers or for `resume`.
   */
  pause(): void {
    this.paused = true;
    clearTimeout(this.pollTimer);
  }

  /** Claims jobs again, at once. */
  resume(): void {
    this.paused = false;
    this.wake();
  }

  /** Looks for jobs now; at most one fetch runs at a time, and a wake during it fetches once more. */
  wake(): void {
    if (this.stopped || this.paused) return;
    if (this.fetching) {
      this.wokenWhileFetching = true;
      return;
    }
    clearTimeout(this.pollTimer);
    this.fetching = this.fill().finally(() => {
      this.fetching = undefined;
      if (!this.stopped && !this.paused) this.pollTimer = setTimeout(() => this.wake(), this.options.pollIntervalMs);
    });
  }

  /**
   * Stops claiming jobs, lets running ones finish for up to `graceMs`, then aborts the rest and
   * releases them (they run again at once elsewhere, or here after a restart).
   */
  async stop(graceMs: number): Promise<void> {
    this.stopped = true;
    clearTimeout(this.pollTimer);
    await this.fetching;
    if (await settlesWithin(Promise.all([...this.running.values()].map((job) => job.done)), graceMs)) return;
    const left = [...this.running].filter(([, job]) => !job.settled);
    for (const [, job] of left) {
      job.settled = true;
      job.controller.abort(new Error('the process is shutting down'));
    }
    if (left.length === 0) return;
    const ids = left.map(([id]) => id);
    const queue = this.options.definition.queue;
    try {
      await this.options.release(ids);
      this.options.logger.info({ queue, jobIds: ids }, 'released jobs still running at shutdown');
    } catch (error) {
      this.options.logger.warn({ err: error, queue, jobIds: ids }, 'could not release jobs at shutdown; they run again when their lease ends');
    }
  }

  private async fill(): Promise<void> {
    const { boss, definition, settings, logger } = this.options;
    try {
      while (!this.stopped && !this.paused) {
        this.wokenWhileFetching = false;
        const free = settings.concurrency - this.running.size;
        if (free <= 0) return; // a finishing job wakes the runner
        const jobs = await boss.fetch<object>(definition.queue, { batchSize: free, includeMetadata: true });
        for (const job of jobs) this.start(job);
        if (jobs.length < free && !this.wokenWhileFetching) return;
      }
    } catch (error) {
      logger.warn({ err: error, queue: definition.queue }, 'could not fetch jobs');
    }
  }

  private start(job: PgBoss.JobWithMetadata<object>): void {
    const entry: RunningJob = { controller: new AbortController(), done: Promise.resolve(), settled: false };
    this.running.set(job.id, entry);
    entry.done = this.run(job, entry).finally(() => {
      this.running.delete(job.id);
      this.wake();
    });
  }

  private async run(job: PgBoss.JobWithMetadata<object>, entry: RunningJob): Promise<void> {
    const { boss, definition, settings, logger } = this.options;
    const context: JobContext = { id: job.id, queue: job.name, retryCount: job.retryCount, signal: entry.controller.signal };
    let timer: NodeJS.Timeout | undefined;
    const timedOut = new Promise<never>((_, reject) => {
      timer = setTimeout(() => {
        const error = new JobTimeoutError(`the job ran longer than its queue's timeout of ${settings.timeoutSeconds} s`);
        entry.controller.abort(error);
        reject(error);
      }, settings.timeoutSeconds * 1000);
    });

    let outcome: { output: Record<string, unknown> | void } | { error: unknown };
    try {
      outcome = { output: await Promise.race([definition.work(job.data, context), timedOut]) };
    } catch (error) {
      outcome = { error };
    } finally {
      clearTimeout(timer);
    }
    if (entry.settled) return; // released at shutdown meanwhile
    entry.settled = true;

    const fields = { queue: job.name, jobId: job.id, retryCount: job.retryCount };
    try {
      if ('error' in outcome) {
        const final = job.retryCount >= job.retryLimit;
        if (final) logger.error({ ...fields, err: outcome.error }, 'job failed, and has no retry left');
        else logger.warn({ ...fields, err: outcome.error }, 'job failed; it will be retried');
        await boss.fail(job.name, job.id, describeError(outcome.error));
      } else if (outcome.output) {
        await boss.complete(job.name, job.id, outcome.output);
      } else {
        await boss.complete(job.name, job.id);
      }
    } catch (error) {
      logger.error({ ...fields, err: error }, 'could not record the outcome of a job; it runs again when its lease ends');
    }
  }
}

/** What a job keeps of its error: name and message (the stack is logged, not stored). */
function describeError(error: unknown): { name: string; message: string } {
  return error instanceof Error ? { name: error.name, message: error.message } : { name: 'Error', message: String(error) };
}
