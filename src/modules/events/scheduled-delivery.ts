import type { DataSource } from 'typeorm';
import type { EventsConfig } from '../../config';
import type { CronTriggerConfig, HeaderConf, RetryConf } from './definitions';
import type { AttemptRecord, ClaimedDelivery, DeliveryGroup, DeliveryLane } from './dispatcher';
import { loggedRequest, loggedResponse } from './event-delivery';
import { missedToleranceSeconds, type ScheduledEventsService } from './scheduled-events.service';
import { webhookRequest, type TemplateValues } from './webhook-request';

/** The group of one-off scheduled events (cron triggers are their own groups). */
export const ONE_OFF_GROUP = '';
/** The timeout the lease of a one-off event covers at most (its own retry_conf may be shorter). */
const ONE_OFF_MAX_TIMEOUT_SEC = 3600;

interface ClaimedRow {
  id: string;
  cron_trigger_name: string | null;
  scheduled_time: Date;
  tries: number;
  created_at: Date;
  locked: string;
  webhook: string | null;
  payload: unknown;
  headers: HeaderConf[] | null;
  retry_conf: RetryConf | null;
  comment: string | null;
}

/**
 * Scheduled events' deliveries, due by their time (or their retry's), with Hasura's body
 * `{id, name, scheduled_time, payload, comment}`. An event not yet attempted and later than the
 * tolerance (the cron trigger's `tolerance_seconds`, or EVENTS_MISSED_TOLERANCE_SECONDS) is
 * never claimed; the scheduled events' upkeep marks it dead (ScheduledEventsService.maintain).
 */
export class ScheduledEventLane implements DeliveryLane {
  readonly kind = 'scheduled_event';
  private triggers = new Map<string, CronTriggerConfig>();

  constructor(
    private readonly dataSource: DataSource,
    private readonly scheduled: ScheduledEventsService,
    private readonly config: EventsConfig,
    private readonly templateValues: () => Omit<TemplateValues, 'sessionVariables' | 'requestId'>,
  ) {}

  async groups(): Promise<DeliveryGroup[]> {
    const configs = await this.scheduled.list();
    this.triggers = new Map(configs.map((config) => [config.name, config]));
    return [
      { name: ONE_OFF_GROUP, timeoutSec: ONE_OFF_MAX_TIMEOUT_SEC, ordered: false },
      ...configs.map((config) => ({ name: config.name, timeoutSec: config.retry_conf.timeout_sec, ordered: false })),
    ];
  }

  private tolerance(name: string | null): number {
    return missedToleranceSeconds(name === null ? undefined : this.triggers.get(name), this.config);
  }

  async claim(group: string, limit: number, leaseSeconds: number): Promise<ClaimedDelivery[]> {
    const trigger = group === ONE_OFF_GROUP ? undefined : this.triggers.get(group);
    if (group !== ONE_OFF_GROUP && !trigger) return [];
    const rows: ClaimedRow[] = await this.dataSource.query(
      `WITH claimed AS (UPDATE scheduled_events e SET status = 'locked', locked = clock_timestamp(), lease_expires_at = clock_timestamp() + make_interval(secs => $3)
       FROM (SELECT c.id FROM scheduled_events c
             WHERE c.cron_trigger_name IS NOT DISTINCT FROM $1
               AND ((c.status = 'scheduled' AND coalesce(c.next_retry_at, c.scheduled_time) <= clock_timestamp()
                     AND (c.tries > 0 OR c.scheduled_time >= clock_timestamp() - make_interval(secs => $4)))
                 OR (c.status = 'locked' AND c.lease_expires_at < clock_timestamp()))
             ORDER BY coalesce(c.next_retry_at, c.scheduled_time) LIMIT $2 FOR UPDATE SKIP LOCKED) picked
       WHERE e.id = picked.id
       RETURNING e.id, e.cron_trigger_name, e.scheduled_time, e.tries, e.created_at, e.locked::text AS locked, e.webhook, e.payload, e.headers, e.retry_conf, e.comment)
       SELECT * FROM claimed`,
      [group === ONE_OFF_GROUP ? null : group, limit, leaseSeconds, this.tolerance(group === ONE_OFF_GROUP ? null : group)],
    );
    return rows.map((row) => {
      const retryConf = trigger?.retry_conf ?? row.retry_conf!;
      const target = trigger
        ? { webhook: trigger.webhook, headers: trigger.headers, retryConf }
        : { webhook: row.webhook!, headers: row.headers ?? [], retryConf };
      const body = {
        id: row.id,
        name: row.cron_trigger_name,
        scheduled_time: row.scheduled_time.toISOString(),
        payload: trigger ? (trigger.payload ?? {}) : row.payload,
        comment: trigger ? (trigger.comment ?? null) : row.comment,
      };
      return {
        id: row.id,
        group,
        lockedAt: row.locked,
        tries: row.tries,
        // Latency counts from when the event was due.
        createdAt: row.scheduled_time,
        retryConf,
        request: (requestId: string) => webhookRequest(target, body, { ...this.templateValues(), sessionVariables: null, requestId }),
      };
    });
  }

  async release(deliveries: ClaimedDelivery[]): Promise<void> {
    await this.dataSource.query(
      `UPDATE scheduled_events e SET status = 'scheduled', locked = NULL, lease_expires_at = NULL FROM unnest($1::uuid[], $2::text[]) AS r (id, locked)
       WHERE e.id = r.id AND e.locked = r.locked::timestamptz`,
      [deliveries.map((delivery) => delivery.id), deliveries.map((delivery) => delivery.lockedAt)],
    );
  }

  async record(records: AttemptRecord[]): Promise<void> {
    for (const { delivery, request, attempt, state, nextRetryAt } of records) {
      const status = state === 'delivered' ? 'delivered' : state === 'dead' ? 'error' : 'scheduled';
      await this.dataSource.query(
        `WITH updated AS (
           UPDATE scheduled_events SET tries = tries + 1, locked = NULL, lease_expires_at = NULL, status = $3, next_retry_at = $4,
             delivered_at = CASE WHEN $3 = 'delivered' THEN clock_timestamp() END
           WHERE id = $1 AND locked = $2::timestamptz RETURNING id)
         INSERT INTO scheduled_event_invocation_logs (event_id, status, request, response, duration_ms) VALUES ($1, $5, $6, $7, $8)`,
        [
          delivery.id,
          delivery.lockedAt,
          status,
          nextRetryAt ?? null,
          attempt.status,
          loggedRequest(request, attempt.requestId),
          loggedResponse(attempt),
          attempt.durationMs,
        ],
      );
    }
  }

  async nextDue(): Promise<Date | undefined> {
    const [{ due }]: { due: Date | null }[] = await this.dataSource.query(
      `SELECT min(coalesce(next_retry_at, scheduled_time)) AS due FROM scheduled_events
       WHERE status = 'scheduled' AND coalesce(next_retry_at, scheduled_time) > clock_timestamp()`,
    );
    return due ?? undefined;
  }
}

/**
 * Deletes delivered, failed and dead events (and so their invocation logs) older than
 * EVENTS_CLEANUP_AFTER_HOURS (0 keeps them), of event triggers and scheduled events, and the
 * external webhooks' dedup records older than their window (no delivery can match those any
 * more). A recurring task, every EVENTS_CLEANUP_INTERVAL_SECONDS. Pending events stay.
 */
export async function cleanUpOldEvents(
  dataSource: DataSource,
  config: Pick<EventsConfig, 'cleanupAfterHours' | 'externalDedupWindowHours'>,
): Promise<{ events: number; scheduledEvents: number; receipts: number }> {
  return dataSource.transaction(async (manager) => {
    const count = async (sql: string, hours: number): Promise<number> =>
      (await manager.query(`WITH deleted AS (${sql} RETURNING 1) SELECT count(*)::int AS n FROM deleted`, [hours]))[0].n;
    const hours = config.cleanupAfterHours;
    return {
      events:
        hours === 0
          ? 0
          : await count('DELETE FROM event_log WHERE (delivered OR error OR archived) AND created_at < now() - make_interval(hours => $1)', hours),
      scheduledEvents:
        hours === 0
          ? 0
          : await count(
              "DELETE FROM scheduled_events WHERE status IN ('delivered', 'error', 'dead') AND scheduled_time < now() - make_interval(hours => $1)",
              hours,
            ),
      receipts: await count('DELETE FROM external_webhook_receipts WHERE received_at < now() - make_interval(hours => $1)', config.externalDedupWindowHours),
    };
  });
}
