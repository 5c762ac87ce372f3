import type { FastifyInstance } from 'fastify';
import { Kind, parse } from 'graphql';
import { assertedSession } from '../../platform/session';
import type { AdminServices } from './admin.services';
import { HISTORY_MINUTES, HISTORY_SERIES } from './admin-history.service';
import { CHANGE_ERRORS, CSRF_HEADER, error, SESSION_ERRORS, TAGS } from './admin.schemas';

const NUMBER_OR_NULL = { type: ['number', 'null'] } as const;

const HISTORY = {
  type: 'object',
  properties: {
    intervalSeconds: { type: 'integer', description: 'How often samples are taken (PLATFORM_ADMIN_METRICS_INTERVAL_SECONDS)' },
    minutes: { type: 'integer' },
    instance: {
      type: 'object',
      description: 'The instance that answered: the `instance` series are its own',
      properties: { hostname: { type: 'string' }, pid: { type: 'integer' } },
      required: ['hostname', 'pid'],
    },
    timestamps: { type: 'array', items: { type: 'number' }, description: 'When each sample was taken (milliseconds since the epoch), oldest first' },
    series: {
      type: 'array',
      items: {
        type: 'object',
        properties: {
          name: { type: 'string', enum: [...HISTORY_SERIES] },
          title: { type: 'string' },
          unit: { type: 'string' },
          scope: {
            type: 'string',
            enum: ['instance', 'cluster'],
            description: "instance: this instance's own counters; cluster: read from the database every instance shares",
          },
          description: { type: 'string' },
          values: { type: 'array', items: NUMBER_OR_NULL, description: 'One per timestamp; null where it could not be read' },
        },
        required: ['name', 'title', 'unit', 'scope', 'description', 'values'],
      },
    },
  },
  required: ['intervalSeconds', 'minutes', 'instance', 'timestamps', 'series'],
} as const;

const COLUMN = {
  type: 'object',
  properties: {
    name: { type: 'string' },
    field: { type: 'string', description: 'Its GraphQL field name' },
    scalar: { type: 'string', description: 'Its GraphQL scalar' },
    array: { type: 'boolean' },
    sqlType: { type: 'string' },
    nullable: { type: 'boolean' },
    primaryKey: { type: 'boolean' },
  },
  required: ['name', 'field', 'scalar', 'array', 'sqlType', 'nullable', 'primaryKey'],
} as const;

const NAME_OR_NULL = { type: ['string', 'null'] } as const;

const TABLE = {
  type: 'object',
  properties: {
    schema: { type: 'string' },
    name: { type: 'string' },
    key: { type: 'string', description: '`schema.name`' },
    typeName: { type: 'string', description: 'The GraphQL type of its rows: `<typeName>_bool_exp`, `_order_by`, `_set_input`, `_pk_columns_input` follow it' },
    roots: {
      type: 'object',
      properties: { select: { type: 'string' }, selectAggregate: { type: 'string' }, selectByPk: NAME_OR_NULL, updateByPk: NAME_OR_NULL },
      required: ['select', 'selectAggregate', 'selectByPk', 'updateByPk'],
    },
    columns: { type: 'array', items: COLUMN },
  },
  required: ['schema', 'name', 'key', 'typeName', 'roots', 'columns'],
} as const;

const GRAPHQL_ANSWER = {
  type: 'object',
  properties: { data: {}, errors: { type: 'array', items: { type: 'object', additionalProperties: true } } },
  additionalProperties: true,
} as const;

/** Whether a document holds a mutation (logged: the admin changed data). Unparsable: GraphQL answers the syntax error. */
function mutationIn(query: string): boolean {
  try {
    return parse(query).definitions.some((definition) => definition.kind === Kind.OPERATION_DEFINITION && definition.operation === 'mutation');
  } catch {
    return false;
  }
}

/** The dashboard's charts (the last hour's samples) and its data browser (tracked tables, through the generated GraphQL API). */
export function chartsRoutes(scope: FastifyInstance, services: AdminServices): void {
  scope.get<{ Querystring: { minutes: number } }>(
    '/api/metrics/history',
    {
      schema: {
        tags: TAGS,
        summary: "The dashboard's charts: request and error rates, event backlog and job queue depth over the last hour",
        description:
          'Samples taken every PLATFORM_ADMIN_METRICS_INTERVAL_SECONDS by the instance answering, kept in memory for an hour. Rates are ' +
          "this instance's (scope `instance`); the event backlog and the job queue depth are every instance's, read from the database (scope `cluster`).",
        querystring: {
          type: 'object',
          additionalProperties: false,
          properties: { minutes: { type: 'integer', minimum: 1, maximum: HISTORY_MINUTES, default: HISTORY_MINUTES, description: 'How far back' } },
        },
        response: { 200: HISTORY, 400: error('minutes out of 1 to 60 (VALIDATION_ERROR)'), ...SESSION_ERRORS },
      },
    },
    async (request) => services.history.history(request.query.minutes),
  );

  scope.get(
    '/api/data/tables',
    {
      schema: {
        tags: TAGS,
        summary: 'The tracked tables the data browser shows, with their columns and generated root fields',
        response: { 200: { type: 'object', properties: { tables: { type: 'array', items: TABLE } }, required: ['tables'] }, ...SESSION_ERRORS },
      },
    },
    async () => ({ tables: services.data.tables() }),
  );

  scope.post<{ Body: { query: string; variables?: Record<string, unknown> | null; operationName?: string | null } }>(
    '/api/data/graphql',
    {
      schema: {
        tags: TAGS,
        summary: 'Run a GraphQL document against the served schema as the admin',
        description:
          'The generated API (as at /v1/graphql) with role admin, as the admin secret would give, which never leaves the server: the ' +
          "data browser's reads and edits. Errors are GraphQL errors (`errors`), with HTTP 400 for a document that cannot run.",
        headers: CSRF_HEADER,
        body: {
          type: 'object',
          required: ['query'],
          additionalProperties: false,
          properties: {
            query: { type: 'string', minLength: 1 },
            variables: { type: ['object', 'null'] },
            operationName: { type: ['string', 'null'] },
          },
        },
        response: {
          200: { ...GRAPHQL_ANSWER, description: 'A GraphQL response (errors of fields in `errors`)' },
          400: { ...GRAPHQL_ANSWER, description: 'A document that cannot run: its GraphQL errors (or VALIDATION_ERROR for a body without a query)' },
          ...CHANGE_ERRORS,
        },
      },
    },
    async (request, reply) => {
      if (mutationIn(request.body.query)) {
        request.log.info({ operationName: request.body.operationName ?? null, admin: request.adminSession?.session.username }, 'admin ran a GraphQL mutation');
      }
      return scope.serveGraphQL(request, reply, assertedSession({}));
    },
  );
}
