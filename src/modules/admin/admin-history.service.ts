import os from 'node:os';
import type { Logger } from 'pino';
import type { JobQueue } from '../../platform/job-queue';
import type { Metrics } from '../../platform/metrics';

/** The history kept: the last hour. */
export const HISTORY_MINUTES = 60;

/** The series the dashboard charts, in its order. */
export const HISTORY_SERIES = ['requestRate', 'errorRate', 'eventBacklog', 'jobQueueDepth'] as const;
export type HistorySeriesName = (typeof HISTORY_SERIES)[number];

/** Where a series' values come from: this instance's counters, or the database every instance shares. */
export type HistoryScope = 'instance' | 'cluster';

const DESCRIPTIONS: Record<HistorySeriesName, { title: string; unit: string; scope: HistoryScope; description: string }> = {
  requestRate: {
    title: 'Requests',
    unit: 'per second',
    scope: 'instance',
    description: 'HTTP responses this instance sent, per second, over each interval',
  },
  errorRate: {
    title: 'Errors',
    unit: 'per second',
    scope: 'instance',
    description: 'Responses with a 5xx status and GraphQL errors answered by this instance, per second, over each interval',
  },
  eventBacklog: {
    title: 'Event backlog',
    unit: 'deliveries',
    scope: 'cluster',
    description: 'Event trigger deliveries pending and scheduled events due, on every instance (the database)',
  },
  jobQueueDepth: {
    title: 'Job queue depth',
    unit: 'jobs',
    scope: 'cluster',
    description: 'Jobs waiting in every queue (created or to retry), on every instance (the database)',
  },
};

export interface HistorySeries {
  name: HistorySeriesName;
  title: string;
  unit: string;
  scope: HistoryScope;
  description: string;
  /** One per timestamp; null where it could not be read (the database did not answer). */
  values: (number | null)[];
}

export interface MetricsHistoryAnswer {
  intervalSeconds: number;
  minutes: number;
  instance: { hostname: string; pid: number };
  /** When each sample was taken (milliseconds since the epoch), oldest first. */
  timestamps: number[];
  series: HistorySeries[];
}

export interface HistorySources {
  metrics: Metrics;
  jobs: Pick<JobQueue, 'countsByQueueAndState'>;
  /** Deliveries pending on every instance (the events module's). */
  eventBacklog(): Promise<number>;
  logger: Logger;
}

/** Rates are rounded to this many decimals, counts are whole. */
const RATE_DECIMALS = 3;

/**
 * The dashboard's charts (issue 33): every `intervalSeconds`, this instance samples its request
 * and error rates (the differences of its Prometheus counters) and the cluster's event backlog and
 * job queue depth (the database), into a ring holding the last hour. Each instance keeps its own.
 */
export class MetricsHistory {
  private readonly capacity: number;
  private readonly timestamps: Float64Array;
  private readonly values: Record<HistorySeriesName, (number | null)[]>;
  /** Where the next sample goes, and how many are kept. */
  private next = 0;
  private size = 0;
  private last: { at: number; requests: number; errors: number } | undefined;
  private timer: NodeJS.Timeout | undefined;
  private sampling: Promise<void> | undefined;

  constructor(
    private readonly sources: HistorySources,
    readonly intervalSeconds: number,
  ) {
    this.capacity = Math.ceil((HISTORY_MINUTES * 60) / intervalSeconds);
    this.timestamps = new Float64Array(this.capacity);
    this.values = Object.fromEntries(HISTORY_SERIES.map((name) => [name, new Array<number | null>(this.capacity).fill(null)])) as Record<
      HistorySeriesName,
      (number | null)[]
    >;
  }

  /** Reads the counters now (the first rates are over the first interval), then samples every interval; answers the stop. */
  async start(): Promise<() => Promise<void>> {
    const totals = await this.sources.metrics.totals();
    this.last = { at: Date.now(), requests: totals.requests, errors: totals.serverErrors + totals.graphqlErrors };
    this.timer = setInterval(() => void this.sample(), this.intervalSeconds * 1000);
    this.timer.unref();
    return async () => {
      clearInterval(this.timer);
      this.timer = undefined;
      await this.sampling;
    };
  }

  /** Takes one sample (one at a time: a slow database skips a tick rather than piling them up). */
  sample(): Promise<void> {
    if (this.sampling) return this.sampling;
    this.sampling = this.take().finally(() => (this.sampling = undefined));
    return this.sampling;
  }

  private async take(): Promise<void> {
    const [totals, backlog, depth] = await Promise.all([
      this.sources.metrics.totals(),
      this.sources.eventBacklog().catch((error: unknown) => this.unread('event backlog', error)),
      this.sources.jobs
        .countsByQueueAndState()
        .then((counts) => counts.filter((entry) => entry.state === 'created' || entry.state === 'retry').reduce((sum, entry) => sum + entry.count, 0))
        .catch((error: unknown) => this.unread('job queue depth', error)),
    ]);
    const at = Date.now();
    const errors = totals.serverErrors + totals.graphqlErrors;
    const previous = this.last ?? { at, requests: totals.requests, errors };
    const seconds = Math.max((at - previous.at) / 1000, 0.001);
    const rate = (now: number, before: number) => round(Math.max(now - before, 0) / seconds);
    this.last = { at, requests: totals.requests, errors };
    this.push(at, {
      requestRate: rate(totals.requests, previous.requests),
      errorRate: rate(errors, previous.errors),
      eventBacklog: backlog,
      jobQueueDepth: depth,
    });
  }

  private unread(what: string, error: unknown): null {
    this.sources.logger.warn({ err: error }, `admin metrics history: the ${what} could not be read`);
    return null;
  }

  private push(at: number, sample: Record<HistorySeriesName, number | null>): void {
    this.timestamps[this.next] = at;
    for (const name of HISTORY_SERIES) this.values[name][this.next] = sample[name];
    this.next = (this.next + 1) % this.capacity;
    this.size = Math.min(this.size + 1, this.capacity);
  }

  /** The samples of the last `minutes`, oldest first. */
  history(minutes: number, now = Date.now()): MetricsHistoryAnswer {
    const since = now - minutes * 60_000;
    const indexes: number[] = [];
    for (let offset = this.size; offset > 0; offset--) {
      const index = (this.next - offset + this.capacity) % this.capacity;
      if (this.timestamps[index] >= since) indexes.push(index);
    }
    return {
      intervalSeconds: this.intervalSeconds,
      minutes,
      instance: { hostname: os.hostname(), pid: process.pid },
      timestamps: indexes.map((index) => this.timestamps[index]),
      series: HISTORY_SERIES.map((name) => ({ name, ...DESCRIPTIONS[name], values: indexes.map((index) => this.values[name][index]) })),
    };
  }
}

function round(value: number): number {
  const factor = 10 ** RATE_DECIMALS;
  return Math.round(value * factor) / factor;
}
