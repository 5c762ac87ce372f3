import { MetadataError } from '../../platform/metadata';

/**
 * Hasura's event trigger and cron trigger definitions: their parsing and checks (no database).
 * Every refusal is a MetadataError whose path points at the offending key and whose message
 * names the entry.
 */

export interface RetryConf {
  num_retries: number;
  interval_sec: number;
  timeout_sec: number;
}

export type HeaderConf = { name: string; value: string } | { name: string; value_from_env: string };

export interface OperationSpec {
  columns: '*' | string[];
  payload?: '*' | string[];
}

/** A condition on the changed row (Plinth's addition, Hasura's boolean-expression style). */
export type Condition = Record<string, unknown>;

export interface EventTriggerConfig {
  name: string;
  table: { schema: string; name: string };
  definition: { enable_manual: boolean; insert?: OperationSpec; update?: OperationSpec; delete?: OperationSpec };
  retry_conf: RetryConf;
  webhook?: string;
  webhook_from_env?: string;
  headers: HeaderConf[];
  /** Events of one row (by primary key) are delivered one after the other, in order. */
  in_order?: boolean;
  /** The event fires only when this holds for the row before (`old`) and after (`new`) the change. */
  condition?: Condition;
  comment?: string;
}

export interface CronTriggerConfig {
  name: string;
  webhook: string;
  schedule: string;
  payload?: unknown;
  headers: HeaderConf[];
  retry_conf: CronRetryConf;
  comment?: string;
  include_in_metadata: boolean;
}

export interface CronRetryConf extends RetryConf {
  /** Hasura's tolerance: how late (after downtime) an event may still be delivered. */
  tolerance_seconds?: number;
}

/** Hasura's limits: names of letters, digits, `_` and `-`, at most 42 characters. */
const TRIGGER_NAME = /^[A-Za-z0-9_-]{1,42}$/;
const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;
const HEADER_NAME = /^[A-Za-z0-9!#$%&'*+.^_`|~-]+$/;
const OPERATIONS = ['insert', 'update', 'delete'] as const;
export const DEFAULT_RETRY_CONF: RetryConf = { num_retries: 0, interval_sec: 10, timeout_sec: 60 };

type Json = Record<string, unknown>;
export const isObject = (value: unknown): value is Json => value !== null && typeof value === 'object' && !Array.isArray(value);

/** Reads the object `value` at `path`, refusing anything else. */
export function objectAt(value: unknown, path: string, what: string): Json {
  if (!isObject(value)) throw new MetadataError('parse-failed', `${what} must be an object`, path);
  return value;
}

function stringAt(value: unknown, path: string, what: string): string {
  if (typeof value !== 'string' || value === '') throw new MetadataError('parse-failed', `${what} must be a non-empty string`, path);
  return value;
}

function integerAt(value: unknown, path: string, what: string, min: number, max: number): number {
  if (typeof value !== 'number' || !Number.isInteger(value) || value < min || value > max) {
    throw new MetadataError('parse-failed', `${what} must be a whole number from ${min} to ${max}`, path);
  }
  return value;
}

export function triggerName(value: unknown, path: string, kind: string): string {
  if (typeof value !== 'string' || !TRIGGER_NAME.test(value)) {
    throw new MetadataError('parse-failed', `the ${kind} name ${JSON.stringify(value)} must be 1 to 42 letters, digits, "_" or "-"`, path);
  }
  return value;
}

/** A webhook URL: absolute http(s), `{{ENV_VAR}}` templates allowed (they are resolved per delivery). */
export function webhookUrl(value: unknown, path: string, entry: string): string {
  const url = stringAt(value, path, `the webhook of ${entry}`);
  const sample = url.replace(/\{\{\s*[A-Za-z_][A-Za-z0-9_]*\s*\}\}/g, 'http://template.invalid');
  const resolvedStart = /^\{\{/.test(url) ? sample : url;
  if (!URL.canParse(resolvedStart) || !/^https?:$/.test(new URL(resolvedStart).protocol)) {
    throw new MetadataError('parse-failed', `the webhook of ${entry} must be an http(s) URL, got ${JSON.stringify(url)}`, path);
  }
  return url;
}

function retryConf(value: unknown, path: string, entry: string, defaults: RetryConf): RetryConf {
  if (value === undefined || value === null) return { ...defaults };
  const conf = objectAt(value, path, `the retry_conf of ${entry}`);
  return {
    num_retries: conf.num_retries === undefined ? defaults.num_retries : integerAt(conf.num_retries, `${path}.num_retries`, `num_retries of ${entry}`, 0, 1000),
    interval_sec:
      conf.interval_sec === undefined ? defaults.interval_sec : integerAt(conf.interval_sec, `${path}.interval_sec`, `interval_sec of ${entry}`, 0, 86_400),
    timeout_sec: conf.timeout_sec === undefined ? defaults.timeout_sec : integerAt(conf.timeout_sec, `${path}.timeout_sec`, `timeout_sec of ${entry}`, 1, 3600),
  };
}

export function headerConfs(value: unknown, path: string, entry: string): HeaderConf[] {
  if (value === undefined || value === null) return [];
  if (!Array.isArray(value)) throw new MetadataError('parse-failed', `the headers of ${entry} must be a list`, path);
  return value.map((item, index): HeaderConf => {
    const at = `${path}[${index}]`;
    const header = objectAt(item, at, `a header of ${entry}`);
    const name = stringAt(header.name, `${at}.name`, `a header name of ${entry}`);
    if (!HEADER_NAME.test(name)) throw new MetadataError('parse-failed', `${JSON.stringify(name)} is not a valid header name (${entry})`, `${at}.name`);
    if (typeof header.value === 'string') {
      if (/[\r\n]/.test(header.value)) throw new MetadataError('parse-failed', `the header ${name} of ${entry} must be one line`, `${at}.value`);
      return { name, value: header.value };
    }
    if (typeof header.value_from_env === 'string' && ENV_NAME.test(header.value_from_env)) return { name, value_from_env: header.value_from_env };
    throw new MetadataError('parse-failed', `the header ${name} of ${entry} needs a value or a value_from_env (an environment variable name)`, at);
  });
}

function operationSpec(value: unknown, path: string, entry: string): OperationSpec | undefined {
  if (value === undefined || value === null) return undefined;
  const spec = objectAt(value, path, `an operation of ${entry}`);
  const columnList = (list: unknown, at: string, what: string): '*' | string[] => {
    if (list === '*') return '*';
    if (!Array.isArray(list) || list.length === 0 || !list.every((column) => typeof column === 'string' && column !== '')) {
      throw new MetadataError('parse-failed', `the ${what} of ${entry} must be "*" or a non-empty list of column names`, at);
    }
    return [...new Set(list as string[])];
  };
  const columns = columnList(spec.columns ?? '*', `${path}.columns`, 'columns');
  return spec.payload === undefined ? { columns } : { columns, payload: columnList(spec.payload, `${path}.payload`, 'payload columns') };
}

/**
 * An event trigger from the args of `pg_create_event_trigger` (`{name, table, insert, ...}`) or
 * an `event_triggers` entry of a table in the metadata (`{name, definition: {...}, webhook, ...}`,
 * where retry_conf, webhook and headers may also sit in `definition`, as spec 1 §2.5 shows them).
 */
export function parseEventTrigger(value: unknown, path: string, table?: { schema: string; name: string }): EventTriggerConfig {
  const args = objectAt(value, path, 'an event trigger');
  const name = triggerName(args.name, `${path}.name`, 'event trigger');
  const entry = `the event trigger "${name}"`;
  const definition = isObject(args.definition) ? args.definition : args;
  const definitionPath = isObject(args.definition) ? `${path}.definition` : path;
  const pick = (key: string) =>
    args[key] !== undefined ? { value: args[key], at: `${path}.${key}` } : { value: definition[key], at: `${definitionPath}.${key}` };

  let qualified = table;
  if (!qualified) {
    const given = args.table;
    if (typeof given === 'string') qualified = { schema: 'public', name: given };
    else if (isObject(given) && typeof given.name === 'string' && given.name !== '') {
      qualified = { schema: typeof given.schema === 'string' && given.schema !== '' ? given.schema : 'public', name: given.name };
    } else throw new MetadataError('parse-failed', `${entry} needs a table: {schema, name}`, `${path}.table`);
  }
  if (args.source !== undefined && args.source !== 'default') {
    throw new MetadataError('not-supported', `${entry}: Plinth has one source, "default"`, `${path}.source`);
  }

  const operations: EventTriggerConfig['definition'] = { enable_manual: false };
  for (const operation of OPERATIONS) {
    const spec = operationSpec(definition[operation], `${definitionPath}.${operation}`, entry);
    if (spec) operations[operation] = spec;
  }
  const manual = definition.enable_manual ?? false;
  if (typeof manual !== 'boolean')
    throw new MetadataError('parse-failed', `enable_manual of ${entry} must be true or false`, `${definitionPath}.enable_manual`);
  operations.enable_manual = manual;
  if (!operations.insert && !operations.update && !operations.delete && !manual) {
    throw new MetadataError('parse-failed', `${entry} must watch at least one of insert, update, delete, or enable_manual`, definitionPath);
  }

  const webhook = pick('webhook');
  const webhookFromEnv = pick('webhook_from_env');
  const config: EventTriggerConfig = {
    name,
    table: qualified,
    definition: operations,
    retry_conf: retryConf(pick('retry_conf').value, pick('retry_conf').at, entry, DEFAULT_RETRY_CONF),
    headers: headerConfs(pick('headers').value, pick('headers').at, entry),
  };
  if ((webhook.value === undefined) === (webhookFromEnv.value === undefined)) {
    throw new MetadataError('parse-failed', `${entry} needs exactly one of webhook and webhook_from_env`, path);
  }
  if (webhook.value !== undefined) config.webhook = webhookUrl(webhook.value, webhook.at, entry);
  else {
    const variable = webhookFromEnv.value;
    if (typeof variable !== 'string' || !ENV_NAME.test(variable)) {
      throw new MetadataError('parse-failed', `webhook_from_env of ${entry} must be an environment variable name`, webhookFromEnv.at);
    }
    if (!process.env[variable])
      throw new MetadataError('not-exists', `${entry}: the environment variable ${variable} (webhook_from_env) is not set`, webhookFromEnv.at);
    config.webhook_from_env = variable;
  }
  const inOrder = pick('in_order').value;
  if (inOrder !== undefined) {
    if (typeof inOrder !== 'boolean') throw new MetadataError('parse-failed', `in_order of ${entry} must be true or false`, pick('in_order').at);
    if (inOrder) config.in_order = true;
  }
  const condition = pick('condition').value;
  if (condition !== undefined && condition !== null) config.condition = objectAt(condition, pick('condition').at, `the condition of ${entry}`);
  const comment = pick('comment').value;
  if (typeof comment === 'string') config.comment = comment;
  return config;
}

/** The `event_triggers` entry of a table in the exported metadata (Hasura's layout). */
export function exportedEventTrigger(config: EventTriggerConfig): Json {
  const definition: Json = { enable_manual: config.definition.enable_manual };
  for (const operation of OPERATIONS) if (config.definition[operation]) definition[operation] = config.definition[operation];
  return {
    name: config.name,
    definition,
    retry_conf: config.retry_conf,
    ...(config.webhook !== undefined ? { webhook: config.webhook } : { webhook_from_env: config.webhook_from_env }),
    ...(config.headers.length ? { headers: config.headers } : {}),
    ...(config.in_order ? { in_order: true } : {}),
    ...(config.condition ? { condition: config.condition } : {}),
    ...(config.comment !== undefined ? { comment: config.comment } : {}),
  };
}

/** Column names a condition mentions, per side, to be checked against the table. */
export function conditionColumns(condition: Condition, path: string, entry: string): { column: string; path: string }[] {
  const found: { column: string; path: string }[] = [];
  const visit = (node: unknown, at: string) => {
    const expression = objectAt(node, at, `a condition of ${entry}`);
    for (const [key, value] of Object.entries(expression)) {
      if (key === '_and' || key === '_or') {
        if (!Array.isArray(value)) throw new MetadataError('parse-failed', `${key} in the condition of ${entry} must be a list`, `${at}.${key}`);
        value.forEach((item, index) => visit(item, `${at}.${key}[${index}]`));
      } else if (key === '_not') visit(value, `${at}._not`);
      else if (key === 'old' || key === 'new') {
        const columns = objectAt(value, `${at}.${key}`, `the ${key} row of the condition of ${entry}`);
        for (const [column, operators] of Object.entries(columns)) {
          const operatorsAt = `${at}.${key}.${column}`;
          found.push({ column, path: operatorsAt });
          for (const [operator, operand] of Object.entries(objectAt(operators, operatorsAt, `the comparison of ${column} in ${entry}`))) {
            if (!COMPARISONS[operator])
              throw new MetadataError('parse-failed', `unknown operator ${operator} in the condition of ${entry}`, `${operatorsAt}.${operator}`);
            if ((operator === '_in' || operator === '_nin') && !Array.isArray(operand)) {
              throw new MetadataError('parse-failed', `${operator} in the condition of ${entry} takes a list`, `${operatorsAt}.${operator}`);
            }
            if (operator === '_is_null' && typeof operand !== 'boolean') {
              throw new MetadataError('parse-failed', `_is_null in the condition of ${entry} takes true or false`, `${operatorsAt}.${operator}`);
            }
          }
        }
      } else throw new MetadataError('parse-failed', `unknown key ${key} in the condition of ${entry} (expected _and, _or, _not, old or new)`, `${at}.${key}`);
    }
  };
  visit(condition, path);
  return found;
}

const COMPARISONS: Record<string, string> = {
  _eq: '=',
  _neq: '<>',
  _gt: '>',
  _gte: '>=',
  _lt: '<',
  _lte: '<=',
  _in: 'IN',
  _nin: 'NOT IN',
  _is_null: 'IS NULL',
};

/** A SQL string literal. */
export const literal = (text: string) => `'${text.replace(/'/g, "''")}'`;
const jsonLiteral = (value: unknown) => `${literal(JSON.stringify(value ?? null))}::jsonb`;

/**
 * The condition as a SQL expression over the trigger function's `old_row` and `new_row` (jsonb,
 * null when absent). Already checked by conditionColumns. A comparison with a missing row is false.
 */
export function conditionSql(condition: Condition): string {
  const parts = Object.entries(condition).map(([key, value]) => {
    if (key === '_and' || key === '_or') {
      const items = (value as Condition[]).map(conditionSql);
      if (items.length === 0) return key === '_and' ? 'true' : 'false';
      return `(${items.join(key === '_and' ? ' AND ' : ' OR ')})`;
    }
    if (key === '_not') return `(NOT coalesce(${conditionSql(value as Condition)}, false))`;
    const row = key === 'old' ? 'old_row' : 'new_row';
    return (
      Object.entries(value as Record<string, Record<string, unknown>>)
        .flatMap(([column, operators]) =>
          Object.entries(operators).map(([operator, operand]) => {
            const field = `(${row} -> ${literal(column)})`;
            if (operator === '_is_null') return operand ? `(${row} IS NOT NULL AND jsonb_typeof(${field}) = 'null')` : `(jsonb_typeof(${field}) <> 'null')`;
            if (operator === '_in' || operator === '_nin') {
              const list = (operand as unknown[]).map(jsonLiteral);
              if (list.length === 0) return operator === '_in' ? 'false' : `(${row} IS NOT NULL)`;
              return `(${field} ${COMPARISONS[operator]} (${list.join(', ')}))`;
            }
            return `(${field} ${COMPARISONS[operator]} ${jsonLiteral(operand)})`;
          }),
        )
        .join(' AND ') || 'true'
    );
  });
  return parts.length ? `(${parts.join(' AND ')})` : 'true';
}

/** A cron trigger from the args of `create_cron_trigger` or an entry of cron_triggers.yaml. */
export function parseCronTrigger(value: unknown, path: string, validSchedule: (schedule: string) => string | undefined): CronTriggerConfig {
  const args = objectAt(value, path, 'a cron trigger');
  const name = triggerName(args.name, `${path}.name`, 'cron trigger');
  const entry = `the cron trigger "${name}"`;
  const schedule = stringAt(args.schedule, `${path}.schedule`, `the schedule of ${entry}`);
  const problem = validSchedule(schedule);
  if (problem)
    throw new MetadataError(
      'parse-failed',
      `${entry}: the schedule ${JSON.stringify(schedule)} is not a valid cron expression (${problem})`,
      `${path}.schedule`,
    );
  const retry = retryConf(args.retry_conf, `${path}.retry_conf`, entry, DEFAULT_RETRY_CONF) as CronRetryConf;
  if (isObject(args.retry_conf) && args.retry_conf.tolerance_seconds !== undefined) {
    retry.tolerance_seconds = integerAt(
      args.retry_conf.tolerance_seconds,
      `${path}.retry_conf.tolerance_seconds`,
      `tolerance_seconds of ${entry}`,
      0,
      31 * 86_400,
    );
  }
  const includeInMetadata = args.include_in_metadata ?? true;
  if (typeof includeInMetadata !== 'boolean')
    throw new MetadataError('parse-failed', `include_in_metadata of ${entry} must be true or false`, `${path}.include_in_metadata`);
  return {
    name,
    webhook: webhookUrl(args.webhook, `${path}.webhook`, entry),
    schedule,
    ...(args.payload !== undefined ? { payload: args.payload } : {}),
    headers: headerConfs(args.headers, `${path}.headers`, entry),
    retry_conf: retry,
    ...(typeof args.comment === 'string' ? { comment: args.comment } : {}),
    include_in_metadata: includeInMetadata,
  };
}

/** Every column a trigger names: its operations' columns and payloads, and its condition's. */
export function triggerColumns(config: EventTriggerConfig): string[] {
  const columns = new Set<string>();
  for (const operation of ['insert', 'update', 'delete'] as const) {
    const spec = config.definition[operation];
    if (spec && spec.columns !== '*') spec.columns.forEach((column) => columns.add(column));
    if (spec?.payload && spec.payload !== '*') spec.payload.forEach((column) => columns.add(column));
  }
  const visit = (condition: Condition) => {
    for (const [key, value] of Object.entries(condition)) {
      if (key === '_and' || key === '_or') (value as Condition[]).forEach(visit);
      else if (key === '_not') visit(value as Condition);
      else Object.keys(value as Condition).forEach((column) => columns.add(column));
    }
  };
  if (config.condition) visit(config.condition);
  return [...columns];
}

/** `config` with its table and columns renamed: `table` the table's new name, `column` a column's (old name to new). */
export function renamedTrigger(config: EventTriggerConfig, table: { schema: string; name: string }, column: (name: string) => string): EventTriggerConfig {
  const spec = (given: OperationSpec | undefined): OperationSpec | undefined =>
    given && {
      ...given,
      columns: given.columns === '*' ? '*' : given.columns.map(column),
      ...(given.payload !== undefined ? { payload: given.payload === '*' ? '*' : given.payload.map(column) } : {}),
    };
  const condition = (given: Condition): Condition =>
    Object.fromEntries(
      Object.entries(given).map(([key, value]) => {
        if (key === '_and' || key === '_or') return [key, (value as Condition[]).map(condition)];
        if (key === '_not') return [key, condition(value as Condition)];
        return [key, Object.fromEntries(Object.entries(value as Condition).map(([name, operators]) => [column(name), operators]))];
      }),
    );
  const definition = { ...config.definition };
  for (const operation of ['insert', 'update', 'delete'] as const) if (definition[operation]) definition[operation] = spec(definition[operation]);
  return { ...config, table: { schema: table.schema, name: table.name }, definition, ...(config.condition ? { condition: condition(config.condition) } : {}) };
}
