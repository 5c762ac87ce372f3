import { DEFAULT_SOURCE, MetadataError } from '../../platform/metadata';
import type { QualifiedTable } from '../../platform/sql-renames';

export type { QualifiedTable };

/** `configuration` of a tracked table (Hasura's table configuration). */
export interface TableConfiguration {
  custom_name?: string;
  custom_root_fields?: Partial<Record<(typeof CUSTOM_ROOT_FIELDS)[number], string>>;
  column_config?: Record<string, { custom_name?: string }>;
}

/** How a relationship joins: a foreign key (ours, or the remote table's), or a column mapping. */
export type RelationshipUsing =
  | { foreign_key_constraint_on: string | string[] | { table: QualifiedTable; column?: string; columns?: string[] } }
  | { manual_configuration: { remote_table: QualifiedTable; column_mapping: Record<string, string> } };

export interface RelationshipEntry {
  name: string;
  using: RelationshipUsing;
  comment?: string;
}

/** A boolean expression as Hasura writes it (a permission's filter, a query's where). */
export type BoolExp = Record<string, unknown>;

/** The root fields a permission may open (Hasura's names). */
export const QUERY_ROOT_FIELDS = ['select', 'select_by_pk', 'select_aggregate'] as const;
/** The subscription root fields a select permission may open: the query ones as live queries, and the stream. */
export const SUBSCRIPTION_ROOT_FIELDS = [...QUERY_ROOT_FIELDS, 'select_stream'] as const;

export interface SelectPermission {
  columns: string[] | '*';
  filter: BoolExp;
  limit?: number;
  allow_aggregations?: boolean;
  /** Left out: every root field (select_aggregate with allow_aggregations). */
  query_root_fields?: (typeof QUERY_ROOT_FIELDS)[number][];
  /** Left out: every subscription root field; `select_stream` opens `<table>_stream` (the others are kept as given). */
  subscription_root_fields?: (typeof SUBSCRIPTION_ROOT_FIELDS)[number][];
}

export interface SelectPermissionEntry {
  role: string;
  permission: SelectPermission;
  comment?: string;
}

/** Column values a write sets whatever the caller gives: a session variable's name (`X-Gql-*`, `X-Hasura-*`) or a constant. */
export type ColumnPresets = Record<string, unknown>;

export interface InsertPermission {
  check: BoolExp;
  columns: string[] | '*';
  set?: ColumnPresets;
  backend_only?: boolean;
}

export interface UpdatePermission {
  columns: string[] | '*';
  filter: BoolExp;
  check?: BoolExp;
  set?: ColumnPresets;
}

export interface DeletePermission {
  filter: BoolExp;
  backend_only?: boolean;
}

export interface PermissionEntry<P> {
  role: string;
  permission: P;
  comment?: string;
}

/** The four kinds of permission, by their key in a table entry. */
export type PermissionKind = 'select' | 'insert' | 'update' | 'delete';
export const PERMISSION_KINDS: readonly PermissionKind[] = ['select', 'insert', 'update', 'delete'];

/** A tracked table's entry, in Hasura's shape (what `export_metadata` shows under `tables`). */
export interface TrackedTableEntry {
  table: QualifiedTable;
  configuration?: TableConfiguration;
  object_relationships?: RelationshipEntry[];
  array_relationships?: RelationshipEntry[];
  select_permissions?: SelectPermissionEntry[];
  insert_permissions?: PermissionEntry<InsertPermission>[];
  update_permissions?: PermissionEntry<UpdatePermission>[];
  delete_permissions?: PermissionEntry<DeletePermission>[];
}

/** The keys of a table entry this module owns (others, such as event_triggers, are other modules'). */
export const TABLE_KEYS = [
  'configuration',
  'object_relationships',
  'array_relationships',
  'select_permissions',
  'insert_permissions',
  'update_permissions',
  'delete_permissions',
] as const;

/** The root fields custom_root_fields may rename (Hasura's keys). */
export const CUSTOM_ROOT_FIELDS = [
  'select',
  'select_by_pk',
  'select_aggregate',
  'insert',
  'insert_one',
  'update',
  'update_by_pk',
  'update_many',
  'delete',
  'delete_by_pk',
  'select_stream',
] as const;

/** A GraphQL name (also what custom names must be). */
const GRAPHQL_NAME = /^[_A-Za-z][_0-9A-Za-z]*$/;

export function fail(code: string, message: string, path: string): never {
  throw new MetadataError(code, message, path);
}

export function isObject(value: unknown): value is Record<string, unknown> {
  return value !== null && typeof value === 'object' && !Array.isArray(value);
}

export function objectAt(value: unknown, path: string): Record<string, unknown> {
  if (!isObject(value)) fail('parse-failed', 'expected an object', path);
  return value;
}

export function stringAt(value: unknown, path: string): string {
  if (typeof value !== 'string' || value === '') fail('parse-failed', 'expected a non-empty string', path);
  return value;
}

export function graphqlNameAt(value: unknown, path: string): string {
  const name = stringAt(value, path);
  if (!GRAPHQL_NAME.test(name)) fail('validation-failed', `${JSON.stringify(name)} is not a valid GraphQL name`, path);
  return name;
}

/** `"name"` or `{schema, name}` (schema public when left out), as Hasura takes a table. */
export function qualifiedTableAt(value: unknown, path: string): QualifiedTable {
  if (typeof value === 'string') return { schema: 'public', name: stringAt(value, path) };
  const given = objectAt(value, path);
  return { schema: given.schema === undefined ? 'public' : stringAt(given.schema, `${path}.schema`), name: stringAt(given.name, `${path}.name`) };
}

export const sameTable = (a: QualifiedTable, b: QualifiedTable) => a.schema === b.schema && a.name === b.name;
export const tableText = (table: QualifiedTable) => (table.schema === 'public' ? table.name : `${table.schema}.${table.name}`);

export function configurationAt(value: unknown, path: string): TableConfiguration {
  if (value === undefined || value === null) return {};
  const given = objectAt(value, path);
  const configuration: TableConfiguration = {};
  for (const key of Object.keys(given)) {
    if (!['custom_name', 'custom_root_fields', 'column_config', 'custom_column_names', 'comment'].includes(key))
      fail('parse-failed', `unexpected key "${key}"`, `${path}.${key}`);
  }
  if (given.custom_name !== undefined && given.custom_name !== null) configuration.custom_name = graphqlNameAt(given.custom_name, `${path}.custom_name`);
  if (given.custom_root_fields !== undefined && given.custom_root_fields !== null) {
    const roots = objectAt(given.custom_root_fields, `${path}.custom_root_fields`);
    const parsed: NonNullable<TableConfiguration['custom_root_fields']> = {};
    for (const [key, name] of Object.entries(roots)) {
      if (name === null) continue;
      if (!(CUSTOM_ROOT_FIELDS as readonly string[]).includes(key)) {
        // No subscription root field is served yet.
        fail('not-supported', `the custom root field "${key}" is not supported (${CUSTOM_ROOT_FIELDS.join(', ')} are)`, `${path}.custom_root_fields.${key}`);
      }
      // Hasura takes a name or {name, comment}.
      const text = isObject(name) ? name.name : name;
      parsed[key as (typeof CUSTOM_ROOT_FIELDS)[number]] = graphqlNameAt(text, `${path}.custom_root_fields.${key}`);
    }
    if (Object.keys(parsed).length) configuration.custom_root_fields = parsed;
  }
  const columns: Record<string, { custom_name?: string }> = {};
  if (given.custom_column_names !== undefined && given.custom_column_names !== null) {
    for (const [column, name] of Object.entries(objectAt(given.custom_column_names, `${path}.custom_column_names`))) {
      columns[column] = { custom_name: graphqlNameAt(name, `${path}.custom_column_names.${column}`) };
    }
  }
  if (given.column_config !== undefined && given.column_config !== null) {
    for (const [column, config] of Object.entries(objectAt(given.column_config, `${path}.column_config`))) {
      const entry = objectAt(config, `${path}.column_config.${column}`);
      columns[column] =
        entry.custom_name === undefined || entry.custom_name === null
          ? {}
          : { custom_name: graphqlNameAt(entry.custom_name, `${path}.column_config.${column}.custom_name`) };
    }
  }
  if (Object.keys(columns).length) configuration.column_config = columns;
  return configuration;
}

export function relationshipAt(value: unknown, path: string): RelationshipEntry {
  const given = objectAt(value, path);
  const name = graphqlNameAt(given.name, `${path}.name`);
  const using = objectAt(given.using, `${path}.using`);
  const entry: RelationshipEntry = { name, using: usingAt(using, `${path}.using`) };
  if (typeof given.comment === 'string') entry.comment = given.comment;
  return entry;
}

function usingAt(using: Record<string, unknown>, path: string): RelationshipUsing {
  if (using.foreign_key_constraint_on !== undefined) {
    const on = using.foreign_key_constraint_on;
    const at = `${path}.foreign_key_constraint_on`;
    if (typeof on === 'string') return { foreign_key_constraint_on: stringAt(on, at) };
    if (Array.isArray(on)) return { foreign_key_constraint_on: on.map((column, index) => stringAt(column, `${at}[${index}]`)) };
    const remote = objectAt(on, at);
    const table = qualifiedTableAt(remote.table, `${at}.table`);
    const columns = remote.columns !== undefined ? columnListAt(remote.columns, `${at}.columns`) : [stringAt(remote.column, `${at}.column`)];
    return { foreign_key_constraint_on: { table, columns } };
  }
  if (using.manual_configuration !== undefined) {
    const manual = objectAt(using.manual_configuration, `${path}.manual_configuration`);
    const remoteTable = qualifiedTableAt(manual.remote_table, `${path}.manual_configuration.remote_table`);
    const mapping = objectAt(manual.column_mapping, `${path}.manual_configuration.column_mapping`);
    if (Object.keys(mapping).length === 0)
      fail('validation-failed', 'column_mapping must map at least one column', `${path}.manual_configuration.column_mapping`);
    for (const [local, remote] of Object.entries(mapping)) stringAt(remote, `${path}.manual_configuration.column_mapping.${local}`);
    return { manual_configuration: { remote_table: remoteTable, column_mapping: mapping as Record<string, string> } };
  }
  fail('parse-failed', 'using must have foreign_key_constraint_on or manual_configuration', path);
}

function columnListAt(value: unknown, path: string): string[] {
  if (!Array.isArray(value) || value.length === 0) fail('parse-failed', 'expected a non-empty list of column names', path);
  return value.map((column, index) => stringAt(column, `${path}[${index}]`));
}

export function roleAt(value: unknown, path: string): string {
  return stringAt(value, path);
}

export function selectPermissionAt(value: unknown, path: string): SelectPermission {
  const given = objectAt(value, path);
  for (const key of Object.keys(given)) {
    if (!['columns', 'filter', 'limit', 'allow_aggregations', 'computed_fields', 'query_root_fields', 'subscription_root_fields'].includes(key)) {
      fail('parse-failed', `unexpected key "${key}"`, `${path}.${key}`);
    }
  }
  if (given.computed_fields !== undefined && !(Array.isArray(given.computed_fields) && given.computed_fields.length === 0)) {
    fail('not-supported', 'computed fields are not supported yet', `${path}.computed_fields`);
  }
  const columns =
    given.columns === '*'
      ? '*'
      : Array.isArray(given.columns)
        ? given.columns.map((column, index) => stringAt(column, `${path}.columns[${index}]`))
        : fail('parse-failed', 'columns must be a list of column names or "*"', `${path}.columns`);
  const filter = given.filter === undefined ? {} : objectAt(given.filter, `${path}.filter`);
  const permission: SelectPermission = { columns, filter };
  if (given.limit !== undefined && given.limit !== null) {
    if (!Number.isInteger(given.limit) || (given.limit as number) < 0) fail('parse-failed', 'limit must be a non-negative integer', `${path}.limit`);
    permission.limit = given.limit as number;
  }
  for (const key of ['query_root_fields', 'subscription_root_fields'] as const) {
    const list = given[key];
    if (list === undefined || list === null) continue;
    if (!Array.isArray(list)) fail('parse-failed', `${key} must be a list`, `${path}.${key}`);
    const names = list.map((name, index) => stringAt(name, `${path}.${key}[${index}]`));
    const known: readonly string[] = key === 'query_root_fields' ? QUERY_ROOT_FIELDS : SUBSCRIPTION_ROOT_FIELDS;
    const unknown = names.find((name) => !known.includes(name));
    if (unknown) fail('parse-failed', `unknown root field "${unknown}" (one of ${known.join(', ')})`, `${path}.${key}`);
    if (key === 'query_root_fields') permission.query_root_fields = names as SelectPermission['query_root_fields'];
    else permission.subscription_root_fields = names as SelectPermission['subscription_root_fields'];
  }
  if (given.allow_aggregations !== undefined) {
    if (typeof given.allow_aggregations !== 'boolean') fail('parse-failed', 'allow_aggregations must be a boolean', `${path}.allow_aggregations`);
    permission.allow_aggregations = given.allow_aggregations;
  }
  return permission;
}

/** A table entry of replace_metadata, checked for this module's keys. */
export function trackedEntryAt(value: Record<string, unknown>, path: string): TrackedTableEntry {
  const entry: TrackedTableEntry = { table: qualifiedTableAt(value.table, `${path}.table`) };
  const configuration = configurationAt(value.configuration, `${path}.configuration`);
  if (Object.keys(configuration).length) entry.configuration = configuration;
  for (const kind of ['object_relationships', 'array_relationships'] as const) {
    const list = value[kind];
    if (list === undefined || list === null) continue;
    if (!Array.isArray(list)) fail('parse-failed', `${kind} must be a list`, `${path}.${kind}`);
    if (list.length) entry[kind] = list.map((item, index) => relationshipAt(item, `${path}.${kind}[${index}]`));
  }
  for (const kind of PERMISSION_KINDS) {
    const key = `${kind}_permissions` as const;
    const permissions = value[key];
    if (permissions === undefined || permissions === null) continue;
    if (!Array.isArray(permissions)) fail('parse-failed', `${key} must be a list`, `${path}.${key}`);
    if (permissions.length === 0) continue;
    const parsed = permissions.map((item, index) => {
      const at = `${path}.${key}[${index}]`;
      const given = objectAt(item, at);
      return { role: roleAt(given.role, `${at}.role`), permission: PERMISSION_PARSERS[kind](given.permission, `${at}.permission`) };
    });
    const roles = parsed.map((item) => item.role);
    const repeated = roles.find((role, index) => roles.indexOf(role) !== index);
    if (repeated !== undefined) fail('already-exists', `${kind} permission for role "${repeated}" is defined twice`, `${path}.${key}`);
    (entry as unknown as Record<string, unknown>)[key] = parsed;
  }
  return entry;
}

/** A request's args; `source`, when given, must be Plinth's one source. */
export function argsAt(args: unknown): Record<string, unknown> {
  const given = objectAt(args, '$.args');
  if (given.source !== undefined && given.source !== DEFAULT_SOURCE)
    fail('not-exists', `source with name ${JSON.stringify(given.source)} does not exist`, '$.args.source');
  return given;
}

/** `entry` without empty lists, an empty configuration or keys left undefined (as Hasura exports it). */
export function withoutEmpty(entry: TrackedTableEntry): TrackedTableEntry {
  const copy: TrackedTableEntry = { ...entry };
  for (const key of TABLE_KEYS) if (key !== 'configuration' && !copy[key]?.length) delete copy[key];
  if (!copy.configuration || Object.keys(copy.configuration).length === 0) delete copy.configuration;
  return copy;
}

function columnsAt(value: unknown, path: string): string[] | '*' {
  if (value === '*') return '*';
  if (Array.isArray(value)) return value.map((column, index) => stringAt(column, `${path}[${index}]`));
  fail('parse-failed', 'columns must be a list of column names or "*"', path);
}

function onlyKeys(given: Record<string, unknown>, keys: readonly string[], path: string): void {
  for (const key of Object.keys(given)) if (!keys.includes(key)) fail('parse-failed', `unexpected key "${key}"`, `${path}.${key}`);
}

function presetsAt(value: unknown, path: string): ColumnPresets | undefined {
  if (value === undefined || value === null) return undefined;
  const presets = objectAt(value, path);
  for (const [column, preset] of Object.entries(presets)) {
    if (preset === undefined) fail('parse-failed', 'a preset needs a value', `${path}.${column}`);
  }
  return Object.keys(presets).length ? presets : undefined;
}

function booleanAt(value: unknown, path: string): boolean | undefined {
  if (value === undefined || value === null) return undefined;
  if (typeof value !== 'boolean') fail('parse-failed', 'expected a boolean', path);
  return value;
}

export function insertPermissionAt(value: unknown, path: string): InsertPermission {
  const given = objectAt(value, path);
  onlyKeys(given, ['check', 'columns', 'set', 'backend_only', 'validate_input'], path);
  if (given.validate_input !== undefined && given.validate_input !== null) fail('not-supported', 'validate_input is not supported', `${path}.validate_input`);
  const permission: InsertPermission = {
    check: given.check === undefined || given.check === null ? {} : objectAt(given.check, `${path}.check`),
    columns: given.columns === undefined ? [] : columnsAt(given.columns, `${path}.columns`),
  };
  const set = presetsAt(given.set, `${path}.set`);
  if (set) permission.set = set;
  const backendOnly = booleanAt(given.backend_only, `${path}.backend_only`);
  if (backendOnly) permission.backend_only = true;
  return permission;
}

export function updatePermissionAt(value: unknown, path: string): UpdatePermission {
  const given = objectAt(value, path);
  onlyKeys(given, ['columns', 'filter', 'check', 'set', 'backend_only', 'validate_input'], path);
  if (given.validate_input !== undefined && given.validate_input !== null) fail('not-supported', 'validate_input is not supported', `${path}.validate_input`);
  if (given.backend_only === true) fail('not-supported', 'backend_only is supported on insert permissions only', `${path}.backend_only`);
  const permission: UpdatePermission = {
    columns: columnsAt(given.columns, `${path}.columns`),
    filter: given.filter === undefined || given.filter === null ? {} : objectAt(given.filter, `${path}.filter`),
  };
  if (given.check !== undefined && given.check !== null) permission.check = objectAt(given.check, `${path}.check`);
  const set = presetsAt(given.set, `${path}.set`);
  if (set) permission.set = set;
  return permission;
}

export function deletePermissionAt(value: unknown, path: string): DeletePermission {
  const given = objectAt(value, path);
  onlyKeys(given, ['filter', 'backend_only', 'validate_input'], path);
  if (given.validate_input !== undefined && given.validate_input !== null) fail('not-supported', 'validate_input is not supported', `${path}.validate_input`);
  if (given.backend_only === true) fail('not-supported', 'backend_only is supported on insert permissions only', `${path}.backend_only`);
  return { filter: given.filter === undefined || given.filter === null ? {} : objectAt(given.filter, `${path}.filter`) };
}

/** Each kind's permission parser. */
export const PERMISSION_PARSERS: { [K in PermissionKind]: (value: unknown, path: string) => PermissionOf<K> } = {
  select: selectPermissionAt,
  insert: insertPermissionAt,
  update: updatePermissionAt,
  delete: deletePermissionAt,
};

export type PermissionOf<K extends PermissionKind> = K extends 'select'
  ? SelectPermission
  : K extends 'insert'
    ? InsertPermission
    : K extends 'update'
      ? UpdatePermission
      : DeletePermission;

/** The name of a relationship `entry` has, or a refusal. */
export function existingRelationship(entry: TrackedTableEntry, value: unknown, path: string): string {
  const name = stringAt(value, path);
  if (!relationshipNames(entry).includes(name)) fail('not-exists', `relationship "${name}" of table "${tableText(entry.table)}" does not exist`, path);
  return name;
}

export function relationshipNames(entry: TrackedTableEntry): string[] {
  return [...(entry.object_relationships ?? []), ...(entry.array_relationships ?? [])].map((item) => item.name);
}
