import { DEFAULT_SOURCE, MetadataError } from '../../platform/metadata';
import type { QualifiedTable } from '../../platform/sql-renames';

export type { QualifiedTable };

/** `configuration` of a tracked table (Hasura's table configuration). */
export interface TableConfiguration {
  custom_name?: string;
  custom_root_fields?: { select?: string; select_by_pk?: string; select_aggregate?: string };
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

export interface SelectPermission {
  columns: string[] | '*';
  filter: BoolExp;
  limit?: number;
  allow_aggregations?: boolean;
  /** Left out: every root field (select_aggregate with allow_aggregations). */
  query_root_fields?: (typeof QUERY_ROOT_FIELDS)[number][];
  /** Kept as given: no subscription root field is served yet. */
  subscription_root_fields?: string[];
}

export interface SelectPermissionEntry {
  role: string;
  permission: SelectPermission;
  comment?: string;
}

/** A tracked table's entry, in Hasura's shape (what `export_metadata` shows under `tables`). */
export interface TrackedTableEntry {
  table: QualifiedTable;
  configuration?: TableConfiguration;
  object_relationships?: RelationshipEntry[];
  array_relationships?: RelationshipEntry[];
  select_permissions?: SelectPermissionEntry[];
}

/** The keys of a table entry this module owns (others, such as event_triggers, are other modules'). */
export const TABLE_KEYS = ['configuration', 'object_relationships', 'array_relationships', 'select_permissions'] as const;

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
      if (key !== 'select' && key !== 'select_by_pk' && key !== 'select_aggregate') {
        // No mutation or subscription root field is served yet.
        fail(
          'not-supported',
          `the custom root field "${key}" is not supported yet (select, select_by_pk, select_aggregate are)`,
          `${path}.custom_root_fields.${key}`,
        );
      }
      // Hasura takes a name or {name, comment}.
      const text = isObject(name) ? name.name : name;
      parsed[key] = graphqlNameAt(text, `${path}.custom_root_fields.${key}`);
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
    const unknown = names.find((name) => !(QUERY_ROOT_FIELDS as readonly string[]).includes(name));
    if (unknown) fail('parse-failed', `unknown root field "${unknown}" (one of ${QUERY_ROOT_FIELDS.join(', ')})`, `${path}.${key}`);
    if (key === 'query_root_fields') permission.query_root_fields = names as SelectPermission['query_root_fields'];
    else permission.subscription_root_fields = names;
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
  const permissions = value.select_permissions;
  if (permissions !== undefined && permissions !== null) {
    if (!Array.isArray(permissions)) fail('parse-failed', 'select_permissions must be a list', `${path}.select_permissions`);
    if (permissions.length) {
      entry.select_permissions = permissions.map((item, index) => {
        const at = `${path}.select_permissions[${index}]`;
        const given = objectAt(item, at);
        return { role: roleAt(given.role, `${at}.role`), permission: selectPermissionAt(given.permission, `${at}.permission`) };
      });
    }
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
  for (const key of ['object_relationships', 'array_relationships', 'select_permissions'] as const) if (!copy[key]?.length) delete copy[key];
  if (!copy.configuration || Object.keys(copy.configuration).length === 0) delete copy.configuration;
  return copy;
}
