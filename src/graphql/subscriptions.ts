import { randomUUID } from 'node:crypto';
import type { IncomingMessage, Server } from 'node:http';
import type { FastifyBaseLogger } from 'fastify';
import { getOperationAST, GraphQLError, parse, specifiedRules, validate, type DocumentNode, type GraphQLSchema } from 'graphql';
import { CloseCode } from 'graphql-ws';
import { WebSocketServer } from 'ws';
import { INTERNAL_ERROR_MESSAGE } from '../http/errors';
import { resolveSession, SessionError, type Session, type SessionSettings } from '../http/session';
import type { RateLimits } from '../platform/rate-limits';
import type { GraphQLContext } from './context';
import { documentSizeError, type QueryLimits } from './limits';
import { serveGraphQLWs } from './ws-server';

export const SUBSCRIPTIONS_PATH = '/v1/graphql/subscriptions';

export interface SubscriptionSettings extends SessionSettings {
  initTimeoutMs: number;
  maxPayload: number;
}

/** What the context of every operation on a connection takes from the HTTP server. */
export interface ConnectionContext {
  /** The client's address from the upgrade request, read as Fastify reads request.ip. */
  clientIp(request: IncomingMessage): string;
  rateLimits: RateLimits;
}

interface ConnectionState {
  session?: Session;
  headers?: Record<string, string>;
  requestId?: string;
  expiryTimer?: NodeJS.Timeout;
}

/** Longest delay setTimeout accepts (about 24.8 days). */
const MAX_TIMER_MS = 2 ** 31 - 1;

/**
 * graphql-ws (subprotocol graphql-transport-ws) on the HTTP server's port. The connection is
 * authenticated once, from the `headers` of the connection_init payload (or header-like keys at
 * its top level), by the same rules as HTTP; a refused session closes the socket with 4403.
 * A connection made with a token is closed with 4403 when the token expires.
 */
export function attachSubscriptions(
  server: Server,
  served: GraphQLSchema | (() => GraphQLSchema),
  settings: SubscriptionSettings,
  limits: QueryLimits,
  logger: FastifyBaseLogger,
  connection: ConnectionContext,
): { close(): Promise<void> } {
  const wss = new WebSocketServer({ server, path: SUBSCRIPTIONS_PATH, maxPayload: settings.maxPayload });
  // An operation runs to its end on the schema current when it was subscribed.
  const currentSchema = typeof served === 'function' ? served : () => served;
  const states = new WeakMap<object, ConnectionState>();
  const stateOf = (extra: object) => {
    let state = states.get(extra);
    if (!state) states.set(extra, (state = {}));
    return state;
  };

  const disposable = serveGraphQLWs<Record<string, unknown> | undefined>(
    {
      schema: () => currentSchema(),
      connectionInitWaitTimeout: settings.initTimeoutMs,
      // Parse and validate here, with the limits HTTP applies and the codes HTTP gives.
      onSubscribe: (_ctx, _id, payload) => {
        const schema = currentSchema();
        const tooLarge = documentSizeError(payload.query, limits);
        if (tooLarge) return [tooLarge];
        let document: DocumentNode;
        try {
          document = parse(payload.query, limits.parseOptions);
        } catch (error) {
          return [withCode(error as GraphQLError, 'GRAPHQL_PARSE_FAILED')];
        }
        const invalid = validate(schema, document, [...specifiedRules, ...limits.rules]);
        if (invalid.length > 0) return invalid.map((error) => withCode(error, 'GRAPHQL_VALIDATION_FAILED'));
        if (!getOperationAST(document, payload.operationName ?? undefined)) {
          const name = payload.operationName ? `named "${payload.operationName}"` : 'to run (name one with operationName)';
          return [new GraphQLError(`The document has no single operation ${name}`, { extensions: { code: 'OPERATION_RESOLUTION_FAILURE' } })];
        }
        const tooComplex = limits.complexityError(document, payload.operationName, payload.variables ?? undefined, schema);
        if (tooComplex) return [tooComplex];
        return { schema, document, operationName: payload.operationName, variableValues: payload.variables };
      },
      onConnect: (ctx) => {
        const state = stateOf(ctx.extra);
        try {
          state.headers = headersFromPayload(ctx.connectionParams);
          state.session = resolveSession(state.headers, settings);
          state.requestId = randomUUID();
        } catch (error) {
          if (!(error instanceof SessionError)) throw error;
          ctx.extra.socket.close(CloseCode.Forbidden, `Forbidden: ${error.code}`);
          return false;
        }
        const expiresAt = state.session.expiresAt;
        if (expiresAt !== null) {
          const delay = Math.min(Math.max(expiresAt * 1000 - Date.now(), 0), MAX_TIMER_MS);
          state.expiryTimer = setTimeout(() => ctx.extra.socket.close(CloseCode.Forbidden, 'Forbidden: JWT_EXPIRED'), delay);
        }
        return true;
      },
      onClose: (ctx) => clearTimeout(stateOf(ctx.extra).expiryTimer),
      context: (ctx): GraphQLContext => {
        const state = stateOf(ctx.extra);
        return {
          session: state.session!,
          requestId: state.requestId!,
          logger: logger.child({ reqId: state.requestId, transport: 'ws' }),
          clientIp: connection.clientIp(ctx.extra.request),
          rateLimits: connection.rateLimits,
          requestHeaders: state.headers,
        };
      },
      onNext: (ctx, _id, _payload, _args, result) => {
        // Unexpected resolver errors are logged, and masked for the client, as on HTTP.
        if (!result.errors) return;
        return {
          ...result,
          errors: result.errors.map((error) => {
            if (error.extensions?.code || error.originalError instanceof GraphQLError) return error;
            logger.error({ err: error.originalError ?? error, reqId: stateOf(ctx.extra).requestId, path: error.path }, 'unexpected GraphQL error');
            return new GraphQLError(INTERNAL_ERROR_MESSAGE, { path: error.path, extensions: { code: 'INTERNAL_SERVER_ERROR' } });
          }),
        };
      },
    },
    wss,
    logger,
  );

  return { close: async () => disposable.dispose() };
}

function withCode(error: GraphQLError, code: string): GraphQLError {
  return new GraphQLError(error.message, {
    nodes: error.nodes,
    source: error.source,
    positions: error.positions,
    extensions: { ...error.extensions, code },
  });
}

/**
 * Clients put headers under `headers` (Hasura, Apollo, urql) or at the top level of the
 * connection_init payload; names are compared case-insensitively, `headers` wins.
 */
function headersFromPayload(payload: Record<string, unknown> | undefined): Record<string, string> {
  const headers: Record<string, string> = {};
  const take = (source: unknown) => {
    if (source === null || typeof source !== 'object' || Array.isArray(source)) return;
    for (const [name, value] of Object.entries(source)) {
      if (typeof value === 'string') headers[name.toLowerCase()] = value;
    }
  };
  take(payload);
  take(payload?.headers);
  return headers;
}
