import type { ObjectLiteral, SelectQueryBuilder } from 'typeorm';
import { ADMIN_ROLE, type Session } from '../http/session';

/**
 * The row filters of spec 2 §2.3, in the one place every module's queries of user-owned rows go
 * through (`filterRows` for TypeORM query builders, `rowFilterSql` for SQL written by hand):
 *
 * - `admin` sees the rows whose source account is its `x-gql-source-account-id`; the admin
 *   secret without that variable sees every row (the engine's admin);
 * - `me` sees the row that is the user itself (`id` of `users`; the owner column elsewhere);
 * - `user`, and every other role a token carries (custom roles, `anonymous` with a user id), sees
 *   the rows whose owner is its `x-gql-user-id`;
 * - a caller without a user id (the unauthorised role) sees nothing.
 */
export interface OwnedTable {
  /** The column naming the row's owner: `user_id`, or `id` for `users` itself. */
  owner: string;
  /** The column role `me` matches; the owner column when unset. */
  self?: string;
  /** The column of the row's source account; `source_account_id` when unset. */
  sourceAccount?: string;
}

/** What a session may see of a table: everything, nothing, or the rows whose column equals a value. */
export type RowScope = { kind: 'all' } | { kind: 'none' } | { kind: 'equal'; column: string; value: string };

const SOURCE_ACCOUNT_VARIABLE = 'x-gql-source-account-id';
const IDENTIFIER = /^[a-z_][a-z0-9_]*$/;

export function rowScope(session: Session, table: OwnedTable): RowScope {
  if (session.role === ADMIN_ROLE) {
    const account = session.variables[SOURCE_ACCOUNT_VARIABLE];
    return account ? equal(table.sourceAccount ?? 'source_account_id', account) : { kind: 'all' };
  }
  if (!session.authenticated || !session.userId) return { kind: 'none' };
  return equal(session.role === 'me' ? (table.self ?? table.owner) : table.owner, session.userId);
}

function equal(column: string, value: string): RowScope {
  if (!IDENTIFIER.test(column)) throw new Error(`row filter: "${column}" is not a column name`);
  return { kind: 'equal', column, value };
}

/** Restricts a query builder to the rows the session may see (`alias` is the table's alias in it). */
export function filterRows<Entity extends ObjectLiteral>(
  query: SelectQueryBuilder<Entity>,
  alias: string,
  session: Session,
  table: OwnedTable,
): SelectQueryBuilder<Entity> {
  const scope = rowScope(session, table);
  if (scope.kind === 'all') return query;
  if (scope.kind === 'none') return query.andWhere('false');
  // Compared as text: owner columns are uuid or text, and a user id that is not a uuid matches nothing.
  return query.andWhere(`"${alias}"."${scope.column}"::text = :rowFilterValue`, { rowFilterValue: scope.value });
}

/**
 * The same as an SQL condition on `alias` (a table name or alias of the statement), its value as
 * parameter `$<parameterIndex>`: `WHERE ${clause}` with `[...parameters, ...filter.parameters]`.
 */
export function rowFilterSql(session: Session, table: OwnedTable, alias: string, parameterIndex: number): { clause: string; parameters: string[] } {
  if (!IDENTIFIER.test(alias)) throw new Error(`row filter: "${alias}" is not a table alias`);
  const scope = rowScope(session, table);
  if (scope.kind === 'all') return { clause: 'true', parameters: [] };
  if (scope.kind === 'none') return { clause: 'false', parameters: [] };
  return { clause: `${alias}.${scope.column}::text = $${parameterIndex}`, parameters: [scope.value] };
}
