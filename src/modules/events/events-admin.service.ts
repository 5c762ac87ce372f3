import type { DataSource } from 'typeorm';
import { Refusal } from '../../common/refusal';
import type { EventTriggerConfig } from './definitions';
import type { EventTriggersService } from './event-triggers.service';
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

  async scheduled(filter: { cronTrigger?: string | null; status?: string | null; first?: number | null }): Promise<ScheduledEvent[]> {
    if (filter.status && !['scheduled', 'locked', 'delivered', 'error', 'dead'].includes(filter.status)) {
      throw new Refusal('BAD_USER_INPUT', 'status must be scheduled, locked, delivered, error or dead', 400);
    }
    const rows: { id: string; cron_trigger_name: string | null; scheduled_time: Date; status: string; tries: number }[] = await this.dataSource.query(
      `SELECT id, cron_trigger_name, scheduled_time, status, tries FROM scheduled_events
       WHERE ($1::text IS NULL OR cron_trigger_name = $1) AND ($2::text IS NULL OR status = $2) ORDER BY scheduled_time DESC LIMIT $3`,
      [filter.cronTrigger ?? null, filter.status ?? null, page(filter.first)],
    );
    return rows.map((row) => ({ id: row.id, cronTrigger: row.cron_trigger_name, scheduledTime: row.scheduled_time, status: row.status, tries: row.tries }));
  }
}
