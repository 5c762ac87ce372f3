import type pg from 'pg';
import type { DataSource, EntityManager } from 'typeorm';
import type { PostgresDriver } from 'typeorm/driver/postgres/PostgresDriver';
import { connectionOf, prepareConnectionFor } from './session-variables';

/** A statement with a name: PostgreSQL parses it once per connection and soon keeps one plan for it. */
export interface PreparedStatement {
  readonly name: string;
  readonly text: string;
}

/**
 * Runs a named prepared statement and answers its rows. TypeORM sends every statement unnamed,
 * so PostgreSQL parses and plans it on each call; for a short statement on a hot path (token
 * refresh, sign-in) that is most of the database's work (docs/decisions.md, Authentication
 * service). With `manager` inside a transaction it runs on that transaction's connection;
 * otherwise on a connection of the data source's pool, with the request's session variables as
 * TypeORM's statements get them (src/db/session-variables.ts).
 */
export async function queryPrepared<Row extends pg.QueryResultRow>(
  dataSource: DataSource,
  statement: PreparedStatement,
  values: unknown[],
  manager?: EntityManager,
): Promise<Row[]> {
  const runner = manager?.queryRunner;
  if (runner?.isTransactionActive) {
    const client = connectionOf(runner) as unknown as pg.PoolClient;
    return (await client.query<Row>({ ...statement, values })).rows;
  }
  const client = await ((dataSource.driver as PostgresDriver).master as pg.Pool).connect();
  // A connection lost meanwhile fails the statement below; unheard, its 'error' event would end
  // the process. The pool drops such a connection when it is released.
  const ignore = () => undefined;
  client.on('error', ignore);
  try {
    await prepareConnectionFor(client, statement.text);
    return (await client.query<Row>({ ...statement, values })).rows;
  } finally {
    client.removeListener('error', ignore);
    client.release();
  }
}
