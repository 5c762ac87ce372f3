import { isObject } from './tables.metadata';
import { TEXT_SCALARS, type ColumnModel } from './tables.model';
import { badInput, COMPARISONS, JSONB_OPERATORS, SessionValue, TEXT_MATCHES, VariableValue } from './tables.sql';

/* A column's `<scalar>_comparison_exp` (or `<scalar>_array_comparison_exp`) as an SQL condition, every operand bound. */

/** What a comparison needs of the compiler: binding a value, reading a variable the text depends on. */
export interface Binder {
  /** `$n` (with `::cast`) for a value bound when the statement runs. */
  bind(value: unknown, cast?: string): string;
  /** A variable's value, read: the statement holds for that value only. */
  valueOf(value: unknown): unknown;
  /** `value` with every variable inside it read. */
  readAll(value: unknown): unknown;
}

type Mode = 'query' | 'permission';

/** A permission's operand: a session variable named as `X-Gql-*` or `X-Hasura-*` (read when the statement runs), or a literal. */
export function sessionValue(value: unknown): unknown {
  if (typeof value !== 'string') return value;
  const match = /^x-(gql|hasura)-(.+)$/i.exec(value);
  return match ? new SessionValue(`x-gql-${match[2].toLowerCase()}`) : value;
}

/** The SQL condition of `operators` (a comparison object) on `column`, read at `expression`. */
export function comparison(binder: Binder, column: ColumnModel, expression: string, operators: unknown, mode: Mode): string {
  if (!isObject(operators)) throw badInput(`the comparison on "${column.field}" must be an object of operators`);
  if (column.array) return arrayComparison(binder, column, expression, operators, mode);
  const parts: string[] = [];
  const json = column.scalar === 'jsonb' || column.scalar === 'json';
  /** An operand as given: a permission's may name a session variable, a query's be a variable bound when the statement runs. */
  const operandOf = (value: unknown) => (mode === 'permission' ? sessionValue(value) : value instanceof VariableValue ? value : binder.readAll(value));
  /** A value as bound: JSON text for a json column (or a jsonb operand), a session's or a request's variable read when the statement runs. */
  const asBound = (value: unknown, asJson: boolean) =>
    value instanceof SessionValue
      ? new SessionValue(value.name, asJson)
      : value instanceof VariableValue
        ? value.boundAs(asJson ? 'json' : 'value')
        : asJson
          ? JSON.stringify(value)
          : value;
  const operand = (value: unknown, cast: string, list = false) => {
    const given = operandOf(value);
    if (given === null || given === undefined) throw badInput(`the operand on "${column.field}" cannot be null (use _is_null)`);
    const deferred = given instanceof SessionValue || given instanceof VariableValue;
    if (list && typeof given !== 'string' && !Array.isArray(given) && !deferred) throw badInput(`the operand on "${column.field}" must be a list`);
    if (list && given instanceof VariableValue) return binder.bind(given.boundAs(json ? 'json items' : 'value'), cast);
    if (list) return binder.bind(json && Array.isArray(given) ? given.map((item) => JSON.stringify(item)) : given, cast);
    return binder.bind(asBound(given, json), cast);
  };
  for (const [operator, value] of Object.entries(operators)) {
    if (value === undefined) continue;
    if (column.scalar === 'json' && operator !== '_is_null')
      throw badInput(`the operator "${operator}" does not apply to the json column "${column.field}" (only _is_null does)`);
    if (COMPARISONS[operator]) parts.push(`${expression} ${COMPARISONS[operator]} ${operand(value, column.sqlType)}`);
    else if (operator === '_in') parts.push(`${expression} = ANY(${operand(value, `${column.sqlType}[]`, true)})`);
    else if (operator === '_nin') parts.push(`${expression} <> ALL(${operand(value, `${column.sqlType}[]`, true)})`);
    else if (operator === '_is_null') parts.push(isNull(binder, column, expression, value));
    else if (TEXT_MATCHES[operator] && TEXT_SCALARS.has(column.scalar)) {
      parts.push(`${expression} ${TEXT_MATCHES[operator]} ${operand(value, column.sqlType)}`);
    } else if (JSONB_OPERATORS[operator] && column.scalar === 'jsonb') {
      const [sqlOperator, cast] = JSONB_OPERATORS[operator];
      const given = operandOf(value);
      if (given === null || given === undefined) throw badInput(`the operand on "${column.field}" cannot be null`);
      parts.push(`${expression} ${sqlOperator} ${binder.bind(asBound(given, cast === 'jsonb'), cast)}`);
    } else {
      throw badInput(`the operator "${operator}" does not apply to the column "${column.field}" (${column.scalar})`);
    }
  }
  return parts.length === 0 ? 'true' : parts.join(' AND ');
}

function isNull(binder: Binder, column: ColumnModel, expression: string, value: unknown): string {
  const given = binder.valueOf(value);
  if (typeof given !== 'boolean') throw badInput(`_is_null on "${column.field}" takes a boolean`);
  return `(${expression} IS NULL) = ${binder.bind(given, 'boolean')}`;
}

/** The operators of `<scalar>_array_comparison_exp` whose operand is one array of the column's type. */
const ARRAY_OPERATORS: Record<string, string> = { ...COMPARISONS, _contains: '@>', _contained_in: '<@' };

/**
 * A comparison on an array column (Hasura's `<scalar>_array_comparison_exp`): `_eq`.. `_lte`,
 * `_contains` and `_contained_in` take one array, `_in` and `_nin` a list of arrays, each bound
 * as PostgreSQL's array literal text and cast to the column's type. A `json[]` column has only
 * `_is_null` (json has no equality).
 */
function arrayComparison(binder: Binder, column: ColumnModel, expression: string, operators: Record<string, unknown>, mode: Mode): string {
  const parts: string[] = [];
  const array = (value: unknown, what: string) => arrayOperand(binder, column, mode === 'permission' ? sessionValue(value) : value, what, mode);
  for (const [operator, value] of Object.entries(operators)) {
    if (value === undefined) continue;
    if (column.scalar === 'json' && operator !== '_is_null')
      throw badInput(`the operator "${operator}" does not apply to the json[] column "${column.field}" (only _is_null does)`);
    if (ARRAY_OPERATORS[operator]) parts.push(`${expression} ${ARRAY_OPERATORS[operator]} ${array(value, operator)}`);
    else if (operator === '_in' || operator === '_nin') {
      const given = mode === 'permission' ? sessionValue(value) : value;
      if (given instanceof SessionValue) throw badInput(`${operator} on the array column "${column.field}" takes a list of arrays, not a session variable`);
      // A variable's list is read: the statement has one parameter per array.
      const list = given instanceof VariableValue ? binder.valueOf(given) : given;
      if (!Array.isArray(list)) throw badInput(`the operand of ${operator} on "${column.field}" must be a list of arrays`);
      const arrays = list.map((item) => array(item, operator));
      if (arrays.length === 0) parts.push(operator === '_in' ? 'false' : 'true');
      else parts.push(`${expression} ${operator === '_in' ? 'IN' : 'NOT IN'} (${arrays.join(', ')})`);
    } else if (operator === '_is_null') parts.push(isNull(binder, column, expression, value));
    else throw badInput(`the operator "${operator}" does not apply to the array column "${column.field}" ([${column.scalar}!])`);
  }
  return parts.length === 0 ? 'true' : parts.join(' AND ');
}

/**
 * One array operand of `column`, bound: a query's literal or variable as its array literal, a
 * session variable (or a permission's string) as the PostgreSQL array literal it holds, which the
 * cast reads (Hasura's session variables give arrays so: "{a,b}").
 */
export function arrayOperand(binder: Binder, column: ColumnModel, given: unknown, what = 'the primary key', mode: Mode = 'query'): string {
  if (given === null || given === undefined) throw badInput(`the operand of ${what} on "${column.field}" cannot be null (use _is_null)`);
  if (given instanceof SessionValue || (mode === 'permission' && typeof given === 'string')) return binder.bind(given, column.sqlType);
  if (given instanceof VariableValue)
    return binder.bind(
      given.prepared((items) => arrayLiteral(column, items, what)),
      column.sqlType,
    );
  return binder.bind(arrayLiteral(column, binder.readAll(given), what), column.sqlType);
}

/** What an element of each scalar must be in JSON (the others are given as text and read by PostgreSQL, which refuses what is not of the type). */
const ELEMENT_CHECKS: Record<string, [(value: unknown) => boolean, string]> = {
  Int: [(value) => Number.isInteger(value), 'an integer'],
  Float: [(value) => typeof value === 'number', 'a number'],
  Boolean: [(value) => typeof value === 'boolean', 'a boolean'],
  String: [(value) => typeof value === 'string', 'a string'],
};

/**
 * `items` as PostgreSQL's array literal of the column's element type: one dimension, no null
 * element (Hasura's `[scalar!]`), each element quoted and escaped (so a quote, a brace or a
 * backslash is a character of the element, and the text is bound, never part of the statement).
 */
export function arrayLiteral(column: ColumnModel, items: unknown, what: string): string {
  const type = `[${column.scalar}!]`;
  if (!Array.isArray(items)) throw badInput(`the operand of ${what} on "${column.field}" must be a list (${type})`);
  const json = column.scalar === 'json' || column.scalar === 'jsonb';
  const check = ELEMENT_CHECKS[column.scalar];
  const elements = items.map((item, index) => {
    const at = `element ${index} of ${what} on "${column.field}" (${type})`;
    if (item === null || item === undefined) throw badInput(`${at} is null: array elements cannot be null`);
    if (json) return JSON.stringify(item);
    if (Array.isArray(item)) throw badInput(`${at} is a list: nested arrays are not supported`);
    if (typeof item === 'object') throw badInput(`${at} is an object, not ${column.scalar === 'String' ? 'a string' : `a ${column.scalar}`}`);
    if (check && !check[0](item)) throw badInput(`${at} must be ${check[1]}`);
    return String(item);
  });
  return `{${elements.map((element) => `"${element.replace(/\\/g, '\\\\').replace(/"/g, '\\"')}"`).join(',')}}`;
}
