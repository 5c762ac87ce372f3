import { Refusal } from '../../common/refusal';
import type { JobQueue, JobRecord } from '../../platform/job-queue';
import { JOB_STATES, type JobState } from '../../platform/jobs';
import type { Job, JobStateValue } from './jobs.types';
import { UUID } from '../../common/ids';

export const DEFAULT_JOBS_PAGE = 50;
export const MAX_JOBS_PAGE = 500;
const RETRYABLE: readonly JobState[] = ['failed', 'cancelled'];
const CANCELLABLE: readonly JobState[] = ['created', 'retry', 'active'];

/** How a retry or cancel of a job in the wrong state is refused. */
export interface WrongState {
  code: string;
  status: number;
}
const BAD_REQUEST: WrongState = { code: 'BAD_REQUEST', status: 400 };

export interface JobListFilter {
  queue?: string | null;
  /** A state name, any case (the CLI passes what was typed). */
  state?: string | null;
  first?: number | null;
}

/** The jobs admin: what the GraphQL API and `plinth jobs` show and do. */
export class JobsService {
  constructor(private readonly queue: Pick<JobQueue, 'find' | 'get' | 'retry' | 'cancel' | 'countsByQueueAndState' | 'declaredQueues' | 'hasQueue'>) {}

  /** Every queue with its jobs by state (0 for a state without any), and whether this process's modules declare it. */
  async queues(): Promise<{ queue: string; declared: boolean; counts: Record<JobState, number> }[]> {
    const declared = new Set(this.queue.declaredQueues());
    const byQueue = new Map<string, Record<JobState, number>>();
    for (const { queue, state, count } of await this.queue.countsByQueueAndState()) {
      const counts = byQueue.get(queue) ?? (Object.fromEntries(JOB_STATES.map((each) => [each, 0])) as Record<JobState, number>);
      counts[state] = count;
      byQueue.set(queue, counts);
    }
    return [...byQueue].map(([queue, counts]) => ({ queue, declared: declared.has(queue), counts }));
  }

  /**
   * A page of one queue's jobs: failed ones first, then newest first; `limit` of them (+1 to tell
   * whether more follow) from `offset`. NOT_FOUND for a queue pg-boss does not know.
   */
  async page(queue: string, filter: { state?: JobState | null; limit: number; offset: number }): Promise<{ items: Job[]; hasMore: boolean }> {
    if (!(await this.queue.hasQueue(queue))) throw new Refusal('NOT_FOUND', `no job queue is named ${queue}`, 404);
    const found = await this.queue.find({ queue, state: filter.state ?? undefined, first: filter.limit + 1, offset: filter.offset, failedFirst: true });
    return { items: found.slice(0, filter.limit).map(toJob), hasMore: found.length > filter.limit };
  }

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

  /**
   * Runs a failed job again (one more retry is allowed), or a cancelled one. A job in another state
   * is refused with `wrongState` (BAD_REQUEST 400 for GraphQL and the CLI).
   */
  async retry(id: string, wrongState: WrongState = BAD_REQUEST): Promise<Job> {
    const job = await this.existing(id);
    if (!RETRYABLE.includes(job.state) || !(await this.queue.retry(job))) throw await this.inWrongState(id, 'retried', RETRYABLE, wrongState);
    return toJob(await this.existing(id));
  }

  /** Cancels a job that has not finished (a running one is not interrupted; its outcome is dropped). */
  async cancel(id: string, wrongState: WrongState = BAD_REQUEST): Promise<Job> {
    const job = await this.existing(id);
    if (!CANCELLABLE.includes(job.state) || !(await this.queue.cancel(job))) throw await this.inWrongState(id, 'cancelled', CANCELLABLE, wrongState);
    return toJob(await this.existing(id));
  }

  private async existing(id: string): Promise<JobRecord> {
    if (!UUID.test(id)) throw new Refusal('BAD_REQUEST', 'a job id is a UUID', 400);
    const job = await this.queue.get(id);
    if (!job) throw new Refusal('NOT_FOUND', `no job ${id} (finished jobs are archived after 12 hours)`, 404);
    return job;
  }

  /** Reads the state again: it may have changed between the check and the update. */
  private async inWrongState(id: string, verb: string, allowed: readonly JobState[], wrongState: WrongState): Promise<Refusal> {
    const job = await this.existing(id);
    return new Refusal(wrongState.code, `job ${id} is ${job.state}; only ${allowed.join(' or ')} jobs can be ${verb}`, wrongState.status);
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
