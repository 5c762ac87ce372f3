import type { DataSource, EntityManager } from 'typeorm';

export type Queryable = Pick<DataSource | EntityManager, 'query'>;

/**
 * The rows of a statement. TypeORM answers UPDATE and DELETE with `[rows, count]` and every
 * other statement with the rows; rows are objects, so the two cannot be confused.
 */
export async function rows<T>(db: Queryable, sql: string, parameters: unknown[] = []): Promise<T[]> {
  const result = (await db.query(sql, parameters)) as unknown;
  if (Array.isArray(result) && result.length === 2 && Array.isArray(result[0]) && typeof result[1] === 'number') return result[0] as T[];
  return result as T[];
}
