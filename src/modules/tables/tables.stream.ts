import { GraphQLError, type GraphQLResolveInfo } from 'graphql';
import type pg from 'pg';
import type { GraphQLContext } from '../../graphql/context';
import { tableKey } from './tables.catalog';
import { StatementCompiler } from './tables.compiler';
import { isObject, type BoolExp } from './tables.metadata';
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
  /** How long a stream waits between polls that found no more rows to send. */
  intervalMs: number;
}

/**
 * `<table>_stream` subscriptions: each polls its own statement (the rows after its cursor) every
 * interval, at once again after a full batch, and yields each batch that has rows.
 */
export class TableStreams {
  constructor(private readonly deps: TableStreamsDependencies) {}

  /** The stream of one subscription; a refusal of its arguments is thrown (GraphQL answers it as the subscription's error). */
  open(table: TableModel, info: GraphQLResolveInfo, context: GraphQLContext): AsyncIterableIterator<unknown> {
    const { session } = context;
    const compile = (model: TableModel): CompiledStream => {
      const stream = new StreamCompiler({ role: session.role, admin: isAdmin(session) }, this.deps.tables(), info).compileStream(model);
      return { model, ...stream, values: boundValues(stream.statement, session.variables, info.variableValues) };
    };
    return new StreamPoll(this.deps, compile, compile(table));
  }
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

/**
 * The poll loop of one stream, as an async iterator graphql-js maps to messages. `return()` (the
 * client's `complete`, or its socket closing) stops it at once, even while it waits. An error is
 * yielded as the last event (GraphQL sends it as that message's error) and the stream ends: the
 * client may subscribe again from the last cursor value it received. When the table's metadata
 * changes, the stream is compiled again for it (the new permission applies from the next poll),
 * or ends if the document no longer fits it.
 */
class StreamPoll implements AsyncIterableIterator<unknown> {
  private stopped = false;
  private timer?: NodeJS.Timeout;
  private wake?: () => void;
  /** Whether the last poll sent a full batch (more rows may be waiting: the next poll runs at once). */
  private more = true;

  constructor(
    private readonly deps: TableStreamsDependencies,
    private readonly compile: (model: TableModel) => CompiledStream,
    private stream: CompiledStream,
  ) {}

  [Symbol.asyncIterator](): this {
    return this;
  }

  async next(): Promise<IteratorResult<unknown>> {
    while (!this.stopped) {
      if (!this.more) await this.pause();
      if (this.stopped) break;
      let batch: Batch;
      try {
        batch = await this.poll();
      } catch (error) {
        this.stop();
        return { done: false, value: error };
      }
      // (A permission's limit may be 0: nothing is ever sent, and the loop still waits.)
      this.more = batch.sent > 0 && batch.sent === this.stream.limit;
      if (this.stopped) break;
      if (batch.sent > 0) {
        this.stream.values[this.stream.cursor] = batch.last;
        return { done: false, value: batch.j };
      }
    }
    return DONE;
  }

  return(): Promise<IteratorResult<unknown>> {
    this.stop();
    return Promise.resolve(DONE);
  }

  private stop(): void {
    this.stopped = true;
    clearTimeout(this.timer);
    this.wake?.();
  }

  private pause(): Promise<void> {
    return new Promise((resolve) => {
      this.wake = resolve;
      this.timer = setTimeout(resolve, this.deps.intervalMs);
    });
  }

  private async poll(): Promise<Batch> {
    const { model } = this.stream;
    const current = this.deps.tables().get(tableKey(model.table));
    if (current !== model) this.follow(current);
    const { statement, values } = this.stream;
    try {
      return (await this.deps.pool.query<Batch>(statement.text, values)).rows[0];
    } catch (error) {
      if (changedUnderMetadata(error)) throw this.deps.staleCatalog(model, error as Error);
      throw asInputError(error);
    }
  }

  /** The stream compiled again for the table's new model (its permission, columns, relationships), from the same cursor value. */
  private follow(current: TableModel | undefined): void {
    const { model, values, cursor } = this.stream;
    let next: CompiledStream;
    try {
      if (!current) throw new Error('no longer tracked');
      next = this.compile(current);
    } catch {
      throw new GraphQLError(`the metadata of the table ${model.typeName} changed so that this stream no longer fits it: subscribe again`, {
        extensions: { code: 'METADATA_CHANGED' },
      });
    }
    next.values[next.cursor] = values[cursor];
    this.stream = next;
  }
}
