import type pg from 'pg';
import { poolOf } from './sql';
import type { DataSource, EntityManager } from 'typeorm';
import { sha256Hex } from '../common/sha256';
import {
  connectionOf,
  currentSessionLevel,
  heldSessionLevel,
  holdsSessionLevel,
  prepareConnectionFor,
  SESSION_VARIABLES_SETTING,
  type TrackedClient,
} from './session-variables';

/** Prepared statements' names by their text (constant texts: values come as parameters). */
const preparedNames = new Map<string, string>();

function preparedName(text: string): string {
  let name = preparedNames.get(text);
  if (name === undefined) preparedNames.set(text, (name = `plinth_${sha256Hex(text).slice(0, 32)}`));
  return name;
}

/**
 * Runs one statement as a prepared statement and answers its rows. TypeORM sends every statement
 * unnamed, so PostgreSQL parses and plans it on each call; for a short statement on a hot path
 * (token refresh, sign-in, processPayment's read and write) that is most of the database's work
 * (docs/decisions.md, Authentication service and Payments).
 *
 * `sql` is a constant text (values as parameters), names the columns it returns (with `*`, a
 * column added while the process runs fails the statement: "cached plan must not change result
 * type") and ends without a semicolon. With `manager` it runs on that transaction's connection;
 * otherwise on a pooled connection, whose session variables a write first makes the request's (as
 * for TypeORM's statements) and a read sets only when they are unset: a request that reads before
 * it writes (processPayment) then usually finds them already set for its write.
 */
export async function queryPrepared<Row extends pg.QueryResultRow>(
  dataSource: DataSource,
  sql: string,
  values: unknown[],
  manager?: EntityManager,
): Promise<Row[]> {
  const name = preparedName(sql);
  const runner = manager?.queryRunner;
  if (runner?.isTransactionActive) {
    const client = connectionOf(runner)!;
    return (await client.query<Row>({ name, text: sql, values })).rows;
  }
  const client = (await poolOf(dataSource).connect()) as pg.PoolClient & TrackedClient;
  // A connection lost meanwhile fails the statement below; unheard, its 'error' event would end
  // the process. The pool drops such a connection when it is released.
  const ignore = () => undefined;
  client.on('error', ignore);
  try {
    await prepareConnectionFor(client, sql);
    const wanted = currentSessionLevel();
    if (holdsSessionLevel(client, wanted)) return (await client.query<Row>({ name, text: sql, values })).rows;
    const carried = `SELECT carried.*, set_config($${values.length + 1}, $${values.length + 2}, false) AS plinth_session_level FROM (${sql}) carried`;
    const rows = (
      await client.query<Row & { plinth_session_level?: string }>({
        name: preparedName(carried),
        text: carried,
        values: [...values, SESSION_VARIABLES_SETTING, wanted],
      })
    ).rows;
    // set_config ran once per row: with no row it did not run, and the connection holds what it held.
    if (rows.length > 0) heldSessionLevel(client, wanted);
    return rows.map(({ plinth_session_level: _set, ...row }) => row as unknown as Row);
  } finally {
    client.removeListener('error', ignore);
    client.release();
  }
}
