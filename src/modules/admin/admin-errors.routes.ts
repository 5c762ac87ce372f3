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

const LEVELS = ['fatal', 'error', 'warning', 'info', 'debug'];
const ERROR_STATUSES = ['unresolved', 'resolved', 'ignored'];
const INCIDENT_STATUSES = ['triggered', 'acknowledged', 'resolved'];
/** An error's id: its group's number. */
const ERROR_ID = { type: 'string', pattern: '^[1-9][0-9]{0,17}$', description: "An error's id (a positive whole number)" } as const;
const PROJECT_ID = { type: 'integer', minimum: 1, maximum: 2_147_483_647, description: "A project's id" } as const;
/** How many of an error's latest events its details show. */
const EVENTS_SHOWN = 10;

const PROJECT = {
  type: 'object',
  properties: {
    id: { type: 'integer' },
    name: { type: 'string' },
    slug: { type: 'string' },
    service: { type: 'string' },
    createdAt: DATE,
    openErrors: { type: 'integer', description: 'Unresolved errors' },
    lastSeen: { ...NULLABLE_DATE, description: 'The latest event of any of its errors' },
  },
  required: ['id', 'name', 'slug', 'service', 'createdAt', 'openErrors', 'lastSeen'],
} as const;

const PROJECT_REF = {
  type: 'object',
  properties: { id: PROJECT.properties.id, name: PROJECT.properties.name, slug: PROJECT.properties.slug, service: PROJECT.properties.service },
  required: ['id', 'name', 'slug', 'service'],
} as const;

const ERROR = {
  type: 'object',
  properties: {
    id: { type: 'string' },
    projectId: { type: 'integer' },
    message: { type: 'string' },
    type: nullable('string'),
    level: { type: 'string', enum: LEVELS },
    status: { type: 'string', enum: ERROR_STATUSES },
    occurrenceCount: { type: 'integer', description: 'Events grouped into this error' },
    firstSeen: DATE,
    lastSeen: DATE,
    lastRelease: nullable('string'),
    resolvedRelease: nullable('string'),
  },
  required: ['id', 'projectId', 'message', 'type', 'level', 'status', 'occurrenceCount', 'firstSeen', 'lastSeen'],
} as const;

const FRAME = {
  type: 'object',
  properties: {
    filename: nullable('string'),
    function: nullable('string'),
    module: nullable('string'),
    lineno: nullable('integer'),
    colno: nullable('integer'),
    inApp: { type: 'boolean' },
    source: nullable('string'),
  },
} as const;

const ERROR_EVENT = {
  type: 'object',
  properties: {
    eventId: { type: 'string' },
    occurredAt: DATE,
    level: { type: 'string' },
    environment: nullable('string'),
    release: nullable('string'),
    message: { type: 'string' },
    frames: { type: 'array', items: FRAME, description: 'The stack, outermost call first' },
  },
  required: ['eventId', 'occurredAt', 'level', 'environment', 'release', 'message', 'frames'],
} as const;

const INCIDENT = {
  type: 'object',
  properties: {
    id: { type: 'string' },
    projectId: { type: 'integer' },
    title: { type: 'string' },
    description: { type: 'string' },
    severity: { type: 'string' },
    status: { type: 'string', enum: INCIDENT_STATUSES },
    service: { type: 'string' },
    cause: { type: 'string' },
    alerts: { type: 'object', properties: { count: { type: 'integer' }, types: { type: 'array', items: { type: 'string' } } } },
    createdAt: DATE,
    createdBy: { type: 'string' },
    acknowledgedAt: NULLABLE_DATE,
    acknowledgedBy: nullable('string'),
    resolvedAt: NULLABLE_DATE,
    resolvedBy: nullable('string'),
  },
  required: ['id', 'projectId', 'title', 'severity', 'status', 'service', 'createdAt'],
} as const;

const SLO = {
  type: 'object',
  properties: {
    id: { type: 'string' },
    name: { type: 'string' },
    service: { type: 'string' },
    targetPercentage: { type: 'number' },
    windowDays: { type: 'integer' },
    errorBudgetAlertThreshold: { type: 'number' },
    status: { type: 'string', enum: ['ON_TRACK', 'AT_RISK', 'BREACHED'] },
    errorBudgetRemaining: { type: 'number' },
    currentBurnRate: { type: 'number' },
    totalEvents: { type: 'number' },
    badEvents: { type: 'number' },
    alerts: { type: 'array', items: { type: 'string' } },
  },
  required: ['id', 'name', 'service', 'targetPercentage', 'windowDays', 'status', 'errorBudgetRemaining', 'currentBurnRate'],
} as const;

/** A page of a cursor-paged list (errors, incidents, SLOs): `after` is the `endCursor` of the page before. */
const cursorPageOf = (item: object) => ({
  type: 'object',
  properties: { items: { type: 'array', items: item }, hasMore: { type: 'boolean' }, endCursor: nullable('string') },
  required: ['items', 'hasMore', 'endCursor'],
});
const CURSOR_PAGING = {
  limit: PAGING_PROPERTIES.limit,
  after: { type: 'string', maxLength: 200, description: 'The endCursor of the page before' },
} as const;
const PROJECT_PARAMS = { type: 'object', required: ['projectId'], properties: { projectId: PROJECT_ID } } as const;

const unpaged = <T>(page: { nodes: { node: T }[]; hasNextPage: boolean; endCursor: string | null }) => ({
  items: page.nodes.map(({ node }) => node),
  hasMore: page.hasNextPage,
  endCursor: page.endCursor,
});

/** Error tracking's views: projects, their grouped errors (with details and status changes), incidents and SLOs. */
export function adminErrorRoutes(scope: FastifyInstance, { errors: services }: Pick<AdminAreas, 'errors'>): void {
  const project = (id: number) => services.projects.findProject(id);

  scope.get<{ Querystring: Paging }>(
    '/api/errors/projects',
    {
      schema: {
        tags: TAGS,
        summary: 'Error-tracking projects, with their open errors',
        querystring: { type: 'object', additionalProperties: false, properties: PAGING_PROPERTIES },
        response: { 200: pageOf(PROJECT, { total: { type: 'integer' } }), 400: BAD_INPUT, ...SESSION_ERRORS },
      },
    },
    async (request) => {
      const { limit, offset } = request.query;
      const { total, items } = await services.projects.page(limit, offset);
      return { items, total, limit, offset, hasMore: offset + items.length < total };
    },
  );

  scope.get<{ Params: { projectId: number }; Querystring: { limit: number; after?: string; status?: string; level?: string; timeRange?: string } }>(
    '/api/errors/projects/:projectId/errors',
    {
      schema: {
        tags: TAGS,
        summary: "A project's errors (events grouped), newest first, filtered",
        params: PROJECT_PARAMS,
        querystring: {
          type: 'object',
          additionalProperties: false,
          properties: {
            ...CURSOR_PAGING,
            status: { type: 'string', enum: ERROR_STATUSES },
            level: { type: 'string', enum: LEVELS },
            timeRange: { type: 'string', enum: ['1h', '6h', '24h', '7d', '14d', '30d', '90d'], description: 'Seen within' },
          },
        },
        response: { 200: cursorPageOf(ERROR), 400: BAD_INPUT, ...SESSION_ERRORS, 404: NOT_FOUND('project') },
      },
    },
    async (request) => {
      const { id } = await project(request.params.projectId);
      const { limit, after, status, level, timeRange } = request.query;
      return unpaged(
        await services.errors.list(id, limit, after, {
          status: status as 'unresolved' | undefined,
          severity: level as 'error' | undefined,
          timeRange,
        }),
      );
    },
  );

  scope.get<{ Params: { errorId: string } }>(
    '/api/errors/errors/:errorId',
    {
      schema: {
        tags: TAGS,
        summary: 'An error, with its latest events (stack, environment, release)',
        params: { type: 'object', required: ['errorId'], properties: { errorId: ERROR_ID } },
        response: {
          200: {
            type: 'object',
            properties: { error: ERROR, project: PROJECT_REF, events: { type: 'array', items: ERROR_EVENT, description: `The latest ${EVENTS_SHOWN}` } },
            required: ['error', 'project', 'events'],
          },
          400: BAD_INPUT,
          ...SESSION_ERRORS,
          404: NOT_FOUND('error'),
        },
      },
    },
    async (request) => {
      const found = await services.errors.get(null, request.params.errorId);
      const [owner, events] = await Promise.all([project(found.projectId), services.errors.latestEvents(null, found.id, EVENTS_SHOWN)]);
      return { error: found, project: owner, events };
    },
  );

  scope.post<{ Params: { errorId: string; action: 'resolve' | 'ignore' | 'reopen' } }>(
    '/api/errors/errors/:errorId/:action',
    {
      schema: {
        tags: TAGS,
        summary: 'Resolve, ignore or reopen an error',
        description: 'A resolved error reopens when an event of a newer release (or, without releases, any new event) comes.',
        headers: CSRF_HEADER,
        body: NO_BODY,
        params: {
          type: 'object',
          required: ['errorId', 'action'],
          properties: { errorId: ERROR_ID, action: { type: 'string', enum: ['resolve', 'ignore', 'reopen'] } },
        },
        response: {
          200: { ...ERROR, description: 'The error after the change' },
          400: BAD_INPUT,
          ...CHANGE_ERRORS,
          404: NOT_FOUND('error'),
          409: error('Reopening an error that is not resolved or ignored (INVALID_TRANSITION)'),
        },
      },
    },
    async (request) => {
      const { errorId, action } = request.params;
      if (action === 'resolve') return services.errors.resolve(null, errorId);
      if (action === 'ignore') return services.errors.ignore(null, errorId);
      return services.errors.reopen(null, errorId);
    },
  );

  scope.get<{ Params: { projectId: number }; Querystring: { limit: number; after?: string; status?: string } }>(
    '/api/errors/projects/:projectId/incidents',
    {
      schema: {
        tags: TAGS,
        summary: "A project's incidents, newest first",
        params: PROJECT_PARAMS,
        querystring: {
          type: 'object',
          additionalProperties: false,
          properties: { ...CURSOR_PAGING, status: { type: 'string', enum: INCIDENT_STATUSES } },
        },
        response: { 200: cursorPageOf(INCIDENT), 400: BAD_INPUT, ...SESSION_ERRORS, 404: NOT_FOUND('project') },
      },
    },
    async (request) => {
      const { id } = await project(request.params.projectId);
      const { status, limit, after } = request.query;
      return unpaged(await services.incidents.list(id, status as 'triggered' | undefined, limit, after));
    },
  );

  scope.post<{ Params: { incidentId: string; action: 'acknowledge' | 'resolve' } }>(
    '/api/errors/incidents/:incidentId/:action',
    {
      schema: {
        tags: TAGS,
        summary: 'Acknowledge or resolve an incident',
        headers: CSRF_HEADER,
        body: NO_BODY,
        params: {
          type: 'object',
          required: ['incidentId', 'action'],
          properties: { incidentId: UUID_PARAM, action: { type: 'string', enum: ['acknowledge', 'resolve'] } },
        },
        response: {
          200: { ...INCIDENT, description: 'The incident after the change' },
          400: BAD_INPUT,
          ...CHANGE_ERRORS,
          404: NOT_FOUND('incident'),
          409: error('The incident is not in a state that takes this (INVALID_TRANSITION)'),
        },
      },
    },
    async (request) => {
      const { incidentId, action } = request.params;
      const actor = `admin dashboard (${request.adminSession!.session.username})`;
      return action === 'acknowledge' ? services.incidents.acknowledge(null, incidentId, actor) : services.incidents.resolve(null, incidentId, actor);
    },
  );

  scope.get<{ Params: { projectId: number }; Querystring: { limit: number; after?: string } }>(
    '/api/errors/projects/:projectId/slos',
    {
      schema: {
        tags: TAGS,
        summary: "A project's SLOs with their error budget and burn rate",
        params: PROJECT_PARAMS,
        querystring: { type: 'object', additionalProperties: false, properties: CURSOR_PAGING },
        response: { 200: cursorPageOf(SLO), 400: BAD_INPUT, ...SESSION_ERRORS, 404: NOT_FOUND('project') },
      },
    },
    async (request) => {
      const { id } = await project(request.params.projectId);
      const page = unpaged(await services.slos.list(id, request.query.limit, request.query.after));
      const figures = await services.slos.figuresOf(page.items);
      return { ...page, items: page.items.map((slo) => ({ ...slo, ...figures.get(slo.id) })) };
    },
  );
}
