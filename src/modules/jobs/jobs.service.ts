import { Refusal } from '../../common/refusal';
import type { JobQueue, JobRecord } from '../../platform/job-queue';
import { JOB_STATES, type JobState } from '../../platform/jobs';
import type { Job, JobStateValue } from './jobs.types';
import { UUID } from '../../common/ids';

export const DEFAULT_JOBS_PAGE = 50;
export const MAX_JOBS_PAGE = 500;
const RETRYABLE: readonly JobState[] = ['failed', 'cancelled'];
const CANCELLABLE: readonly JobState[] = ['created', 'retry', 'active'];

export interface JobListFilter {
  queue?: string | null;
  /** A state name, any case (the CLI passes what was typed). */
  state?: string | null;
  first?: number | null;
}

/** The jobs admin: what the GraphQL API and `plinth jobs` show and do. */
export class JobsService {
  constructor(private readonly queue: Pick<JobQueue, 'find' | 'get' | 'retry' | 'cancel'>) {}

  /** Jobs, newest first. */
  async list(filter: JobListFilter): Promise<Job[]> {
    const first = filter.first ?? DEFAULT_JOBS_PAGE;
    if (!Number.isInteger(first) || first < 1 || first > MAX_JOBS_PAGE) {
      throw new Refusal('BAD_REQUEST', `first must be a whole number from 1 to ${MAX_JOBS_PAGE}`, 400);
    }
    const state = filter.state?.toLowerCase();
    if (state !== undefined && !(JOB_STATES as readonly string[]).includes(state)) {
      throw new Refusal('BAD_REQUEST', `state must be one of ${JOB_STATES.join(', ')}`, 400);
    }
    const jobs = await this.queue.find({ queue: filter.queue ?? undefined, state: state as JobState | undefined, first });
    return jobs.map(toJob);
  }

  /** Runs a failed job again (one more retry is allowed), or a cancelled one. */
  async retry(id: string): Promise<Job> {
    const job = await this.existing(id);
    if (!RETRYABLE.includes(job.state) || !(await this.queue.retry(job))) throw await this.inWrongState(id, 'retried', RETRYABLE);
    return toJob(await this.existing(id));
  }

  /** Cancels a job that has not finished (a running one is not interrupted; its outcome is dropped). */
  async cancel(id: string): Promise<Job> {
    const job = await this.existing(id);
    if (!CANCELLABLE.includes(job.state) || !(await this.queue.cancel(job))) throw await this.inWrongState(id, 'cancelled', CANCELLABLE);
    return toJob(await this.existing(id));
  }

  private async existing(id: string): Promise<JobRecord> {
    if (!UUID.test(id)) throw new Refusal('BAD_REQUEST', 'a job id is a UUID', 400);
    const job = await this.queue.get(id);
    if (!job) throw new Refusal('NOT_FOUND', `no job ${id} (finished jobs are archived after 12 hours)`, 404);
    return job;
  }

  /** Reads the state again: it may have changed between the check and the update. */
  private async inWrongState(id: string, verb: string, allowed: readonly JobState[]): Promise<Refusal> {
    const job = await this.existing(id);
    return new Refusal('BAD_REQUEST', `job ${id} is ${job.state}; only ${allowed.join(' or ')} jobs can be ${verb}`, 400);
  }
}

function toJob(record: JobRecord): Job {
  return {
    ...record,
    state: record.state as JobStateValue,
    data: asObject(record.data) ?? {},
    output: asObject(record.output),
    error: record.state === 'failed' || record.state === 'retry' ? errorMessage(record.output) : null,
  };
}

/** JSON that is not an object (pg-boss stores what a worker returned as is) shows as {value}. */
function asObject(value: unknown): Record<string, unknown> | null {
  if (value === null || value === undefined) return null;
  return typeof value === 'object' && !Array.isArray(value) ? (value as Record<string, unknown>) : { value };
}

/** Our workers keep {name, message}; pg-boss's own failures (expiry) keep {value: {message}} or {value: text}. */
function errorMessage(output: unknown): string | null {
  const object = asObject(output);
  if (!object) return null;
  if (typeof object.message === 'string') return object.message;
  const value = asObject(object.value);
  if (value && typeof value.message === 'string') return value.message;
  return typeof object.value === 'string' ? object.value : null;
}
