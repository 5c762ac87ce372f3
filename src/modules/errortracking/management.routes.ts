import type { FastifyInstance, FastifyRequest } from 'fastify';
import { isTooManyRequests, Refusal, tooManyRequests } from '../../common/refusal';
import { sendError } from '../../http/errors';
import { requires } from '../../platform/fastify/security-schemes';
import { isGraphQLRequestMediaType, prefersHtml, unsupportedGraphQLMediaTypeMessage } from '../../graphql/media-type';
import { actorOf, SECRET_KEY_FIELDS, secretKeySession } from './access';
import type { ErrorTrackingServices } from './errortracking.services';
import type { TokenIdentity } from './projects.service';
import type { Slo } from './slos.service';
import { statusPageHtml } from './status-page.service';

const ERROR_BODY = {
  type: 'object',
  properties: {
    success: { type: 'boolean' },
    message: { type: 'string' },
    error_code: { type: 'string' },
    errors: { type: 'array', items: { type: 'object', properties: { field: { type: 'string' }, message: { type: 'string' }, code: { type: 'string' } } } },
  },
  required: ['success', 'message', 'error_code'],
} as const;
const errorResponse = (description: string) => ({ ...ERROR_BODY, description });
const RATE_LIMITED = { ...ERROR_BODY, description: 'More than ERRORS_API_RATE_LIMIT_PER_MINUTE calls this minute for the key; see Retry-After' };
const GRAPHQL_ERROR = (description: string) => ({
  description,
  type: 'object',
  properties: {
    errors: {
      type: 'array',
      items: { type: 'object', properties: { message: { type: 'string' }, extensions: { type: 'object', additionalProperties: true } } },
    },
  },
});
const AUTH_RESPONSES = {
  401: errorResponse('No secret key, or one that is unknown or revoked'),
  403: errorResponse('A DSN key: it authorises ingestion only'),
  429: RATE_LIMITED,
};

const nullable = (type: string) => ({ type: [type, 'null'] });
const INCIDENT_SCHEMA = {
  type: 'object',
  properties: {
    id: { type: 'string', format: 'uuid' },
    title: { type: 'string' },
    description: { type: 'string' },
    severity: { type: 'string', enum: ['critical', 'major', 'minor', 'info', 'maintenance'] },
    status: { type: 'string', enum: ['triggered', 'acknowledged', 'resolved'] },
    service: { type: 'string' },
    runbookUrl: nullable('string'),
    cause: { type: 'string' },
    causeId: nullable('string'),
    assignee: { type: ['object', 'null'], properties: { name: { type: 'string' }, email: nullable('string') } },
    alerts: { type: 'object', properties: { count: { type: 'integer' }, types: { type: 'array', items: { type: 'string' } } } },
    createdAt: { type: 'string', format: 'date-time' },
    createdBy: { type: 'string' },
    updatedAt: { type: 'string', format: 'date-time' },
    acknowledgedAt: nullable('string'),
    acknowledgedBy: nullable('string'),
    resolvedAt: nullable('string'),
    resolvedBy: nullable('string'),
    projectId: { type: 'integer' },
  },
  required: ['id', 'title', 'severity', 'status', 'service', 'createdAt', 'alerts'],
} as const;

const SLO_SCHEMA = {
  type: 'object',
  properties: {
    id: { type: 'string', format: 'uuid' },
    name: { type: 'string' },
    service: { type: 'string' },
    targetPercentage: { type: 'number' },
    windowDays: { type: 'integer' },
    errorBudgetAlertThreshold: { type: 'number' },
    currentBurnRate: { type: 'number' },
    errorBudgetRemaining: { type: 'number' },
    status: { type: 'string', enum: ['ON_TRACK', 'AT_RISK', 'BREACHED'] },
    alerts: { type: 'array', items: { type: 'string' } },
    totalEvents: { type: 'number' },
    badEvents: { type: 'number' },
  },
  required: ['id', 'name', 'service', 'targetPercentage', 'currentBurnRate', 'errorBudgetRemaining', 'status'],
} as const;

const STATUS_PAGE_SCHEMA = {
  type: 'object',
  properties: {
    page: { type: 'object', properties: { name: { type: 'string' }, slug: { type: 'string' }, updatedAt: { type: 'string', format: 'date-time' } } },
    status: { type: 'object', properties: { indicator: { type: 'string' }, description: { type: 'string' } } },
    components: {
      type: 'array',
      items: {
        type: 'object',
        properties: {
          name: { type: 'string' },
          status: { type: 'string', enum: ['operational', 'under_maintenance', 'degraded_performance', 'partial_outage', 'major_outage'] },
          lastUpdate: { type: 'string', format: 'date-time' },
        },
        required: ['name', 'status', 'lastUpdate'],
      },
    },
    incidents: {
      type: 'array',
      items: {
        type: 'object',
        properties: {
          id: { type: 'string' },
          title: { type: 'string' },
          status: { type: 'string' },
          severity: { type: 'string' },
          service: { type: 'string' },
          createdAt: { type: 'string', format: 'date-time' },
          updatedAt: { type: 'string', format: 'date-time' },
          resolvedAt: nullable('string'),
        },
      },
    },
  },
  required: ['components', 'incidents'],
} as const;

/**
 * The management API for secret keys (spec 2 §4.2, §5.6): GraphQL at /api/graphql, incidents,
 * SLO changes and reported outcomes, each call counted against the key's per-minute limit; and
 * the public status page.
 */
export function managementRoutes(app: FastifyInstance, services: ErrorTrackingServices): void {
  /** The secret key of the request, after its limit; refused when missing, unknown, revoked, a DSN key or over its limit. */
  const secretKeyOf = async (request: FastifyRequest): Promise<TokenIdentity> => {
    const match = /^Bearer\s+(\S+)\s*$/i.exec(request.headers.authorization ?? '');
    if (!match) throw new Refusal('UNAUTHENTICATED', 'a secret key is required: Authorization: Bearer sk_...', 401);
    const identity = await services.projects.authenticate(match[1]);
    if (typeof identity === 'string') {
      throw new Refusal('UNAUTHENTICATED', identity === 'revoked' ? 'the secret key has been revoked' : 'the secret key is not valid', 401);
    }
    if (identity.kind !== 'secret') throw new Refusal('FORBIDDEN', 'a DSN key authorises ingestion only; the management API takes a secret key', 403);
    const limiter = services.rateLimits.get('errorApi');
    try {
      await limiter.consume({ ip: request.ip, token: match[1] });
    } catch (error) {
      if (!isTooManyRequests(error)) throw error;
      const seconds = error.retryAfterSeconds;
      throw tooManyRequests(seconds, `this secret key made more than its ${limiter.rule.points} calls this minute; retry in ${seconds} s`);
    }
    return identity;
  };

  app.post('/api/graphql', {
    config: { errorFormat: 'graphql', checksOwnText: true, service: 'graphql' },
    schema: {
      tags: ['errors'],
      summary: 'GraphQL for a secret key',
      description:
        'The one schema (as at /v1/graphql), as the key’s project sees it: `errors`, `slos`, `incidents` and their mutations for that project only; a request selecting any other root field is refused whole (403). Counted against ERRORS_API_RATE_LIMIT_PER_MINUTE.',
      security: requires('secretKey'),
      body: {
        type: 'object',
        properties: { query: { type: 'string' }, variables: { type: ['object', 'null'] }, operationName: { type: ['string', 'null'] } },
        required: ['query'],
      },
      response: {
        200: { description: 'A GraphQL response', type: 'object', properties: { data: {}, errors: { type: 'array' } }, additionalProperties: true },
        400: GRAPHQL_ERROR('A request that is not GraphQL'),
        401: GRAPHQL_ERROR('No secret key, or one that is unknown or revoked'),
        403: GRAPHQL_ERROR('A DSN key (it authorises ingestion only), or a root field outside error tracking’s management fields (FORBIDDEN)'),
        415: GRAPHQL_ERROR('A body that is not application/json in UTF-8'),
        429: GRAPHQL_ERROR('More than ERRORS_API_RATE_LIMIT_PER_MINUTE calls this minute for the key; see Retry-After'),
      },
    },
    // As at /v1/graphql: a body of another media type is refused before it is read.
    preParsing: (request, reply, payload, done) => {
      const contentType = request.headers['content-type'];
      if (isGraphQLRequestMediaType(contentType)) return done(null, payload);
      sendError(reply, 415, 'UNSUPPORTED_MEDIA_TYPE', unsupportedGraphQLMediaTypeMessage(contentType!));
    },
    handler: async (request, reply) => {
      const identity = await secretKeyOf(request);
      return app.serveGraphQL(request, reply, secretKeySession(identity.projectId, identity.tokenId), SECRET_KEY_FIELDS);
    },
  });

  app.post('/api/incidents', {
    schema: {
      tags: ['errors'],
      summary: 'Open an incident',
      description:
        'Opens a TRIGGERED incident in the key’s project. `severity`: critical, major, minor, info or maintenance; `service` defaults to the project’s.',
      security: requires('secretKey'),
      body: {
        type: 'object',
        properties: {
          title: { type: 'string' },
          severity: { type: 'string' },
          description: { type: 'string' },
          service: { type: 'string' },
          runbookUrl: { type: 'string' },
        },
        required: ['title', 'severity'],
      },
      response: { 201: { ...INCIDENT_SCHEMA, description: 'The incident' }, 400: errorResponse('A field is missing or invalid'), ...AUTH_RESPONSES },
    },
    handler: async (request, reply) => {
      const identity = await secretKeyOf(request);
      const created = await services.incidents.create(
        identity.projectId,
        request.body as Record<string, unknown>,
        actorOf(secretKeySession(identity.projectId, identity.tokenId)),
      );
      return reply.code(201).send(created);
    },
  });

  const sloJson = async (slo: Slo) => ({ ...slo, ...(await services.slos.figuresOf([slo])).get(slo.id)! });

  app.patch('/api/slos/:id', {
    schema: {
      tags: ['errors'],
      summary: 'Change an SLO',
      description: '`targetPercentage` above 0 and below 100; `errorBudgetAlertThreshold` a fraction of the budget from 0 to 1. At least one.',
      security: requires('secretKey'),
      params: { type: 'object', properties: { id: { type: 'string', description: 'The SLO id' } }, required: ['id'] },
      body: {
        type: 'object',
        properties: { targetPercentage: { type: 'number' }, errorBudgetAlertThreshold: { type: 'number' } },
      },
      response: {
        200: { ...SLO_SCHEMA, description: 'The SLO as changed' },
        400: errorResponse('A value out of its range'),
        404: errorResponse('No such SLO in the key’s project'),
        ...AUTH_RESPONSES,
      },
    },
    handler: async (request) => {
      const identity = await secretKeyOf(request);
      const body = (request.body ?? {}) as { targetPercentage?: unknown; errorBudgetAlertThreshold?: unknown };
      const changed = await services.slos.update(identity.projectId, (request.params as { id: string }).id, {
        targetPercentage: body.targetPercentage,
        errorBudgetAlertThreshold: body.errorBudgetAlertThreshold,
      });
      return sloJson(changed);
    },
  });

  app.post('/api/outcomes', {
    schema: {
      tags: ['errors'],
      summary: 'Report good and bad events',
      description:
        'A service reports its own good and bad events for its SLOs; they count for the current minute. The service must be the key’s project’s or one of its SLOs’.',
      security: requires('secretKey'),
      body: {
        type: 'object',
        properties: {
          service: { type: 'string' },
          good: { type: 'integer', minimum: 0, maximum: 1_000_000_000 },
          bad: { type: 'integer', minimum: 0, maximum: 1_000_000_000 },
        },
        required: ['service', 'good', 'bad'],
      },
      response: {
        200: { description: 'Counted', type: 'object', properties: { service: { type: 'string' }, good: { type: 'integer' }, bad: { type: 'integer' } } },
        400: errorResponse('A count is missing or invalid'),
        ...AUTH_RESPONSES,
        403: errorResponse('A DSN key, or a service that is not the project’s'),
      },
    },
    handler: async (request) => {
      const identity = await secretKeyOf(request);
      const body = request.body as { service: string; good: number; bad: number };
      if (!(await services.slos.servicesOf(identity.projectId)).has(body.service)) {
        throw new Refusal('FORBIDDEN', `service "${body.service.slice(0, 100)}" is neither the project’s nor one of its SLOs’`, 403);
      }
      await services.slos.report(body.service, body.good, body.bad);
      return { service: body.service, good: body.good, bad: body.bad };
    },
  });

  app.get('/api/status-page/:slug', {
    schema: {
      tags: ['errors'],
      summary: 'Public status page',
      description:
        'A project’s status page (its slug): components with Statuspage’s statuses and the incidents open or resolved in the last 7 days. `Accept: text/html` gives the page for people. Public and unlimited; answers are reused for ERRORS_STATUS_PAGE_CACHE_SECONDS.',
      params: { type: 'object', properties: { slug: { type: 'string', maxLength: 200 } }, required: ['slug'] },
      response: {
        200: { ...STATUS_PAGE_SCHEMA, description: 'The status page (JSON, or HTML for Accept: text/html)' },
        404: errorResponse('No project has this slug'),
      },
    },
    handler: async (request, reply) => {
      const page = await services.statusPage.page((request.params as { slug: string }).slug);
      if (!page) throw new Refusal('NOT_FOUND', 'no status page has this slug', 404);
      reply.header('cache-control', `public, max-age=${services.statusPageCacheSeconds}`);
      if (prefersHtml(request.headers.accept)) return reply.type('text/html; charset=utf-8').send(statusPageHtml(page));
      return page;
    },
  });
}
