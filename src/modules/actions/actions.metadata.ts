import { DEFAULT_SOURCE, MetadataError } from '../../platform/metadata';
import type { TableRelationship } from '../tables/tables.joins';

/**
 * Actions and custom types in Hasura's metadata shapes (what `set_custom_types`, `create_action`
 * and `export_metadata` carry), and the checks of their shape. Whether they fit the schema is
 * checked by building it (actions.schema.ts).
 */

export interface CustomScalar {
  name: string;
  description?: string | null;
}

export interface CustomEnum {
  name: string;
  description?: string | null;
  values: { value: string; description?: string | null; is_deprecated?: boolean | null }[];
}

export interface CustomField {
  name: string;
  type: string;
  description?: string | null;
  arguments?: unknown;
}

export interface CustomObject {
  name: string;
  description?: string | null;
  fields: CustomField[];
  /** Relationships to tracked tables (objects only). */
  relationships?: TableRelationship[];
}

export interface CustomTypes {
  scalars?: CustomScalar[];
  enums?: CustomEnum[];
  input_objects?: CustomObject[];
  objects?: CustomObject[];
}

export type ActionHeader = { name: string; value: string } | { name: string; value_from_env: string };

export interface ActionDefinition {
  kind?: 'synchronous' | 'asynchronous';
  type?: 'mutation' | 'query';
  arguments?: { name: string; type: string; description?: string | null }[];
  output_type: string;
  handler: string;
  headers?: ActionHeader[];
  forward_client_headers?: boolean;
  /** Seconds. */
  timeout?: number;
  [key: string]: unknown;
}

export interface ActionPermission {
  role: string;
  comment?: string | null;
}

export interface ActionEntry {
  name: string;
  definition: ActionDefinition;
  comment?: string | null;
  permissions?: ActionPermission[];
}

/** The actions module's part of the metadata. */
export interface ActionsMetadata {
  customTypes: CustomTypes;
  actions: ActionEntry[];
}

const GRAPHQL_NAME = /^[_A-Za-z][_0-9A-Za-z]*$/;
/** A GraphQL type reference: a name, wrapped in lists and non-null marks. */
const TYPE_REFERENCE = /^\[*[_A-Za-z][_0-9A-Za-z]*!?(\]!?)*$/;
/** `{{NAME}}` in a handler URL or a header value: the environment variable NAME. */
export const ENV_TEMPLATE = /\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*\}\}/g;

type Json = Record<string, unknown>;
const isObject = (value: unknown): value is Json => value !== null && typeof value === 'object' && !Array.isArray(value);

function fail(path: string, message: string, code = 'parse-failed'): never {
  throw new MetadataError(code, message, path);
}

function objectAt(value: unknown, path: string, what: string): Json {
  if (!isObject(value)) fail(path, `${what} must be an object`);
  return value;
}

function nameAt(value: unknown, path: string, what: string): string {
  if (typeof value !== 'string' || !GRAPHQL_NAME.test(value))
    fail(path, `${what} must be a GraphQL name (letters, digits and _, not starting with a digit); got ${JSON.stringify(value)}`);
  return value;
}

function optionalText(value: unknown, path: string): string | null | undefined {
  if (value === undefined || value === null) return value;
  if (typeof value !== 'string') fail(path, 'must be a string');
  return value;
}

function listAt(value: unknown, path: string, what: string): unknown[] {
  if (value === undefined || value === null) return [];
  if (!Array.isArray(value)) fail(path, `${what} must be a list`);
  return value;
}

/** The name a type reference stands for: `[Foo!]!` gives Foo. */
export function namedType(reference: string): string {
  return reference.replace(/[[\]!]/g, '');
}

function typeReferenceAt(value: unknown, path: string, what: string): string {
  if (typeof value !== 'string' || !TYPE_REFERENCE.test(value.replace(/\s+/g, '')))
    fail(path, `${what} must be a GraphQL type such as String! or [Item!]; got ${JSON.stringify(value)}`);
  const reference = value.replace(/\s+/g, '');
  const opened = (reference.match(/\[/g) ?? []).length;
  if (opened !== (reference.match(/\]/g) ?? []).length) fail(path, `${what} has unbalanced brackets: ${value}`);
  return reference;
}

function fieldsAt(value: unknown, path: string, owner: string, input: boolean): CustomField[] {
  const fields = listAt(value, path, `the fields of ${owner}`);
  if (fields.length === 0) fail(path, `${owner} needs at least one field`);
  const seen = new Set<string>();
  return fields.map((raw, index) => {
    const at = `${path}[${index}]`;
    const field = objectAt(raw, at, `a field of ${owner}`);
    const name = nameAt(field.name, `${at}.name`, `a field name of ${owner}`);
    if (seen.has(name)) fail(`${at}.name`, `${owner} has the field "${name}" twice`, 'already-exists');
    seen.add(name);
    const parsed: CustomField = { name, type: typeReferenceAt(field.type, `${at}.type`, `the type of ${owner}.${name}`) };
    const description = optionalText(field.description, `${at}.description`);
    if (description !== undefined) parsed.description = description;
    if (!input && field.arguments !== undefined && field.arguments !== null) parsed.arguments = field.arguments;
    return parsed;
  });
}

/** The args of `set_custom_types`, checked for their shape; names must be unique across kinds. */
export function parseCustomTypes(value: unknown, path = '$.args'): CustomTypes {
  const args = value === undefined || value === null ? {} : objectAt(value, path, 'the custom types');
  const names = new Set<string>();
  const named = (raw: unknown, at: string, kind: string): Json => {
    const entry = objectAt(raw, at, `a custom ${kind}`);
    const name = nameAt(entry.name, `${at}.name`, `the name of a custom ${kind}`);
    if (name.startsWith('__')) fail(`${at}.name`, `the name ${name} is reserved (it starts with __)`);
    if (names.has(name)) fail(`${at}.name`, `the custom type "${name}" is declared twice`, 'already-exists');
    names.add(name);
    return entry;
  };
  const described = <T extends { name: string; description?: string | null }>(entry: Json, at: string, parsed: T): T => {
    const description = optionalText(entry.description, `${at}.description`);
    if (description !== undefined) parsed.description = description;
    return parsed;
  };
  const types: CustomTypes = {};
  types.scalars = listAt(args.scalars, `${path}.scalars`, 'scalars').map((raw, index) => {
    const at = `${path}.scalars[${index}]`;
    const entry = named(raw, at, 'scalar');
    return described<CustomScalar>(entry, at, { name: entry.name as string });
  });
  types.enums = listAt(args.enums, `${path}.enums`, 'enums').map((raw, index) => {
    const at = `${path}.enums[${index}]`;
    const entry = named(raw, at, 'enum');
    const values = listAt(entry.values, `${at}.values`, `the values of ${entry.name}`);
    if (values.length === 0) fail(`${at}.values`, `the enum ${entry.name} needs at least one value`);
    const seen = new Set<string>();
    return described<CustomEnum>(entry, at, {
      name: entry.name as string,
      values: values.map((rawValue, position) => {
        const valueAt = `${at}.values[${position}]`;
        const item = objectAt(rawValue, valueAt, `a value of ${entry.name}`);
        const name = nameAt(item.value, `${valueAt}.value`, `a value of ${entry.name}`);
        if (['true', 'false', 'null'].includes(name)) fail(`${valueAt}.value`, `${name} cannot be an enum value`);
        if (seen.has(name)) fail(`${valueAt}.value`, `the enum ${entry.name} has the value ${name} twice`, 'already-exists');
        seen.add(name);
        const parsed: CustomEnum['values'][number] = { value: name };
        const description = optionalText(item.description, `${valueAt}.description`);
        if (description !== undefined) parsed.description = description;
        if (item.is_deprecated !== undefined && item.is_deprecated !== null) {
          if (typeof item.is_deprecated !== 'boolean') fail(`${valueAt}.is_deprecated`, 'must be a boolean');
          parsed.is_deprecated = item.is_deprecated;
        }
        return parsed;
      }),
    });
  });
  for (const kind of ['input_objects', 'objects'] as const) {
    types[kind] = listAt(args[kind], `${path}.${kind}`, kind).map((raw, index) => {
      const at = `${path}.${kind}[${index}]`;
      const entry = named(raw, at, kind === 'objects' ? 'object' : 'input object');
      const parsed: CustomObject = {
        name: entry.name as string,
        fields: fieldsAt(entry.fields, `${at}.fields`, entry.name as string, kind === 'input_objects'),
      };
      if (kind === 'objects') {
        const relationships = relationshipsAt(entry.relationships, `${at}.relationships`, parsed);
        if (relationships.length) parsed.relationships = relationships;
      } else if (entry.relationships !== undefined && entry.relationships !== null) {
        fail(`${at}.relationships`, `the input object ${parsed.name} cannot have relationships (only object types can)`);
      }
      return described(entry, at, parsed);
    });
  }
  return types;
}

/**
 * The relationships of an object type to tracked tables (Hasura's `{name, type, remote_table,
 * field_mapping}`), checked for their shape and against the object's fields; whether the table and
 * columns exist is checked against the tracked tables before the change commits.
 */
function relationshipsAt(value: unknown, path: string, object: CustomObject): TableRelationship[] {
  const names = new Set<string>();
  const fields = new Map(object.fields.map((field) => [field.name, field]));
  return listAt(value, path, `the relationships of ${object.name}`).map((raw, index) => {
    const at = `${path}[${index}]`;
    const entry = objectAt(raw, at, `a relationship of ${object.name}`);
    const name = nameAt(entry.name, `${at}.name`, `a relationship name of ${object.name}`);
    const what = `the relationship "${name}" of ${object.name}`;
    if (names.has(name)) fail(`${at}.name`, `${object.name} has the relationship "${name}" twice`, 'already-exists');
    names.add(name);
    if (fields.has(name)) fail(`${at}.name`, `${what} has the name of a field of ${object.name}: rename one`, 'already-exists');
    if (entry.type !== 'object' && entry.type !== 'array')
      fail(`${at}.type`, `the type of ${what} must be "object" or "array"; got ${JSON.stringify(entry.type)}`);
    if (entry.type === 'array' && fields.has(`${name}_aggregate`))
      fail(`${at}.name`, `${what} gives the field ${name}_aggregate, which ${object.name} has: rename one`, 'already-exists');
    if (entry.source !== undefined && entry.source !== DEFAULT_SOURCE)
      fail(`${at}.source`, `Plinth has one source, "${DEFAULT_SOURCE}"; ${what} names ${JSON.stringify(entry.source)}`, 'not-supported');
    const table = entry.remote_table;
    const remote = isObject(table) ? table : { name: table };
    if (typeof remote.name !== 'string' || remote.name === '' || (remote.schema !== undefined && (typeof remote.schema !== 'string' || remote.schema === '')))
      fail(`${at}.remote_table`, `the remote_table of ${what} must be a table name or {schema, name}`);
    const mapping = objectAt(entry.field_mapping, `${at}.field_mapping`, `the field_mapping of ${what}`);
    if (Object.keys(mapping).length === 0) fail(`${at}.field_mapping`, `the field_mapping of ${what} must map at least one field to a column`);
    for (const [field, column] of Object.entries(mapping)) {
      const declared = fields.get(field);
      if (!declared) fail(`${at}.field_mapping`, `${what} maps the field "${field}", which ${object.name} does not have`, 'validation-failed');
      if (declared.type.includes('[')) fail(`${at}.field_mapping`, `${what} maps the list field "${field}": map scalar fields only`, 'validation-failed');
      if (typeof column !== 'string' || column === '') fail(`${at}.field_mapping.${field}`, `${what} must map "${field}" to a column name`);
    }
    return {
      name,
      type: entry.type,
      remote_table: { schema: (remote.schema as string | undefined) ?? 'public', name: remote.name },
      field_mapping: mapping as Record<string, string>,
    };
  });
}

/** An action's definition, checked for its shape (types and URLs are checked against the schema later). */
export function parseDefinition(value: unknown, path: string, action: string): ActionDefinition {
  const definition = objectAt(value, path, `the definition of ${action}`);
  const kind = definition.kind ?? 'synchronous';
  if (kind !== 'synchronous' && kind !== 'asynchronous') fail(`${path}.kind`, `the kind of ${action} must be synchronous or asynchronous`);
  const type = definition.type ?? 'mutation';
  if (type !== 'mutation' && type !== 'query') fail(`${path}.type`, `the type of ${action} must be mutation or query`);
  if (type === 'query' && kind === 'asynchronous') fail(`${path}.kind`, `${action} is a query: only mutations can be asynchronous`, 'validation-failed');
  if (typeof definition.handler !== 'string' || definition.handler.trim() === '') fail(`${path}.handler`, `the handler of ${action} must be a URL`);
  const seen = new Set<string>();
  const parsed: ActionDefinition = {
    kind,
    type,
    arguments: listAt(definition.arguments, `${path}.arguments`, `the arguments of ${action}`).map((raw, index) => {
      const at = `${path}.arguments[${index}]`;
      const argument = objectAt(raw, at, `an argument of ${action}`);
      const name = nameAt(argument.name, `${at}.name`, `an argument name of ${action}`);
      if (seen.has(name)) fail(`${at}.name`, `${action} has the argument "${name}" twice`, 'already-exists');
      seen.add(name);
      const entry: { name: string; type: string; description?: string | null } = {
        name,
        type: typeReferenceAt(argument.type, `${at}.type`, `the type of the argument ${name} of ${action}`),
      };
      const description = optionalText(argument.description, `${at}.description`);
      if (description !== undefined) entry.description = description;
      return entry;
    }),
    output_type: typeReferenceAt(definition.output_type, `${path}.output_type`, `the output type of ${action}`),
    handler: definition.handler.trim(),
  };
  const headers = listAt(definition.headers, `${path}.headers`, `the headers of ${action}`).map((raw, index): ActionHeader => {
    const at = `${path}.headers[${index}]`;
    const header = objectAt(raw, at, `a header of ${action}`);
    if (typeof header.name !== 'string' || !/^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/.test(header.name))
      fail(`${at}.name`, `a header name of ${action} must be an HTTP header name`);
    if (typeof header.value === 'string' && header.value_from_env === undefined) return { name: header.name, value: header.value };
    if (typeof header.value_from_env === 'string' && header.value === undefined) return { name: header.name, value_from_env: header.value_from_env };
    fail(at, `the header ${header.name} of ${action} needs exactly one of value or value_from_env (a string)`);
  });
  if (headers.length) parsed.headers = headers;
  if (definition.forward_client_headers !== undefined && definition.forward_client_headers !== null) {
    if (typeof definition.forward_client_headers !== 'boolean') fail(`${path}.forward_client_headers`, 'must be a boolean');
    parsed.forward_client_headers = definition.forward_client_headers;
  }
  if (definition.timeout !== undefined && definition.timeout !== null) {
    if (typeof definition.timeout !== 'number' || !Number.isInteger(definition.timeout) || definition.timeout < 1 || definition.timeout > 3600) {
      fail(`${path}.timeout`, `the timeout of ${action} must be a whole number of seconds from 1 to 3600`);
    }
    parsed.timeout = definition.timeout;
  }
  for (const key of ['request_transform', 'response_transform']) {
    if (definition[key] !== undefined && definition[key] !== null) fail(`${path}.${key}`, `${key} is not supported`, 'not-supported');
  }
  return parsed;
}

/** The args of `create_action` / `update_action`: `{name, definition, comment}`. */
export function parseActionArgs(value: unknown): { name: string; definition: ActionDefinition; comment?: string | null } {
  const args = objectAt(value, '$.args', 'the args');
  const name = nameAt(args.name, '$.args.name', 'the action name');
  const parsed: { name: string; definition: ActionDefinition; comment?: string | null } = {
    name,
    definition: parseDefinition(args.definition, '$.args.definition', name),
  };
  const comment = optionalText(args.comment, '$.args.comment');
  if (comment !== undefined) parsed.comment = comment;
  return parsed;
}

/** A role name of a permission. */
export function roleAt(value: unknown, path: string): string {
  if (typeof value !== 'string' || !/^[A-Za-z0-9_-]{1,100}$/.test(value))
    fail(path, `a role must be 1 to 100 letters, digits, _ or -; got ${JSON.stringify(value)}`);
  if (value === 'admin') fail(path, 'the admin role may call every action: it takes no permission', 'validation-failed');
  return value;
}

/** An action name that must exist. */
export function actionNameAt(value: unknown, path: string, metadata: ActionsMetadata): ActionEntry {
  const name = nameAt(value, path, 'the action name');
  const entry = metadata.actions.find((action) => action.name === name);
  if (!entry) fail(path, `action "${name}" does not exist`, 'not-exists');
  return entry;
}

/** The `actions` and `custom_types` keys of a whole metadata object, checked (replace_metadata). */
export function parseActionsSection(metadata: Record<string, unknown>, path = '$.args'): ActionsMetadata {
  const customTypes = parseCustomTypes(metadata.custom_types, `${path}.custom_types`);
  const names = new Set<string>();
  const actions = listAt(metadata.actions, `${path}.actions`, 'actions').map((raw, index): ActionEntry => {
    const at = `${path}.actions[${index}]`;
    const entry = objectAt(raw, at, 'an action');
    const name = nameAt(entry.name, `${at}.name`, 'the action name');
    if (names.has(name)) fail(`${at}.name`, `the action "${name}" is declared twice`, 'already-exists');
    names.add(name);
    const action: ActionEntry = { name, definition: parseDefinition(entry.definition, `${at}.definition`, name) };
    const comment = optionalText(entry.comment, `${at}.comment`);
    if (comment !== undefined) action.comment = comment;
    const roles = new Set<string>();
    const permissions = listAt(entry.permissions, `${at}.permissions`, `the permissions of ${name}`).map((rawPermission, position) => {
      const permissionAt = `${at}.permissions[${position}]`;
      const permission = objectAt(rawPermission, permissionAt, `a permission of ${name}`);
      const role = roleAt(permission.role, `${permissionAt}.role`);
      if (roles.has(role)) fail(`${permissionAt}.role`, `the permission of ${name} for role ${role} is declared twice`, 'already-exists');
      roles.add(role);
      const parsed: ActionPermission = { role };
      const permissionComment = optionalText(permission.comment, `${permissionAt}.comment`);
      if (permissionComment !== undefined) parsed.comment = permissionComment;
      return parsed;
    });
    if (permissions.length) action.permissions = permissions;
    return action;
  });
  return { customTypes, actions };
}

/**
 * Replaces the `{{NAME}}` templates of `text` from `env`, and `{{ADMIN_SECRET}}` by `adminSecret`
 * when one is given (header values only: a URL is no place for a secret). A variable that is not
 * set is an error naming it (nothing is sent with a hole in it).
 */
export function resolveTemplate(text: string, env: Record<string, string | undefined>, adminSecret?: string): string {
  return text.replace(ENV_TEMPLATE, (_match, name: string) => {
    if (name === 'ADMIN_SECRET' && adminSecret !== undefined) {
      if (adminSecret === '') throw new Error('ADMIN_SECRET is not configured');
      return adminSecret;
    }
    const value = env[name];
    if (value === undefined) throw new Error(`the environment variable ${name} is not set`);
    return value;
  });
}
