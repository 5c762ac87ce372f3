import type { IncomingHttpHeaders, IncomingMessage, ServerResponse } from 'node:http';
import { Readable, Transform } from 'node:stream';
import { HeaderMap, type HTTPGraphQLRequest } from '@apollo/server';
import Fastify, { type FastifyBaseLogger, type FastifyInstance, type FastifyReply, type FastifyRequest, type RouteOptions } from 'fastify';
import { GraphQLError, parse, type DocumentNode, type GraphQLSchema } from 'graphql';
import type { Logger } from 'pino';
import type { DataSource } from 'typeorm';
import { Refusal } from '../common/refusal';
import type { TrustProxy } from '../config';
import { AcceptedQueryLane, type LaneContext } from '../graphql/accepted-queries';
import { createApolloServer, type ApolloSettings } from '../graphql/apollo';
import { OperationExecutor } from '../graphql/compiled-execution';
import { graphqlMetricsPlugin, httpMetricsObserver, registerMetricsRoute, type Metrics, type MetricsAccess } from '../platform/metrics';
import type { GraphQLContext } from '../graphql/context';
import { createQueryLimits, DOCUMENT_TOO_LARGE, documentSizeError, type QueryLimitSettings } from '../graphql/limits';
import { isGraphQLRequestMediaType, prefersHtml, unsupportedGraphQLMediaTypeMessage } from '../graphql/media-type';
import { refusedRootFields, type RootFieldRule } from '../graphql/root-fields';
import { isUploadRequest } from '../graphql/upload-body';
import { attachSubscriptions, type SubscriptionSettings } from '../graphql/subscriptions';
import { clientAddress, trustFunction } from '../platform/client-address';
import type { RateLimits } from '../platform/rate-limits';
import { requestOutcomesObserver, type RequestOutcomes } from '../platform/request-outcomes';
import { keepRawBodies } from '../platform/signatures';
import type { ServedSchema } from '../platform/served-schema';
import type { ActionDefinition } from '../platform/actions';
import { actionUrl, registerActionRoute } from './actions';
import { CorsPolicy } from './cors';
import { answerClientError, installErrorHandling, sendError } from './errors';
import { registerHealthRoutes } from './health';
import { createHttpServer, identify, requestIdOf, type ServerTimeouts } from './incoming';
import { installInputTextCheck } from './input-text';
import { installJsonDepthCheck } from './json-depth';
import { requestLogger } from './request-logger';
import { observeResponses } from '../platform/fastify/response-observers';
import { addRouteHook, isRestRouteWithBody, READ_METHODS } from '../platform/fastify/route-hooks';
import { registerMetadataRoute } from './metadata';
import type { MetadataApi } from '../platform/metadata';
import { resolveSession, type Session } from '../platform/session';
import { runWithSessionVariables } from '../db/session-variables';

export const GRAPHQL_PATH = '/v1/graphql';

declare module 'fastify' {
  interface FastifyInstance {
    /** Serves a raw request as the main port does (its id, CORS, then routing): for other listeners (AUTH_PORT). */
    dispatch(request: IncomingMessage, response: ServerResponse): void;
    /** The routes registered on this app, in order, as Fastify's onRoute hook saw them. */
    routeTable: readonly RouteOptions[];
    /**
     * Answers a GraphQL request with the one schema, as the caller's headers say or as `session`
     * (for routes that authenticate callers their own way, such as error tracking's secret keys),
     * refusing with 403 a document that selects a root field `rootFields` does not allow.
     */
    serveGraphQL(request: FastifyRequest, reply: FastifyReply, session?: Session, rootFields?: RootFieldRule): Promise<FastifyReply>;
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
 * The API reference as this layer serves it; src/apidocs builds it (apiReference), above the
 * http layer, since it documents the whole application.
 */
export interface ApiReference {
  /** Paths any origin may read (CORS): the OpenAPI document. */
  openPaths: string[];
  /** Registers the reference's routes; called first, so that it documents the routes registered after it. */
  install(app: FastifyInstance, context: { schema: GraphQLSchema; actions: readonly { name: string; path: string }[]; logger: Logger }): Promise<void>;
  /** GraphiQL, for a browser asking the GraphQL endpoint for HTML. */
  graphiql(request: FastifyRequest, reply: FastifyReply): FastifyReply;
}

/**
 * Apollo's view of a Fastify request. (The @as-integrations/fastify handler builds the query
 * string through new URL() from the Host header, which throws on a malformed Host.)
 */
/** Whether the request carries valid credentials of a signed-in caller (not the unauthorised role). */
function isSignedIn(headers: FastifyRequest['headers'], settings: SubscriptionSettings): boolean {
  try {
    return resolveSession(headers, settings).authenticated;
  } catch {
    return false;
  }
}

/**
 * Apollo's view of a request's headers, read from Node's object when asked (Apollo reads two or
 * three) rather than copied into a map on every request. Listing or changing them copies them first.
 */
class RequestHeaderMap extends HeaderMap {
  private copied = false;

  constructor(private readonly incoming: IncomingHttpHeaders) {
    super();
  }

  override get(name: string): string | undefined {
    if (this.copied) return super.get(name);
    const value = this.incoming[name.toLowerCase()];
    return Array.isArray(value) ? value.join(', ') : value;
  }

  override has(name: string): boolean {
    return this.get(name) !== undefined;
  }

  override set(name: string, value: string): this {
    this.copy();
    return super.set(name, value);
  }

  override delete(name: string): boolean {
    this.copy();
    return super.delete(name);
  }

  override clear(): void {
    this.copy();
    super.clear();
  }

  override get size(): number {
    this.copy();
    return super.size;
  }

  override entries(): MapIterator<[string, string]> {
    this.copy();
    return super.entries();
  }

  override keys(): MapIterator<string> {
    this.copy();
    return super.keys();
  }

  override values(): MapIterator<string> {
    this.copy();
    return super.values();
  }

  override forEach(callback: (value: string, key: string, map: Map<string, string>) => void, thisArg?: unknown): void {
    this.copy();
    super.forEach(callback, thisArg);
  }

  override [Symbol.iterator](): MapIterator<[string, string]> {
    return this.entries();
  }

  private copy(): void {
    if (this.copied) return;
    this.copied = true;
    for (const [name, value] of Object.entries(this.incoming)) {
      if (value !== undefined) super.set(name, Array.isArray(value) ? value.join(', ') : value);
    }
  }
}

function toGraphQLRequest(request: FastifyRequest): HTTPGraphQLRequest {
  const queryStart = request.url.indexOf('?');
  return {
    method: request.method,
    headers: new RequestHeaderMap(request.headers),
    body: request.body,
    search: queryStart === -1 ? '' : request.url.slice(queryStart),
  };
}

/** How often, while the server closes, connections left idle by their last answer are closed. */
const IDLE_CONNECTION_SWEEP_MS = 100;

/**
 * Fastify closes the idle keep-alive connections when it starts closing; a connection whose
 * request is still in flight then goes idle after its answer and would hold shutdown up until the
 * keep-alive timeout. They are closed as they go idle (a sweep while closing costs requests nothing,
 * where a header added to every answer cost each one a hook).
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
 * /v1/graphql/subscriptions, the engine-compatible action routes, and the health probes.
 */
export async function buildHttpApp(options: HttpAppOptions): Promise<FastifyInstance> {
  const { logger, subscriptions: sessionSettings, rateLimits } = options;
  const trust = trustFunction(options.trustProxy ?? false);
  const { apiDocs } = options;
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
  // Route hooks (added as routes register, so before any route is). Each goes ahead of those added
  // before it: the depth check runs first, since the text check walks the body recursively.
  installInputTextCheck(app);
  installJsonDepthCheck(app, options.maxJsonDepth);
  // The caller's session variables reach the statements a request that may write runs (event
  // triggers record them): REST calls here, GraphQL mutations in the executor (graphql/apollo.ts),
  // with the session the GraphQL context resolved. A preHandler: the body's stream events
  // (parsing) run outside an earlier hook's context.
  addRouteHook(app, 'preHandler', isRestRouteWithBody, (request, reply, done) => {
    if (READ_METHODS.has(request.method)) return done();
    const { release } = runWithSessionVariables(() => {
      try {
        return resolveSession(request.headers, sessionSettings).variables;
      } catch {
        return null;
      }
    }, done);
    // Emitted once the response is sent or the connection is gone.
    reply.raw.once('close', release);
  });
  // First: it documents the routes registered after it.
  if (apiDocs) {
    const actions = options.actions.map((action) => ({ name: action.name, path: actionUrl(options.actionsRoute, action.name) }));
    await apiDocs.install(app, { schema: options.schema.base, actions, logger });
  }
  const graphiql = apiDocs ? (request: FastifyRequest, reply: FastifyReply) => apiDocs.graphiql(request, reply) : undefined;
  installErrorHandling(app);
  keepRawBodies(app);
  closeConnectionsWhenIdle(app);
  cors.registerPreflight(app);
  observeResponses(app, [httpMetricsObserver(options.metrics), requestOutcomesObserver(app, options.requestOutcomes)]);
  registerMetricsRoute(app, options.metrics, options.metricsAccess);

  registerHealthRoutes(app, options.dataSource);

  const limits = createQueryLimits(options.schema.base, options.limits);
  const executor = new OperationExecutor(options.apollo.compiledExecution);
  const apollo = createApolloServer(options.schema, options.apollo, limits, logger, [graphqlMetricsPlugin(options.metrics)], executor);
  // Only with compiled execution: off, every request takes the reference path (Apollo, graphql-js).
  const acceptedQueries = options.apollo.compiledExecution.enabled ? new AcceptedQueryLane(executor, options.schema, limits, options.metrics) : undefined;
  await apollo.start();
  // app.close() stops accepting and waits for in-flight requests; Apollo stops after them.
  app.addHook('onClose', async () => apollo.stop());

  const uploadBodyLimit = Math.max(options.bodyLimit, options.uploadBodyLimit);
  const bodyBytes = new WeakMap<FastifyRequest, number>();
  const tooLargeMessage =
    `GraphQL requests are limited to ${options.bodyLimit} bytes (GQL_GRAPHQL_BODY_LIMIT); ` +
    `only an upload mutation from a signed-in caller may send up to ${uploadBodyLimit} bytes (FILES_MAX_BYTES in base64)`;

  /**
   * Answers a GraphQL request, as the caller's headers say or as `session` (a route that
   * authenticated the caller itself), and only when its root fields are all ones `rootFields` allows.
   */
  const serveGraphQL = async (request: FastifyRequest, reply: FastifyReply, session?: Session, rootFields?: RootFieldRule) => {
    const query = request.method === 'GET' ? (request.query as { query?: unknown }).query : (request.body as { query?: unknown } | null)?.query;
    const tooLarge = typeof query === 'string' ? documentSizeError(query, limits) : undefined;
    if (tooLarge) return sendError(reply, 400, DOCUMENT_TOO_LARGE, tooLarge.message);
    if (rootFields) {
      // Checked on the text itself: a persisted query's hash alone would be looked up past the rule.
      if (typeof query !== 'string') return sendError(reply, 400, 'BAD_REQUEST', 'The request must carry its query text');
      let document: DocumentNode | undefined;
      try {
        document = parse(query, limits.parseOptions);
      } catch {
        // Apollo parses it again and answers the syntax error; nothing runs.
      }
      const refused = document ? refusedRootFields(options.schema.current, document, rootFields) : [];
      if (refused.length > 0) return sendError(reply, 403, 'FORBIDDEN', `${rootFields.caller} may not use ${refused.join(', ')}`);
    }
    let context: LaneContext | undefined;
    const contextOnce = () =>
      (context ??= {
        session: session ?? resolveSession(request.headers, sessionSettings),
        requestId: request.id,
        logger: request.log,
        clientIp: request.ip,
        rateLimits,
        idempotencyKey: request.headers['idempotency-key'],
        requestHeaders: request.headers,
      });
    if (acceptedQueries && request.method === 'POST') {
      const answer = await acceptedQueries.answer(request.body, request.headers.accept, contextOnce);
      if (answer) return reply.headers(answer.headers).send(answer.body);
    }
    const response = await apollo.executeHTTPGraphQLRequest({
      httpGraphQLRequest: toGraphQLRequest(request),
      context: async (): Promise<GraphQLContext> => {
        try {
          return contextOnce();
        } catch (error) {
          if (!(error instanceof Refusal)) throw error;
          // Before anything runs, the request itself is refused: its status is the answer's.
          throw new GraphQLError(error.message, { extensions: { ...error.extensions, http: { status: error.status } } });
        }
      },
    });
    for (const [name, value] of response.headers) reply.header(name, value);
    reply.code(response.status ?? 200);
    if (response.body.kind === 'complete') {
      // A masked failure under HTTP 200 is still the server's: it counts against the SLOs.
      if (response.body.string.includes('"INTERNAL_SERVER_ERROR"')) request.unexpectedFailure = true;
      return reply.send(response.body.string);
    }
    return reply.send(Readable.from(response.body.asyncIterator));
  };
  app.decorate('serveGraphQL', serveGraphQL);

  app.route({
    method: ['GET', 'POST'],
    url: GRAPHQL_PATH,
    // Arguments are checked per root field (guardRootArgumentText), where the field is known.
    config: { errorFormat: 'graphql', checksOwnText: true, service: 'graphql' },
    // Any GraphQL body goes: the API reference documents this route by hand, from the schema.
    schema: { hide: true },
    // Uploads may be larger than ordinary requests; the handler holds the others to bodyLimit.
    bodyLimit: uploadBodyLimit,
    // A large body is read only from a caller who may upload (signed in), and never past the upload
    // limit, whether it declares its length or comes in chunks; one hook, before the body is read,
    // and with a callback (an async hook costs every request a promise, and each hook type a trip
    // through Fastify's hook runner).
    preParsing: (request, reply, payload, done) => {
      const contentType = request.headers['content-type'];
      if (request.method === 'POST' && !isGraphQLRequestMediaType(contentType)) {
        sendError(reply, 415, 'UNSUPPORTED_MEDIA_TYPE', unsupportedGraphQLMediaTypeMessage(contentType!));
        return;
      }
      const declared = request.headers['content-length'];
      const declaredBytes = Number(declared ?? 0);
      const withinLimit = declaredBytes <= options.bodyLimit;
      if (!withinLimit && (declaredBytes > uploadBodyLimit || !isSignedIn(request.headers, sessionSettings))) {
        sendError(reply, 413, 'PAYLOAD_TOO_LARGE', tooLargeMessage);
        return;
      }
      // A declared length within the limit needs no counting (a stream pipeline per request cost
      // an eighth of the request's CPU): Fastify answers 400 when the body differs from it.
      if (request.method !== 'POST' || (declared !== undefined && withinLimit)) return done(null, payload);
      // Counts the bytes received (chunked bodies have no Content-Length to go by), and stops
      // reading at the limit for a caller who may not upload: the parser then fails with the 413.
      let received = 0;
      let mayUpload: boolean | undefined;
      const counter = new Transform({
        transform(chunk: Buffer, _encoding, callback) {
          received += chunk.length;
          bodyBytes.set(request, received);
          if (received > options.bodyLimit && !(mayUpload ??= isSignedIn(request.headers, sessionSettings))) {
            payload.unpipe(counter);
            callback(Object.assign(new Error(tooLargeMessage), { statusCode: 413 }));
            return;
          }
          callback(null, chunk);
        },
      });
      // Not pipeline(): a failing counter would destroy the request, and its socket with the answer.
      payload.on('error', (error) => counter.destroy(error));
      payload.pipe(counter);
      done(null, counter);
    },
    handler: async (request, reply) => {
      if (graphiql && request.method === 'GET' && prefersHtml(request.headers.accept)) return graphiql(request, reply);
      if ((bodyBytes.get(request) ?? 0) > options.bodyLimit) {
        if (!isUploadRequest(options.schema.base, request.body) || !isSignedIn(request.headers, sessionSettings)) {
          return sendError(reply, 413, 'PAYLOAD_TOO_LARGE', tooLargeMessage);
        }
      }
      return serveGraphQL(request, reply);
    },
  });

  for (const action of options.actions) {
    registerActionRoute(
      app,
      { prefix: options.actionsRoute, adminSecret: sessionSettings.adminSecret, rateLimits, schema: options.schema.base, uploadBodyLimit, unauthorizedRole: sessionSettings.unauthorizedRole },
      action,
    );
  }

  registerMetadataRoute(app, { adminSecret: sessionSettings.adminSecret, api: options.metadata });
  options.routes(app);

  const ws = attachSubscriptions(app.server, () => options.schema.current, sessionSettings, limits, logger, {
    clientIp: (request) => clientAddress(request, trust),
    rateLimits,
  });
  app.addHook('preClose', async () => ws.close());
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
  return app;
}
