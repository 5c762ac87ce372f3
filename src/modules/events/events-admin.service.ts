import type { DataSource } from 'typeorm';
import { Refusal } from '../../common/refusal';
import type { EventTriggerConfig } from './definitions';
import { EVENTS_CHANNEL, type EventTriggersService } from './event-triggers.service';
import type { ScheduledEventsService } from './scheduled-events.service';
import { EventStateValue, type CronTrigger, type EventAttempt, type EventTrigger, type ScheduledEvent, type TriggerEvent } from './events.types';
import { UUID } from '../../common/ids';

export const MAX_EVENTS_PAGE = 500;

const STATE_FILTER: Record<EventStateValue, string> = {
  PENDING: 'NOT delivered AND NOT error AND NOT archived AND locked IS NULL',
  DELIVERING: 'NOT delivered AND NOT error AND NOT archived AND locked IS NOT NULL',
  DELIVERED: 'delivered',
  DEAD: 'error AND NOT archived',
  ARCHIVED: 'archived AND NOT delivered',
};

interface EventRow {
  id: string;
  trigger_name: string;
  payload: { op: string; data: Record<string, unknown>; session_variables: Record<string, string> | null };
  delivered: boolean;
  error: boolean;
  archived: boolean;
  locked: Date | null;
  tries: number;
  created_at: Date;
  next_retry_at: Date | null;
}

function stateOf(row: EventRow): EventStateValue {
  if (row.delivered) return EventStateValue.DELIVERED;
  if (row.archived) return EventStateValue.ARCHIVED;
  if (row.error) return EventStateValue.DEAD;
  return row.locked ? EventStateValue.DELIVERING : EventStateValue.PENDING;
}

/** An attempt of an event trigger's event, with its event as it is now (the admin dashboard's view). */
export interface TriggerInvocation {
  id: string;
  eventId: string;
  /** Which attempt of its event this was, from 1 (a redelivery starts the count of tries again, not of attempts). */
  attempt: number;
  /** The webhook's HTTP status; null when it did not answer (timeout, connection refused). */
  status: number | null;
  error: string | null;
  durationMs: number;
  createdAt: Date;
  event: { state: EventStateValue; tries: number; op: string; createdAt: Date };
}

/** What asking to redeliver an event did: queued it again, or nothing because it is queued already or being delivered. */
export type RedeliveryOutcome = 'queued' | 'already-queued' | 'in-flight';

function page(first: number | null | undefined): number {
  const value = first ?? 50;
  if (!Number.isInteger(value) || value < 1 || value > MAX_EVENTS_PAGE) throw new Refusal('BAD_USER_INPUT', `first must be from 1 to ${MAX_EVENTS_PAGE}`, 400);
  return value;
}

/** The admin GraphQL view of triggers, events, their attempts and scheduled events. */
export class EventsAdminService {
  constructor(
    private readonly dataSource: DataSource,
    private readonly eventTriggers: EventTriggersService,
    private readonly scheduledEvents: ScheduledEventsService,
  ) {}

  async triggers(): Promise<EventTrigger[]> {
    const counts: { trigger_name: string; pending: number; dead: number }[] = await this.dataSource.query(
      `SELECT trigger_name, count(*) FILTER (WHERE NOT delivered AND NOT error AND NOT archived)::int AS pending,
         count(*) FILTER (WHERE error AND NOT archived)::int AS dead
       FROM event_log WHERE NOT delivered GROUP BY trigger_name`,
    );
    const byName = new Map(counts.map((row) => [row.trigger_name, row]));
    return (await this.eventTriggers.list()).map((config: EventTriggerConfig) => ({
      name: config.name,
      table: `${config.table.schema}.${config.table.name}`,
      operations: [
        ...(['insert', 'update', 'delete'] as const).filter((operation) => config.definition[operation]).map((operation) => operation.toUpperCase()),
        ...(config.definition.enable_manual ? ['MANUAL'] : []),
      ],
      webhook: config.webhook ?? null,
      webhookFromEnv: config.webhook_from_env ?? null,
      numRetries: config.retry_conf.num_retries,
      intervalSec: config.retry_conf.interval_sec,
      timeoutSec: config.retry_conf.timeout_sec,
      inOrder: config.in_order ?? false,
      pending: byName.get(config.name)?.pending ?? 0,
      dead: byName.get(config.name)?.dead ?? 0,
    }));
  }

  /**
   * Deliveries waiting, on every instance: trigger events not yet delivered, given up or archived
   * (event_log_pending_idx), and scheduled events due and not yet delivered (scheduled_events_due_idx).
   */
  async backlog(): Promise<number> {
    const [row]: { pending: number }[] = await this.dataSource.query(
      `SELECT (SELECT count(*) FROM event_log WHERE NOT delivered AND NOT error AND NOT archived)::int
         + (SELECT count(*) FROM scheduled_events WHERE status IN ('scheduled', 'locked') AND coalesce(next_retry_at, scheduled_time) <= now())::int AS pending`,
    );
    return row.pending;
  }

  async events(filter: { trigger?: string | null; state?: EventStateValue | null; first?: number | null }): Promise<TriggerEvent[]> {
    const rows: EventRow[] = await this.dataSource.query(
      `SELECT id, trigger_name, payload, delivered, error, archived, locked, tries, created_at, next_retry_at FROM event_log
       WHERE ($1::text IS NULL OR trigger_name = $1) AND ${filter.state ? STATE_FILTER[filter.state] : 'true'}
       ORDER BY created_at DESC, seq DESC LIMIT $2`,
      [filter.trigger ?? null, page(filter.first)],
    );
    return rows.map((row) => ({
      id: row.id,
      trigger: row.trigger_name,
      op: row.payload.op,
      state: stateOf(row),
      tries: row.tries,
      createdAt: row.created_at,
      nextRetryAt: row.next_retry_at,
      data: row.payload.data,
      sessionVariables: row.payload.session_variables,
    }));
  }

  /** The attempts of an event trigger's event or of a scheduled event, newest first. */
  async attempts(eventId: string): Promise<EventAttempt[]> {
    if (!UUID.test(eventId)) throw new Refusal('BAD_USER_INPUT', 'eventId must be a UUID', 400);
    const rows: {
      id: string;
      event_id: string;
      status: number | null;
      duration_ms: number;
      created_at: Date;
      request: Record<string, unknown>;
      response: Record<string, unknown>;
    }[] = await this.dataSource.query(
      `SELECT id, event_id, status, duration_ms, created_at, request, response FROM event_invocation_logs WHERE event_id = $1
         UNION ALL SELECT id, event_id, status, duration_ms, created_at, request, response FROM scheduled_event_invocation_logs WHERE event_id = $1
         ORDER BY created_at DESC`,
      [eventId],
    );
    return rows.map((row) => ({
      id: row.id,
      eventId: row.event_id,
      status: row.status,
      error: row.response.type === 'client_error' ? String((row.response.data as { message?: unknown }).message ?? '') : null,
      durationMs: row.duration_ms,
      createdAt: row.created_at,
      request: row.request,
      response: row.response,
    }));
  }

  /** A trigger's attempts, newest first, `limit` (+1 to tell whether more follow) from `offset`; NOT_FOUND for an unknown trigger. */
  async recentInvocations(trigger: string, limit: number, offset: number): Promise<{ items: TriggerInvocation[]; hasMore: boolean }> {
    if (!(await this.eventTriggers.find(trigger))) throw new Refusal('NOT_FOUND', `no event trigger is named ${trigger}`, 404);
    const rows: (EventRow & {
      invocation_id: string;
      status: number | null;
      duration_ms: number;
      invoked_at: Date;
      response: Record<string, unknown>;
      attempt: number;
    })[] = await this.dataSource.query(
      `SELECT i.id AS invocation_id, i.status, i.duration_ms, i.created_at AS invoked_at, i.response,
         (SELECT count(*)::int FROM event_invocation_logs x WHERE x.event_id = i.event_id AND (x.created_at, x.id) <= (i.created_at, i.id)) AS attempt,
         e.id, e.trigger_name, e.payload, e.delivered, e.error, e.archived, e.locked, e.tries, e.created_at, e.next_retry_at
       FROM event_invocation_logs i JOIN event_log e ON e.id = i.event_id
       WHERE i.trigger_name = $1 ORDER BY i.created_at DESC, i.id DESC LIMIT $2 OFFSET $3`,
      [trigger, limit + 1, offset],
    );
    return {
      hasMore: rows.length > limit,
      items: rows.slice(0, limit).map((row) => ({
        id: row.invocation_id,
        eventId: row.id,
        attempt: row.attempt,
        status: row.status,
        error: row.response.type === 'client_error' ? String((row.response.data as { message?: unknown } | undefined)?.message ?? '') : null,
        durationMs: row.duration_ms,
        createdAt: row.invoked_at,
        event: { state: stateOf(row), tries: row.tries, op: row.payload.op, createdAt: row.created_at },
      })),
    };
  }

  /**
   * Delivers an event trigger's event again from its first try, once: a delivered, dead or archived
   * event is queued again; one still queued, or being delivered now, is left as it is (asking twice
   * delivers once, and an attempt in flight is never doubled). NOT_FOUND for an unknown event.
   */
  async redeliverOnce(eventId: string): Promise<{ eventId: string; outcome: RedeliveryOutcome; state: EventStateValue }> {
    if (!UUID.test(eventId)) throw new Refusal('BAD_USER_INPUT', 'eventId must be a UUID', 400);
    return this.dataSource.transaction(async (manager) => {
      const [row]: (EventRow & { lease_expires_at: Date | null; leased: boolean })[] = await manager.query(
        `SELECT id, trigger_name, payload, delivered, error, archived, locked, tries, created_at, next_retry_at,
           (locked IS NOT NULL AND lease_expires_at > clock_timestamp()) AS leased
         FROM event_log WHERE id = $1 FOR UPDATE`,
        [eventId],
      );
      if (!row) throw new Refusal('NOT_FOUND', `no event has the id ${eventId}`, 404);
      if (!row.delivered && !row.error && !row.archived) {
        return { eventId: row.id, outcome: row.leased ? 'in-flight' : 'already-queued', state: stateOf(row) };
      }
      await manager.query(
        `UPDATE event_log SET delivered = false, error = false, archived = false, tries = 0, next_retry_at = NULL, locked = NULL,
           lease_expires_at = NULL, delivered_at = NULL WHERE id = $1`,
        [row.id],
      );
      // Delivered when this transaction commits.
      await manager.query('SELECT pg_notify($1, $2)', [EVENTS_CHANNEL, '']);
      return { eventId: row.id, outcome: 'queued', state: EventStateValue.PENDING };
    });
  }

  async cronTriggers(): Promise<CronTrigger[]> {
    const next: { cron_trigger_name: string; next: Date }[] = await this.dataSource.query(
      `SELECT cron_trigger_name, min(scheduled_time) AS next FROM scheduled_events WHERE cron_trigger_name IS NOT NULL AND status = 'scheduled'
       AND scheduled_time > now() GROUP BY cron_trigger_name`,
    );
    const byName = new Map(next.map((row) => [row.cron_trigger_name, row.next]));
    return (await this.scheduledEvents.list()).map((config) => ({
      name: config.name,
      schedule: config.schedule,
      webhook: config.webhook,
      comment: config.comment ?? null,
      payload: (config.payload ?? null) as Record<string, unknown> | null,
      nextScheduledTime: byName.get(config.name) ?? null,
    }));
  }

  async scheduled(filter: { cronTrigger?: string | null; status?: string | null; first?: number | null; offset?: number }): Promise<ScheduledEvent[]> {
    if (filter.status && !['scheduled', 'locked', 'delivered', 'error', 'dead'].includes(filter.status)) {
      throw new Refusal('BAD_USER_INPUT', 'status must be scheduled, locked, delivered, error or dead', 400);
    }
    const rows: { id: string; cron_trigger_name: string | null; scheduled_time: Date; status: string; tries: number }[] = await this.dataSource.query(
      `SELECT id, cron_trigger_name, scheduled_time, status, tries FROM scheduled_events
       WHERE ($1::text IS NULL OR cron_trigger_name = $1) AND ($2::text IS NULL OR status = $2) ORDER BY scheduled_time DESC, id LIMIT $3 OFFSET $4`,
      [filter.cronTrigger ?? null, filter.status ?? null, page(filter.first), filter.offset ?? 0],
    );
    return rows.map((row) => ({ id: row.id, cronTrigger: row.cron_trigger_name, scheduledTime: row.scheduled_time, status: row.status, tries: row.tries }));
  }
}
