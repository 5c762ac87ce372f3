import type { FastifyInstance } from 'fastify';
import { CHANGE_ERRORS, CSRF_HEADER, NO_BODY, SESSION_ERRORS, TAGS } from './admin.schemas';
import {
  BAD_INPUT,
  DATE,
  NOT_FOUND,
  NULLABLE_DATE,
  nullable,
  paged,
  pageOf,
  PAGING_PROPERTIES,
  UUID_PARAM,
  type AdminAreas,
  type Paging,
} from './admin-areas.schemas';

const EVENT_STATES = ['PENDING', 'DELIVERING', 'DELIVERED', 'DEAD', 'ARCHIVED'];
const SCHEDULED_STATUSES = ['scheduled', 'locked', 'delivered', 'error', 'dead'];
const TRIGGER_NAME = { type: 'string', pattern: '^[A-Za-z0-9_-]{1,42}$', description: "An event trigger's name" } as const;

const TRIGGER = {
  type: 'object',
  properties: {
    name: { type: 'string' },
    table: { type: 'string' },
    operations: { type: 'array', items: { type: 'string' } },
    webhook: nullable('string'),
    webhookFromEnv: nullable('string', { description: 'The variable holding the webhook URL (its value is not shown)' }),
    numRetries: { type: 'integer' },
    intervalSec: { type: 'integer' },
    timeoutSec: { type: 'integer' },
    pending: { type: 'integer', description: 'Events waiting to be delivered' },
    dead: { type: 'integer', description: 'Events that used up their retries' },
  },
  required: ['name', 'table', 'operations', 'pending', 'dead'],
} as const;

const INVOCATION = {
  type: 'object',
  properties: {
    id: { type: 'string' },
    eventId: { type: 'string' },
    attempt: { type: 'integer', description: 'Which attempt of its event, from 1' },
    status: nullable('integer', { description: "The webhook's HTTP status; null without an answer" }),
    error: nullable('string'),
    durationMs: { type: 'integer' },
    createdAt: DATE,
    event: {
      type: 'object',
      properties: { state: { type: 'string', enum: EVENT_STATES }, tries: { type: 'integer' }, op: { type: 'string' }, createdAt: DATE },
      required: ['state', 'tries', 'op', 'createdAt'],
    },
  },
  required: ['id', 'eventId', 'attempt', 'status', 'error', 'durationMs', 'createdAt', 'event'],
} as const;

const CRON_TRIGGER = {
  type: 'object',
  properties: {
    name: { type: 'string' },
    schedule: { type: 'string' },
    webhook: { type: 'string' },
    comment: nullable('string'),
    nextScheduledTime: NULLABLE_DATE,
  },
  required: ['name', 'schedule', 'webhook', 'nextScheduledTime'],
} as const;

const SCHEDULED_EVENT = {
  type: 'object',
  properties: {
    id: { type: 'string' },
    cronTrigger: nullable('string', { description: 'null for a one-off scheduled event' }),
    scheduledTime: DATE,
    status: { type: 'string', enum: SCHEDULED_STATUSES },
    tries: { type: 'integer' },
  },
  required: ['id', 'cronTrigger', 'scheduledTime', 'status', 'tries'],
} as const;

const PAGING_QUERY = { type: 'object', additionalProperties: false, properties: PAGING_PROPERTIES } as const;

/** A page of a list held whole in memory (the triggers of the metadata: a handful, not rows of data). */
const slice = <T>(all: T[], { limit, offset }: Paging) => ({ ...paged(all.slice(offset, offset + limit + 1), { limit, offset }), total: all.length });

/** The events' views: triggers with their recent attempts and a redelivery, cron triggers and scheduled events. */
export function adminEventRoutes(scope: FastifyInstance, { events: services }: Pick<AdminAreas, 'events'>): void {
  scope.get<{ Querystring: Paging }>(
    '/api/events/triggers',
    {
      schema: {
        tags: TAGS,
        summary: 'Event triggers, with their pending and dead events',
        querystring: PAGING_QUERY,
        response: { 200: pageOf(TRIGGER, { total: { type: 'integer' } }), 400: BAD_INPUT, ...SESSION_ERRORS },
      },
    },
    async (request) => slice(await services.admin.triggers(), request.query),
  );

  scope.get<{ Params: { name: string }; Querystring: Paging }>(
    '/api/events/triggers/:name/invocations',
    {
      schema: {
        tags: TAGS,
        summary: "A trigger's delivery attempts, newest first, with their event's state now",
        params: { type: 'object', required: ['name'], properties: { name: TRIGGER_NAME } },
        querystring: PAGING_QUERY,
        response: { 200: pageOf(INVOCATION), 400: BAD_INPUT, ...SESSION_ERRORS, 404: NOT_FOUND('event trigger') },
      },
    },
    async (request) => {
      const { limit, offset } = request.query;
      return { ...(await services.admin.recentInvocations(request.params.name, limit, offset)), limit, offset };
    },
  );

  scope.post<{ Params: { eventId: string } }>(
    '/api/events/events/:eventId/redeliver',
    {
      schema: {
        tags: TAGS,
        summary: 'Deliver an event again, from its first try',
        description:
          'A delivered, dead or archived event is queued again (its attempts so far stay in its history); one that is still queued ' +
          '(`already-queued`) or being delivered now (`in-flight`) is left as it is. Asking twice delivers once.',
        headers: CSRF_HEADER,
        body: NO_BODY,
        params: { type: 'object', required: ['eventId'], properties: { eventId: UUID_PARAM } },
        response: {
          200: {
            type: 'object',
            properties: {
              eventId: { type: 'string' },
              outcome: { type: 'string', enum: ['queued', 'already-queued', 'in-flight'] },
              state: { type: 'string', enum: EVENT_STATES },
            },
            required: ['eventId', 'outcome', 'state'],
          },
          400: BAD_INPUT,
          ...CHANGE_ERRORS,
          404: NOT_FOUND('event'),
        },
      },
    },
    async (request) => services.admin.redeliverOnce(request.params.eventId),
  );

  scope.get<{ Querystring: Paging }>(
    '/api/events/cron-triggers',
    {
      schema: {
        tags: TAGS,
        summary: 'Cron triggers, with their next scheduled time',
        querystring: PAGING_QUERY,
        response: { 200: pageOf(CRON_TRIGGER, { total: { type: 'integer' } }), 400: BAD_INPUT, ...SESSION_ERRORS },
      },
    },
    async (request) => slice(await services.admin.cronTriggers(), request.query),
  );

  scope.get<{ Querystring: Paging & { status?: string; cronTrigger?: string } }>(
    '/api/events/scheduled',
    {
      schema: {
        tags: TAGS,
        summary: 'Scheduled events (of cron triggers and one-off), latest scheduled time first',
        querystring: {
          type: 'object',
          additionalProperties: false,
          properties: { ...PAGING_PROPERTIES, status: { type: 'string', enum: SCHEDULED_STATUSES }, cronTrigger: TRIGGER_NAME },
        },
        response: { 200: pageOf(SCHEDULED_EVENT), 400: BAD_INPUT, ...SESSION_ERRORS },
      },
    },
    async (request) => {
      const { limit, offset, status, cronTrigger } = request.query;
      return paged(await services.admin.scheduled({ first: limit + 1, offset, status, cronTrigger }), { limit, offset });
    },
  );
}
