import { GraphQLError } from 'graphql';
import { escapeIdentifier } from 'pg';
import type { TableModel } from './tables.model';

/* The SQL the compiler writes with: quoting, operators, and the values a compiled statement binds when it runs. */

/** One statement: its text (identifiers quoted, values as $n only) and its bound values (SessionValue for a session's, VariableValue for a request's). */
export interface CompiledStatement {
  text: string;
  parameters: unknown[];
}

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

/**
 * `json_build_object` of key/value pairs; over 50 pairs (its 100-argument limit) the parts are
 * joined as jsonb, whose key order GraphQL's execution does not depend on.
 */
export function buildObject(pairs: string[]): string {
  if (pairs.length <= 50) return `json_build_object(${pairs.join(', ')})`;
  const chunks: string[] = [];
  for (let index = 0; index < pairs.length; index += 50) chunks.push(`jsonb_build_object(${pairs.slice(index, index + 50).join(', ')})`);
  return `(${chunks.join(' || ')})::json`;
}
