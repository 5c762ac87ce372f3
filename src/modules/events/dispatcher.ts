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

/** One attempt to record: its invocation log and the delivery's new state. */
export interface AttemptRecord {
  delivery: ClaimedDelivery;
  request: WebhookRequest | undefined;
  attempt: AttemptResult;
  state: DeliveryState;
  nextRetryAt: Date | undefined;
}

export interface DeliveryGroup {
  name: string;
  /** Its webhook timeout: the lease covers it. */
  timeoutSec: number;
  /** Events wait for earlier ones (of their row): a delivery's end may free the next. */
  ordered: boolean;
}

/** One kind of delivery (event triggers, scheduled events): claiming, and recording attempts. */
export interface DeliveryLane {
  readonly kind: 'event_trigger' | 'scheduled_event';
  /** The groups (triggers) that may have work. */
  groups(): Promise<DeliveryGroup[]>;
  /** Claims up to `limit` due deliveries of `group` (FOR UPDATE SKIP LOCKED), leased for `leaseSeconds`. */
  claim(group: string, limit: number, leaseSeconds: number): Promise<ClaimedDelivery[]>;
  /** Records attempts (invocation logs and new states) in one go, each only while its claim is still this process's. */
  record(records: AttemptRecord[]): Promise<void>;
  /** Gives back claimed deliveries that were not attempted (at shutdown), for any process to take at once. */
  release(deliveries: ClaimedDelivery[]): Promise<void>;
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
  /** The outcomes of the attempts recorded together (one statement), once they are recorded. */
  onOutcomes(outcomes: DeliveryOutcome[]): void;
}

interface LaneState {
  lane: DeliveryLane;
  groups: DeliveryGroup[];
  /** Attempts waiting to be recorded, and the flush in progress. */
  pending: { record: AttemptRecord; outcome: DeliveryOutcome; done: () => void }[];
  flushing: Promise<void> | undefined;
}

/**
 * Delivers claimed events to their webhooks. A full round reads each lane's groups and claims
 * their due work while slots are free (EVENTS_CONCURRENCY in all, EVENTS_TRIGGER_CONCURRENCY per
 * group); full rounds run on a NOTIFY (wake), at the time of the earliest retry or scheduled
 * event this process knows of, and every EVENTS_POLL_INTERVAL_MS (other processes' retries,
 * takeovers). When a delivery ends, a short round claims again only for the groups that may
 * have more (their last claim was full, or they deliver in order). Attempts are recorded in
 * batches: one statement for all the attempts that ended meanwhile.
 */
export class Dispatcher {
  private inFlight = 0;
  private readonly perGroup = new Map<string, number>();
  private readonly lanes: LaneState[];
  /** Groups (lane kind:name) that may have more due work than they were given. */
  private readonly backlog = new Set<string>();
  /**
   * Claimed deliveries waiting for a slot, by group: claimed ahead (up to as many again as the
   * slots), so a slot that frees starts the next delivery without waiting for a claim.
   */
  private readonly queued = new Map<string, { state: LaneState; deliveries: ClaimedDelivery[] }>();
  private queuedCount = 0;
  private running = false;
  private again: 'none' | 'backlog' | 'full' = 'none';
  private readonly timers = new Set<NodeJS.Timeout>();
  private poller: NodeJS.Timeout | undefined;
  private dueTimer: NodeJS.Timeout | undefined;
  private readonly inFlightWork = new Set<Promise<void>>();
  private stopped = false;

  constructor(private readonly options: DispatcherOptions) {
    this.lanes = options.lanes.map((lane) => ({ lane, groups: [], pending: [], flushing: undefined }));
  }

  start(): void {
    this.poller = setInterval(() => this.wake(), this.options.config.pollIntervalMs);
    this.poller.unref();
    this.wake();
  }

  /** Stops claiming; waits for the attempts in flight and their records. */
  async stop(): Promise<void> {
    this.stopped = true;
    clearInterval(this.poller);
    clearTimeout(this.dueTimer);
    for (const timer of this.timers) clearTimeout(timer);
    this.timers.clear();
    for (const { state, deliveries } of this.queued.values()) {
      if (deliveries.length > 0)
        await state.lane.release(deliveries.splice(0)).catch((error: unknown) => this.trouble(error, 'releasing claimed events failed'));
    }
    this.queuedCount = 0;
    while (this.inFlightWork.size > 0) await Promise.allSettled([...this.inFlightWork]);
  }

  /** Runs a full round soon (now, or right after the running one). */
  wake(): void {
    this.schedule('full');
  }

  private schedule(kind: 'backlog' | 'full'): void {
    if (this.stopped) return;
    if (this.running) {
      if (kind === 'full' || this.again === 'none') this.again = kind;
      return;
    }
    this.running = true;
    void this.round(kind)
      .catch((error: unknown) => this.trouble(error, 'claiming events failed'))
      .finally(() => {
        this.running = false;
        const next = this.again;
        this.again = 'none';
        if (next !== 'none') this.schedule(next);
      });
  }

  private wakeAt(when: Date): void {
    if (this.stopped) return;
    const timer = setTimeout(
      () => {
        this.timers.delete(timer);
        this.wake();
      },
      Math.max(0, when.getTime() - Date.now()),
    );
    timer.unref();
    this.timers.add(timer);
  }

  private trouble(error: unknown, message: string): void {
    reportDatabaseTrouble(this.options.logger, this.options.shutdown, error, 'error', message);
  }

  private async round(kind: 'backlog' | 'full'): Promise<void> {
    const { concurrency, triggerConcurrency, leaseMarginSeconds } = this.options.config;
    for (const state of this.lanes) {
      if (kind === 'full') state.groups = await state.lane.groups();
      for (const group of state.groups) {
        const key = `${state.lane.kind}:${group.name}`;
        if (kind === 'backlog' && !this.backlog.has(key)) continue;
        const busy = this.perGroup.get(key) ?? 0;
        const waiting = this.queued.get(key)?.deliveries.length ?? 0;
        // Up to as many again as the slots are claimed ahead.
        const room = Math.min(2 * concurrency - this.inFlight - this.queuedCount, 2 * triggerConcurrency - busy - waiting);
        if (room <= 0 || this.stopped) continue;
        // Claim again once a quarter of that room is free: one claim per event would cost a query each.
        if (kind === 'backlog' && busy + waiting > 0 && room < Math.ceil(Math.min(concurrency, triggerConcurrency) / 2)) continue;
        const claimed = await state.lane.claim(group.name, room, group.timeoutSec + leaseMarginSeconds);
        if (claimed.length === room || group.ordered) this.backlog.add(key);
        else this.backlog.delete(key);
        if (claimed.length === 0) continue;
        let entry = this.queued.get(key);
        if (!entry) this.queued.set(key, (entry = { state, deliveries: [] }));
        entry.deliveries.push(...claimed);
        this.queuedCount += claimed.length;
        this.pump(key);
      }
    }
    if (kind === 'full') await this.timeNextDue();
  }

  /** A timer for the earliest scheduled time within the poll interval (the poll covers the rest). */
  private async timeNextDue(): Promise<void> {
    const due = (await Promise.all(this.lanes.map(({ lane }) => lane.nextDue?.()))).filter((date): date is Date => date !== undefined);
    clearTimeout(this.dueTimer);
    if (due.length === 0 || this.stopped) return;
    const first = Math.min(...due.map((date) => date.getTime()));
    if (first - Date.now() < this.options.config.pollIntervalMs) {
      this.dueTimer = setTimeout(() => this.wake(), Math.max(0, first - Date.now()));
      this.dueTimer.unref();
    }
  }

  /** Starts queued deliveries of a group while it and the process have free slots. */
  private pump(key: string): void {
    const entry = this.queued.get(key);
    if (!entry) return;
    const { concurrency, triggerConcurrency } = this.options.config;
    while (entry.deliveries.length > 0 && !this.stopped && this.inFlight < concurrency && (this.perGroup.get(key) ?? 0) < triggerConcurrency) {
      this.queuedCount -= 1;
      this.begin(entry.state, key, entry.deliveries.shift()!);
    }
  }

  /**
   * Attempts a delivery in a slot of its own; the slot is free again as soon as the webhook
   * answered, while the attempt waits for its batch to be recorded (its lease keeps it ours).
   */
  private begin(state: LaneState, key: string, delivery: ClaimedDelivery): void {
    this.inFlight += 1;
    this.perGroup.set(key, (this.perGroup.get(key) ?? 0) + 1);
    const work = (async () => {
      let recorded: Promise<void> | undefined;
      try {
        recorded = (await this.deliver(state, delivery)).recorded;
      } catch (error) {
        this.trouble(error, 'a delivery failed');
      } finally {
        this.inFlight -= 1;
        this.perGroup.set(key, (this.perGroup.get(key) ?? 1) - 1);
        this.pump(key);
        // Other groups may be waiting for a slot of the process too.
        if (this.inFlight < this.options.config.concurrency) for (const other of this.queued.keys()) if (other !== key) this.pump(other);
        this.schedule('backlog');
      }
      await recorded;
    })().finally(() => this.inFlightWork.delete(work));
    this.inFlightWork.add(work);
  }

  /** Makes the attempt; resolves, once the webhook answered, with the promise of its record (wrapped: await would wait for it). */
  private async deliver(state: LaneState, delivery: ClaimedDelivery): Promise<{ recorded: Promise<void> }> {
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
    let outcome: DeliveryState;
    let nextRetryAt: Date | undefined;
    if (attempt.outcome === 'delivered') outcome = 'delivered';
    else if (attempt.outcome === 'final') outcome = 'dead';
    else {
      const delay = nextRetryDelaySeconds(delivery.retryConf, tries, attempt.retryAfterSeconds);
      if (delay === undefined) outcome = 'dead';
      else {
        outcome = 'retrying';
        nextRetryAt = new Date(Date.now() + delay * this.options.config.retrySecondMs);
      }
    }
    const record = { delivery, request: request instanceof TemplateError ? undefined : request, attempt, state: outcome, nextRetryAt };
    if (nextRetryAt) this.wakeAt(nextRetryAt);
    const recorded = this.record(state, record, {
      kind: state.lane.kind,
      id: delivery.id,
      group: delivery.group,
      state: outcome,
      status: attempt.status,
      tries,
      error: attempt.error,
      latencyMs: Date.now() - delivery.createdAt.getTime(),
    });
    return { recorded };
  }

  /** Resolves once the attempt is recorded, with the others that ended meanwhile. */
  private record(state: LaneState, record: AttemptRecord, outcome: DeliveryOutcome): Promise<void> {
    return new Promise<void>((resolve) => {
      state.pending.push({ record, outcome, done: resolve });
      state.flushing ??= this.flush(state);
    });
  }

  private async flush(state: LaneState): Promise<void> {
    try {
      while (state.pending.length > 0) {
        const batch = state.pending.splice(0);
        try {
          await state.lane.record(batch.map((entry) => entry.record));
          this.options.onOutcomes(batch.map((entry) => entry.outcome));
        } catch (error) {
          // The claims then expire: the events are delivered again (at least once).
          this.trouble(error, 'recording deliveries failed');
        } finally {
          for (const entry of batch) entry.done();
        }
      }
    } finally {
      state.flushing = undefined;
      // Events that waited for these (in order, per row) may be due now.
      this.schedule('backlog');
    }
  }
}
