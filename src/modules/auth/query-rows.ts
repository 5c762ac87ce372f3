import type { EntityManager } from 'typeorm';

/**
 * The rows a statement returns. TypeORM answers an UPDATE or DELETE (with RETURNING) as
 * `[rows, affectedCount]` and any other statement as its rows; rows themselves are never arrays.
 */
export async function queryRows<Row>(manager: Pick<EntityManager, 'query'>, sql: string, parameters: unknown[]): Promise<Row[]> {
  const result = (await manager.query(sql, parameters)) as unknown[];
  return (Array.isArray(result[0]) ? result[0] : result) as Row[];
}
