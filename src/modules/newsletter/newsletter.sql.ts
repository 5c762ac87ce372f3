import type pg from 'pg';
import type { DataSource, EntityManager } from 'typeorm';
import type { PostgresDriver } from 'typeorm/driver/postgres/PostgresDriver';

/** The pool under TypeORM: statements outside a transaction go straight to it. */
export function newsletterPool(dataSource: DataSource): pg.Pool {
  return (dataSource.driver as PostgresDriver).master as pg.Pool;
}

export interface Rows<T> {
  rows: T[];
  count: number;
}

/**
 * Runs one statement on the pool, or inside a transaction (its manager), with its rows and
 * affected count: the newsletter's one way to the database.
 */
export async function run<T = Record<string, unknown>>(on: pg.Pool | EntityManager, text: string, parameters: unknown[] = []): Promise<Rows<T>> {
  if ('queryRunner' in on) {
    const result = (await on.queryRunner!.query(text, parameters, true)) as { records: T[]; affected?: number };
    return { rows: result.records, count: result.affected ?? result.records.length };
  }
  const result = await (on as pg.Pool).query(text, parameters);
  return { rows: result.rows as T[], count: result.rowCount ?? 0 };
}
