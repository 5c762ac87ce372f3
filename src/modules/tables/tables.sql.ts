import {
  getNamedType,
  getNullableType,
  GraphQLError,
  GraphQLScalarType,
  isListType,
  isScalarType,
  isSpecifiedScalarType,
  type GraphQLOutputType,
} from 'graphql';
import { escapeIdentifier } from 'pg';
import type { TableModel } from './tables.model';

/* The SQL the compiler writes with: quoting, operators, and the values a compiled statement binds when it runs. */

/** One statement: its text (identifiers quoted, values as $n only) and its bound values (SessionValue for a session's, VariableValue for a request's). */
export interface CompiledStatement {
  text: string;
  parameters: unknown[];
  /** Whether its JSON is what GraphQL would write (a root field's statement). */
  output?: JsonOutput;
}

/**
 * Whether a statement's JSON is what GraphQL would write for its field (the same values, and
 * keys in the document's order, with `__typename`): 'as-graphql'; 'floats' when it also holds a
 * Float, which PostgreSQL may write as "NaN" or "Infinity" where GraphQL refuses it; 'reshaped'
 * when GraphQL's completion would change it (keys reordered by jsonb, a value GraphQL's scalar
 * serializes differently).
 */
export type JsonOutput = 'as-graphql' | 'floats' | 'reshaped';

/** The serialization of a scalar declared without one (GraphQLScalarType's default). */
const AS_IS = new GraphQLScalarType({ name: 'AsIs' }).serialize;
/** The SQL types shown as String whose JSON is a string (other types without a scalar name are shown as String too). */
const STRING_TYPES = new Set(['text', 'character varying', 'name']);

/** Of a leaf of type `type` whose value is PostgreSQL's JSON of SQL type `sqlType`: whether GraphQL writes it as it is. */
export function leafOutput(type: GraphQLOutputType, sqlType: string): JsonOutput {
  const named = getNamedType(type);
  // An array column's stored NULL element or extra dimension is an error GraphQL's completion raises (tables.schema.ts).
  if (!isScalarType(named) || isListType(getNullableType(type))) return 'reshaped';
  if (!isSpecifiedScalarType(named)) return named.serialize === AS_IS ? 'as-graphql' : 'reshaped';
  if (named.name === 'Float') return 'floats';
  if (named.name === 'String') return STRING_TYPES.has(sqlType) ? 'as-graphql' : 'reshaped';
  return named.name === 'Int' || named.name === 'Boolean' ? 'as-graphql' : 'reshaped';
}

/** The JSON output of parts written together. */
export function joinedOutput(one: JsonOutput, other: JsonOutput): JsonOutput {
  return one === 'reshaped' || other === 'reshaped' ? 'reshaped' : one === 'floats' || other === 'floats' ? 'floats' : 'as-graphql';
}

/** `__typename`'s value: the object type's name (a GraphQL name, so a safe literal). */
export const typeNameValue = (name: string) => `${key(name)}::text`;

/** The one quoting of identifiers in this module. */
export const quote = (identifier: string) => escapeIdentifier(identifier);
export const qualified = (table: TableModel) => `${quote(table.table.schema)}.${quote(table.table.name)}`;
const GRAPHQL_NAME = /^[_A-Za-z][_0-9A-Za-z]*$/;
/** A JSON key of the statement: a response key, which the GraphQL parser made a Name. */
export function key(name: string): string {
  if (!GRAPHQL_NAME.test(name)) throw new Error(`not a GraphQL name: ${name}`);
  return `'${name}'`;
}

export const DIRECTIONS: Record<string, string> = {
  asc: 'ASC NULLS LAST',
  asc_nulls_last: 'ASC NULLS LAST',
  asc_nulls_first: 'ASC NULLS FIRST',
  desc: 'DESC NULLS FIRST',
  desc_nulls_first: 'DESC NULLS FIRST',
  desc_nulls_last: 'DESC NULLS LAST',
};

/** The SQL function of each aggregate field but count (the same names). */
export const AGGREGATES: Record<string, string> = { sum: 'sum', avg: 'avg', max: 'max', min: 'min' };

export const COMPARISONS: Record<string, string> = { _eq: '=', _neq: '<>', _gt: '>', _gte: '>=', _lt: '<', _lte: '<=' };
export const TEXT_MATCHES: Record<string, string> = {
  _like: 'LIKE',
  _nlike: 'NOT LIKE',
  _ilike: 'ILIKE',
  _nilike: 'NOT ILIKE',
  _similar: 'SIMILAR TO',
  _nsimilar: 'NOT SIMILAR TO',
  _regex: '~',
  _nregex: '!~',
  _iregex: '~*',
  _niregex: '!~*',
};
export const JSONB_OPERATORS: Record<string, [string, string]> = {
  _contains: ['@>', 'jsonb'],
  _contained_in: ['<@', 'jsonb'],
  _has_key: ['?', 'text'],
  _has_keys_any: ['?|', 'text[]'],
  _has_keys_all: ['?&', 'text[]'],
};

/** A refusal of the caller's arguments (an operator misused, an unknown session variable). */
export function badInput(message: string): GraphQLError {
  return new GraphQLError(message, { extensions: { code: 'BAD_USER_INPUT' } });
}

/**
 * A table, column, root field or aggregate the reader's permission does not open. The reader's
 * schema does not have it (tables.views.ts), so GraphQL's validation refused a document naming
 * it: meeting one in the compiler is a fault, and nothing is read.
 */
export function notPermitted(what: string): Error {
  return new Error(`${what} is not open to the role: the operation was not validated against the role's schema`);
}

/**
 * A bound value taken from the session when the statement runs, so that one compiled statement
 * serves every session of its role: `x-gql-*` name, as JSON text for a json operand.
 */
export class SessionValue {
  constructor(
    readonly name: string,
    readonly json = false,
  ) {}
}

/**
 * A query variable's value in a statement, bound from the request's variables when the statement
 * runs (so one compiled statement serves every value): as given, as JSON text (a json operand), or
 * each item as JSON text (a list of json operands). `value` is the compiling request's, read only
 * where the text depends on it.
 */
export class VariableValue {
  constructor(
    readonly name: string,
    readonly value: unknown,
    readonly bound: 'value' | 'json' | 'json items' = 'value',
    /** Turns each request's value into what is bound, or refuses it (an array column's operand: its literal). */
    readonly prepare?: (value: unknown) => unknown,
  ) {}

  boundAs(bound: VariableValue['bound']): VariableValue {
    return new VariableValue(this.name, this.value, bound);
  }

  prepared(prepare: (value: unknown) => unknown): VariableValue {
    return new VariableValue(this.name, this.value, 'value', prepare);
  }
}

/**
 * The values to run `statement` with for a session (its variables, lower-case `x-gql-*` names)
 * and a request's variables (those it binds, which the statement was kept for, are never null).
 */
export function boundValues(
  statement: CompiledStatement,
  variables: Readonly<Record<string, string>>,
  requestVariables: Readonly<Record<string, unknown>> = {},
): unknown[] {
  return statement.parameters.map((value) => {
    if (value instanceof VariableValue) {
      const given = requestVariables[value.name];
      if (given === undefined || given === null) throw new Error(`the statement binds the variable ${value.name}, which the request does not give`);
      if (value.prepare) return value.prepare(given);
      return value.bound === 'json' ? JSON.stringify(given) : value.bound === 'json items' ? (given as unknown[]).map((item) => JSON.stringify(item)) : given;
    }
    if (!(value instanceof SessionValue)) return value;
    const variable = variables[value.name];
    if (variable === undefined) throw badInput(`missing session variable: "${value.name}"`);
    return value.json ? JSON.stringify(variable) : variable;
  });
}

/** The pairs json_build_object takes (100 arguments). */
export const OBJECT_PAIRS = 50;

/**
 * `json_build_object` of key/value pairs; over 50 pairs (its 100-argument limit) the parts are
 * joined as jsonb, whose key order GraphQL's execution does not depend on.
 */
export function buildObject(pairs: string[]): string {
  if (pairs.length <= OBJECT_PAIRS) return `json_build_object(${pairs.join(', ')})`;
  const chunks: string[] = [];
  for (let index = 0; index < pairs.length; index += 50) chunks.push(`jsonb_build_object(${pairs.slice(index, index + 50).join(', ')})`);
  return `(${chunks.join(' || ')})::json`;
}

/**
 * A value PostgreSQL refused (a class 22 "data exception": not a uuid, out of range, an invalid
 * regular expression), or an operation a column's type does not have (42883, 42804: ordering or
 * distinct_on by a json column), is the caller's mistake, told as PostgreSQL says it.
 */
export function asInputError(error: unknown): unknown {
  const code = (error as { code?: unknown }).code;
  if (typeof code === 'string' && (code.startsWith('22') || code === '42883' || code === '42804')) {
    return new GraphQLError(`invalid input: ${(error as Error).message}`, { extensions: { code: 'BAD_USER_INPUT' } });
  }
  return error;
}

/** PostgreSQL's undefined_table and undefined_column: a tracked table dropped or altered since it was read. */
export function changedUnderMetadata(error: unknown): boolean {
  const code = (error as { code?: unknown }).code;
  return code === '42P01' || code === '42703';
}
