import type pg from 'pg';
import type { DataSource, EntityManager } from 'typeorm';
import type { PostgresDriver } from 'typeorm/driver/postgres/PostgresDriver';

/** What a statement runs on: the data source (the pool) or a transaction's manager. */
export type Queryable = Pick<DataSource | EntityManager, 'query'>;

/** The pool under TypeORM, for statements that need pg's own API (cursors, sessions, counts). */
export function poolOf(dataSource: DataSource): pg.Pool {
  return (dataSource.driver as PostgresDriver).master as pg.Pool;
}

/**
 * The rows of a statement. TypeORM answers UPDATE and DELETE with `[rows, count]` and every
 * other statement with the rows; rows are objects, so the two cannot be confused.
 */
export async function rows<T>(db: Queryable, sql: string, parameters: unknown[] = []): Promise<T[]> {
  const result = (await db.query(sql, parameters)) as unknown;
  if (Array.isArray(result) && result.length === 2 && Array.isArray(result[0]) && typeof result[1] === 'number') return result[0] as T[];
  return result as T[];
}

/** The first row of a statement, if any. */
export async function one<T>(db: Queryable, sql: string, parameters: unknown[] = []): Promise<T | undefined> {
  return (await rows<T>(db, sql, parameters))[0];
}

export interface RowsAndCount<T> {
  rows: T[];
  count: number;
}

/**
 * A statement's rows and the number of rows it touched, on the pool or inside a transaction
 * (its manager): for callers that act on an UPDATE's or INSERT's count.
 */
export async function rowsAndCount<T = Record<string, unknown>>(
  on: pg.Pool | EntityManager,
  text: string,
  parameters: unknown[] = [],
): Promise<RowsAndCount<T>> {
  if ('queryRunner' in on) {
    const result = (await on.queryRunner!.query(text, parameters, true)) as { records: T[]; affected?: number };
    return { rows: result.records, count: result.affected ?? result.records.length };
  }
  const result = await (on as pg.Pool).query(text, parameters);
  return { rows: result.rows as T[], count: result.rowCount ?? 0 };
}
