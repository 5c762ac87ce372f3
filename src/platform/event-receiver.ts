import type { FastifyInstance } from 'fastify';
import { secretsEqual } from '../common/secrets';
import { ADMIN_SECRET_HEADER } from './session';

/** An event trigger's delivery (spec 1 §2.4), as a receiver gets it. */
export interface TriggerEvent {
  kind: 'event';
  id: string;
  created_at: string;
  event: {
    op: 'INSERT' | 'UPDATE' | 'DELETE' | 'MANUAL';
    data: { old: Record<string, unknown> | null; new: Record<string, unknown> | null };
    session_variables: Record<string, string> | null;
  };
  delivery_info: { max_retries: number; current_retry: number };
  trigger: { name: string };
  table: { schema: string; name: string };
}

/** A scheduled event's delivery (cron or one-off), as a receiver gets it. */
export interface ScheduledEvent {
  kind: 'scheduled';
  id: string;
  name: string | null;
  scheduled_time: string;
  payload: unknown;
  comment: string | null;
}

/** What a receiver answers: `retry: false` tells the engine a failure is final (spec 1 §6.3). */
export interface ReceiverAnswer {
  status: string;
  message: string;
  retry?: boolean;
}

const OPS = new Set(['INSERT', 'UPDATE', 'DELETE', 'MANUAL']);
const isObject = (value: unknown): value is Record<string, unknown> => value !== null && typeof value === 'object' && !Array.isArray(value);

/** Reads an event trigger's or a scheduled event's body; undefined when it is neither. */
export function parseDelivery(body: unknown): TriggerEvent | ScheduledEvent | undefined {
  if (!isObject(body) || typeof body.id !== 'string') return undefined;
  const { event, trigger, table } = body;
  if (
    isObject(event) &&
    typeof event.op === 'string' &&
    OPS.has(event.op) &&
    isObject(event.data) &&
    isObject(trigger) &&
    typeof trigger.name === 'string' &&
    isObject(table)
  ) {
    return { ...(body as unknown as Omit<TriggerEvent, 'kind'>), kind: 'event' };
  }
  if (typeof body.scheduled_time === 'string' && 'payload' in body) {
    return {
      kind: 'scheduled',
      id: body.id,
      name: typeof body.name === 'string' ? body.name : null,
      scheduled_time: body.scheduled_time,
      payload: body.payload,
      comment: typeof body.comment === 'string' ? body.comment : null,
    };
  }
  return undefined;
}

const ANSWER = {
  type: 'object',
  properties: { status: { type: 'string' }, message: { type: 'string' }, retry: { type: 'boolean' } },
  required: ['status', 'message'],
} as const;

/**
 * Registers a webhook receiver for Plinth's own event triggers and scheduled events
 * (spec 1 §5.2): the engine's `X-Gql-Admin-Secret` is checked in constant time (401
 * `{status: "unauthorized"}` otherwise), the body is read as an event or a scheduled event (400
 * when it is neither), and `handle`'s answer is sent as `{status, message}`. A handler that
 * throws answers 500, so the engine retries; one that wants no retry answers `retry: false`.
 */
export function registerEventReceiver(
  app: FastifyInstance,
  options: {
    path: string;
    adminSecret: string;
    summary: string;
    tags: string[];
    handle(delivery: TriggerEvent | ScheduledEvent): Promise<ReceiverAnswer>;
  },
): void {
  app.post(options.path, {
    schema: {
      tags: options.tags,
      summary: options.summary,
      description: 'A webhook receiver of event triggers and scheduled events: the engine POSTs the event with X-Gql-Admin-Secret.',
      security: [{ adminSecret: [] }],
      body: { type: 'object', description: 'An event trigger payload (spec 1 §2.4) or a scheduled event `{id, name, scheduled_time, payload, comment}`' },
      response: {
        200: { ...ANSWER, description: 'Handled (or refused for good, with retry: false)' },
        400: { ...ANSWER, description: 'The body is not an event' },
        401: { ...ANSWER, description: 'No admin secret, or a wrong one' },
        500: { ...ANSWER, description: 'The handler failed: the engine retries' },
      },
    },
    onRequest: async (request, reply) => {
      const given = request.headers[ADMIN_SECRET_HEADER];
      if (typeof given !== 'string' || !secretsEqual(given, options.adminSecret)) {
        return reply.code(401).send({ status: 'unauthorized', message: 'invalid or missing x-gql-admin-secret' });
      }
    },
    handler: async (request, reply) => {
      const delivery = parseDelivery(request.body);
      if (!delivery)
        return reply.code(400).send({ status: 'error', message: 'the body is neither an event trigger payload nor a scheduled event', retry: false });
      try {
        return reply.code(200).send(await options.handle(delivery));
      } catch (error) {
        request.log.error({ err: error, event: delivery.id }, 'an event receiver failed');
        return reply.code(500).send({ status: 'error', message: 'the receiver failed; the event will be retried' });
      }
    },
  });
}
