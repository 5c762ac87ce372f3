import type pg from 'pg';
import type { EntityManager } from 'typeorm';
import type { PostgresQueryRunner } from 'typeorm/driver/postgres/PostgresQueryRunner';
import { MetadataError } from '../../platform/metadata';
import { renamesSince, type Renames, type TableIdentity } from '../../platform/sql-renames';
import { readCatalog, tableKey, type CatalogTable } from './tables.catalog';
import { argsAt, fail, stringAt, withoutEmpty, type BoolExp, type QualifiedTable, type RelationshipEntry, type TrackedTableEntry } from './tables.metadata';
import { resolveTables, type Inconsistency, type TableModel } from './tables.model';
import { describeProblem, problemKey, problemsOf } from './tables.problems';

/** `run_sql`'s args, as Hasura's schema API takes them. */
export interface RunSqlArgs {
  sql: string;
  cascade: boolean;
  readOnly: boolean;
  /** Whether the tracked tables are compared before and after (never for a read-only run). */
  checkMetadata: boolean;
}

/** `run_sql`'s answer: the last statement's rows as text, with its column names first (Hasura's shape). */
export type RunSqlResult = { result_type: 'TuplesOk'; result: (string | null)[][] } | { result_type: 'CommandOk'; result: null };

export function runSqlArgsAt(args: unknown): RunSqlArgs {
  const given = argsAt(args);
  const known = ['sql', 'source', 'cascade', 'read_only', 'check_metadata_consistency'];
  const unknown = Object.keys(given).find((key) => !known.includes(key));
  if (unknown !== undefined) fail('parse-failed', `unexpected key "${unknown}"`, `$.args.${unknown}`);
  const sql = stringAt(given.sql, '$.args.sql');
  const flag = (key: string): boolean | undefined => {
    const value = given[key];
    if (value !== undefined && typeof value !== 'boolean') fail('parse-failed', 'expected a boolean', `$.args.${key}`);
    return value as boolean | undefined;
  };
  const readOnly = flag('read_only') === true;
  const check = flag('check_metadata_consistency');
  return { sql, cascade: flag('cascade') === true, readOnly, checkMetadata: !readOnly && check !== false };
}

/**
 * Runs `sql` (one or more statements) in the request's transaction, with PostgreSQL's simple
 * protocol as Hasura does, every value read as text. A failing statement is Hasura's
 * `postgres-error` with PostgreSQL's own error as `internal`; the request's transaction rolls back.
 */
export async function runStatements(manager: EntityManager, sql: string, readOnly: boolean): Promise<RunSqlResult> {
  const client = (await (manager.queryRunner as PostgresQueryRunner).connect()) as pg.PoolClient;
  const transaction = await currentTransaction(client);
  if (readOnly) await client.query('SET TRANSACTION READ ONLY');
  let results: pg.QueryArrayResult | pg.QueryArrayResult[];
  try {
    results = (await client.query({ text: sql, rowMode: 'array', types: { getTypeParser: () => asText } })) as unknown as
      pg.QueryArrayResult | pg.QueryArrayResult[];
  } catch (error) {
    throw postgresError(error, sql);
  }
  // A COMMIT or ROLLBACK among the statements would end the request's transaction (and its lock).
  if ((await currentTransaction(client)) !== transaction) {
    throw new MetadataError('postgres-error', 'the SQL ended the transaction it runs in: run_sql takes no COMMIT, ROLLBACK or BEGIN', '$.args.sql');
  }
  const last = Array.isArray(results) ? results[results.length - 1] : results;
  if (!last || last.fields.length === 0) return { result_type: 'CommandOk', result: null };
  return { result_type: 'TuplesOk', result: [last.fields.map((field) => field.name), ...last.rows.map((row) => row.map((value) => value ?? 'NULL'))] };
}

const asText = (value: string) => value;

async function currentTransaction(client: pg.PoolClient): Promise<string> {
  return (await client.query<{ id: string }>('SELECT pg_current_xact_id()::text AS id')).rows[0].id;
}

function postgresError(error: unknown, sql: string): MetadataError {
  const failure = error as Partial<pg.DatabaseError> & Error;
  if (typeof failure.code !== 'string') return new MetadataError('postgres-error', 'query execution failed', '$');
  return new MetadataError('postgres-error', 'query execution failed', '$', {
    arguments: [],
    error: {
      description: failure.detail ?? null,
      exec_status: 'FatalError',
      hint: failure.hint ?? null,
      message: failure.message,
      status_code: failure.code,
    },
    prepared: false,
    statement: sql,
  });
}

/**
 * `entries` with the renames applied wherever metadata names a table or a column: the entry's
 * table, its column configuration, permissions (columns and filters, followed through
 * relationships and `_exists`), and the relationships of every entry that reach it.
 * `models` are the tables as they were served before, to follow relationships in filters.
 */
export function withRenames(entries: readonly TrackedTableEntry[], renames: Renames, models: ReadonlyMap<string, TableModel>): TrackedTableEntry[] {
  if (renames.tables.size === 0 && renames.columns.size === 0) return [...entries];
  const table = (name: QualifiedTable) => renames.tables.get(tableKey(name)) ?? name;
  const column = (owner: QualifiedTable, name: string) => renames.columns.get(tableKey(owner))?.get(name) ?? name;
  const renameFilter = (filter: BoolExp, owner: QualifiedTable): BoolExp => {
    const renamed: BoolExp = {};
    for (const [key, value] of Object.entries(filter)) {
      if ((key === '_and' || key === '_or') && Array.isArray(value)) {
        renamed[key] = value.map((item: unknown) => (isBoolExp(item) ? renameFilter(item, owner) : item));
      } else if (key === '_not' && isBoolExp(value)) {
        renamed[key] = renameFilter(value, owner);
      } else if (key === '_exists' && isBoolExp(value) && (typeof value._table === 'string' || isTable(value._table))) {
        const target =
          typeof value._table === 'string' ? { schema: 'public', name: value._table } : { schema: value._table.schema ?? 'public', name: value._table.name };
        renamed[key] = { ...value, _table: table(target), ...(isBoolExp(value._where) ? { _where: renameFilter(value._where, target) } : {}) };
      } else {
        const relationship = models.get(tableKey(owner))?.relationships.get(key);
        if (relationship && isBoolExp(value)) renamed[key] = renameFilter(value, relationship.target.table);
        else renamed[column(owner, key)] = value;
      }
    }
    return renamed;
  };
  const renameRelationship = (relationship: RelationshipEntry, owner: QualifiedTable): RelationshipEntry => {
    const using = relationship.using;
    if ('manual_configuration' in using) {
      const remote = using.manual_configuration.remote_table;
      const mapping = Object.fromEntries(
        Object.entries(using.manual_configuration.column_mapping).map(([local, other]) => [column(owner, local), column(remote, other)]),
      );
      return { ...relationship, using: { manual_configuration: { remote_table: table(remote), column_mapping: mapping } } };
    }
    const on = using.foreign_key_constraint_on;
    if (typeof on === 'string') return { ...relationship, using: { foreign_key_constraint_on: column(owner, on) } };
    if (Array.isArray(on)) return { ...relationship, using: { foreign_key_constraint_on: on.map((name) => column(owner, name)) } };
    const renamedOn = {
      table: table(on.table),
      ...(on.column !== undefined ? { column: column(on.table, on.column) } : {}),
      ...(on.columns !== undefined ? { columns: on.columns.map((name) => column(on.table, name)) } : {}),
    };
    return { ...relationship, using: { foreign_key_constraint_on: renamedOn } };
  };
  return entries.map((entry) => {
    const owner = entry.table;
    const columnConfig = entry.configuration?.column_config;
    return withoutEmpty({
      ...entry,
      table: table(owner),
      configuration: entry.configuration && {
        ...entry.configuration,
        ...(columnConfig ? { column_config: Object.fromEntries(Object.entries(columnConfig).map(([name, value]) => [column(owner, name), value])) } : {}),
      },
      object_relationships: entry.object_relationships?.map((item) => renameRelationship(item, owner)),
      array_relationships: entry.array_relationships?.map((item) => renameRelationship(item, owner)),
      select_permissions: entry.select_permissions?.map((item) => ({
        ...item,
        permission: {
          ...item.permission,
          columns: item.permission.columns === '*' ? '*' : item.permission.columns.map((name) => column(owner, name)),
          filter: renameFilter(item.permission.filter, owner),
        },
      })),
      insert_permissions: entry.insert_permissions?.map((item) => ({
        ...item,
        permission: {
          ...item.permission,
          columns: item.permission.columns === '*' ? '*' : item.permission.columns.map((name) => column(owner, name)),
          check: renameFilter(item.permission.check, owner),
          ...(item.permission.set ? { set: renamedKeys(item.permission.set, (name) => column(owner, name)) } : {}),
        },
      })),
      update_permissions: entry.update_permissions?.map((item) => ({
        ...item,
        permission: {
          ...item.permission,
          columns: item.permission.columns === '*' ? '*' : item.permission.columns.map((name) => column(owner, name)),
          filter: renameFilter(item.permission.filter, owner),
          ...(item.permission.check ? { check: renameFilter(item.permission.check, owner) } : {}),
          ...(item.permission.set ? { set: renamedKeys(item.permission.set, (name) => column(owner, name)) } : {}),
        },
      })),
      delete_permissions: entry.delete_permissions?.map((item) => ({
        ...item,
        permission: { ...item.permission, filter: renameFilter(item.permission.filter, owner) },
      })),
    });
  });
}

/**
 * `entries` without the metadata objects `dropped` names (their `definition` is the object in
 * `entries`: a table's name, a relationship, a permission), as `cascade` drops them.
 */
export function withoutDependents(entries: readonly TrackedTableEntry[], dropped: readonly Inconsistency[]): TrackedTableEntry[] {
  const definitions = new Set(dropped.map((item) => item.definition));
  return entries
    .filter((entry) => !definitions.has(entry.table))
    .map((entry) =>
      withoutEmpty({
        ...entry,
        object_relationships: entry.object_relationships?.filter((item) => !definitions.has(item)),
        array_relationships: entry.array_relationships?.filter((item) => !definitions.has(item)),
        select_permissions: entry.select_permissions?.filter((item) => !definitions.has(item.permission)),
        insert_permissions: entry.insert_permissions?.filter((item) => !definitions.has(item.permission)),
        update_permissions: entry.update_permissions?.filter((item) => !definitions.has(item.permission)),
        delete_permissions: entry.delete_permissions?.filter((item) => !definitions.has(item.permission)),
      }),
    );
}

/** Whether the catalog's definition of the tracked tables differs between `before` and `after`. */
export function catalogChanged(before: Map<string, CatalogTable>, after: Map<string, CatalogTable>): boolean {
  if (before.size !== after.size) return true;
  for (const [key, table] of before) if (JSON.stringify(table) !== JSON.stringify(after.get(key))) return true;
  return false;
}

const isBoolExp = (value: unknown): value is BoolExp => value !== null && typeof value === 'object' && !Array.isArray(value);
const isTable = (value: unknown): value is { schema?: string; name: string } => isBoolExp(value) && typeof value.name === 'string';

const renamedKeys = (object: Record<string, unknown>, rename: (name: string) => string) =>
  Object.fromEntries(Object.entries(object).map(([name, value]) => [rename(name), value]));

/**
 * The tracked tables' metadata after an SQL run (`before` and `catalogBefore` taken before it):
 * renames followed, what the SQL broke refused or (cascade) dropped; undefined when nothing changed.
 */
export async function entriesAfterSql(
  manager: EntityManager,
  current: TrackedTableEntry[],
  before: TableIdentity[],
  catalogBefore: Map<string, CatalogTable>,
  cascade: boolean,
): Promise<TrackedTableEntry[] | undefined> {
  const models = new Map(resolveTables(current, catalogBefore).tables.map((table) => [tableKey(table.table), table]));
  let next = withRenames(current, await renamesSince(manager, before), models);
  const catalogAfter = await readCatalog(
    manager,
    next.map((entry) => entry.table),
  );
  if (!catalogChanged(catalogBefore, catalogAfter) && JSON.stringify(next) === JSON.stringify(current)) return undefined;
  const known = new Set(problemsOf(current, catalogBefore).map(problemKey));
  for (;;) {
    const added = problemsOf(next, catalogAfter).filter((item) => !known.has(problemKey(item)));
    if (added.length === 0) return next;
    if (!cascade) {
      fail(
        'dependency-error',
        `cannot drop due to the following dependent objects: ${added.map(describeProblem).join('; ')} (use cascade to drop them)`,
        '$.args',
      );
    }
    next = withoutDependents(next, added);
  }
}
