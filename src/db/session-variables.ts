import { AsyncLocalStorage } from 'node:async_hooks';
import { createHash } from 'node:crypto';
import type pg from 'pg';
import {
  EventSubscriber,
  type BeforeQueryEvent,
  type DataSource,
  type EntitySubscriberInterface,
  type QueryRunner,
  type TransactionStartEvent,
} from 'typeorm';

/**
 * The session variables of the request being served, carried into the statements it runs:
 * `plinth.session_variables` holds them as JSON, so the capture triggers of event triggers record
 * who made a change (`event.session_variables`, null for a change made outside a Plinth request:
 * a job, psql).
 */
export const SESSION_VARIABLES_SETTING = 'plinth.session_variables';

/** The variables of the current request, read lazily (most requests write nothing). */
type VariablesOf = () => Record<string, string> | null;

const current = new AsyncLocalStorage<() => string>();

/** Work that may write and runs with its session variables now; while there is none, the storage is off. */
let writersInFlight = 0;

/**
 * Runs `work` (and all it calls) as part of a request whose session variables `variables` gives,
 * until `release` is called (once the request's work is over). Only work that may write comes
 * here (mutations, REST calls other than GET): while AsyncLocalStorage is on, Node runs a hook for
 * every promise of the process (about 2.9 times the cost of an `await`, a tenth of a small query's
 * CPU), so it is turned off whenever no such work is in flight, and reads pay nothing.
 */
export function runWithSessionVariables<T>(variables: VariablesOf, work: () => T): { result: T; release(): void } {
  let resolved: string | undefined;
  let released = false;
  writersInFlight++;
  const release = () => {
    if (released) return;
    released = true;
    // A store kept by work that outlives its request is seen again once another writer turns the storage on.
    if (--writersInFlight === 0) current.disable();
  };
  try {
    const result = current.run(() => {
      if (resolved === undefined) {
        const value = variables();
        resolved = value ? JSON.stringify(value) : '';
      }
      return resolved;
    }, work);
    return { result, release };
  } catch (error) {
    release();
    throw error;
  }
}

/** What the connection's session-level setting holds (kept on the pg client; '' when unset). */
const SESSION_LEVEL = Symbol('plinth session variables');
type TrackedClient = pg.ClientBase & { [SESSION_LEVEL]?: string };

/** Statements that may change rows (and so fire a capture trigger); reads need no setting. */
const WRITE = /^\s*(insert|update|delete|with|merge|copy|call)\b/i;

/**
 * Keeps `plinth.session_variables` right for every write made through TypeORM:
 * - a transaction opened during a request gets them transaction-locally at its start;
 * - a single write outside a transaction (repository.insert, say) runs on a connection whose
 *   session-level setting is first made the request's (or cleared outside a request). The value
 *   a pooled connection holds is tracked, so this costs a round trip only when it changes.
 */
@EventSubscriber()
export class SessionVariablesSubscriber implements EntitySubscriberInterface {
  async afterTransactionStart({ queryRunner }: TransactionStartEvent): Promise<void> {
    // Savepoints (nested transactions) share the outer transaction's setting.
    if ((queryRunner as unknown as { transactionDepth: number }).transactionDepth !== 1) return;
    const wanted = current.getStore()?.() ?? '';
    if (wanted !== (connectionOf(queryRunner)?.[SESSION_LEVEL] ?? '')) {
      await queryRunner.query('SELECT set_config($1, $2, true)', [SESSION_VARIABLES_SETTING, wanted]);
    }
  }

  async beforeQuery({ queryRunner, query }: BeforeQueryEvent): Promise<void> {
    if (queryRunner.isTransactionActive || !WRITE.test(query)) return;
    const client = connectionOf(queryRunner);
    if (client) await holdSessionLevel(client, current.getStore()?.() ?? '');
  }
}

/** Makes the connection's session-level setting `wanted`: a round trip, unless it holds it already. */
async function holdSessionLevel(client: TrackedClient, wanted: string): Promise<void> {
  if (wanted === (client[SESSION_LEVEL] ?? '')) return;
  // On the client itself: through a query runner, this statement would come back to beforeQuery.
  await client.query('SELECT set_config($1, $2, false)', [SESSION_VARIABLES_SETTING, wanted]);
  client[SESSION_LEVEL] = wanted;
}

/** Prepared statements' names by their text (constant texts: values come as parameters). */
const preparedNames = new Map<string, string>();

function preparedName(text: string): string {
  let name = preparedNames.get(text);
  if (name === undefined) preparedNames.set(text, (name = `plinth_${createHash('sha256').update(text).digest('hex').slice(0, 32)}`));
  return name;
}

/**
 * Runs one statement, outside any transaction, as a prepared statement of a pooled connection:
 * parsed and planned once per connection (a third of the round trip of processPayment's read).
 * `sql` is a constant text (values as parameters), names the columns it returns (with `*`, a column
 * added while the process runs fails the statement: "cached plan must not change result type") and
 * ends without a semicolon. The request's session variables reach it as they reach TypeORM's
 * statements: a write finds them set on its connection first. A read sets them in its own round
 * trip: a request that reads before it writes (processPayment reads before the provider call and
 * writes after it) then usually gets a connection back that already holds them, and its write
 * needs no `set_config` round trip of its own (given another connection, it sets them as before).
 */
export async function preparedStatement<Row>(dataSource: DataSource, sql: string, parameters: unknown[]): Promise<Row[]> {
  const runner = dataSource.createQueryRunner();
  try {
    const client = (await runner.connect()) as TrackedClient;
    const run = async <Result>(text: string, values: unknown[]) => (await client.query({ name: preparedName(text), text, values })).rows as Result[];
    const wanted = current.getStore()?.() ?? '';
    if (WRITE.test(sql)) await holdSessionLevel(client, wanted);
    if (wanted === (client[SESSION_LEVEL] ?? '')) return await run<Row>(sql, parameters);
    const [name, value] = [parameters.length + 1, parameters.length + 2];
    const rows = await run<Row & { plinth_session_level?: string }>(`SELECT carried.*, set_config($${name}, $${value}, false) AS plinth_session_level FROM (${sql}) carried`, [
      ...parameters,
      SESSION_VARIABLES_SETTING,
      wanted,
    ]);
    // set_config ran once per row: with no row it did not run, and the connection holds what it held.
    if (rows.length > 0) client[SESSION_LEVEL] = wanted;
    return rows.map(({ plinth_session_level: _set, ...row }) => row as Row);
  } finally {
    await runner.release();
  }
}

function connectionOf(queryRunner: QueryRunner): TrackedClient | undefined {
  return (queryRunner as unknown as { databaseConnection?: TrackedClient }).databaseConnection;
}
