import { GraphQLError, type GraphQLResolveInfo } from 'graphql';
import type pg from 'pg';
import { Counter } from 'prom-client';
import type { GraphQLContext } from '../../graphql/context';
import type { Metrics } from '../../platform/metrics';
import { tableKey } from './tables.catalog';
import { StatementCompiler } from './tables.compiler';
import { asText } from './tables.live-queries';
import { isObject, type BoolExp, type QualifiedTable } from './tables.metadata';
import type { ColumnModel, PermissionModel, TableModel } from './tables.model';
import { isAdmin } from './tables.root-fields';
import { cursorColumns } from './tables.stream-schema';
import { asInputError, badInput, boundValues, changedUnderMetadata, notPermitted, qualified, quote, type CompiledStatement } from './tables.sql';

interface StreamArguments {
  batch_size?: unknown;
  cursor?: unknown;
  where?: BoolExp | null;
}

/** A stream's statement: `$cursor` (0-based index into its parameters) is the cursor value, the last one sent after each batch. */
export interface StreamStatement {
  statement: CompiledStatement;
  cursor: number;
  /** The most rows one batch reads (batch_size, or the permission's smaller limit). */
  limit: number;
}

/**
 * The oldest transaction still running when the statement's snapshot was taken, as the 32-bit
 * xid a row's `xmin` is compared with (age() compares them modulo wraparound).
 */
const HORIZON = `(pg_snapshot_xmin(pg_current_snapshot())::text::bigint % 4294967296)::text::xid`;

/**
 * Compiles `<table>_stream(batch_size, cursor, where)` as Hasura defines it: the rows after the
 * cursor value in the cursor's order (strictly after: the initial value itself is not sent), at
 * most batch_size of them, under the reader's permission, with their JSON as a list query builds
 * it, and the last cursor value sent (as PostgreSQL's text, bound back on the next poll).
 */
export class StreamCompiler extends StatementCompiler {
  compileStream(table: TableModel): StreamStatement {
    const node = this.operation.fieldNodes[0];
    const rootName = node.name.value;
    const permission = this.permission(table);
    if (permission && !permission.stream) throw notPermitted(`the root field ${rootName}`);
    const args = this.argumentsOf(this.operation.parentType, node) as StreamArguments;
    const batchSize = this.valueOf(args.batch_size);
    if (typeof batchSize !== 'number' || !Number.isInteger(batchSize) || batchSize < 1)
      throw badInput(`"batch_size" must be a positive integer, not ${JSON.stringify(batchSize)}`);
    const { column, value, descending } = this.cursorOf(table, args.cursor, permission);
    const alias = this.alias();
    const selections = this.fieldsOf(
      this.operation.fieldNodes.map((fieldNode) => fieldNode.selectionSet),
      this.operation.parentType.getFields()[rootName].type,
    );
    const { json, joins } = this.rowJson(table, alias, selections);
    const cursorColumn = `${alias}.${quote(column.name)}`;
    const cursorValue = this.bind(column.scalar === 'jsonb' ? JSON.stringify(value) : value, column.sqlType);
    const cursor = this.parameters.length - 1;
    const where = [`${cursorColumn} ${descending ? '<' : '>'} ${cursorValue}`, this.permissionFilter(table, alias, permission)];
    if (args.where) where.push(this.boolExp(args.where, table, alias, 'query'));
    const limit = Math.min(batchSize, permission?.limit ?? batchSize);
    const order = descending ? 'DESC' : 'ASC';
    // A row whose transaction is not older than every transaction still running is held back, and
    // so is every row after it (see "Streaming subscriptions" in docs/decisions.md): a transaction
    // still running may yet commit a row before it in the cursor's order (a serial taken earlier).
    // An xmin whose age is negative is older than wraparound allows a live one to be: frozen.
    const held = table.rowVersions ? `NOT (age(${alias}.xmin) > age(${HORIZON}) OR age(${alias}.xmin) < 0)` : 'false';
    const rows =
      `SELECT ${json} AS "j", ${cursorColumn} AS "c", ${held} AS "h" FROM ${qualified(table)} AS ${alias}${joins}` +
      ` WHERE ${where.join(' AND ')} ORDER BY ${cursorColumn} ${order} LIMIT ${this.bind(limit, 'integer')}`;
    const cut = `SELECT "_l".*, bool_or("_l"."h") OVER (ORDER BY "_l"."c" ${order} ROWS UNBOUNDED PRECEDING) AS "stop" FROM (${rows}) AS "_l"`;
    const sent = 'FILTER (WHERE NOT "_s"."stop")';
    const text =
      `SELECT coalesce(json_agg("_s"."j" ORDER BY "_s"."c" ${order}) ${sent}, '[]'::json) AS "j",` +
      ` (array_agg("_s"."c"::text ORDER BY "_s"."c" ${descending ? 'ASC' : 'DESC'}) ${sent})[1] AS "last",` +
      ` (count(*) ${sent})::integer AS "sent" FROM (${cut}) AS "_s"`;
    return { statement: { text, parameters: this.parameters }, cursor, limit };
  }

  /** The one cursor column, its initial value and direction, as Hasura reads `cursor: [{ initial_value, ordering }]`. */
  private cursorOf(table: TableModel, given: unknown, permission: PermissionModel | undefined): { column: ColumnModel; value: unknown; descending: boolean } {
    const items = (Array.isArray(given) ? given : [given]).map((item) => this.readAll(item)).filter(isObject);
    const chosen = items.flatMap((item) =>
      Object.entries(isObject(item.initial_value) ? item.initial_value : {})
        .filter(([, value]) => value !== undefined)
        .map(([field, value]) => ({ field, value, ordering: item.ordering ?? 'ASC' })),
    );
    if (chosen.length === 0) throw badInput('one streaming column field is expected');
    if (chosen.length > 1) throw badInput('multiple column cursors are not supported yet');
    const [{ field, value, ordering }] = chosen;
    const column = this.visibleColumn(table, field, permission);
    if (!cursorColumns([column]).length) throw badInput(`the column "${field}" cannot be a cursor: its values have no order`);
    if (value === null) throw badInput(`the initial value of the cursor column "${field}" cannot be null`);
    if (ordering !== 'ASC' && ordering !== 'DESC') throw badInput(`unknown cursor ordering ${JSON.stringify(ordering)}`);
    return { column, value, descending: ordering === 'DESC' };
  }
}

/** What a stream needs of the service around it. */
export interface TableStreamsDependencies {
  pool: pg.Pool;
  /** The tracked tables served now, by tableKey (a stream ends when its table's model is replaced). */
  tables: () => ReadonlyMap<string, TableModel>;
  /** The error of a statement that met a table or column gone since the metadata was read (which it has read again). */
  staleCatalog: (table: TableModel, error: Error) => GraphQLError;
  /** How long a stream waits between polls that found no more rows to send, unless its table changes. */
  intervalMs: number;
  /** Calls `changed` after each committed change to the table (the live queries' NOTIFY), until the returned function is called. */
  watch?: (table: QualifiedTable, changed: () => void) => () => void;
  metrics?: Metrics;
}

/**
 * `<table>_stream` subscriptions. Subscribers whose statement and bound values are equal (the
 * same table, document, role, session values the statement reads, and cursor value) share one
 * poll: one statement per poll, its batch sent to each. A poll runs every interval, at once
 * again after a full batch, and as soon as a change to the table commits (its NOTIFY).
 */
export class TableStreams {
  /** The polls by key (statement text and bound values, the cursor's included). */
  private readonly polls = new Map<string, SharedPoll>();
  /** Every poll running, those alone included. */
  private readonly running = new Set<SharedPoll>();
  private readonly statements?: Counter;

  constructor(readonly deps: TableStreamsDependencies) {
    const registry = deps.metrics?.registry;
    if (registry) {
      this.statements = new Counter({
        name: 'plinth_stream_statements_total',
        help: 'Statements run for streaming subscriptions (one per poll, whatever the number of subscribers sharing it)',
        registers: [registry],
      });
      deps.metrics!.addGauge('plinth_streams', 'Streaming subscriptions: subscribers and the polls they share', ['kind'], async () => {
        let subscribers = 0;
        for (const poll of this.running) subscribers += poll.members.size;
        return [
          { labels: { kind: 'subscribers' }, value: subscribers },
          { labels: { kind: 'polls' }, value: this.running.size },
        ];
      });
    }
  }

  /** The stream of one subscription; a refusal of its arguments is thrown (GraphQL answers it as the subscription's error). */
  open(table: TableModel, info: GraphQLResolveInfo, context: GraphQLContext): AsyncIterableIterator<unknown> {
    const { session } = context;
    const compile = (model: TableModel): CompiledStream => {
      const stream = new StreamCompiler({ role: session.role, admin: isAdmin(session) }, this.deps.tables(), info).compileStream(model);
      return { model, ...stream, values: boundValues(stream.statement, session.variables, info.variableValues) };
    };
    const subscriber = new StreamSubscriber(compile);
    this.place(subscriber, compile(table));
    return subscriber;
  }

  /** Puts `subscriber` in the poll of `stream` (its statement and values), started if there is none. */
  place(subscriber: StreamSubscriber, stream: CompiledStream): void {
    const key = keyOf(stream);
    let poll = this.polls.get(key);
    if (!poll) {
      poll = new SharedPoll(this, stream, key);
      this.polls.set(key, poll);
    }
    poll.add(subscriber);
  }

  /** A poll alone, under no key: a subscriber that fell behind the others of its poll. */
  alone(subscriber: StreamSubscriber, stream: CompiledStream): void {
    new SharedPoll(this, stream, undefined).add(subscriber);
  }

  /**
   * The poll's cursor moved: it is filed under its new key, or, when another poll is at the same
   * point already, its members join that one (both would poll from the same cursor) and it ends.
   */
  moved(poll: SharedPoll): boolean {
    if (poll.key !== undefined && this.polls.get(poll.key) === poll) this.polls.delete(poll.key);
    const key = keyOf(poll.stream);
    const other = this.polls.get(key);
    if (other && other !== poll) {
      for (const member of poll.members) other.add(member);
      return false;
    }
    poll.key = key;
    this.polls.set(key, poll);
    return true;
  }

  started(poll: SharedPoll): void {
    this.running.add(poll);
  }

  ended(poll: SharedPoll): void {
    this.running.delete(poll);
    if (poll.key !== undefined && this.polls.get(poll.key) === poll) this.polls.delete(poll.key);
  }

  async query(stream: CompiledStream): Promise<Batch> {
    this.statements?.inc();
    try {
      return (await this.deps.pool.query<Batch>(stream.statement.text, stream.values)).rows[0];
    } catch (error) {
      if (changedUnderMetadata(error)) throw this.deps.staleCatalog(stream.model, error as Error);
      throw asInputError(error);
    }
  }
}

/** A stream's statement and values as a key: subscribers with equal keys read the same rows. */
function keyOf(stream: CompiledStream): string {
  return JSON.stringify([stream.statement.text, stream.values.map(asText)]);
}

/** A stream's statement for one model of its table, with the values it runs with (the cursor's the last one sent). */
interface CompiledStream extends StreamStatement {
  model: TableModel;
  values: unknown[];
}

/** One poll's answer. */
interface Batch {
  j: unknown[];
  last: string | null;
  sent: number;
}

const DONE: IteratorReturnResult<undefined> = { done: true, value: undefined };
/** The least time between the end of a poll and the next one when the table changed meanwhile (as live queries' refetches). */
const COALESCE_MS = 10;

/**
 * One subscription, as the async iterator graphql-js maps to messages: the batches its poll
 * gave it, in order, and an error as the last event (GraphQL sends it as that message's error;
 * the client may subscribe again from the last cursor value it received). `return()` (the
 * client's `complete`, or its socket closing) leaves the poll at once.
 */
class StreamSubscriber implements AsyncIterableIterator<unknown> {
  poll?: SharedPoll;
  /** Batches given and not yet read: the poll waits for them to be read before its next one. */
  readonly queue: unknown[] = [];
  private waiting?: (result: IteratorResult<unknown>) => void;
  private ended = false;
  private failed = false;

  constructor(
    /** The stream compiled for a model of its table, with this subscriber's session and variables. */
    readonly compile: (model: TableModel) => CompiledStream,
  ) {}

  get ready(): boolean {
    return this.queue.length === 0;
  }

  offer(event: unknown): void {
    if (this.ended || this.failed) return;
    const waiting = this.waiting;
    if (waiting) {
      this.waiting = undefined;
      waiting({ done: false, value: event });
    } else this.queue.push(event);
  }

  /** The error ends the stream after what was given before it. */
  fail(error: unknown): void {
    this.offer(error);
    this.failed = true;
    this.leave();
  }

  next(): Promise<IteratorResult<unknown>> {
    if (this.queue.length > 0) {
      const value = this.queue.shift();
      if (this.queue.length === 0) this.poll?.memberReady();
      return Promise.resolve({ done: false, value });
    }
    if (this.ended || this.failed) return Promise.resolve(DONE);
    return new Promise((resolve) => (this.waiting = resolve));
  }

  return(): Promise<IteratorResult<unknown>> {
    this.ended = true;
    this.queue.length = 0;
    const waiting = this.waiting;
    this.waiting = undefined;
    waiting?.(DONE);
    this.leave();
    return Promise.resolve(DONE);
  }

  [Symbol.asyncIterator](): this {
    return this;
  }

  private leave(): void {
    const poll = this.poll;
    this.poll = undefined;
    poll?.remove(this);
  }
}

/**
 * The poll loop of the subscribers of one statement and cursor value. Before each poll every
 * member has read the batch before (a member still reading after an interval, while others
 * wait, goes on in a poll of its own, so one slow client holds back nobody else). A poll
 * runs after the interval, at once after a full batch, or when the table changes (a change
 * during a poll makes the next one run at once). When the table's metadata changes, each member
 * is compiled again for it (the new permission applies from the next poll, from the same cursor)
 * and placed by its new key, or ends if the document no longer fits it.
 */
class SharedPoll {
  readonly members = new Set<StreamSubscriber>();
  private stopped = false;
  private timer?: NodeJS.Timeout;
  private wake?: () => void;
  /** The table changed since the last poll began: the next one runs without waiting. */
  private changed = false;
  /** Whether the last poll sent a full batch (more rows may be waiting: the next poll runs at once). */
  private more = true;
  private readonly unwatch?: () => void;

  constructor(
    private readonly owner: TableStreams,
    public stream: CompiledStream,
    /** Its key in the owner's map (undefined: a poll alone, which nobody joins until its cursor moves). */
    public key: string | undefined,
  ) {
    owner.started(this);
    this.unwatch = owner.deps.watch?.(stream.model.table, () => this.tableChanged());
    void this.run();
  }

  add(member: StreamSubscriber): void {
    member.poll = this;
    this.members.add(member);
  }

  remove(member: StreamSubscriber): void {
    this.members.delete(member);
    if (this.members.size === 0) this.stop();
    else this.memberReady();
  }

  /** A member read its last batch: wakes a poll waiting for it. */
  memberReady(): void {
    if (this.waitingForMembers && [...this.members].every((member) => member.ready)) this.wakeUp();
  }

  private waitingForMembers = false;

  private tableChanged(): void {
    this.changed = true;
    if (!this.waitingForMembers) this.wakeUp();
  }

  private wakeUp(): void {
    const wake = this.wake;
    this.wake = undefined;
    clearTimeout(this.timer);
    wake?.();
  }

  private stop(): void {
    if (this.stopped) return;
    this.stopped = true;
    this.owner.ended(this);
    this.unwatch?.();
    this.wakeUp();
  }

  /** Resolves after `ms`, or sooner on wakeUp(). */
  private sleep(ms: number): Promise<void> {
    return new Promise((resolve) => {
      this.wake = resolve;
      this.timer = setTimeout(resolve, ms);
    });
  }

  private async run(): Promise<void> {
    // Members are added right after the poll is made: the first poll waits for them.
    await Promise.resolve();
    while (!this.stopped) {
      if (this.changed) {
        // Changes during the last poll: the next one runs after a short gap (a burst of commits is a few polls, not one each).
        if (!this.more) await new Promise((resolve) => setTimeout(resolve, COALESCE_MS));
      } else if (!this.more) await this.sleep(this.owner.deps.intervalMs);
      if (this.stopped) return;
      await this.membersReady();
      if (this.stopped) return;
      const current = this.owner.deps.tables().get(tableKey(this.stream.model.table));
      if (current !== this.stream.model) return this.regroup(current);
      this.changed = false;
      let batch: Batch;
      try {
        batch = await this.owner.query(this.stream);
      } catch (error) {
        for (const member of [...this.members]) member.fail(error);
        return this.stop();
      }
      if (this.stopped) return;
      // The metadata may have changed while the statement waited for a connection or ran: its rows
      // (committed after the change, perhaps) are dropped and read again under the new plan.
      const after = this.owner.deps.tables().get(tableKey(this.stream.model.table));
      if (after !== this.stream.model) return this.regroup(after);
      // (A permission's limit may be 0: nothing is ever sent, and the loop still waits.)
      this.more = batch.sent > 0 && batch.sent === this.stream.limit;
      if (batch.sent === 0) continue;
      this.stream.values[this.stream.cursor] = batch.last;
      for (const member of this.members) member.offer(batch.j);
      if (!this.owner.moved(this)) {
        this.members.clear();
        return this.stop();
      }
    }
  }

  /** Until every member read the last batch; after an interval, those still reading go on alone (when others wait for them). */
  private async membersReady(): Promise<void> {
    if ([...this.members].every((member) => member.ready)) return;
    this.waitingForMembers = true;
    try {
      while (![...this.members].every((member) => member.ready) && !this.stopped) {
        await this.sleep(this.owner.deps.intervalMs);
        const behind = [...this.members].filter((member) => !member.ready);
        if (behind.length === 0 || behind.length === this.members.size) continue;
        for (const member of behind) {
          this.members.delete(member);
          this.owner.alone(member, { ...this.stream, values: [...this.stream.values] });
        }
      }
    } finally {
      this.waitingForMembers = false;
    }
  }

  /** The table's model changed: each member compiled again (from the same cursor value) goes to the poll of its new statement. */
  private regroup(current: TableModel | undefined): void {
    const { model, values, cursor } = this.stream;
    const members = [...this.members];
    this.members.clear();
    this.stop();
    for (const member of members) {
      let next: CompiledStream;
      try {
        if (!current) throw new Error('no longer tracked');
        next = member.compile(current);
      } catch {
        member.poll = undefined;
        member.fail(
          new GraphQLError(`the metadata of the table ${model.typeName} changed so that this stream no longer fits it: subscribe again`, {
            extensions: { code: 'METADATA_CHANGED' },
          }),
        );
        continue;
      }
      next.values[next.cursor] = values[cursor];
      this.owner.place(member, next);
    }
  }
}
