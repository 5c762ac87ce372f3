import type { FastifyInstance } from 'fastify';
import { CHANGE_ERRORS, CSRF_HEADER, error, NO_BODY, SESSION_ERRORS, TAGS } from './admin.schemas';
import {
  BAD_INPUT,
  DATE,
  NOT_FOUND,
  NULLABLE_DATE,
  nullable,
  pageOf,
  PAGING_PROPERTIES,
  UUID_PARAM,
  type AdminAreas,
  type Paging,
} from './admin-areas.schemas';

const JOB_STATES = ['created', 'retry', 'active', 'completed', 'cancelled', 'failed'] as const;
type JobState = (typeof JOB_STATES)[number];
const QUEUE_NAME = { type: 'string', pattern: '^[a-z][a-z0-9_-]{0,49}$', description: "A queue's name" } as const;
/** A job in the wrong state for the change: a conflict with its state, not bad input. */
const WRONG_STATE = { code: 'INVALID_STATE', status: 409 };

const QUEUE = {
  type: 'object',
  properties: {
    queue: { type: 'string' },
    declared: { type: 'boolean', description: 'A module of this server declares it (else: pg-boss holds jobs of a queue no module works)' },
    counts: { type: 'object', properties: Object.fromEntries(JOB_STATES.map((state) => [state, { type: 'integer' }])), required: [...JOB_STATES] },
  },
  required: ['queue', 'declared', 'counts'],
} as const;

const JOB = {
  type: 'object',
  properties: {
    id: { type: 'string' },
    queue: { type: 'string' },
    state: { type: 'string', enum: [...JOB_STATES] },
    data: { type: 'object', additionalProperties: true },
    error: nullable('string', { description: "The last attempt's error, while failed or waiting to retry" }),
    retryCount: { type: 'integer' },
    retryLimit: { type: 'integer' },
    createdOn: DATE,
    startAfter: DATE,
    startedOn: NULLABLE_DATE,
    completedOn: NULLABLE_DATE,
  },
  required: ['id', 'queue', 'state', 'data', 'error', 'retryCount', 'retryLimit', 'createdOn', 'startAfter', 'startedOn', 'completedOn'],
} as const;

/** The job queues' views: each queue's jobs by state, its jobs (failed first), retry and cancel. */
export function adminJobRoutes(scope: FastifyInstance, { jobs: services }: Pick<AdminAreas, 'jobs'>): void {
  scope.get(
    '/api/jobs/queues',
    {
      schema: {
        tags: TAGS,
        summary: 'Job queues, with their jobs by state',
        response: { 200: { type: 'object', properties: { queues: { type: 'array', items: QUEUE } }, required: ['queues'] }, ...SESSION_ERRORS },
      },
    },
    async () => ({ queues: await services.jobs.queues() }),
  );

  scope.get<{ Params: { queue: string }; Querystring: Paging & { state?: JobState } }>(
    '/api/jobs/queues/:queue/jobs',
    {
      schema: {
        tags: TAGS,
        summary: "A queue's jobs: failed ones first, then newest first",
        params: { type: 'object', required: ['queue'], properties: { queue: QUEUE_NAME } },
        querystring: { type: 'object', additionalProperties: false, properties: { ...PAGING_PROPERTIES, state: { type: 'string', enum: [...JOB_STATES] } } },
        response: { 200: pageOf(JOB), 400: BAD_INPUT, ...SESSION_ERRORS, 404: NOT_FOUND('queue') },
      },
    },
    async (request) => {
      const { limit, offset, state } = request.query;
      return { ...(await services.jobs.page(request.params.queue, { state, limit, offset })), limit, offset };
    },
  );

  scope.post<{ Params: { jobId: string; action: 'retry' | 'cancel' } }>(
    '/api/jobs/:jobId/:action',
    {
      schema: {
        tags: TAGS,
        summary: 'Retry a failed (or cancelled) job, or cancel one that has not finished',
        description: 'A retried job runs again (one more retry is allowed); a cancelled job that is running is not interrupted, but its outcome is dropped.',
        headers: CSRF_HEADER,
        body: NO_BODY,
        params: {
          type: 'object',
          required: ['jobId', 'action'],
          properties: { jobId: UUID_PARAM, action: { type: 'string', enum: ['retry', 'cancel'] } },
        },
        response: {
          200: { ...JOB, description: 'The job after the change' },
          400: BAD_INPUT,
          ...CHANGE_ERRORS,
          404: error('No job has this id (NOT_FOUND); finished jobs are archived after 12 hours'),
          409: error(
            'The job is in a state that does not take this (INVALID_STATE): only failed or cancelled jobs are retried, only waiting or active ones cancelled',
          ),
        },
      },
    },
    async (request) => {
      const { jobId, action } = request.params;
      return action === 'retry' ? services.jobs.retry(jobId, WRONG_STATE) : services.jobs.cancel(jobId, WRONG_STATE);
    },
  );
}
