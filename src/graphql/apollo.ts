import { ApolloServer, type ApolloServerOptionsWithGateway, type ApolloServerPlugin, type GraphQLRequestListener } from '@apollo/server';
import {
  ApolloServerPluginCacheControlDisabled,
  ApolloServerPluginInlineTraceDisabled,
  ApolloServerPluginLandingPageDisabled,
} from '@apollo/server/plugin/disabled';
import { unwrapResolverError } from '@apollo/server/errors';
import { InMemoryLRUCache } from '@apollo/utils.keyvaluecache';
import { GraphQLError, type DocumentNode, type GraphQLFormattedError, type GraphQLSchema } from 'graphql';
import type { Logger } from 'pino';
import { isDatabaseUnavailable } from '../db/unavailable';
import { DATABASE_UNAVAILABLE_MESSAGE, INTERNAL_ERROR_MESSAGE } from '../common/error-messages';
import type { GraphQLContext } from './context';
import { documentHeapBytes } from './document-heap';
import type { QueryLimits } from './limits';
import { APPLICATION_JSON, chooseGraphQLMediaType, GRAPHQL_CACHE_CONTROL } from './media-type';
import { EXECUTED_OUTCOME, type LaneContext } from './accepted-queries';
import { OperationExecutor, type CompiledExecutionSettings } from './compiled-execution';
import { ServedSchema } from '../platform/served-schema';
import { countTakenIn } from '../platform/text-caches';
import { runWithSessionVariables } from '../db/session-variables';
import { SUBSCRIPTIONS_PATH } from './subscriptions';
import { executionKey, schemaServedTo, viewValidationErrors } from './role-views';
import { isVariableValueError } from './variable-errors';

export interface ApolloSettings {
  introspection: boolean;
  devMode: boolean;
  /** Bytes of parsed, validated documents kept so that repeated queries skip both. */
  documentCacheBytes: number;
  compiledExecution: CompiledExecutionSettings;
}

export function createApolloServer(
  schema: GraphQLSchema | ServedSchema,
  settings: ApolloSettings,
  limits: QueryLimits,
  logger: Logger,
  extraPlugins: ApolloServerPlugin<GraphQLContext>[] = [],
  executor = new OperationExecutor(settings.compiledExecution),
): ApolloServer<GraphQLContext> {
  return new ApolloServer<GraphQLContext>({
    gateway: servingGateway(schema, executor),
    introspection: settings.introspection,
    // Credentials are headers only (bearer token, admin secret), never cookies, so a cross-site
    // "simple" request can act only as the unauthorised role; GET queries must work for explorers.
    csrfPrevention: false,
    // The CLI owns signal handling and shuts down in order (src/cli/main.ts).
    stopOnTerminationSignals: false,
    includeStacktraceInErrorResponses: settings.devMode,
    validationRules: limits.rules,
    parseOptions: limits.parseOptions,
    // Apollo's own store is bounded at 30 MiB by the length of each document's JSON, a quarter
    // of what the document takes in memory; ours is a setting, counted in heap bytes.
    documentStore:
      settings.documentCacheBytes > 0
        ? new InMemoryLRUCache<DocumentNode>({ maxSize: settings.documentCacheBytes, sizeCalculation: countTakenIn(documentHeapBytes) })
        : null,
    logger: logger.child({ component: 'apollo' }),
    formatError: (formatted, error) => maskUnexpected(formatted, error, settings.devMode),
    plugins: [
      ApolloServerPluginLandingPageDisabled(),
      // No field sets cache hints; without this Apollo wraps every resolver to collect them.
      ApolloServerPluginCacheControlDisabled(),
      // Inline traces are for federation subgraphs, which Plinth is not; Apollo would load the
      // plugin anyway, with its protobuf encoder.
      ApolloServerPluginInlineTraceDisabled(),
      subscriptionsOverWebSocketOnly(),
      complexityLimit(limits),
      graphqlOverHttpStatus(),
      unexpectedErrorLogging(),
      ...extraPlugins,
    ],
  });
}

/**
 * Apollo's way to serve a schema that changes and to run operations its own way (a "gateway"):
 * each request is parsed, validated and executed against the schema current when it started,
 * and a new one replaces it for the requests after (with its own document cache keys). The
 * executor runs what Apollo has parsed, validated and resolved, with Apollo's context, on the
 * session's view of the schema when it has one (validated there first).
 */
function servingGateway(schema: GraphQLSchema | ServedSchema, executor: OperationExecutor): ApolloServerOptionsWithGateway<GraphQLContext>['gateway'] {
  let stop: (() => void) | undefined;
  return {
    onSchemaLoadOrUpdate(callback) {
      if (schema instanceof ServedSchema) {
        callback({ apiSchema: schema.current, coreSupergraphSdl: '' });
        stop = schema.onChange((apiSchema) => callback({ apiSchema, coreSupergraphSdl: '' }));
      } else {
        callback({ apiSchema: schema, coreSupergraphSdl: '' });
      }
      return () => stop?.();
    },
    load: async () => ({
      executor: (request) => {
        const executed = (request.context as LaneContext)[EXECUTED_OUTCOME];
        if (executed) return 'thrown' in executed ? Promise.reject(executed.thrown) : Promise.resolve(executed.result);
        // Apollo validated the document on the whole schema; a session served a view runs it there, if it is valid there too.
        const operationSchema = schemaServedTo(schema, request.schema, request.context.session);
        if (operationSchema !== request.schema) {
          const refused = viewValidationErrors(operationSchema, request.document);
          if (refused.length > 0) return Promise.resolve({ errors: refused.map(asValidationFailure) });
        }
        const execute = () =>
          Promise.resolve(
            executor.execute({
              schema: operationSchema,
              document: request.document,
              source: executionKey(schema, operationSchema, request.source),
              operation: request.operation,
              operationName: request.request.operationName ?? undefined,
              variables: request.request.variables,
              contextValue: request.context,
            }),
          );
        if (request.operation?.operation !== 'mutation') return execute();
        // A mutation's writes carry the caller's session variables (event triggers record them).
        const session = request.context.session;
        const { result, release } = runWithSessionVariables(() => session.variables, execute);
        return result.finally(release);
      },
    }),
    stop: async () => stop?.(),
  };
}

/** A validation error on a session's view, answered as Apollo answers its own (code and HTTP status). */
function asValidationFailure(error: GraphQLError): GraphQLError {
  return new GraphQLError(error.message, {
    nodes: error.nodes,
    source: error.source,
    positions: error.positions,
    extensions: { code: 'GRAPHQL_VALIDATION_FAILED', http: { status: 400 } },
  });
}

/**
 * Errors a resolver did not mean to show (anything that is not a GraphQLError with a code) keep
 * their place in the response but lose their message; dev mode adds the original under
 * extensions.internal, as Hasura's dev mode does. A database that cannot be reached is told as
 * SERVICE_UNAVAILABLE, so a client knows the same request may succeed later.
 */
function maskUnexpected(formatted: GraphQLFormattedError, error: unknown, devMode: boolean): GraphQLFormattedError {
  if (formatted.extensions?.code !== 'INTERNAL_SERVER_ERROR') return formatted;
  const original = unwrapResolverError(error);
  if (isUncodedClientError(original)) return { message: formatted.message, extensions: { code: 'BAD_REQUEST' } };
  if (isVariableValueError(original)) return { message: formatted.message, extensions: { code: 'BAD_USER_INPUT' } };
  if (isDatabaseUnavailable(original)) {
    return { message: DATABASE_UNAVAILABLE_MESSAGE, locations: formatted.locations, path: formatted.path, extensions: { code: 'SERVICE_UNAVAILABLE' } };
  }
  return {
    message: INTERNAL_ERROR_MESSAGE,
    locations: formatted.locations,
    path: formatted.path,
    extensions: {
      code: 'INTERNAL_SERVER_ERROR',
      ...(devMode ? { internal: { message: (original as Error)?.message, stacktrace: formatted.extensions?.stacktrace } } : {}),
    },
  };
}

/**
 * Apollo refuses some requests with a GraphQLError that has an HTTP 4xx status but no code (an
 * unsupported persisted-query version, a hash that does not match the query): the client's
 * mistake, to be told as it is and not logged as the server's fault.
 */
function isUncodedClientError(error: unknown): error is GraphQLError {
  if (!(error instanceof GraphQLError) || error.extensions.code) return false;
  const status = (error.extensions.http as { status?: number } | undefined)?.status;
  return status !== undefined && status >= 400 && status < 500;
}

// The plugins keep no per-request state, so each builds its listener once rather than per request.

function unexpectedErrorLogging(): ApolloServerPlugin<GraphQLContext> {
  const listener: GraphQLRequestListener<GraphQLContext> = {
    async didEncounterErrors({ errors, contextValue, operationName, logger }) {
      for (const error of errors) {
        const original = unwrapResolverError(error);
        if (original instanceof GraphQLError && original.extensions.code) continue;
        if (error.extensions.code && error.extensions.code !== 'INTERNAL_SERVER_ERROR') continue;
        if (isUncodedClientError(original) || isVariableValueError(original)) {
          contextValue?.logger.debug({ reason: (original as GraphQLError).message }, 'GraphQL request refused');
          continue;
        }
        // The request's logger carries its id; Apollo's own serves calls made without HTTP.
        const requestLogger = contextValue?.logger;
        if (requestLogger) requestLogger.error({ err: original, operationName, path: error.path }, 'unexpected GraphQL error');
        else logger.error(`unexpected GraphQL error in ${operationName ?? 'an operation'}: ${(original as Error)?.message}`);
      }
    },
  };
  return { requestDidStart: async () => listener };
}

export const SUBSCRIPTION_OVER_HTTP = 'SUBSCRIPTION_OVER_HTTP';

/** A subscription sent over HTTP is a request error pointing at the WebSocket endpoint. */
function subscriptionsOverWebSocketOnly(): ApolloServerPlugin<GraphQLContext> {
  const listener: GraphQLRequestListener<GraphQLContext> = {
    async didResolveOperation({ operation }) {
      if (operation?.operation !== 'subscription') return;
      throw new GraphQLError(`Subscriptions are served over WebSocket (graphql-transport-ws) at ${SUBSCRIPTIONS_PATH}, not over HTTP`, {
        extensions: { code: SUBSCRIPTION_OVER_HTTP, http: { status: 400 } },
      });
    },
  };
  return { requestDidStart: async () => listener };
}

/** Rejects operations costlier than the limit before they run. */
function complexityLimit(limits: QueryLimits): ApolloServerPlugin<GraphQLContext> {
  const listener: GraphQLRequestListener<GraphQLContext> = {
    async didResolveOperation({ request, document, operationName, schema }) {
      const error = limits.complexityError(document, operationName, request.variables, schema);
      if (error) throw error;
    },
  };
  return { requestDidStart: async () => listener };
}

/** Errors of a well-formed request that the GraphQL-over-HTTP watershed answers with 200 for application/json. */
const GRAPHQL_REQUEST_ERROR_CODES = new Set([
  'GRAPHQL_PARSE_FAILED',
  'GRAPHQL_VALIDATION_FAILED',
  'BAD_USER_INPUT',
  'OPERATION_RESOLUTION_FAILURE',
  SUBSCRIPTION_OVER_HTTP,
]);

/**
 * GraphQL-over-HTTP status codes. Apollo answers parse, validation and variable errors with 400
 * whatever the client accepts; the specification keeps 4xx for application/graphql-response+json
 * and asks for 200 when the client takes legacy application/json (its "watershed"), since such
 * clients read errors only from 200 responses. A request that is not well-formed (no query, a
 * query that is not a string) stays 400, and a mutation over GET stays 405, for every media type.
 */
function graphqlOverHttpStatus(): ApolloServerPlugin<GraphQLContext> {
  const listener: GraphQLRequestListener<GraphQLContext> = {
    async willSendResponse({ request, response }) {
      const mediaType = chooseGraphQLMediaType(request.http?.headers.get('accept'));
      if (mediaType === null) return; // Apollo answers 406
      response.http.headers.set('content-type', mediaType);
      response.http.headers.set('cache-control', GRAPHQL_CACHE_CONTROL);
      if (mediaType !== APPLICATION_JSON || response.http.status !== 400 || response.body.kind !== 'single') return;
      const errors = response.body.singleResult.errors ?? [];
      if (errors.length > 0 && errors.every((error) => GRAPHQL_REQUEST_ERROR_CODES.has(String(error.extensions?.code)))) {
        response.http.status = 200;
      }
    },
  };
  return { requestDidStart: async () => listener };
}
