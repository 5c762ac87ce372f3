import type { IncomingHttpHeaders } from 'node:http';
import { Readable, Transform } from 'node:stream';
import { HeaderMap, type HTTPGraphQLRequest } from '@apollo/server';
import type { FastifyReply, FastifyRequest } from 'fastify';
import fp from 'fastify-plugin';
import { GraphQLError, parse, type DocumentNode } from 'graphql';
import type { Logger } from 'pino';
import { Refusal } from '../common/refusal';
import { AcceptedQueryLane, type LaneContext } from '../graphql/accepted-queries';
import { createApolloServer, type ApolloSettings } from '../graphql/apollo';
import { OperationExecutor } from '../graphql/compiled-execution';
import type { GraphQLContext } from '../graphql/context';
import { DOCUMENT_TOO_LARGE, documentSizeError, type QueryLimits } from '../graphql/limits';
import { isGraphQLRequestMediaType, prefersHtml, unsupportedGraphQLMediaTypeMessage } from '../graphql/media-type';
import { graphqlMetricsPlugin } from '../graphql/metrics-plugin';
import { refusedRootFields, type RootFieldRule } from '../graphql/root-fields';
import type { SubscriptionSettings } from '../graphql/subscriptions';
import { isUploadRequest } from '../graphql/upload-body';
import type { Metrics } from '../platform/metrics';
import type { RateLimits } from '../platform/rate-limits';
import type { ServedSchema } from '../platform/served-schema';
import { resolveSession, type Session } from '../platform/session';
import { sendError } from './errors';

export const GRAPHQL_PATH = '/v1/graphql';

declare module 'fastify' {
  interface FastifyInstance {
    /**
     * Answers a GraphQL request with the one schema, as the caller's headers say or as `session`
     * (for routes that authenticate callers their own way, such as error tracking's secret keys),
     * refusing with 403 a document that selects a root field `rootFields` does not allow.
     */
    serveGraphQL(request: FastifyRequest, reply: FastifyReply, session?: Session, rootFields?: RootFieldRule): Promise<FastifyReply>;
  }
}

export interface GraphQLRouteOptions {
  logger: Logger;
  schema: ServedSchema;
  apollo: ApolloSettings;
  limits: QueryLimits;
  /** How callers' sessions are read (the admin secret, JWT keys, the unauthorised role). */
  session: SubscriptionSettings;
  rateLimits: RateLimits;
  metrics: Metrics;
  bodyLimit: number;
  /** The limit of an upload mutation from a signed-in caller (at least bodyLimit). */
  uploadBodyLimit: number;
  /** GraphiQL, for a browser asking for HTML; undefined without the API reference. */
  graphiql: ((request: FastifyRequest, reply: FastifyReply) => FastifyReply) | undefined;
}

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

/**
 * Apollo's view of a Fastify request. (The @as-integrations/fastify handler builds the query
 * string through new URL() from the Host header, which throws on a malformed Host.)
 */
function toGraphQLRequest(request: FastifyRequest): HTTPGraphQLRequest {
  const queryStart = request.url.indexOf('?');
  return {
    method: request.method,
    headers: new RequestHeaderMap(request.headers),
    body: request.body,
    search: queryStart === -1 ? '' : request.url.slice(queryStart),
  };
}

/**
 * GraphQL over HTTP at /v1/graphql (Apollo, and the accepted-query lane with compiled execution),
 * and `serveGraphQL` for routes that answer GraphQL as another caller (error tracking's /api/graphql).
 */
export const graphqlRoute = fp<GraphQLRouteOptions>(
  async (app, options) => {
    const { logger, limits, rateLimits, uploadBodyLimit, graphiql, session: sessionSettings } = options;
    const executor = new OperationExecutor(options.apollo.compiledExecution);
    const apollo = createApolloServer(options.schema, options.apollo, limits, logger, [graphqlMetricsPlugin(options.metrics)], executor);
    // Only with compiled execution: off, every request takes the reference path (Apollo, graphql-js).
    const acceptedQueries = options.apollo.compiledExecution.enabled ? new AcceptedQueryLane(executor, options.schema, limits, options.metrics) : undefined;
    await apollo.start();
    // app.close() stops accepting and waits for in-flight requests; Apollo stops after them.
    app.addHook('onClose', async () => apollo.stop());

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
        // A declared length within the limit needs no counting, which takes a stream pipeline per
        // request: Fastify answers 400 when the body differs from it.
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
  },
  { name: 'plinth-graphql-route' },
);
