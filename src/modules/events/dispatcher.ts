import type { Logger } from 'pino';
import type { EventsConfig } from '../../config';
import { reportDatabaseTrouble } from '../../platform/pg-listener';
import type { OutboundHttp } from '../../platform/outbound-http';
import { attemptDelivery, newRequestId, nextRetryDelaySeconds, TemplateError, type AttemptResult, type WebhookRequest } from './webhook-request';
import type { RetryConf } from './definitions';

/** A claimed delivery: one event (of a trigger) or one scheduled event, ready to be attempted. */
export interface ClaimedDelivery {
  id: string;
  /** The trigger (or cron trigger) it belongs to: per-group concurrency and metrics labels. */
  group: string;
  /** The claim's timestamp: recording the outcome only applies while the claim is still ours. */
  lockedAt: string;
  /** Attempts made before this one. */
  tries: number;
  createdAt: Date;
  retryConf: RetryConf;
  /** Builds the request of this attempt (templates resolved with its request id). */
  request(requestId: string): WebhookRequest;
}

/** What happened to a delivery after an attempt. */
export type DeliveryState = 'delivered' | 'retrying' | 'dead';

/** One kind of delivery (event triggers, scheduled events): claiming, and recording an attempt. */
export interface DeliveryLane {
  readonly kind: 'event_trigger' | 'scheduled_event';
  /** The groups (triggers) that may have work, each with its delivery timeout (the lease covers it). */
  groups(): Promise<{ name: string; timeoutSec: number }[]>;
  /** Claims up to `limit` due deliveries of `group` (FOR UPDATE SKIP LOCKED), leased for `leaseSeconds`. */
  claim(group: string, limit: number, leaseSeconds: number): Promise<ClaimedDelivery[]>;
  /** Records the attempt (invocation log) and the new state, if the claim is still this process's. */
  record(delivery: ClaimedDelivery, request: WebhookRequest | undefined, attempt: AttemptResult, state: DeliveryState, nextRetryAt: Date | undefined): Promise<void>;
  /** Periodic work of the lane (generating cron events, marking missed ones, cleaning up). */
  maintain?(): Promise<void>;
  /** When the lane's next delivery falls due (a scheduled time), so a round runs then. */
  nextDue?(): Promise<Date | undefined>;
}

export interface DeliveryOutcome {
  kind: DeliveryLane['kind'];
  id: string;
  group: string;
  state: DeliveryState;
  status: number | null;
  tries: number;
  error: string | undefined;
  /** From the event's creation to this attempt's end. */
  latencyMs: number;
}

export interface DispatcherOptions {
  config: EventsConfig;
  http: OutboundHttp;
  logger: Logger;
  shutdown: AbortSignal;
  lanes: DeliveryLane[];
  onOutcome(outcome: DeliveryOutcome): void;
}

/**
 * Delivers claimed events to their webhooks. A round asks each lane's groups for due work while
 * slots are free (EVENTS_CONCURRENCY in all, EVENTS_TRIGGER_CONCURRENCY per group); rounds run on
 * a NOTIFY (wake), when a delivery ends, at the time of the earliest retry this process set, and
 * every EVENTS_POLL_INTERVAL_MS for the work of other processes (their retries, takeovers).
 */
export class Dispatcher {
  private inFlight = 0;
  private readonly perGroup = new Map<string, number>();
  private running = false;
  private again = false;
  private readonly timers = new Set<NodeJS.Timeout>();
  private poller: NodeJS.Timeout | undefined;
  private dueTimer: NodeJS.Timeout | undefined;
  private readonly pending = new Set<Promise<void>>();
  private stopped = false;

  constructor(private readonly options: DispatcherOptions) {}

  start(): void {
    const every = this.options.config.pollIntervalMs;
    this.poller = setInterval(() => {
      this.wake();
      for (const lane of this.options.lanes) void lane.maintain?.().catch((error: unknown) => this.trouble(error, 'events maintenance failed'));
    }, every);
    this.poller.unref();
    for (const lane of this.options.lanes) void lane.maintain?.().catch((error: unknown) => this.trouble(error, 'events maintenance failed'));
    this.wake();
  }

  /** Stops claiming; waits for the attempts in flight (their outcomes are recorded). */
  async stop(): Promise<void> {
    this.stopped = true;
    clearInterval(this.poller);
    clearTimeout(this.dueTimer);
    for (const timer of this.timers) clearTimeout(timer);
    this.timers.clear();
    while (this.pending.size > 0) await Promise.allSettled([...this.pending]);
  }

  /** Runs a round soon (now, or right after the running one). */
  wake(): void {
    if (this.stopped) return;
    if (this.running) {
      this.again = true;
      return;
    }
    this.running = true;
    void this.round()
      .catch((error: unknown) => this.trouble(error, 'claiming events failed'))
      .finally(() => {
        this.running = false;
        if (this.again) {
          this.again = false;
          this.wake();
        }
      });
  }

  private wakeAt(when: Date): void {
    if (this.stopped) return;
    const timer = setTimeout(() => {
      this.timers.delete(timer);
      this.wake();
    }, Math.max(0, when.getTime() - Date.now()));
    timer.unref();
    this.timers.add(timer);
  }

  private trouble(error: unknown, message: string): void {
    reportDatabaseTrouble(this.options.logger, this.options.shutdown, error, 'error', message);
  }

  private async round(): Promise<void> {
    const { concurrency, triggerConcurrency, leaseMarginSeconds } = this.options.config;
    for (const lane of this.options.lanes) {
      for (const group of await lane.groups()) {
        const key = `${lane.kind}:${group.name}`;
        const free = Math.min(concurrency - this.inFlight, triggerConcurrency - (this.perGroup.get(key) ?? 0));
        if (free <= 0 || this.stopped) continue;
        const claimed = await lane.claim(group.name, free, group.timeoutSec + leaseMarginSeconds);
        for (const delivery of claimed) this.begin(lane, key, delivery);
      }
    }
    const due = (await Promise.all(this.options.lanes.map((lane) => lane.nextDue?.()))).filter((date): date is Date => date !== undefined);
    clearTimeout(this.dueTimer);
    if (due.length > 0 && !this.stopped) {
      const first = Math.min(...due.map((date) => date.getTime()));
      // The poll covers what is further away; a timer per round would pile up otherwise.
      if (first - Date.now() < this.options.config.pollIntervalMs) {
        this.dueTimer = setTimeout(() => this.wake(), Math.max(0, first - Date.now()));
        this.dueTimer.unref();
      }
    }
  }

  private begin(lane: DeliveryLane, key: string, delivery: ClaimedDelivery): void {
    this.inFlight += 1;
    this.perGroup.set(key, (this.perGroup.get(key) ?? 0) + 1);
    const work = this.deliver(lane, delivery)
      .catch((error: unknown) => this.trouble(error, 'recording a delivery failed'))
      .finally(() => {
        this.inFlight -= 1;
        this.perGroup.set(key, (this.perGroup.get(key) ?? 1) - 1);
        this.pending.delete(work);
        this.wake();
      });
    this.pending.add(work);
  }

  private async deliver(lane: DeliveryLane, delivery: ClaimedDelivery): Promise<void> {
    const requestId = newRequestId();
    let request: WebhookRequest | TemplateError;
    try {
      request = delivery.request(requestId);
    } catch (error) {
      if (!(error instanceof TemplateError)) throw error;
      request = error;
    }
    const attempt = await attemptDelivery(this.options.http, request, requestId);
    const tries = delivery.tries + 1;
    let state: DeliveryState;
    let nextRetryAt: Date | undefined;
    if (attempt.outcome === 'delivered') state = 'delivered';
    else if (attempt.outcome === 'final') state = 'dead';
    else {
      const delay = nextRetryDelaySeconds(delivery.retryConf, tries, attempt.retryAfterSeconds);
      if (delay === undefined) state = 'dead';
      else {
        state = 'retrying';
        nextRetryAt = new Date(Date.now() + delay * this.options.config.retrySecondMs);
      }
    }
    await lane.record(delivery, request instanceof TemplateError ? undefined : request, attempt, state, nextRetryAt);
    if (nextRetryAt) this.wakeAt(nextRetryAt);
    this.options.onOutcome({
      kind: lane.kind,
      id: delivery.id,
      group: delivery.group,
      state,
      status: attempt.status,
      tries,
      error: attempt.error,
      latencyMs: Date.now() - delivery.createdAt.getTime(),
    });
  }
}
