import type { IncomingMessage, ServerResponse } from 'node:http';
import Fastify, { type FastifyBaseLogger, type FastifyInstance, type FastifyReply, type FastifyRequest, type RouteOptions } from 'fastify';
import fp from 'fastify-plugin';
import type { GraphQLSchema } from 'graphql';
import type { Logger } from 'pino';
import type { DataSource } from 'typeorm';
import type { TrustProxy } from '../config';
import type { ApolloSettings } from '../graphql/apollo';
import { createQueryLimits, type QueryLimitSettings } from '../graphql/limits';
import { attachSubscriptions, type SubscriptionSettings } from '../graphql/subscriptions';
import type { ActionDefinition } from '../platform/actions';
import { clientAddress, trustFunction } from '../platform/client-address';
import { observeResponses } from '../platform/fastify/response-observers';
import { sharedSchemaCompilers } from '../platform/fastify/schema-compilers';
import type { MetadataApi } from '../platform/metadata';
import type { Metrics, MetricsAccess } from '../platform/metrics';
import type { RateLimits } from '../platform/rate-limits';
import { requestOutcomesObserver, type RequestOutcomes } from '../platform/request-outcomes';
import type { ServedSchema } from '../platform/served-schema';
import { resolveSession } from '../platform/session';
import { keepRawBodies } from '../platform/signatures';
import { actionUrl, registerActionRoute } from './actions';
import { CorsPolicy } from './cors';
import { answerClientError, installErrorHandling } from './errors';
import { graphqlRoute } from './graphql-route';
import { registerHealthRoutes } from './health';
import { createHttpServer, identify, requestIdOf, type ServerTimeouts } from './incoming';
import { registerMetadataRoute } from './metadata';
import { httpMetricsObserver, registerMetricsRoute } from './metrics-route';
import { requestChecks } from './request-checks';
import { requestLogger } from './request-logger';

declare module 'fastify' {
  interface FastifyInstance {
    /** Serves a raw request as the main port does (its id, CORS, then routing): for other listeners (AUTH_PORT). */
    dispatch(request: IncomingMessage, response: ServerResponse): void;
    /** The routes registered on this app, in order, as Fastify's onRoute hook saw them. */
    routeTable: readonly RouteOptions[];
  }
}

export interface HttpAppOptions {
  logger: Logger;
  /** Served as it changes; its base documents the API and types Plinth's own action routes. */
  schema: ServedSchema;
  dataSource: DataSource;
  apollo: ApolloSettings;
  limits: QueryLimitSettings;
  subscriptions: SubscriptionSettings;
  bodyLimit: number;
  /** The body limit of requests carrying a file (upload mutations and their action routes). */
  uploadBodyLimit: number;
  /** The time a caller has to send a whole request (0: no bound). */
  requestTimeoutMs: number;
  /** How deep objects and arrays may nest in a REST body (REQUEST_MAX_JSON_DEPTH; GraphQL variables: `limits`). */
  maxJsonDepth: number;
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
  /** The API reference (/api-docs, the page, GraphiQL); undefined when API_DOCS_ENABLED is false. */
  apiDocs: ApiReference | undefined;
  /** Good and bad requests per service, for SLOs. */
  requestOutcomes: RequestOutcomes;
}

/**
 * The schema the public API reference documents: Plinth's own (`base`) and, as served `current`ly,
 * what a caller without credentials may use (the unauthorised role's view of the tracked tables),
 * so that the reference shows no table or column a reader could not query.
 */
export interface DocumentedSchema {
  readonly base: GraphQLSchema;
  readonly current: GraphQLSchema;
}

/**
 * The API reference as this layer serves it; src/apidocs builds it (apiReference), above the
 * http layer, since it documents the whole application.
 */
export interface ApiReference {
  /** Paths any origin may read (CORS): the OpenAPI document. */
  openPaths: string[];
  /** Registers the reference's routes; called first, so that it documents the routes registered after it. */
  install(app: FastifyInstance, context: { schema: DocumentedSchema; actions: readonly { name: string; path: string }[]; logger: Logger }): Promise<void>;
  /** GraphiQL, for a browser asking the GraphQL endpoint for HTML. */
  graphiql(request: FastifyRequest, reply: FastifyReply): FastifyReply;
}

/** How often, while the server closes, connections left idle by their last answer are closed. */
const IDLE_CONNECTION_SWEEP_MS = 100;

/**
 * Fastify closes the idle keep-alive connections when it starts closing; a connection whose
 * request is still in flight then goes idle after its answer and would hold shutdown up until the
 * keep-alive timeout. They are closed as they go idle (a sweep while closing costs requests nothing,
 * where a header added to every answer would cost each one a hook).
 */
function closeConnectionsWhenIdle(app: FastifyInstance): void {
  let sweep: NodeJS.Timeout | undefined;
  app.addHook('preClose', async () => {
    sweep = setInterval(() => app.server.closeIdleConnections(), IDLE_CONNECTION_SWEEP_MS);
    sweep.unref();
  });
  app.addHook('onClose', async () => clearInterval(sweep));
}

/**
 * The Fastify application: GraphQL over HTTP at /v1/graphql, graphql-ws at
 * /v1/graphql/subscriptions, the engine-compatible action routes, and the health probes. Its parts
 * are plugins registered in order: the route hooks before any route, the API reference before the
 * routes it documents, then the shared handling, GraphQL, the REST routes, and graphql-ws.
 */
export async function buildHttpApp(options: HttpAppOptions): Promise<FastifyInstance> {
  const { logger, subscriptions: sessionSettings, rateLimits, apiDocs } = options;
  const trust = trustFunction(options.trustProxy ?? false);
  const cors = new CorsPolicy(options.corsOrigins, apiDocs?.openPaths ?? []);
  /** What every request gets before routing, on whichever port it came (AUTH_PORT too): its id and CORS headers. */
  const beforeRouting = (request: IncomingMessage, response: ServerResponse) => {
    identify(request, response);
    cors.setHeaders(request, response);
  };
  const app = Fastify({
    loggerInstance: logger as FastifyBaseLogger,
    bodyLimit: options.bodyLimit,
    requestTimeout: options.requestTimeoutMs,
    genReqId: requestIdOf,
    childLoggerFactory: requestLogger,
    routerOptions: { ignoreTrailingSlash: true },
    trustProxy: trust,
    clientErrorHandler: answerClientError,
    schemaController: { compilersFactory: sharedSchemaCompilers },
    serverFactory: (route, settings) => createHttpServer(route, settings as ServerTimeouts, beforeRouting),
  });
  app.decorate('dispatch', (request: IncomingMessage, response: ServerResponse) => {
    beforeRouting(request, response);
    app.routing(request, response);
  });
  // Every route as registered, with its schemas: the route-coverage and fuzz tests walk it.
  const routeTable: RouteOptions[] = [];
  app.decorate('routeTable', routeTable);
  app.addHook('onRoute', (route) => void routeTable.push(route));
  const limits = createQueryLimits(options.schema.base, options.limits);
  const uploadBodyLimit = Math.max(options.bodyLimit, options.uploadBodyLimit);

  await app.register(requestChecks, { maxJsonDepth: options.maxJsonDepth, session: sessionSettings });
  if (apiDocs) {
    const actions = options.actions.map((action) => ({ name: action.name, path: actionUrl(options.actionsRoute, action.name) }));
    const anonymous = resolveSession({}, sessionSettings);
    const served = options.schema;
    const schema: DocumentedSchema = {
      get base() {
        return served.base;
      },
      get current() {
        return served.viewFor(served.current, anonymous);
      },
    };
    await app.register(fp(async (root) => apiDocs.install(root, { schema, actions, logger }), { name: 'plinth-api-reference' }));
  }
  await app.register(
    fp(
      async (root) => {
        installErrorHandling(root);
        keepRawBodies(root);
        closeConnectionsWhenIdle(root);
        cors.registerPreflight(root);
        observeResponses(root, [httpMetricsObserver(options.metrics), requestOutcomesObserver(root, options.requestOutcomes)]);
        registerMetricsRoute(root, options.metrics, options.metricsAccess);
        registerHealthRoutes(root, options.dataSource);
      },
      { name: 'plinth-server-basics' },
    ),
  );
  await app.register(graphqlRoute, {
    logger,
    schema: options.schema,
    apollo: options.apollo,
    limits,
    session: sessionSettings,
    rateLimits,
    metrics: options.metrics,
    bodyLimit: options.bodyLimit,
    uploadBodyLimit,
    graphiql: apiDocs ? (request: FastifyRequest, reply: FastifyReply) => apiDocs.graphiql(request, reply) : undefined,
  });
  await app.register(
    fp(
      async (root) => {
        const actionRoutes = {
          prefix: options.actionsRoute,
          adminSecret: sessionSettings.adminSecret,
          rateLimits,
          schema: options.schema.base,
          uploadBodyLimit,
          unauthorizedRole: sessionSettings.unauthorizedRole,
        };
        for (const action of options.actions) registerActionRoute(root, actionRoutes, action);
        registerMetadataRoute(root, { adminSecret: sessionSettings.adminSecret, api: options.metadata });
        options.routes(root);
      },
      { name: 'plinth-rest-routes' },
    ),
  );
  await app.register(
    fp(
      async (root) => {
        const ws = attachSubscriptions(root.server, options.schema, sessionSettings, limits, logger, {
          clientIp: (request) => clientAddress(request, trust),
          rateLimits,
        });
        root.addHook('preClose', async () => ws.close());
        options.metrics.addGauge(
          'plinth_graphql_subscription_groups',
          'graphql-ws subscriptions sharing one execution per event: the groups, and the subscribers in them',
          ['kind'],
          async () => {
            const { groups, members } = ws.groups();
            return [
              { labels: { kind: 'groups' }, value: groups },
              { labels: { kind: 'members' }, value: members },
            ];
          },
        );
      },
      { name: 'plinth-graphql-ws' },
    ),
  );
  return app;
}
