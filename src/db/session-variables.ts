import { AsyncLocalStorage } from 'node:async_hooks';
import type pg from 'pg';
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
 * every promise of the process, which makes every `await` several times dearer, so it is turned
 * off whenever no such work is in flight, and reads pay nothing.
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

const NO_REQUEST = () => '';

/**
 * Runs `work` (and all it calls) as work of no request, even when a request started it: a batch
 * written for several requests (src/platform/group-commit.ts) is no single caller's change.
 */
export function outsideRequests<T>(work: () => T): T {
  return current.getStore() === undefined ? work() : current.run(NO_REQUEST, work);
}

/** What the connection's session-level setting holds (kept on the pg client; '' when unset). */
const SESSION_LEVEL = Symbol('plinth session variables');
export type TrackedClient = pg.ClientBase & { [SESSION_LEVEL]?: string };

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
    const wanted = currentSessionLevel();
    const client = connectionOf(queryRunner);
    if (!client || !holdsSessionLevel(client, wanted)) {
      await queryRunner.query('SELECT set_config($1, $2, true)', [SESSION_VARIABLES_SETTING, wanted]);
    }
  }

  async beforeQuery({ queryRunner, query }: BeforeQueryEvent): Promise<void> {
    if (queryRunner.isTransactionActive) return;
    const client = connectionOf(queryRunner);
    if (client) await prepareConnectionFor(client, query);
  }
}

/**
 * Before a single statement outside a transaction on a pooled connection: when it may write, the
 * connection's session-level setting is made the current request's (cleared outside a request),
 * a round trip only when it changes. The subscriber above calls it for TypeORM's statements;
 * src/db/prepared-statements.ts for its own.
 */
export async function prepareConnectionFor(client: TrackedClient, sql: string): Promise<void> {
  if (!WRITE.test(sql)) return;
  const wanted = currentSessionLevel();
  if (holdsSessionLevel(client, wanted)) return;
  // On the client itself: through a query runner, this statement would come back to the subscriber.
  await client.query('SELECT set_config($1, $2, false)', [SESSION_VARIABLES_SETTING, wanted]);
  heldSessionLevel(client, wanted);
}

/** The value `plinth.session_variables` should hold for the work running now ('' outside a request). */
export function currentSessionLevel(): string {
  return current.getStore()?.() ?? '';
}

/** Whether the connection's session-level setting is `wanted` already. */
export function holdsSessionLevel(client: TrackedClient, wanted: string): boolean {
  return wanted === (client[SESSION_LEVEL] ?? '');
}

/** Notes that a statement run on the connection set its session-level setting to `wanted`. */
export function heldSessionLevel(client: TrackedClient, wanted: string): void {
  client[SESSION_LEVEL] = wanted;
}

export function connectionOf(queryRunner: QueryRunner): TrackedClient | undefined {
  return (queryRunner as unknown as { databaseConnection?: TrackedClient }).databaseConnection;
}
