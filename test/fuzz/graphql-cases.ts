import fc from 'fast-check';
import {
  getNamedType,
  isEnumType,
  isInputObjectType,
  isLeafType,
  isListType,
  isNonNullType,
  isObjectType,
  isInterfaceType,
  isScalarType,
  type GraphQLField,
  type GraphQLInputType,
  type GraphQLOutputType,
  type GraphQLSchema,
} from 'graphql';
import { anyJson, nastyNumber, nastyString } from './values';

/** One GraphQL request: the body (or GET parameters), and how it is sent. */
export interface GraphQLCase {
  kind: 'graphql';
  method: 'POST' | 'GET';
  credentials: string;
  body: unknown;
  contentType?: string;
  accept?: string;
}

const NAME = /^[_A-Za-z][_0-9A-Za-z]*$/;

/** A value for an input type: mostly of the right shape, sometimes wrong or at an edge. */
function inputValue(type: GraphQLInputType, depth = 0): fc.Arbitrary<unknown> {
  const wellTyped = (): fc.Arbitrary<unknown> => {
    if (isNonNullType(type)) return inputValue(type.ofType, depth);
    if (isListType(type)) {
      return fc.oneof(fc.array(inputValue(type.ofType, depth + 1), { maxLength: depth > 1 ? 2 : 5 }), inputValue(type.ofType, depth + 1));
    }
    if (isEnumType(type)) return fc.oneof(fc.constantFrom(...type.getValues().map((value) => value.name)), nastyString);
    if (isInputObjectType(type)) {
      if (depth > 3) return anyJson;
      const fields = Object.fromEntries(Object.values(type.getFields()).map((field) => [field.name, inputValue(field.type, depth + 1)]));
      return fc
        .tuple(fc.record(fields, { requiredKeys: [] }), fc.option(fc.tuple(nastyString, anyJson), { freq: 8 }))
        .map(([record, extra]) => (extra ? { ...record, [extra[0]]: extra[1] } : record));
    }
    if (isScalarType(type)) {
      switch (type.name) {
        case 'Int':
          return nastyNumber.map((n) => (Number.isFinite(n) ? Math.trunc(n) : n));
        case 'Float':
          return nastyNumber;
        case 'Boolean':
          return fc.boolean();
        case 'String':
        case 'ID':
          return nastyString;
        default:
          return fc.oneof(nastyString, fc.uuid(), anyJson);
      }
    }
    return anyJson;
  };
  return fc.oneof({ weight: 7, arbitrary: wellTyped() }, { weight: 1, arbitrary: fc.constant(null) }, { weight: 2, arbitrary: anyJson });
}

/** A GraphQL literal for any JSON value (which may not fit the type, or even parse). */
function literal(value: unknown, type: GraphQLInputType): string {
  const named = getNamedType(type);
  if (value === null || value === undefined) return 'null';
  if (typeof value === 'string') return isEnumType(named) && NAME.test(value) ? value : JSON.stringify(value);
  if (typeof value === 'number') return Number.isFinite(value) ? String(value) : '0';
  if (typeof value === 'boolean') return String(value);
  if (Array.isArray(value)) return `[${value.map((item) => literal(item, type)).join(', ')}]`;
  const fields = isInputObjectType(named) ? named.getFields() : {};
  return `{${Object.entries(value as Record<string, unknown>)
    .map(([key, item]) => `${NAME.test(key) ? key : 'bad_key'}: ${literal(item, fields[key]?.type ?? type)}`)
    .join(', ')}}`;
}

/** Leaf fields (and a level of objects) of an output type, enough to make a valid selection. */
function selection(type: GraphQLOutputType, depth: number): string {
  const named = getNamedType(type);
  if (isLeafType(named)) return '';
  if (!isObjectType(named) && !isInterfaceType(named)) return '{ __typename }';
  const fields = Object.values(named.getFields()).filter((field) => field.args.every((arg) => !isNonNullType(arg.type)));
  const parts = ['__typename'];
  for (const field of fields) {
    if (isLeafType(getNamedType(field.type))) parts.push(field.name);
    else if (depth > 0) parts.push(`${field.name} ${selection(field.type, depth - 1)}`);
  }
  return `{ ${parts.join(' ')} }`;
}

/** Requests for one root field: arguments as variables or literals, present, missing or wrong. */
function fieldCase(
  operation: 'query' | 'mutation' | 'subscription',
  field: GraphQLField<unknown, unknown>,
  credentials: fc.Arbitrary<string>,
): fc.Arbitrary<GraphQLCase> {
  const args = field.args.map((arg) =>
    fc.record({ present: fc.boolean(), asVariable: fc.boolean(), value: inputValue(arg.type) }).map((choice) => ({ arg, ...choice })),
  );
  return fc
    .record({
      args: fc.tuple(...args),
      credentials,
      method: fc.constantFrom('POST', 'POST', 'POST', 'GET') as fc.Arbitrary<'POST' | 'GET'>,
      accept: fc.constantFrom(undefined, 'application/json', 'application/graphql-response+json'),
    })
    .map(({ args: chosen, credentials: who, method, accept }) => {
      const definitions: string[] = [];
      const passed: string[] = [];
      const variables: Record<string, unknown> = {};
      for (const { arg, present, asVariable, value } of chosen) {
        if (!present && !isNonNullType(arg.type)) continue;
        if (asVariable) {
          definitions.push(`$${arg.name}: ${String(arg.type)}`);
          passed.push(`${arg.name}: $${arg.name}`);
          if (present) variables[arg.name] = value;
        } else {
          passed.push(`${arg.name}: ${literal(value, arg.type)}`);
        }
      }
      const head = definitions.length ? `${operation} Fuzz(${definitions.join(', ')})` : `${operation} Fuzz`;
      const call = passed.length ? `${field.name}(${passed.join(', ')})` : field.name;
      const query = `${head} { ${call} ${selection(field.type, 1)} }`;
      return { kind: 'graphql' as const, method, credentials: who, accept, body: { query, variables, operationName: 'Fuzz' } };
    });
}

/** Documents no client library would send: broken, huge, deep, cyclic, batched. */
function malformedDocuments(credentials: fc.Arbitrary<string>): fc.Arbitrary<GraphQLCase> {
  const documents = fc.oneof(
    nastyString,
    fc.constantFrom(
      '{',
      '}',
      'query {',
      '{ session { role } ',
      'query Q($a: String) { session { role } }',
      'query Q { ...F } fragment F on Query { ...F }',
      'query Q { ...F } fragment F on Query { ...G } fragment G on Query { ...F }',
      'query Q { session @skip(if: $x) { role } }',
      'mutation { __typename } mutation { __typename }',
      'query A { __typename } query A { __typename }',
      'subscription S { __typename }',
      '{ __schema { types { fields { type { ofType { ofType { ofType { name } } } } } } } }',
      `{ ${'session @include(if: true) '.repeat(20)}{ role } }`,
      `{ session { role ${'@skip(if: false) '.repeat(200)} } }`,
      `query (${Array.from({ length: 200 }, (_, i) => `$v${i}: String`).join(' ')}) { __typename }`,
      `{ s: session { role } s: session { user_id } }`,
      `{ __typename(arg: 1) }`,
      `{ session(x: "y") { role } }`,
      'query ($a: [[[[[[String]]]]]]) { __typename }',
      'fragment F on Nope { x } { __typename }',
      '{ __type(name: "\\u0000") { name } }',
    ),
    fc.integer({ min: 1, max: 40 }).map((depth) => `${'{ session '.repeat(depth)}${'}'.repeat(depth)}`),
    fc.integer({ min: 50, max: 3000 }).map((n) => `{ ${Array.from({ length: n }, (_, i) => `a${i}: __typename`).join(' ')} }`),
    fc.integer({ min: 10, max: 60_000 }).map((n) => `{ __typename } # ${'x'.repeat(n)}`),
    fc.integer({ min: 2, max: 500 }).map((n) => `query { ${'__typename '.repeat(n)}}`),
  );
  const bodies = fc.oneof(
    documents.map((query) => ({ query })),
    fc.record({ query: documents, variables: anyJson, operationName: fc.oneof(nastyString, anyJson) }, { requiredKeys: ['query'] }),
    fc.record({ query: documents, extensions: fc.oneof(anyJson, fc.record({ persistedQuery: fc.record({ version: nastyNumber, sha256Hash: nastyString }) })) }),
    fc.array(
      documents.map((query) => ({ query })),
      { minLength: 1, maxLength: 3 },
    ),
    anyJson,
  );
  return fc.record({
    kind: fc.constant('graphql' as const),
    method: fc.constantFrom('POST', 'GET') as fc.Arbitrary<'POST' | 'GET'>,
    credentials,
    body: bodies,
    contentType: fc.constantFrom(
      undefined,
      'application/json',
      'application/json; charset=utf-8',
      'application/graphql',
      'text/plain',
      'application/x-www-form-urlencoded',
      'multipart/form-data; boundary=x',
      'application/json; charset=utf-16',
      'application/octet-stream',
      '*/*',
      'application/json, text/plain',
    ),
    accept: fc.constantFrom(undefined, 'application/json', 'application/graphql-response+json', 'text/html', 'image/png', '*/*', 'application/*;q=0', ''),
  });
}

/** Every root field of the schema as the server describes it, plus malformed documents. */
export function graphqlCases(schema: GraphQLSchema, credentials: fc.Arbitrary<string>): fc.Arbitrary<GraphQLCase> {
  const fields: fc.Arbitrary<GraphQLCase>[] = [];
  for (const [operation, type] of [
    ['query', schema.getQueryType()],
    ['mutation', schema.getMutationType()],
    ['subscription', schema.getSubscriptionType()],
  ] as const) {
    for (const field of Object.values(type?.getFields() ?? {})) fields.push(fieldCase(operation, field, credentials));
  }
  return fc.oneof({ weight: 3, arbitrary: fc.oneof(...fields) }, { weight: 1, arbitrary: malformedDocuments(credentials) });
}
