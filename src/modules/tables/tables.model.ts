import type { OperationParts } from '../../graphql/raw-root-fields';
import { tableKey, type CatalogForeignKey, type CatalogTable, type CatalogUniqueConstraint } from './tables.catalog';
import {
  QUERY_ROOT_FIELDS,
  sameTable,
  SUBSCRIPTION_ROOT_FIELDS,
  tableText,
  type BoolExp,
  type ColumnPresets,
  type PermissionEntry,
  type QualifiedTable,
  type RelationshipEntry,
  type TrackedTableEntry,
} from './tables.metadata';

/** The three root fields of a table. */
export type RootKind = 'select' | 'selectByPk' | 'selectAggregate';

/** A column of a tracked table as the API shows it. */
export interface ColumnModel {
  name: string;
  /** Its GraphQL field name (column_config's custom_name, or the column's name). */
  field: string;
  /** Hasura's scalar name for its type (`Int`, `String`, `uuid`, `timestamptz`, ...), or for its element type when an array. */
  scalar: string;
  /** A PostgreSQL array (`text[]`): shown as `[scalar!]`, compared by `<scalar>_array_comparison_exp`. */
  array: boolean;
  sqlType: string;
  nullable: boolean;
}

export interface RelationshipModel {
  name: string;
  kind: 'object' | 'array';
  target: TableModel;
  /** Pairs of (column of this table, column of the target). */
  mapping: [string, string][];
  /**
   * In a nested insert, whether the target's row is inserted before this table's (it is the
   * parent: an object relationship on this table's columns) or after (a child: an array
   * relationship, or an object relationship on a foreign key of the target).
   */
  insertOrder: 'beforeParent' | 'afterParent';
}

export interface PermissionModel {
  columns: Set<string>;
  filter: BoolExp;
  limit?: number;
  allowAggregations: boolean;
  /** The query root fields it opens (all of them when query_root_fields does not say). */
  rootFields: Set<RootKind>;
  /** The live query subscription fields it opens (all of them when subscription_root_fields does not say). */
  subscriptionRootFields: Set<RootKind>;
  /** Whether it opens `<table>_stream` (subscription_root_fields left out, or naming select_stream). */
  stream: boolean;
}

export interface InsertPermissionModel {
  columns: Set<string>;
  check: BoolExp;
  /** Column name to a session variable's name or a constant. */
  set: ColumnPresets;
  backendOnly: boolean;
}

export interface UpdatePermissionModel {
  columns: Set<string>;
  filter: BoolExp;
  check?: BoolExp;
  set: ColumnPresets;
}

export interface DeletePermissionModel {
  filter: BoolExp;
}

/** The mutation root fields of a table (Hasura's names, or custom_root_fields). */
export interface MutationRoots {
  insert: string;
  insertOne: string;
  update: string;
  updateByPk: string;
  updateMany: string;
  delete: string;
  deleteByPk: string;
}
export type MutationKind = keyof MutationRoots;

/** A tracked table resolved against the catalog: what the schema and the compiler are made of. */
export interface TableModel {
  table: QualifiedTable;
  /** The GraphQL name of its object type, the base of every generated name. */
  typeName: string;
  roots: { select: string; selectByPk: string; selectAggregate: string };
  /** Whether its rows carry the transaction that wrote them (`xmin`: not a view or foreign table); see tables.stream.ts. */
  rowVersions: boolean;
  /** Its streaming subscription root field (`<table>_stream`, or custom_root_fields' select_stream). */
  streamRoot: string;
  mutationRoots: MutationRoots;
  /** Its primary key and unique constraints (`<table>_constraint`). */
  constraints: CatalogUniqueConstraint[];
  columns: ColumnModel[];
  columnsByField: Map<string, ColumnModel>;
  primaryKey: ColumnModel[];
  relationships: Map<string, RelationshipModel>;
  permissions: Map<string, PermissionModel>;
  insertPermissions: Map<string, InsertPermissionModel>;
  updatePermissions: Map<string, UpdatePermissionModel>;
  deletePermissions: Map<string, DeletePermissionModel>;
}

/** Whom a statement is compiled for (its session variables are bound when it runs: boundValues). */
export interface Reader {
  role: string;
  /** The unrestricted admin: every table, column and row. */
  admin: boolean;
}

/** What the compiler reads of GraphQL's resolve info. */
export type Operation = OperationParts;

/** A part of the metadata that cannot be served now (get_inconsistent_metadata). */
export interface Inconsistency {
  type: 'table' | 'object_relation' | 'array_relation' | 'select_permission' | 'insert_permission' | 'update_permission' | 'delete_permission';
  name: string;
  reason: string;
  definition: unknown;
}

/** Hasura's GraphQL scalar names of PostgreSQL's types (pg_type.typname); others keep their own name. */
const SCALARS: Record<string, string> = {
  int4: 'Int',
  int2: 'smallint',
  int8: 'bigint',
  float4: 'Float',
  float8: 'float8',
  numeric: 'numeric',
  bool: 'Boolean',
  text: 'String',
  varchar: 'String',
  name: 'String',
  bpchar: 'bpchar',
  citext: 'citext',
  uuid: 'uuid',
  date: 'date',
  time: 'time',
  timetz: 'timetz',
  timestamp: 'timestamp',
  timestamptz: 'timestamptz',
  interval: 'interval',
  json: 'json',
  jsonb: 'jsonb',
  money: 'money',
  inet: 'inet',
  bytea: 'bytea',
  oid: 'oid',
};
export const GRAPHQL_BUILT_IN_SCALARS = new Set(['Int', 'Float', 'String', 'Boolean', 'ID']);
/** Scalars whose columns take the text operators (_like, _ilike, _similar, _regex...). */
export const TEXT_SCALARS = new Set(['String', 'citext', 'bpchar']);
/** Scalars summed and averaged by `<table>_aggregate`. */
export const NUMERIC_SCALARS = new Set(['Int', 'smallint', 'bigint', 'Float', 'float8', 'numeric', 'money']);
/** Scalars without an order (max/min skip them). */
export const UNORDERED_SCALARS = new Set(['json', 'jsonb', 'Boolean']);

const GRAPHQL_NAME = /^[_A-Za-z][_0-9A-Za-z]*$/;

/** A column's GraphQL type (without its non-null mark): an array as Hasura v2 shows it since 2.29, a list of its element's scalar. */
export const fieldType = (column: ColumnModel) => (column.array ? `[${column.scalar}!]` : column.scalar);
/** The name of a column's comparison type (`String_comparison_exp`, `String_array_comparison_exp`). */
export const comparisonTypeName = (column: Pick<ColumnModel, 'scalar' | 'array'>) => `${column.scalar}${column.array ? '_array' : ''}_comparison_exp`;

function scalarOf(typeName: string): string {
  return SCALARS[typeName] ?? (GRAPHQL_NAME.test(typeName) ? typeName : 'String');
}

/**
 * The tracked tables resolved against the catalog. A table missing from the catalog, a
 * relationship whose columns or key do not exist, or a permission naming an unknown column is
 * left out and reported; the rest is served.
 */
export function resolveTables(
  entries: readonly TrackedTableEntry[],
  catalog: Map<string, CatalogTable>,
): { tables: TableModel[]; inconsistencies: Inconsistency[] } {
  const inconsistencies: Inconsistency[] = [];
  const byKey = new Map<string, TableModel>();
  for (const entry of entries) {
    const found = catalog.get(tableKey(entry.table));
    if (!found) {
      inconsistencies.push({
        type: 'table',
        name: tableText(entry.table),
        reason: `no table or view ${tableText(entry.table)} exists`,
        definition: entry.table,
      });
      continue;
    }
    const model = tableModel(entry, found);
    const unnamed = [model.typeName, ...model.columns.map((column) => column.field)].find((name) => !GRAPHQL_NAME.test(name));
    if (unnamed !== undefined) {
      const reason = `${JSON.stringify(unnamed)} is not a valid GraphQL name: give it a custom name (configuration.custom_name or column_config)`;
      inconsistencies.push({ type: 'table', name: tableText(entry.table), reason, definition: entry.table });
      continue;
    }
    byKey.set(tableKey(entry.table), model);
  }
  for (const entry of entries) {
    const model = byKey.get(tableKey(entry.table));
    if (!model) continue;
    const catalogTable = catalog.get(tableKey(entry.table))!;
    for (const [kind, list] of [
      ['object', entry.object_relationships ?? []],
      ['array', entry.array_relationships ?? []],
    ] as const) {
      for (const relationship of list) {
        try {
          if (model.columnsByField.has(relationship.name) || (kind === 'array' && model.columnsByField.has(`${relationship.name}_aggregate`))) {
            throw new Error(`the relationship "${relationship.name}" clashes with a column of ${tableText(entry.table)}`);
          }
          model.relationships.set(relationship.name, relationshipModel(kind, relationship, model, catalogTable, byKey, catalog));
        } catch (error) {
          inconsistencies.push({
            type: `${kind}_relation`,
            name: `${relationship.name} of ${tableText(entry.table)}`,
            reason: (error as Error).message,
            definition: relationship,
          });
        }
      }
    }
    for (const { role, permission } of entry.select_permissions ?? []) {
      const columns = permission.columns === '*' ? model.columns.map((column) => column.name) : permission.columns;
      const unknown = columns.find((column) => !model.columns.some((candidate) => candidate.name === column));
      if (unknown) {
        inconsistencies.push({
          type: 'select_permission',
          name: `${role} of ${tableText(entry.table)}`,
          reason: `no column "${unknown}" in ${tableText(entry.table)}`,
          definition: permission,
        });
        continue;
      }
      const subscriptionRootFields = permission.subscription_root_fields ?? [...SUBSCRIPTION_ROOT_FIELDS];
      model.permissions.set(role, {
        columns: new Set(columns),
        filter: permission.filter,
        limit: permission.limit,
        allowAggregations: permission.allow_aggregations === true,
        rootFields: rootKinds(permission.query_root_fields ?? QUERY_ROOT_FIELDS),
        subscriptionRootFields: rootKinds(subscriptionRootFields),
        stream: subscriptionRootFields.includes('select_stream'),
      });
    }
    resolveWritePermissions(entry, model, inconsistencies);
  }
  return { tables: [...byKey.values()], inconsistencies };
}

/** The root kinds Hasura's root field names open (`select_stream` is none of them: see PermissionModel.stream). */
function rootKinds(names: readonly string[]): Set<RootKind> {
  const kinds: Record<string, RootKind> = { select: 'select', select_by_pk: 'selectByPk', select_aggregate: 'selectAggregate' };
  return new Set(names.flatMap((name) => kinds[name] ?? []));
}

/** The insert, update and delete permissions of `entry` on `model`; one naming an unknown column is left out and reported. */
function resolveWritePermissions(entry: TrackedTableEntry, model: TableModel, inconsistencies: Inconsistency[]): void {
  const columnsOf = (columns: string[] | '*') => (columns === '*' ? model.columns.map((column) => column.name) : columns);
  const unknownIn = (names: Iterable<string>) => [...names].find((name) => !model.columns.some((column) => column.name === name));
  const each = <P>(
    kind: 'insert' | 'update' | 'delete',
    list: PermissionEntry<P>[] | undefined,
    names: (permission: P) => string[],
    add: (role: string, permission: P) => void,
  ) => {
    for (const { role, permission } of list ?? []) {
      const unknown = unknownIn(names(permission));
      if (unknown !== undefined) {
        const reason = `no column "${unknown}" in ${tableText(entry.table)}`;
        inconsistencies.push({ type: `${kind}_permission`, name: `${role} of ${tableText(entry.table)}`, reason, definition: permission });
      } else add(role, permission);
    }
  };
  each(
    'insert',
    entry.insert_permissions,
    (permission) => [...columnsOf(permission.columns), ...Object.keys(permission.set ?? {})],
    (role, permission) =>
      model.insertPermissions.set(role, {
        columns: new Set(columnsOf(permission.columns)),
        check: permission.check,
        set: permission.set ?? {},
        backendOnly: permission.backend_only === true,
      }),
  );
  each(
    'update',
    entry.update_permissions,
    (permission) => [...columnsOf(permission.columns), ...Object.keys(permission.set ?? {})],
    (role, permission) =>
      model.updatePermissions.set(role, {
        columns: new Set(columnsOf(permission.columns)),
        filter: permission.filter,
        check: permission.check,
        set: permission.set ?? {},
      }),
  );
  each(
    'delete',
    entry.delete_permissions,
    () => [],
    (role, permission) => model.deletePermissions.set(role, { filter: permission.filter }),
  );
}

function tableModel(entry: TrackedTableEntry, found: CatalogTable): TableModel {
  const configuration = entry.configuration ?? {};
  const typeName = configuration.custom_name ?? (entry.table.schema === 'public' ? entry.table.name : `${entry.table.schema}_${entry.table.name}`);
  const columns = found.columns.map((column) => ({
    name: column.name,
    field: configuration.column_config?.[column.name]?.custom_name ?? column.name,
    scalar: scalarOf(column.elementTypeName ?? column.typeName),
    array: column.elementTypeName !== undefined,
    sqlType: column.sqlType,
    nullable: column.nullable,
  }));
  const roots = configuration.custom_root_fields ?? {};
  return {
    table: entry.table,
    typeName,
    roots: {
      select: roots.select ?? typeName,
      selectByPk: roots.select_by_pk ?? `${typeName}_by_pk`,
      selectAggregate: roots.select_aggregate ?? `${typeName}_aggregate`,
    },
    streamRoot: roots.select_stream ?? `${typeName}_stream`,
    rowVersions: found.rowVersions,
    mutationRoots: {
      insert: roots.insert ?? `insert_${typeName}`,
      insertOne: roots.insert_one ?? `insert_${typeName}_one`,
      update: roots.update ?? `update_${typeName}`,
      updateByPk: roots.update_by_pk ?? `update_${typeName}_by_pk`,
      updateMany: roots.update_many ?? `update_${typeName}_many`,
      delete: roots.delete ?? `delete_${typeName}`,
      deleteByPk: roots.delete_by_pk ?? `delete_${typeName}_by_pk`,
    },
    // An enum value must be a GraphQL name: a constraint named otherwise cannot be named by on_conflict.
    constraints: found.uniqueConstraints.filter((constraint) => GRAPHQL_NAME.test(constraint.name)),
    columns,
    columnsByField: new Map(columns.map((column) => [column.field, column])),
    primaryKey: found.primaryKey.map((name) => columns.find((column) => column.name === name)!),
    relationships: new Map(),
    permissions: new Map(),
    insertPermissions: new Map(),
    updatePermissions: new Map(),
    deletePermissions: new Map(),
  };
}

function relationshipModel(
  kind: 'object' | 'array',
  relationship: RelationshipEntry,
  model: TableModel,
  catalogTable: CatalogTable,
  tracked: Map<string, TableModel>,
  catalog: Map<string, CatalogTable>,
): RelationshipModel {
  const trackedTarget = (table: QualifiedTable) => {
    const target = tracked.get(tableKey(table));
    if (!target) throw new Error(`the remote table ${tableText(table)} is not tracked`);
    return target;
  };
  const hasColumn = (table: TableModel, column: string) => {
    if (!table.columns.some((candidate) => candidate.name === column)) throw new Error(`no column "${column}" in ${tableText(table.table)}`);
  };
  const using = relationship.using;
  if ('manual_configuration' in using) {
    const target = trackedTarget(using.manual_configuration.remote_table);
    const mapping = Object.entries(using.manual_configuration.column_mapping);
    for (const [local, remote] of mapping) {
      hasColumn(model, local);
      hasColumn(target, remote);
    }
    return { name: relationship.name, kind, target, mapping, insertOrder: kind === 'object' ? 'beforeParent' : 'afterParent' };
  }
  const on = using.foreign_key_constraint_on;
  if (typeof on === 'string' || Array.isArray(on)) {
    // A foreign key of this table, on these columns.
    const columns = typeof on === 'string' ? [on] : on;
    const key = catalogTable.foreignKeys.find((candidate) => sameColumns(candidate.columns, columns));
    if (!key) throw new Error(`no foreign key constraint on ${tableText(model.table)} (${columns.join(', ')})`);
    const target = trackedTarget(key.references);
    const mapping: [string, string][] = key.columns.map((column, index) => [column, key.referencedColumns[index]]);
    return { name: relationship.name, kind, target, mapping, insertOrder: kind === 'object' ? 'beforeParent' : 'afterParent' };
  }
  // A foreign key of the remote table, on its columns, referencing this one.
  const target = trackedTarget(on.table);
  const remoteColumns = on.columns ?? (on.column ? [on.column] : []);
  const key: CatalogForeignKey | undefined = catalog
    .get(tableKey(on.table))
    ?.foreignKeys.find((candidate) => sameColumns(candidate.columns, remoteColumns) && sameTable(candidate.references, model.table));
  if (!key) throw new Error(`no foreign key constraint on ${tableText(on.table)} (${remoteColumns.join(', ')}) referencing ${tableText(model.table)}`);
  const mapping: [string, string][] = key.referencedColumns.map((column, index) => [column, key.columns[index]]);
  return { name: relationship.name, kind, target, mapping, insertOrder: 'afterParent' };
}

const sameColumns = (a: readonly string[], b: readonly string[]) => a.length === b.length && a.every((column) => b.includes(column));
