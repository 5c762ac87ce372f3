import { GraphQLError, type GraphQLResolveInfo, type OperationDefinitionNode } from 'graphql';
import { collectFields } from 'graphql/execution/collectFields';
import type pg from 'pg';
import { SESSION_VARIABLES_SETTING } from '../../db/session-variables';
import type { GraphQLContext } from '../../graphql/context';
import type { TableModel } from './tables.model';
import { CHECK_FAILED, checkFailed, MutationCompiler, WrittenRows, type CompiledWrite, type Writer } from './tables.mutations';
import { MUTATION_FIELD, type MutationField } from './tables.schema';
import { asInputError, boundValues, changedUnderMetadata, type CompiledStatement } from './tables.sql';

/** What the generated mutation root fields of one operation came to: each field's value by response key, or the field that failed. */
interface Outcome {
  results: Map<string, unknown>;
  failed?: { key: string; error: unknown };
}

/** Hasura's messages for PostgreSQL's integrity constraint violations (class 23). */
const VIOLATIONS: Record<string, string> = {
  '23505': 'Uniqueness violation',
  '23503': 'Foreign key violation',
  '23502': 'Not-NULL violation',
  '23514': 'Check constraint violation',
  '23P01': 'Exclusion violation',
};

/** PostgreSQL's raise_exception: what RAISE EXCEPTION gives when it names no SQLSTATE. */
const RAISE_EXCEPTION = 'P0001';

/** The session's settings as the statements bind them: Plinth's (`plinth.session_variables`), then Hasura's names (`hasura.user`). */
function sessionSettings(session: Readonly<Record<string, string>>): [string, string] {
  // Hasura's own setting too, with Hasura's names, for triggers written for Hasura.
  const hasuraNames = Object.fromEntries(Object.entries(session).map(([name, value]) => [name.replace(/^x-gql-/, 'x-hasura-'), value]));
  return [JSON.stringify(session), JSON.stringify(hasuraNames)];
}

/**
 * Runs the generated mutation root fields of an operation: when the first of them resolves, all of
 * them are compiled (a refusal stops everything before anything is written) and run in order in
 * one transaction, which first records the caller's session for the event triggers' capture
 * functions; one failing rolls them all back. The other fields then take their values from it.
 * An operation of one field whose write is one statement runs it alone (CompiledWrite.alone: it
 * records the session itself, and PostgreSQL's implicit transaction of one statement is all it
 * needs): one round trip where the transaction takes four.
 */
export class MutationRunner {
  /** Per request (its context) and operation: the outcome of its mutation root fields. */
  private readonly outcomes = new WeakMap<object, Map<OperationDefinitionNode, Promise<Outcome>>>();

  constructor(
    private readonly pool: pg.Pool,
    /** Called when a statement met a table or column gone from the catalog. */
    private readonly onStaleCatalog: (table: TableModel, error: Error) => GraphQLError,
  ) {}

  async mutate(info: GraphQLResolveInfo, context: GraphQLContext, writer: Writer, tables: ReadonlyMap<string, TableModel>): Promise<unknown> {
    let byOperation = this.outcomes.get(context);
    if (!byOperation) this.outcomes.set(context, (byOperation = new Map()));
    let outcome = byOperation.get(info.operation);
    if (!outcome) byOperation.set(info.operation, (outcome = this.runAll(info, context, writer, tables)));
    const { results, failed } = await outcome;
    const key = String(info.path.key);
    if (failed) {
      // The failing field carries the error; the others were rolled back or never ran.
      if (failed.key === key) throw failed.error;
      return null;
    }
    return results.get(key) ?? null;
  }

  private async runAll(info: GraphQLResolveInfo, context: GraphQLContext, writer: Writer, tables: ReadonlyMap<string, TableModel>): Promise<Outcome> {
    const results = new Map<string, unknown>();
    const writes: { key: string; write: CompiledWrite; table: TableModel }[] = [];
    const fields = collectFields(info.schema, info.fragments, info.variableValues, info.parentType, info.operation.selectionSet);
    for (const [key, nodes] of fields) {
      const marker = info.parentType.getFields()[nodes[0].name.value]?.extensions?.[MUTATION_FIELD] as MutationField | undefined;
      if (!marker) continue;
      try {
        const operation = { ...info, fieldNodes: nodes };
        writes.push({ key, table: marker.table, write: new MutationCompiler(writer, tables, operation).compileWrite(marker.table, marker.kind) });
      } catch (error) {
        return { results, failed: { key, error } };
      }
    }
    const alone = writes.length === 1 ? writes[0].write.alone : undefined;
    if (alone) return this.runAlone(alone, writes[0], info, context);
    const client = await this.pool.connect();
    // A connection lost meanwhile fails the statement; unheard, its 'error' event would end the process.
    const ignore = () => undefined;
    client.on('error', ignore);
    let current = writes[0]?.key ?? String(info.path.key);
    let broken: Error | undefined;
    try {
      await client.query('BEGIN');
      const session = context.session.variables;
      const [plinthSession, hasuraSession] = sessionSettings(session);
      await client.query('SELECT set_config($1, $2, true), set_config($3, $4, true)', [SESSION_VARIABLES_SETTING, plinthSession, 'hasura.user', hasuraSession]);
      for (const { key, write, table } of writes) {
        current = key;
        const answers: unknown[] = [];
        let written: string[] = [];
        if (write.nested) {
          const { statement, gaps } = write.nested;
          let row: { written: string[]; gap: number | null };
          try {
            [row] = (await client.query<typeof row>(statement.text, boundValues(statement, session, info.variableValues))).rows;
          } catch (error) {
            throw this.asWriteError(error, table);
          }
          // Hasura's refusal: a row whose relationships need it was not written (an on_conflict that did nothing).
          if (row.gap !== null) throw new GraphQLError(gaps[row.gap], { extensions: { code: 'not-supported' } });
          written = row.written;
        }
        for (const statement of write.statements) {
          let row: { j: unknown };
          const values = boundValues(statement, session, info.variableValues).map((value) => (value instanceof WrittenRows ? written[value.index] : value));
          try {
            [row] = (await client.query<{ j: unknown }>(statement.text, values)).rows;
          } catch (error) {
            throw this.asWriteError(error, table);
          }
          answers.push(row.j);
        }
        results.set(key, write.shape === 'responses' ? answers : answers[0]);
      }
      await client.query('COMMIT');
      return { results };
    } catch (error) {
      try {
        await client.query('ROLLBACK');
      } catch (rollbackError) {
        broken = rollbackError as Error;
      }
      return { results: new Map(), failed: { key: current, error } };
    } finally {
      client.removeListener('error', ignore);
      client.release(broken);
    }
  }

  /** One field's write as one statement, outside a transaction (CompiledWrite.alone). */
  private async runAlone(
    statement: CompiledStatement,
    { key, table }: { key: string; table: TableModel },
    info: GraphQLResolveInfo,
    context: GraphQLContext,
  ): Promise<Outcome> {
    try {
      const session = context.session.variables;
      const values = [...boundValues(statement, session, info.variableValues), ...sessionSettings(session)];
      const [row] = (await this.pool.query<{ j: unknown }>(statement.text, values)).rows;
      return { results: new Map([[key, row.j]]) };
    } catch (error) {
      // (asWriteError leaves an error without PostgreSQL's code, such as a bad value's, as it is.)
      return { results: new Map(), failed: { key, error: this.asWriteError(error, table) } };
    }
  }

  /** PostgreSQL's refusal of a write as the caller's error where it is the caller's (a constraint, a value), else as it is. */
  private asWriteError(error: unknown, table: TableModel): unknown {
    const code = (error as { code?: unknown }).code;
    if (typeof code !== 'string') return error;
    // A written row failed its permission's check (the statement's plinth_check_failed()).
    if (code === CHECK_FAILED) return checkFailed();
    const message = (error as Error).message;
    if (VIOLATIONS[code] || code.startsWith('23')) {
      return new GraphQLError(`${VIOLATIONS[code] ?? 'Integrity constraint violation'}. ${message}`, { extensions: { code: 'constraint-violation' } });
    }
    // RAISE EXCEPTION without a SQLSTATE (a trigger's or function's refusal): its author wrote the message for the caller.
    if (code === RAISE_EXCEPTION) return new GraphQLError(message, { extensions: { code: 'postgres-error' } });
    // An upsert naming one conflicting row twice ("ON CONFLICT DO UPDATE command cannot affect row a second time").
    if (code === '21000') return new GraphQLError(`invalid input: ${message}`, { extensions: { code: 'BAD_USER_INPUT' } });
    if (changedUnderMetadata(error)) return this.onStaleCatalog(table, error as Error);
    return asInputError(error);
  }
}
