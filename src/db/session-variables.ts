import { AsyncLocalStorage } from 'node:async_hooks';
import { EventSubscriber, type BeforeQueryEvent, type EntitySubscriberInterface, type QueryRunner, type TransactionStartEvent } from 'typeorm';

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
type TrackedClient = { [SESSION_LEVEL]?: string; query(sql: string, parameters: unknown[]): Promise<unknown> };

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
    if (!client) return;
    const wanted = current.getStore()?.() ?? '';
    if (wanted === (client[SESSION_LEVEL] ?? '')) return;
    // On the client itself: through the query runner, this statement would come back here.
    await client.query('SELECT set_config($1, $2, false)', [SESSION_VARIABLES_SETTING, wanted]);
    client[SESSION_LEVEL] = wanted;
  }
}

function connectionOf(queryRunner: QueryRunner): TrackedClient | undefined {
  return (queryRunner as unknown as { databaseConnection?: TrackedClient }).databaseConnection;
}
