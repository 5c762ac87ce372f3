import { createHash } from 'node:crypto';
import {
  createSourceEventStream,
  getOperationAST,
  Kind,
  subscribe,
  type DocumentNode,
  type ExecutionResult,
  type GraphQLSchema,
  type OperationDefinitionNode,
} from 'graphql';
import { getMetadataStorage } from 'type-graphql';
import type { WebSocket } from 'ws';
import type { OperationExecutor } from './compiled-execution';
import type { GraphQLContext } from './context';
import { sendText, unpooledBytes } from './ws-frames';

/**
 * Field extension of the subscription fields whose events may be shared: type-graphql fields
 * declared with `topics`, whose source is the PubSub topic (events from the moment of
 * subscribing, kept by the filter or not) and nothing of the subscriber but its arguments and
 * context. A field with its own `subscribe` (an asynchronous action's, which first sends the
 * current state) is not marked: a subscriber joining later would miss what it sent first.
 */
export const SHARED_EVENTS_EXTENSION = 'plinthSharedEvents';

/**
 * Field extension of a live query's subscription field (the generated API's query root fields):
 * its source gives the current result first, then each changed one. Its groups keep the last
 * result and send it to a subscriber that joins; live queries also have their own limit per
 * connection (subscriptions.ts).
 */
export const LIVE_QUERY_EXTENSION = 'plinthLiveQuery';

/** Marks the subscription fields of `schema` that type-graphql declared with topics (see SHARED_EVENTS_EXTENSION). */
export function markSharedEventFields(schema: GraphQLSchema): void {
  const fields = schema.getSubscriptionType()?.getFields() ?? {};
  for (const declared of getMetadataStorage().subscriptions) {
    const field = fields[declared.schemaName];
    if (!field || declared.topics === undefined || declared.subscribe) continue;
    (field as { extensions: Record<string, unknown> }).extensions = { ...field.extensions, [SHARED_EVENTS_EXTENSION]: true };
  }
}

/** One subscribe message, parsed and validated, with the context of its connection. */
export interface GroupedSubscription {
  schema: GraphQLSchema;
  document: DocumentNode;
  /** The query text (part of the group's key). */
  source: string;
  operationName: string | undefined;
  variables: Record<string, unknown> | undefined;
  context: GraphQLContext;
  /** The subscriber's id on its connection, and the socket its messages go to. */
  id: string;
  socket: WebSocket;
}

/** Groups sharing a source stream now, and the subscribers in them. */
export interface SubscriptionGroupStats {
  groups: number;
  members: number;
}

/** What an event's result becomes before it is sent: unexpected errors logged and masked. */
export type ResultMasker = (result: ExecutionResult, context: GraphQLContext) => ExecutionResult;

/**
 * A member's socket with more than this many bytes not yet written misses events until it
 * catches up, rather than the server holding every event for it.
 */
const MAX_BUFFERED_BYTES = 1024 * 1024;
const CLOSING_BRACE = Buffer.from('}');
/** Message prefixes kept by subscription id (clients number their subscriptions: most ids recur). */
const PREFIXES = new Map<string, Buffer>();
const MAX_PREFIXES = 1024;
const MAX_SHARED_ID_LENGTH = 16;
const DONE: IteratorReturnResult<undefined> = { done: true, value: undefined };

/**
 * Subscription multiplexing (as Hasura does it): subscribers that send the same document,
 * operation and variables with the same session share one source stream and one execution per
 * event, serialised once; each member gets those bytes behind its own message id, framed and
 * written to its socket in one write (sendText). Fields not marked with SHARED_EVENTS_EXTENSION
 * run per subscriber through graphql-js's subscribe.
 */
export class SubscriptionGroups {
  /** By key: the group, or the result that refused it, while its stream opens. */
  private readonly groups = new Map<string, Promise<Group | ExecutionResult>>();
  private readonly open = new Set<Group>();
  private readonly schemaIds = new WeakMap<GraphQLSchema, number>();
  private nextSchemaId = 0;

  constructor(
    private readonly executor: OperationExecutor,
    private readonly mask: ResultMasker,
  ) {}

  /** Groups alive now and their members (for tests and the benchmark). */
  get stats(): SubscriptionGroupStats {
    let groups = 0;
    let members = 0;
    for (const group of this.open) {
      groups++;
      members += group.members.size;
    }
    return { groups, members };
  }

  /** graphql-ws's `subscribe`: an iterator graphql-ws holds until the subscriber leaves, or a result it sends once. */
  async subscribe(request: GroupedSubscription): Promise<AsyncGenerator<ExecutionResult> | ExecutionResult> {
    const operation = getOperationAST(request.document, request.operationName);
    const shared = operation && sharesEvents(request.schema, operation);
    if (!shared) {
      return subscribe({
        schema: request.schema,
        document: request.document,
        operationName: request.operationName,
        variableValues: request.variables,
        contextValue: request.context,
      });
    }
    const key = this.keyOf(request);
    for (;;) {
      let opening = this.groups.get(key);
      if (!opening) {
        opening = this.openGroup(key, request, operation, shared === 'latest');
        this.groups.set(key, opening);
      }
      const group = await opening;
      if (!(group instanceof Group)) return group;
      // A group whose stream ended a moment ago takes no one: open another.
      if (group.accepting) return group.join(request.socket, request.id);
    }
  }

  /**
   * What an event's result depends on: the schema, the document and operation, the variables
   * and every value of the session but its expiry (which only closes the connection).
   */
  private keyOf(request: GroupedSubscription): string {
    let schemaId = this.schemaIds.get(request.schema);
    if (schemaId === undefined) this.schemaIds.set(request.schema, (schemaId = this.nextSchemaId++));
    const { expiresAt: _expiresAt, ...session } = request.context.session;
    // Its SHA-256: the key is kept as long as the group, and its text (the session's values, the
    // document) is hundreds of bytes, for each of thousands of groups of one user each.
    const text = JSON.stringify([schemaId, request.operationName ?? null, request.variables ?? null, session, request.source]);
    return createHash('sha256').update(text).digest('base64');
  }

  private async openGroup(
    key: string,
    request: GroupedSubscription,
    operation: OperationDefinitionNode,
    replaysLast: boolean,
  ): Promise<Group | ExecutionResult> {
    try {
      const stream = await createSourceEventStream({
        schema: request.schema,
        document: request.document,
        operationName: request.operationName,
        variableValues: request.variables,
        contextValue: request.context,
      });
      if (!isAsyncIterable(stream)) {
        this.groups.delete(key);
        return stream;
      }
      const group = new Group(
        stream[Symbol.asyncIterator](),
        (event) =>
          this.executor.executeEvent(
            {
              schema: request.schema,
              document: request.document,
              source: request.source,
              operation,
              operationName: request.operationName,
              variables: request.variables,
              contextValue: request.context,
            },
            event,
          ),
        (result) => this.mask(result, request.context),
        () => {
          this.groups.delete(key);
          this.open.delete(group);
        },
        replaysLast,
      );
      this.open.add(group);
      void group.run();
      return group;
    } catch (error) {
      this.groups.delete(key);
      throw error;
    }
  }
}

/** Whether the operation's events may be shared: 'events' from the moment of joining, 'latest' (a live query) with the last result first. */
function sharesEvents(schema: GraphQLSchema, operation: OperationDefinitionNode): 'events' | 'latest' | false {
  if (operation.operation !== 'subscription') return false;
  const [selection] = operation.selectionSet.selections;
  if (operation.selectionSet.selections.length !== 1 || selection.kind !== Kind.FIELD) return false;
  const extensions = schema.getSubscriptionType()?.getFields()[selection.name.value]?.extensions;
  if (extensions?.[LIVE_QUERY_EXTENSION] === true) return 'latest';
  return extensions?.[SHARED_EVENTS_EXTENSION] === true ? 'events' : false;
}

function isAsyncIterable(value: unknown): value is AsyncIterable<unknown> {
  return typeof (value as AsyncIterable<unknown>)[Symbol.asyncIterator] === 'function';
}

/** The subscribers sharing one source stream; it closes when the last one leaves or the stream ends. */
class Group {
  readonly members = new Set<Member>();
  /** False once the stream ended or the last member left. */
  accepting = true;
  /** The last event's payload, sent to a member that joins (replaysLast). */
  private last?: Buffer;

  constructor(
    private readonly stream: AsyncIterator<unknown>,
    private readonly execute: (event: unknown) => Promise<ExecutionResult> | ExecutionResult,
    private readonly mask: (result: ExecutionResult) => ExecutionResult,
    private readonly closed: () => void,
    private readonly replaysLast: boolean,
  ) {}

  join(socket: WebSocket, id: string): Member {
    const member = new Member(socket, nextPrefix(id), this);
    this.members.add(member);
    if (this.last) member.send(this.last);
    return member;
  }

  leave(member: Member): void {
    this.members.delete(member);
    if (this.members.size > 0 || !this.accepting) return;
    this.close();
    // Ends the stream's wait for the next event (and with it the PubSub subscription).
    void this.stream.return?.();
  }

  async run(): Promise<void> {
    let failure: { error: unknown } | undefined;
    try {
      for (;;) {
        const next = await this.stream.next();
        if (next.done || !this.accepting) break;
        const result = this.mask(await this.execute(next.value));
        // graphql-ws's `next` message, its payload serialised once for every member.
        const text = JSON.stringify(result);
        // Kept for members that join: bytes of its own, not a slice pinning a pool slab.
        const payload = this.replaysLast ? (this.last = unpooledBytes(text)) : Buffer.from(text);
        for (const member of this.members) member.send(payload);
      }
    } catch (error) {
      failure = { error };
    }
    if (this.accepting) this.close();
    for (const member of this.members) member.end(failure);
    this.members.clear();
  }

  private close(): void {
    this.accepting = false;
    this.closed();
  }
}

/**
 * `{"id":…,"type":"next","payload":` for subscription `id`, in bytes of its own (a slice of
 * Node's shared 8 KiB pool would keep the whole slab as long as the member lasts: 2,000 slabs,
 * 16 MiB, at 10,000 subscribers), shared by members with the same short id.
 */
function nextPrefix(id: string): Buffer {
  let prefix = PREFIXES.get(id);
  if (prefix) return prefix;
  prefix = unpooledBytes(`{"id":${JSON.stringify(id)},"type":"next","payload":`);
  if (id.length <= MAX_SHARED_ID_LENGTH && PREFIXES.size < MAX_PREFIXES) PREFIXES.set(id, prefix);
  return prefix;
}

/**
 * One subscriber, as graphql-ws holds it: an async generator that yields nothing (the group
 * writes to the socket) and finishes when the subscriber leaves or the group's stream ends.
 */
class Member implements AsyncGenerator<ExecutionResult, undefined> {
  /** Settles graphql-ws's wait for the next result (a rejected promise rejects it): one function kept, not a pair. */
  private waiting?: (result: IteratorReturnResult<undefined> | Promise<never>) => void;
  private ended?: { error?: unknown };

  constructor(
    private readonly socket: WebSocket,
    /** `{"id":…,"type":"next","payload":` as bytes: all the state a member keeps. */
    private readonly prefix: Buffer,
    private readonly group: Group,
  ) {}

  send(payload: Buffer): void {
    const socket = this.socket;
    if (socket.readyState !== socket.OPEN || socket.bufferedAmount > MAX_BUFFERED_BYTES) return;
    sendText(socket, [this.prefix, payload, CLOSING_BRACE]);
  }

  /** The group is done: its stream ended (or failed with `failure.error`). */
  end(failure?: { error: unknown }): void {
    if (this.ended) return;
    this.ended = failure ?? {};
    this.waiting?.(failure ? Promise.reject(failure.error) : DONE);
    this.waiting = undefined;
  }

  next(): Promise<IteratorResult<ExecutionResult, undefined>> {
    if (this.ended) return 'error' in this.ended ? Promise.reject(this.ended.error) : Promise.resolve(DONE);
    return new Promise((resolve) => (this.waiting = resolve));
  }

  return(): Promise<IteratorReturnResult<undefined>> {
    this.group.leave(this);
    this.end();
    return Promise.resolve(DONE);
  }

  throw(error: unknown): Promise<IteratorResult<ExecutionResult, undefined>> {
    this.group.leave(this);
    this.end();
    return Promise.reject(error);
  }

  [Symbol.asyncIterator](): this {
    return this;
  }

  async [Symbol.asyncDispose](): Promise<void> {
    await this.return();
  }
}
