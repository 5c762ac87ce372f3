import { randomUUID } from 'node:crypto';
import { Readable } from 'node:stream';
import { HeaderMap, type HTTPGraphQLRequest } from '@apollo/server';
import Fastify, { type FastifyBaseLogger, type FastifyInstance, type FastifyRequest, type RouteOptions } from 'fastify';
import { GraphQLError, type GraphQLSchema } from 'graphql';
import type { Logger } from 'pino';
import type { DataSource } from 'typeorm';
import { OPENAPI_PATH } from '../apidocs/openapi';
import { graphiqlResponder, installApiReference, type ApiReferenceOptions } from '../apidocs/routes';
import type { TrustProxy } from '../config';
import { createApolloServer, type ApolloSettings } from '../graphql/apollo';
import { graphqlMetricsPlugin, installHttpMetrics, registerMetricsRoute, type Metrics, type MetricsAccess } from '../platform/metrics';
import type { GraphQLContext } from '../graphql/context';
import { createQueryLimits, DOCUMENT_TOO_LARGE, documentSizeError, type QueryLimitSettings } from '../graphql/limits';
import { prefersHtml } from '../graphql/media-type';
import { attachSubscriptions, type SubscriptionSettings } from '../graphql/subscriptions';
import { clientAddress, trustFunction } from '../platform/client-address';
import type { RateLimits } from '../platform/rate-limits';
import { installRawBodyParser } from '../platform/signatures';
import { actionUrl, registerActionRoute, type ActionDefinition } from './actions';
import { installCors } from './cors';
import { installErrorHandling, sendError } from './errors';
import { registerHealthRoutes } from './health';
import { installInputTextCheck } from './input-text';
import { registerMetadataRoute } from './metadata';
import type { MetadataApi } from '../platform/metadata';
import { resolveSession, SessionError } from './session';
import { runWithSessionVariables } from '../db/session-variables';

export const GRAPHQL_PATH = '/v1/graphql';

declare module 'fastify' {
  interface FastifyInstance {
    /** The routes registered on this app, in order, as Fastify's onRoute hook saw them. */
    routeTable: readonly RouteOptions[];
  }
}

export interface HttpAppOptions {
  logger: Logger;
  schema: GraphQLSchema;
  dataSource: DataSource;
  apollo: ApolloSettings;
  limits: QueryLimitSettings;
  subscriptions: SubscriptionSettings;
  bodyLimit: number;
  corsOrigins: string[] | '*';
  actionsRoute: string;
  actions: ActionDefinition[];
  metrics: Metrics;
  metricsAccess: MetricsAccess;
  /** Registers the modules' own REST routes. */
  routes(app: FastifyInstance): void;
  /** TRUST_PROXY: which proxies' X-Forwarded-For gives the client address. */
  trustProxy: TrustProxy;
  /** The named limits for resolvers and action routes. */
  rateLimits: RateLimits;
  /** The metadata API at POST /v1/metadata. */
  metadata: MetadataApi;
  /** The API reference (/api-docs, the page, GraphiQL), when API_DOCS_ENABLED. */
  apiDocs: ApiReferenceOptions;
}

/**
 * Apollo's view of a Fastify request. (The @as-integrations/fastify handler builds the query
 * string through new URL() from the Host header, which throws on a malformed Host.)
 */
function toGraphQLRequest(request: FastifyRequest): HTTPGraphQLRequest {
  const headers = new HeaderMap();
  for (const [name, value] of Object.entries(request.headers)) {
    if (value !== undefined) headers.set(name, Array.isArray(value) ? value.join(', ') : value);
  }
  const queryStart = request.url.indexOf('?');
  return {
    method: request.method,
    headers,
    body: request.body,
    search: queryStart === -1 ? '' : request.url.slice(queryStart),
  };
}

/** A request id from X-Request-Id when it is sane, otherwise a new UUID. */
function requestId(header: string | string[] | undefined): string {
  return typeof header === 'string' && /^[\w.:-]{1,128}$/.test(header) ? header : randomUUID();
}

/**
 * The Fastify application: GraphQL over HTTP at /v1/graphql, graphql-ws at
 * /v1/graphql/subscriptions, the engine-compatible action routes, and the health probes.
 */
export async function buildHttpApp(options: HttpAppOptions): Promise<FastifyInstance> {
  const { logger, subscriptions: sessionSettings, rateLimits } = options;
  const trust = trustFunction(options.trustProxy ?? false);
  const app = Fastify({
    loggerInstance: logger as FastifyBaseLogger,
    bodyLimit: options.bodyLimit,
    genReqId: (request) => requestId(request.headers['x-request-id']),
    routerOptions: { ignoreTrailingSlash: true },
    trustProxy: trust,
  });
  // Every route as registered, with its schemas: the route-coverage and fuzz tests walk it.
  const routeTable: RouteOptions[] = [];
  app.decorate('routeTable', routeTable);
  app.addHook('onRoute', (route) => void routeTable.push(route));
  const apiDocs = options.apiDocs.settings.enabled;
  // First: it documents the routes registered after it.
  if (apiDocs) {
    const actions = options.actions.map((action) => ({ name: action.name, path: actionUrl(options.actionsRoute, action.name) }));
    await installApiReference(app, options.apiDocs, { schema: options.schema, actions, logger });
  }
  const graphiql = apiDocs ? graphiqlResponder(options.apiDocs.settings) : undefined;
  installErrorHandling(app);
  installRawBodyParser(app);
  // Fastify closes idle keep-alive connections when it starts closing; a connection whose
  // request is still in flight would stay open after its response and hold shutdown up.
  let closing = false;
  app.addHook('preClose', async () => {
    closing = true;
  });
  // A callback hook: on every response, an async one would cost a promise for two headers.
  app.addHook('onSend', (request, reply, payload, done) => {
    reply.header('x-request-id', request.id);
    if (closing) reply.header('connection', 'close');
    done(null, payload);
  });
  // The caller's session variables reach the statements the request runs (event triggers record
  // them). A preHandler: the body's stream events (parsing) run outside an earlier hook's context.
  app.addHook('preHandler', (request, _reply, done) =>
    runWithSessionVariables(() => {
      try {
        return resolveSession(request.headers, sessionSettings).variables;
      } catch {
        return null;
      }
    }, done),
  );
  installCors(app, options.corsOrigins, apiDocs ? [OPENAPI_PATH] : []);
  installInputTextCheck(app);
  installHttpMetrics(app, options.metrics);
  registerMetricsRoute(app, options.metrics, options.metricsAccess);

  registerHealthRoutes(app, options.dataSource);

  const limits = createQueryLimits(options.schema, options.limits);
  const apollo = createApolloServer(options.schema, options.apollo, limits, logger, [
    graphqlMetricsPlugin(options.metrics),
  ]);
  await apollo.start();
  // app.close() stops accepting and waits for in-flight requests; Apollo stops after them.
  app.addHook('onClose', async () => apollo.stop());

  app.route({
    method: ['GET', 'POST'],
    url: GRAPHQL_PATH,
    // Arguments are checked per root field (guardRootArgumentText), where the field is known.
    config: { errorFormat: 'graphql', checksOwnText: true },
    // Any GraphQL body goes: the API reference documents this route by hand, from the schema.
    schema: { hide: true },
    handler: async (request, reply) => {
      if (graphiql && request.method === 'GET' && prefersHtml(request.headers.accept)) return graphiql(request, reply);
      const query = request.method === 'GET' ? (request.query as { query?: unknown }).query : (request.body as { query?: unknown } | null)?.query;
      const tooLarge = typeof query === 'string' ? documentSizeError(query, limits) : undefined;
      if (tooLarge) return sendError(reply, 400, DOCUMENT_TOO_LARGE, tooLarge.message);
      const response = await apollo.executeHTTPGraphQLRequest({
        httpGraphQLRequest: toGraphQLRequest(request),
        context: async (): Promise<GraphQLContext> => {
          try {
            return {
              session: resolveSession(request.headers, sessionSettings),
              requestId: request.id,
              logger: request.log,
              clientIp: request.ip,
              rateLimits,
            };
          } catch (error) {
            if (!(error instanceof SessionError)) throw error;
            throw new GraphQLError(error.message, { extensions: { code: error.code, http: { status: error.status } } });
          }
        },
      });
      for (const [name, value] of response.headers) reply.header(name, value);
      reply.code(response.status ?? 200);
      if (response.body.kind === 'complete') return reply.send(response.body.string);
      return reply.send(Readable.from(response.body.asyncIterator));
    },
  });

  for (const action of options.actions) {
    registerActionRoute(app, { prefix: options.actionsRoute, adminSecret: sessionSettings.adminSecret, rateLimits, schema: options.schema }, action);
  }

  registerMetadataRoute(app, { adminSecret: sessionSettings.adminSecret, api: options.metadata });
  options.routes(app);

  const ws = attachSubscriptions(app.server, options.schema, sessionSettings, limits, logger, {
    clientIp: (request) => clientAddress(request, trust),
    rateLimits,
  });
  app.addHook('preClose', async () => ws.close());
  return app;
}
