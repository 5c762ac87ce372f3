import type { DataSource } from 'typeorm';
import type { EventTriggerConfig } from './definitions';
import type { AttemptRecord, ClaimedDelivery, DeliveryGroup, DeliveryLane } from './dispatcher';
import type { EventTriggersService } from './event-triggers.service';
import { webhookRequest, type AttemptResult, type TemplateValues, type WebhookRequest } from './webhook-request';

interface ClaimedRow {
  id: string;
  tries: number;
  created_at: Date;
  locked: string;
  payload: unknown;
  schema_name: string;
  table_name: string;
}

/** The invocation log's `response`, in Hasura's shape. */
export function loggedResponse(attempt: AttemptResult): unknown {
  if (attempt.status === null) return { type: 'client_error', data: { message: attempt.error } };
  let body: unknown = attempt.responseBody;
  try {
    body = JSON.parse(attempt.responseBody);
  } catch {
    // Kept as text.
  }
  return {
    type: 'webhook_response',
    data: { status: attempt.status, body, headers: Object.entries(attempt.responseHeaders).map(([name, value]) => ({ name, value })) },
  };
}

export function loggedRequest(request: WebhookRequest | undefined, requestId: string): unknown {
  return request ? { payload: request.body, headers: request.loggedHeaders, request_id: requestId, version: '2' } : { request_id: requestId, version: '2' };
}

/**
 * The event triggers' deliveries: pending `event_log` rows claimed per trigger in order
 * (FOR UPDATE SKIP LOCKED); with `in_order`, an event waits while an earlier one of its row is
 * pending. The body is Hasura's (spec 1 §2.4).
 */
export class EventTriggerLane implements DeliveryLane {
  readonly kind = 'event_trigger';
  private triggers = new Map<string, EventTriggerConfig>();

  constructor(
    private readonly dataSource: DataSource,
    private readonly eventTriggers: EventTriggersService,
    private readonly templateValues: () => Omit<TemplateValues, 'sessionVariables' | 'requestId'>,
  ) {}

  async groups(): Promise<DeliveryGroup[]> {
    const configs = await this.eventTriggers.list();
    this.triggers = new Map(configs.map((config) => [config.name, config]));
    return configs.map((config) => ({ name: config.name, timeoutSec: config.retry_conf.timeout_sec, ordered: config.in_order === true }));
  }

  async claim(group: string, limit: number, leaseSeconds: number): Promise<ClaimedDelivery[]> {
    const config = this.triggers.get(group);
    if (!config) return [];
    const inOrder = config.in_order
      ? `AND NOT EXISTS (SELECT 1 FROM event_log p WHERE p.trigger_name = c.trigger_name AND p.row_key = c.row_key AND p.seq < c.seq
           AND NOT p.delivered AND NOT p.error AND NOT p.archived)`
      : '';
    const rows: ClaimedRow[] = await this.dataSource.query(
      `WITH claimed AS (UPDATE event_log e SET locked = clock_timestamp(), lease_expires_at = clock_timestamp() + make_interval(secs => $3)
       FROM (SELECT c.id FROM event_log c
             WHERE c.trigger_name = $1 AND NOT c.delivered AND NOT c.error AND NOT c.archived
               AND (c.next_retry_at IS NULL OR c.next_retry_at <= clock_timestamp())
               AND (c.lease_expires_at IS NULL OR c.lease_expires_at < clock_timestamp())
               ${inOrder}
             ORDER BY c.seq LIMIT $2 FOR UPDATE SKIP LOCKED) picked
       WHERE e.id = picked.id
       RETURNING e.id, e.tries, e.created_at, e.locked::text AS locked, e.payload, e.schema_name, e.table_name, e.seq)
       SELECT * FROM claimed ORDER BY seq`,
      [group, limit, leaseSeconds],
    );
    const webhook = config.webhook ?? `{{${config.webhook_from_env}}}`;
    return rows.map((row) => ({
      id: row.id,
      group,
      lockedAt: row.locked,
      tries: row.tries,
      createdAt: row.created_at,
      retryConf: config.retry_conf,
      request: (requestId) => {
        const payload = row.payload as { session_variables?: Record<string, string> | null };
        const body = {
          id: row.id,
          created_at: row.created_at.toISOString(),
          event: row.payload,
          delivery_info: { max_retries: config.retry_conf.num_retries, current_retry: row.tries },
          trigger: { name: group },
          table: { schema: row.schema_name, name: row.table_name },
        };
        return webhookRequest({ webhook, headers: config.headers, retryConf: config.retry_conf }, body, {
          ...this.templateValues(),
          sessionVariables: payload.session_variables ?? null,
          requestId,
        });
      },
    }));
  }

  async release(deliveries: ClaimedDelivery[]): Promise<void> {
    await this.dataSource.query(
      `UPDATE event_log e SET locked = NULL, lease_expires_at = NULL FROM unnest($1::uuid[], $2::text[]) AS r (id, locked)
       WHERE e.id = r.id AND e.locked = r.locked::timestamptz`,
      [deliveries.map((delivery) => delivery.id), deliveries.map((delivery) => delivery.lockedAt)],
    );
  }

  /** One statement for the whole batch: the states (where the claim is still ours) and every invocation log. */
  async record(records: AttemptRecord[]): Promise<void> {
    await this.dataSource.query(
      `WITH input AS (
         SELECT * FROM unnest($1::uuid[], $2::text[], $3::text[], $4::timestamptz[], $5::text[], $6::int[], $7::jsonb[], $8::jsonb[], $9::int[])
           AS t (id, locked, state, next_retry_at, trigger_name, status, request, response, duration_ms)),
       updated AS (
         UPDATE event_log e SET tries = e.tries + 1, locked = NULL, lease_expires_at = NULL,
           delivered = i.state = 'delivered', error = i.state = 'dead', next_retry_at = i.next_retry_at,
           delivered_at = CASE WHEN i.state = 'delivered' THEN clock_timestamp() END
         FROM input i WHERE e.id = i.id AND e.locked = i.locked::timestamptz RETURNING e.id)
       INSERT INTO event_invocation_logs (event_id, trigger_name, status, request, response, duration_ms)
       SELECT id, trigger_name, status, request, response, duration_ms FROM input`,
      [
        records.map((record) => record.delivery.id),
        records.map((record) => record.delivery.lockedAt),
        records.map((record) => record.state),
        records.map((record) => record.nextRetryAt ?? null),
        records.map((record) => record.delivery.group),
        records.map((record) => record.attempt.status),
        records.map((record) => JSON.stringify(loggedRequest(record.request, record.attempt.requestId))),
        records.map((record) => JSON.stringify(loggedResponse(record.attempt))),
        records.map((record) => record.attempt.durationMs),
      ],
    );
  }
}
