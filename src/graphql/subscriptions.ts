import { randomUUID } from 'node:crypto';
import type { IncomingMessage, Server } from 'node:http';
import type { FastifyBaseLogger } from 'fastify';
import {
  getOperationAST,
  GraphQLError,
  parse,
  specifiedRules,
  validate,
  type DocumentNode,
  type ExecutionArgs,
  type ExecutionResult,
  type GraphQLSchema,
} from 'graphql';
import { CloseCode, type Context } from 'graphql-ws';
import { LRUCache } from 'lru-cache';
import { WebSocketServer, type WebSocket } from 'ws';
import { Refusal } from '../common/refusal';
import { INTERNAL_ERROR_MESSAGE } from '../common/error-messages';
import { ADMIN_ROLE } from '../common/roles';
import { resolveSession, type Session, type SessionSettings } from '../platform/session';
import type { WebSocketLimits } from '../config';
import { ConcurrentCounts } from '../platform/quotas';
import type { RateLimits } from '../platform/rate-limits';
import { countTakenIn } from '../platform/text-caches';
import type { GraphQLContext } from './context';
import { documentHeapBytes } from './document-heap';
import { OperationExecutor, type CompiledExecutionSettings } from './compiled-execution';
import { documentSizeError, type QueryLimits } from './limits';
import { LIVE_QUERY_EXTENSION, SubscriptionGroups, type SubscriptionGroupStats } from './subscription-groups';
import { serveGraphQLWs, type SocketExtra } from './ws-server';
import { executionKey, schemaServedTo, viewValidationErrors } from './role-views';
import { isVariableValueError } from './variable-errors';
import { ServedSchema } from '../platform/served-schema';

export const SUBSCRIPTIONS_PATH = '/v1/graphql/subscriptions';

export interface SubscriptionSettings extends SessionSettings {
  initTimeoutMs: number;
  maxPayload: number;
  /** Subscribers with the same document, variables and session share one execution per event (subscription-groups.ts). */
  multiplexing: boolean;
  compiledExecution: CompiledExecutionSettings;
  /** Connections and subscriptions one user (else one client address) may hold at once here; the admin role is not limited. */
  limits: WebSocketLimits;
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
  /** What the connection counts against (its user, else its address); unset for the admin role and until connection_init. */
  holder?: string;
  /**
   * Its subscriptions from onSubscribe to onComplete, by id: the subscribe message's payload (the
   * object graphql-ws hands both hooks) and whether it still counts against the limits.
   */
  held?: Map<string, { payload: object; counted: boolean }>;
  counted?: number;
  /** Its live queries from onSubscribe to onComplete: the subscribe message's payload, by id. */
  liveQueries?: Map<string, object>;
}

/**
 * graphql-ws's own close code for "too many" (its client does not retry it), for a connection
 * past GQL_GRAPHQL_WS_MAX_CONNECTIONS_PER_USER.
 */
export const TOO_MANY_CONNECTIONS = CloseCode.TooManyInitialisationRequests;

/** Longest delay setTimeout accepts (about 24.8 days). */
const MAX_TIMER_MS = 2 ** 31 - 1;
/** Heap bytes of valid documents kept per query text, so that subscribers sending the same text share one document. */
const PREPARED_DOCUMENT_BYTES = 8 * 1024 * 1024;

/** A query text parsed and validated against a schema. */
interface PreparedDocument {
  schema: GraphQLSchema;
  document: DocumentNode;
}

/** What a subscribe message adds to its execution arguments, for the group it joins. */
interface Subscriber {
  id: string;
  /** The query text, qualified by the session's view (executionKey). */
  source: string;
  socket: WebSocket;
}

/**
 * graphql-ws (subprotocol graphql-transport-ws) on the HTTP server's port. The connection is
 * authenticated once, from the `headers` of the connection_init payload (or header-like keys at
 * its top level), by the same rules as HTTP; a refused session closes the socket with 4403.
 * A connection made with a token is closed with 4403 when the token expires.
 */
export function attachSubscriptions(
  server: Server,
  served: GraphQLSchema | ServedSchema,
  settings: SubscriptionSettings,
  limits: QueryLimits,
  logger: FastifyBaseLogger,
  connection: ConnectionContext,
): { close(): Promise<void>; groups(): SubscriptionGroupStats } {
  const wss = new WebSocketServer({ server, path: SUBSCRIPTIONS_PATH, maxPayload: settings.maxPayload });
  // An operation runs to its end on the schema current when it was subscribed.
  const currentSchema = served instanceof ServedSchema ? () => served.current : () => served;
  const states = new WeakMap<object, ConnectionState>();
  const documents = new LRUCache<string, PreparedDocument>({
    maxSize: PREPARED_DOCUMENT_BYTES,
    sizeCalculation: countTakenIn((entry) => documentHeapBytes(entry.document)),
  });
  const subscribers = new WeakMap<ExecutionArgs, Subscriber>();
  const masked = (result: ExecutionResult, context: GraphQLContext) => maskedResult(result, context, logger);
  const groups = settings.multiplexing ? new SubscriptionGroups(new OperationExecutor(settings.compiledExecution), masked) : undefined;
  const stateOf = (extra: object) => {
    let state = states.get(extra);
    if (!state) states.set(extra, (state = {}));
    return state;
  };
  const wsLimits = settings.limits;
  const connectionsHeld = new ConcurrentCounts(wsLimits.connectionsPerUser);
  const subscriptionsHeld = new ConcurrentCounts(wsLimits.subscriptionsPerUser);
  const uncount = (state: ConnectionState, entry: { counted: boolean }) => {
    if (!entry.counted || state.holder === undefined) return;
    entry.counted = false;
    state.counted! -= 1;
    subscriptionsHeld.release(state.holder);
  };
  /** Counts the connection's new subscription, or says why it may not have one. */
  const holdSubscription = (ctx: Context<Record<string, unknown> | undefined, SocketExtra>, id: string, payload: object): GraphQLError | undefined => {
    const state = stateOf(ctx.extra);
    const holder = state.holder;
    if (holder === undefined) return undefined;
    const held = (state.held ??= new Map());
    // graphql-ws takes an id again once the client completed it, but the ending subscription's last
    // step would then drop the new one from the connection (which would outlive it, uncounted).
    if (held.has(id)) {
      return new GraphQLError(`Subscription ${id} is still ending; subscribe with another id`, { extensions: { code: 'SUBSCRIBER_ALREADY_EXISTS' } });
    }
    state.counted ??= 0;
    if (state.counted >= wsLimits.subscriptionsPerConnection || !subscriptionsHeld.acquire(holder)) {
      // A complete message ends its subscription for graphql-ws at once, but onComplete comes some
      // turns later: those the client completed already stop counting now, so that a subscribe
      // sent right after a complete is not refused.
      for (const [heldId, entry] of held) if (!(heldId in ctx.subscriptions)) uncount(state, entry);
      if (state.counted >= wsLimits.subscriptionsPerConnection) {
        return quotaError(`Too many subscriptions on this connection: at most ${wsLimits.subscriptionsPerConnection} at once; complete one first`);
      }
      if (!subscriptionsHeld.acquire(holder)) {
        return quotaError(`Too many subscriptions for this user: at most ${wsLimits.subscriptionsPerUser} at once across connections; complete one first`);
      }
    }
    held.set(id, { payload, counted: true });
    state.counted += 1;
    return undefined;
  };

  /** Counts the connection's new live query, or says why it may not have one (the admin role too: each costs a cohort's refetch). */
  const holdLiveQuery = (ctx: Context<Record<string, unknown> | undefined, SocketExtra>, id: string, payload: object): GraphQLError | undefined => {
    const live = (stateOf(ctx.extra).liveQueries ??= new Map());
    const most = wsLimits.liveQueriesPerConnection;
    // Those the client completed already stop counting now (onComplete comes some turns later).
    if (live.size >= most) for (const liveId of live.keys()) if (!(liveId in ctx.subscriptions)) live.delete(liveId);
    if (live.size >= most) return quotaError(`Too many live queries on this connection: at most ${most} at once; complete one first`);
    live.set(id, payload);
    return undefined;
  };

  const disposable = serveGraphQLWs<Record<string, unknown> | undefined>(
    {
      schema: () => currentSchema(),
      connectionInitWaitTimeout: settings.initTimeoutMs,
      // Parse and validate here, with the limits HTTP applies and the codes HTTP gives.
      onSubscribe: (ctx, id, payload) => {
        const whole = currentSchema();
        const cached = documents.get(payload.query);
        let document = cached?.schema === whole ? cached.document : undefined;
        if (!document) {
          const prepared = prepareDocument(payload.query, whole, limits);
          if (!('kind' in prepared)) return [...prepared];
          documents.set(payload.query, { schema: whole, document: (document = prepared) });
        }
        // Valid on the whole schema; a session served a view runs it there, if it is valid there too.
        const schema = schemaServedTo(served, whole, stateOf(ctx.extra).session!);
        if (schema !== whole) {
          const refused = viewValidationErrors(schema, document);
          if (refused.length > 0) return refused.map((error) => withCode(error, 'GRAPHQL_VALIDATION_FAILED'));
        }
        if (!getOperationAST(document, payload.operationName ?? undefined)) {
          const name = payload.operationName ? `named "${payload.operationName}"` : 'to run (name one with operationName)';
          return [new GraphQLError(`The document has no single operation ${name}`, { extensions: { code: 'OPERATION_RESOLUTION_FAILURE' } })];
        }
        const tooComplex = limits.complexityError(document, payload.operationName, payload.variables ?? undefined, schema);
        if (tooComplex) return [tooComplex];
        // Counted last: graphql-ws reports completion (onComplete) only of what onSubscribe let through.
        if (isLiveQuery(schema, document, payload.operationName ?? undefined)) {
          const refusedLive = holdLiveQuery(ctx, id, payload);
          if (refusedLive) return [refusedLive];
        }
        const refused = holdSubscription(ctx, id, payload);
        if (refused) {
          if (stateOf(ctx.extra).liveQueries?.get(id) === payload) stateOf(ctx.extra).liveQueries!.delete(id);
          return [refused];
        }
        const args: ExecutionArgs = { schema, document, operationName: payload.operationName, variableValues: payload.variables };
        subscribers.set(args, { id, source: executionKey(served, schema, payload.query), socket: ctx.extra.socket });
        return args;
      },
      onComplete: (ctx, id, payload) => {
        const state = stateOf(ctx.extra);
        if (state.liveQueries?.get(id) === payload) state.liveQueries.delete(id);
        const entry = state.held?.get(id);
        if (entry?.payload !== payload) return;
        state.held!.delete(id);
        uncount(state, entry);
      },
      ...(groups && {
        subscribe: (args: ExecutionArgs) => {
          const subscriber = subscribers.get(args)!;
          subscribers.delete(args);
          return groups.subscribe({
            ...subscriber,
            schema: args.schema,
            document: args.document,
            operationName: args.operationName ?? undefined,
            variables: args.variableValues ?? undefined,
            context: args.contextValue as GraphQLContext,
          });
        },
      }),
      onConnect: (ctx) => {
        const state = stateOf(ctx.extra);
        try {
          state.headers = headersFromPayload(ctx.connectionParams);
          state.session = resolveSession(state.headers, settings);
          state.requestId = flatAscii(randomUUID());
        } catch (error) {
          if (!(error instanceof Refusal)) throw error;
          ctx.extra.socket.close(CloseCode.Forbidden, `Forbidden: ${error.code}`);
          return false;
        }
        if (state.session.role !== ADMIN_ROLE) {
          const holder = state.session.userId ? `user:${state.session.userId}` : `ip:${ctx.extra.clientIp}`;
          if (!connectionsHeld.acquire(holder)) {
            ctx.extra.socket.close(TOO_MANY_CONNECTIONS, `Too many connections: at most ${wsLimits.connectionsPerUser} for each user`);
            return false;
          }
          state.holder = holder;
        }
        const expiresAt = state.session.expiresAt;
        if (expiresAt !== null) {
          const delay = Math.min(Math.max(expiresAt * 1000 - Date.now(), 0), MAX_TIMER_MS);
          state.expiryTimer = setTimeout(() => ctx.extra.socket.close(CloseCode.Forbidden, 'Forbidden: JWT_EXPIRED'), delay);
        }
        return true;
      },
      onClose: (ctx) => {
        const state = stateOf(ctx.extra);
        clearTimeout(state.expiryTimer);
        state.liveQueries = undefined;
        if (state.holder === undefined) return;
        // Subscriptions whose completion comes after this find nothing left to release.
        connectionsHeld.release(state.holder);
        subscriptionsHeld.release(state.holder, state.counted ?? 0);
        state.held = undefined;
        state.counted = 0;
        state.holder = undefined;
      },
      context: (ctx): GraphQLContext => {
        const state = stateOf(ctx.extra);
        return new ConnectionOperationContext(state.session!, state.requestId!, ctx.extra.clientIp, connection.rateLimits, state.headers, logger);
      },
      onNext: (_ctx, _id, _payload, args, result) => {
        if (!result.errors) return;
        return masked(result, args.contextValue as GraphQLContext);
      },
    },
    wss,
    logger,
    connection.clientIp,
  );

  return {
    close: async () => disposable.dispose(),
    groups: () => groups?.stats ?? { groups: 0, members: 0 },
  };
}

/**
 * The context of an operation on a connection, kept as long as the subscription lasts. A class:
 * an object literal with a getter is a property dictionary, several times larger.
 */
class ConnectionOperationContext implements GraphQLContext {
  private operationLogger?: FastifyBaseLogger;

  constructor(
    readonly session: Session,
    readonly requestId: string,
    readonly clientIp: string,
    readonly rateLimits: RateLimits,
    readonly requestHeaders: Record<string, string> | undefined,
    private readonly connectionLogger: FastifyBaseLogger,
  ) {}

  /** Made when first used: most subscriptions never log, and each child logger costs memory. */
  get logger(): FastifyBaseLogger {
    return (this.operationLogger ??= this.connectionLogger.child({ reqId: this.requestId, transport: 'ws' }));
  }
}

/**
 * ASCII `text` as one flat string. randomUUID's result is a chain of some twenty two-character pieces,
 * several times the flat string's heap, kept as long as the connection.
 */
function flatAscii(text: string): string {
  return Buffer.from(text, 'latin1').toString('latin1');
}

/** Unexpected resolver errors are logged, and masked for the client, as on HTTP; variables refused get HTTP's code. */
function maskedResult(result: ExecutionResult, context: GraphQLContext, logger: FastifyBaseLogger): ExecutionResult {
  if (!result.errors) return result;
  return {
    ...result,
    errors: result.errors.map((error) => {
      if (isVariableValueError(error)) return withCode(error, 'BAD_USER_INPUT');
      if (error.extensions?.code || error.originalError instanceof GraphQLError) return error;
      logger.error({ err: error.originalError ?? error, reqId: context.requestId, path: error.path }, 'unexpected GraphQL error');
      return new GraphQLError(INTERNAL_ERROR_MESSAGE, { path: error.path, extensions: { code: 'INTERNAL_SERVER_ERROR' } });
    }),
  };
}

/** Parses and validates with the limits HTTP applies and the codes HTTP gives. */
function prepareDocument(query: string, schema: GraphQLSchema, limits: QueryLimits): DocumentNode | readonly GraphQLError[] {
  const tooLarge = documentSizeError(query, limits);
  if (tooLarge) return [tooLarge];
  let document: DocumentNode;
  try {
    document = parse(query, limits.parseOptions);
  } catch (error) {
    return [withCode(error as GraphQLError, 'GRAPHQL_PARSE_FAILED')];
  }
  const invalid = validate(schema, document, [...specifiedRules, ...limits.rules]);
  if (invalid.length > 0) return invalid.map((error) => withCode(error, 'GRAPHQL_VALIDATION_FAILED'));
  return document;
}

/** Whether the operation's root field is a live query (LIVE_QUERY_EXTENSION). */
function isLiveQuery(schema: GraphQLSchema, document: DocumentNode, operationName: string | undefined): boolean {
  const operation = getOperationAST(document, operationName);
  if (operation?.operation !== 'subscription') return false;
  const fields = schema.getSubscriptionType()?.getFields() ?? {};
  return operation.selectionSet.selections.some(
    (selection) => selection.kind === 'Field' && fields[selection.name.value]?.extensions?.[LIVE_QUERY_EXTENSION] === true,
  );
}

/** A subscription refused for a limit on what is held at once: nothing to wait for but the end of another. */
function quotaError(message: string): GraphQLError {
  return new GraphQLError(message, { extensions: { code: 'QUOTA_EXCEEDED' } });
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
