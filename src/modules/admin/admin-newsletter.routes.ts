import type { FastifyInstance } from 'fastify';
import { Refusal } from '../../common/refusal';
import { SESSION_ERRORS, TAGS } from './admin.schemas';
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

const SUBSCRIBER_STATUSES = ['pending', 'active', 'unsubscribed'];

const SUBSCRIBER = {
  type: 'object',
  properties: {
    id: { type: 'string' },
    email: { type: 'string' },
    name: nullable('string'),
    source: nullable('string'),
    is_verified: { type: 'boolean' },
    status: { type: 'string' },
    subscribed_at: NULLABLE_DATE,
    unsubscribed_at: NULLABLE_DATE,
    created_at: DATE,
    confirmations_sent: { type: 'integer' },
  },
  required: ['id', 'email', 'is_verified', 'status', 'created_at'],
} as const;

const ISSUE = {
  type: 'object',
  properties: {
    id: { type: 'string' },
    issue_number: { type: 'integer' },
    status: { type: 'string', enum: ['sending', 'sent'] },
    recipients: { type: 'integer' },
    pending: { type: 'integer' },
    sent: { type: 'integer' },
    skipped: { type: 'integer' },
    failed: { type: 'integer' },
    requested_by: { type: 'string', description: 'Who asked for it: a person, the CLI, or the schedule' },
    created_at: DATE,
    completed_at: NULLABLE_DATE,
  },
  required: ['id', 'issue_number', 'status', 'recipients', 'pending', 'sent', 'skipped', 'failed', 'requested_by', 'created_at', 'completed_at'],
} as const;

const MAIL = {
  type: 'object',
  properties: {
    id: { type: 'string' },
    template: { type: 'string' },
    status: { type: 'string' },
    due_at: DATE,
    sent_at: NULLABLE_DATE,
    issue_number: nullable('integer'),
  },
  required: ['id', 'template', 'status', 'due_at', 'sent_at', 'issue_number'],
} as const;

/** The newsletter's views: subscribers (with their mails), the counts per status, and the issues with the schedule. */
export function adminNewsletterRoutes(scope: FastifyInstance, { newsletter: services }: Pick<AdminAreas, 'newsletter'>): void {
  scope.get<{ Querystring: Paging & { search?: string; status?: string; verified?: boolean } }>(
    '/api/newsletter/subscribers',
    {
      schema: {
        tags: TAGS,
        summary: 'Newsletter subscribers, newest first, searched and filtered; with the counts per status',
        querystring: {
          type: 'object',
          additionalProperties: false,
          properties: {
            ...PAGING_PROPERTIES,
            search: { type: 'string', maxLength: 254, description: 'Part of the address, any case' },
            status: { type: 'string', enum: SUBSCRIBER_STATUSES },
            verified: { type: 'boolean' },
          },
        },
        response: {
          200: pageOf(SUBSCRIBER, {
            total: { type: 'integer', description: 'Subscribers matching the search and filters' },
            counts: {
              type: 'array',
              items: {
                type: 'object',
                properties: { status: { type: 'string' }, count: { type: 'integer' }, verified: { type: 'integer' } },
                required: ['status', 'count', 'verified'],
              },
            },
            configured: { type: 'boolean', description: 'The newsletter is configured (else its routes answer 503 and nothing is sent)' },
          }),
          400: BAD_INPUT,
          ...SESSION_ERRORS,
        },
      },
    },
    async (request) => {
      const { limit, offset, search, status, verified } = request.query;
      const [found, counts] = await Promise.all([
        services.admin.subscribers({ first: limit, offset, search: search?.trim() || null, status: status as 'active' | undefined, verified }),
        services.admin.counts(),
      ]);
      return {
        items: found.items,
        total: found.total,
        limit,
        offset,
        hasMore: offset + found.items.length < found.total,
        counts,
        configured: services.configurationProblem === undefined,
      };
    },
  );

  scope.get<{ Params: { subscriberId: string } }>(
    '/api/newsletter/subscribers/:subscriberId',
    {
      schema: {
        tags: TAGS,
        summary: 'A subscriber, with its mails (confirmation, series, issues), newest first',
        params: { type: 'object', required: ['subscriberId'], properties: { subscriberId: UUID_PARAM } },
        response: {
          200: { type: 'object', properties: { subscriber: SUBSCRIBER, mails: { type: 'array', items: MAIL } }, required: ['subscriber', 'mails'] },
          400: BAD_INPUT,
          ...SESSION_ERRORS,
          404: NOT_FOUND('subscriber'),
        },
      },
    },
    async (request) => {
      const subscriber = await services.admin.subscriberById(request.params.subscriberId);
      if (!subscriber) throw new Refusal('NOT_FOUND', `no subscriber has the id ${request.params.subscriberId}`, 404);
      return { subscriber, mails: await services.admin.mailsOf(subscriber.id) };
    },
  );

  scope.get<{ Querystring: Paging }>(
    '/api/newsletter/issues',
    {
      schema: {
        tags: TAGS,
        summary: 'Newsletter issues with the progress of their send, newest first; and the issue schedule',
        querystring: { type: 'object', additionalProperties: false, properties: PAGING_PROPERTIES },
        response: {
          200: pageOf(ISSUE, {
            schedule: {
              type: 'object',
              properties: { scheduled: { type: 'boolean' }, intervalDays: { type: 'integer' }, nextDueAt: NULLABLE_DATE },
              required: ['scheduled', 'intervalDays', 'nextDueAt'],
              description: 'NEWSLETTER_ISSUE_SCHEDULE_VARS_FILE set: the next issue is sent every intervalDays',
            },
          }),
          400: BAD_INPUT,
          ...SESSION_ERRORS,
        },
      },
    },
    async (request) => {
      const { limit, offset } = request.query;
      const [issues, schedule] = await Promise.all([services.admin.issues({ first: limit + 1, offset }), services.issueSchedule()]);
      return { ...paged(issues, { limit, offset }), schedule };
    },
  );
}
