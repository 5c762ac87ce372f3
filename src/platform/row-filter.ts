import type { ObjectLiteral, SelectQueryBuilder } from 'typeorm';
import { ADMIN_ROLE } from '../common/roles';
import { type Session } from './session';
import { UUID } from '../common/ids';

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
  /**
   * The owner (and self) columns are uuid: compared as uuid, so their indexes serve, and a user
   * id that is not a uuid matches nothing. Otherwise they are compared as text.
   */
  uuid?: boolean;
}

/** What a session may see of a table: everything, nothing, or the rows whose column equals a value. */
export type RowScope = { kind: 'all' } | { kind: 'none' } | { kind: 'equal'; column: string; value: string; uuid?: boolean };

const SOURCE_ACCOUNT_VARIABLE = 'x-gql-source-account-id';
/** The source account of a row whose owner names none (the users table's default). */
export const DEFAULT_SOURCE_ACCOUNT = 'primary';
/** The source account a new row is made in: the one the session names (a token's claim), else its owner's (the database's trigger). */
export function sessionSourceAccount(session: Session): string | null {
  return session.variables[SOURCE_ACCOUNT_VARIABLE] || null;
}

/** The users table itself: role me sees its own row, role user too. */
export const USERS_TABLE: OwnedTable = { owner: 'id', uuid: true };
const IDENTIFIER = /^[a-z_][a-z0-9_]*$/;

export function rowScope(session: Session, table: OwnedTable): RowScope {
  if (session.role === ADMIN_ROLE) {
    const account = session.variables[SOURCE_ACCOUNT_VARIABLE];
    return account ? equal(table.sourceAccount ?? 'source_account_id', account) : { kind: 'all' };
  }
  if (!session.authenticated || !session.userId) return { kind: 'none' };
  if (table.uuid && !UUID.test(session.userId)) return { kind: 'none' };
  const scope = equal(session.role === 'me' ? (table.self ?? table.owner) : table.owner, table.uuid ? session.userId.toLowerCase() : session.userId);
  return table.uuid ? { ...scope, uuid: true } : scope;
}

function equal(column: string, value: string): RowScope & { kind: 'equal' } {
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
  return query.andWhere(`${comparedColumn(`"${alias}"`, scope)} = :rowFilterValue${scope.uuid ? '::uuid' : ''}`, { rowFilterValue: scope.value });
}

/**
 * The same as an SQL condition on `alias` (a table name or alias of the statement), its value as
 * parameter `$<parameterIndex>`: `WHERE ${clause}` with `[...parameters, ...filter.parameters]`.
 */
export function rowFilterSql(session: Session, table: OwnedTable, alias: string, parameterIndex: number): { clause: string; parameters: string[] } {
  return scopeSql(rowScope(session, table), alias, parameterIndex);
}

/** A scope computed earlier (kept with a queued job, say) as an SQL condition, as `rowFilterSql` gives it. */
export function scopeSql(scope: RowScope, alias: string, parameterIndex: number): { clause: string; parameters: string[] } {
  if (!IDENTIFIER.test(alias)) throw new Error(`row filter: "${alias}" is not a table alias`);
  if (scope.kind === 'all') return { clause: 'true', parameters: [] };
  if (scope.kind === 'none') return { clause: 'false', parameters: [] };
  if (!IDENTIFIER.test(scope.column)) throw new Error(`row filter: "${scope.column}" is not a column name`);
  return { clause: `${comparedColumn(alias, scope)} = $${parameterIndex}${scope.uuid ? '::uuid' : ''}`, parameters: [scope.value] };
}

/** A uuid column as it is (its index serves); any other as text (a uuid column not declared so still compares). */
function comparedColumn(alias: string, scope: RowScope & { kind: 'equal' }): string {
  return scope.uuid ? `${alias}."${scope.column}"` : `${alias}."${scope.column}"::text`;
}

/**
 * The same test on a row already in hand (a subscription's payload): `row` carries the table's
 * columns by their names (the owner column, `id` for `me` on users, `source_account_id`).
 */
export function rowVisible(session: Session, table: OwnedTable, row: Record<string, unknown>): boolean {
  const scope = rowScope(session, table);
  if (scope.kind !== 'equal') return scope.kind === 'all';
  const value = row[scope.column];
  return (typeof value === 'string' || typeof value === 'number') && String(value) === scope.value;
}
