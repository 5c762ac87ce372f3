import fs from 'node:fs';
import path from 'node:path';
import {
  buildSchema,
  isEnumType,
  isInputObjectType,
  isListType,
  isNonNullType,
  parse,
  print,
  typeFromAST,
  type GraphQLInputType,
  type GraphQLSchema,
  type OperationDefinitionNode,
} from 'graphql';
import { OperationExecutor } from '../../src/graphql/compiled-execution';
import { heapLeftBehind } from '../support/heap';
import { parsePrometheus, sampleValue as metricValue } from '../support/prometheus';
import { ADMIN_SECRET, startTestServer, type TestServer } from '../support/server';
import { bearer, signToken } from '../support/tokens';

/**
 * Same answers from both executors: every operation of test/operations/ goes over HTTP to a
 * server with compiled execution (graphql-jit) and to one without (graphql-js), on the same
 * database, and the status codes, content types and bodies must be equal byte for byte, errors
 * included. The compiled server gets each query twice: the first time Apollo's pipeline answers it
 * (graphql-js runs an operation's first sight), the second the accepted-query lane
 * (src/graphql/accepted-queries.ts) with the compiled operation; a mutation's second run is compiled.
 */

let compiled: TestServer;
let interpreted: TestServer;

beforeAll(async () => {
  compiled = await startTestServer({ GQL_GRAPHQL_COMPILED_EXECUTION: 'true' });
  interpreted = await startTestServer({ GQL_GRAPHQL_COMPILED_EXECUTION: 'false' }, { database: compiled.database });
});
afterAll(async () => {
  await interpreted?.close();
  await compiled?.close();
});

const OPERATIONS_DIR = path.resolve(__dirname, '..', '..', '..', 'test', 'operations');
const operations: OperationDefinitionNode[] = fs
  .readdirSync(OPERATIONS_DIR)
  .filter((file) => file.endsWith('.graphql'))
  .flatMap((file) => parse(fs.readFileSync(path.join(OPERATIONS_DIR, file), 'utf8')).definitions)
  .filter((definition): definition is OperationDefinitionNode => definition.kind === 'OperationDefinition');

// The committed schema (npm run schema) gives the variables' types.
const schema = buildSchema(fs.readFileSync(path.resolve(OPERATIONS_DIR, '..', '..', 'schema', 'schema.graphql'), 'utf8'));

/** A value of the type that the server accepts (required fields only), pointing at nothing that exists. */
function sampleValue(type: GraphQLInputType): unknown {
  if (isNonNullType(type)) return sampleValue(type.ofType);
  if (isListType(type)) return [sampleValue(type.ofType)];
  if (isEnumType(type)) return type.getValues()[0].value;
  if (isInputObjectType(type)) {
    const fields = Object.values(type.getFields()).filter((field) => isNonNullType(field.type));
    return Object.fromEntries(fields.map((field) => [field.name, sampleValue(field.type)]));
  }
  switch (type.name) {
    case 'Int':
      return 1;
    case 'Float':
      return 1.5;
    case 'Boolean':
      return false;
    case 'UUID':
      return '00000000-0000-4000-8000-000000000000';
    case 'JSONObject':
    case 'JSON':
      return {};
    case 'DateTime':
      return '2030-01-01T00:00:00.000Z';
    default:
      return 'compiled-execution-sample';
  }
}

function sampleVariables(schema: GraphQLSchema, operation: OperationDefinitionNode): Record<string, unknown> {
  return Object.fromEntries(
    (operation.variableDefinitions ?? []).map((definition) => [
      definition.variable.name.value,
      sampleValue(typeFromAST(schema, definition.type as never) as GraphQLInputType),
    ]),
  );
}

async function answer(server: TestServer, body: unknown, headers: Record<string, string>): Promise<string> {
  const response = await fetch(server.graphqlUrl, {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'application/graphql-response+json', ...headers },
    body: JSON.stringify(body),
  });
  return `${response.status} ${response.headers.get('content-type')} ${response.headers.get('cache-control')}\n${await response.text()}`;
}

/** Random identifiers (UUIDs, 16 or more hex digits) a creation returns, blanked. */
function withoutGeneratedIds(text: string): string {
  return text.replace(/[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}|[0-9a-f]{16,}/g, '<generated>');
}

const CALLERS: [string, () => Record<string, string>][] = [
  ['the admin', () => ({ 'x-gql-admin-secret': ADMIN_SECRET })],
  ['a user', () => bearer(signToken({ userId: '11111111-1111-4111-8111-111111111111' }))],
  ['an anonymous caller', () => ({})],
];

describe.each(CALLERS)('as %s', (_caller, headers) => {
  // Subscriptions are refused over HTTP by a plugin, before either executor: they are in the list all the same.
  it.each(operations.map((operation) => [operation.name?.value ?? '(anonymous)', operation] as const))(
    '%s answers the same from both executors, with sample variables and with none',
    async (_name, operation) => {
      const query = print(operation);
      for (const variables of [sampleVariables(schema, operation), {}]) {
        const body = { query, variables };
        if (operation.operation === 'mutation') {
          // Each server sees the state after one run: mutations of missing things change nothing,
          // creations of unique things fail as duplicates, and other creations differ only in the
          // identifiers and secrets they generate.
          await answer(compiled, body, headers());
          const interpretedAnswer = withoutGeneratedIds(await answer(interpreted, body, headers()));
          expect(withoutGeneratedIds(await answer(compiled, body, headers()))).toBe(interpretedAnswer);
        } else {
          const reference = await answer(interpreted, body, headers());
          expect(await answer(compiled, body, headers())).toBe(reference);
          expect(await answer(compiled, body, headers())).toBe(reference);
        }
      }
    },
  );
});

describe('queries the executors may answer differently', () => {
  it.each([
    ['a resolver error under a non-null field', '{ session { role user_id allowed_roles variables } errorProjects { id name } }'],
    ['an unknown operation name', { query: 'query A { session { role } } query B { session { role } }', operationName: 'C' }],
    ['no operation name among several', { query: 'query A { session { role } } query B { session { role } }' }],
    ['a variable of the wrong type', { query: 'query ($first: Int) { jobs(first: $first) { id } }', variables: { first: 'many' } }],
    ['a null for a required variable', { query: 'query ($id: UUID!) { file(id: $id) { id } }', variables: { id: null } }],
    [
      'skip and include',
      { query: 'query ($no: Boolean!) { session { role user_id @skip(if: $no) allowed_roles @include(if: $no) } }', variables: { no: true } },
    ],
    ['aliases and fragments', '{ a: session { ...S } b: session { role } } fragment S on Session { role user_id }'],
    ['__typename', '{ __typename session { __typename role } }'],
  ])('%s', async (_name, request) => {
    const body = typeof request === 'string' ? { query: request } : request;
    for (const [, headers] of CALLERS) {
      const reference = await answer(interpreted, body, headers());
      expect(await answer(compiled, body, headers())).toBe(reference);
      expect(await answer(compiled, body, headers())).toBe(reference);
    }
  });
});

describe('the executor', () => {
  const executorSchema = buildSchema('type Query { hello(name: String!): String }');
  const request = (source: string, variables?: Record<string, unknown>) => {
    const document = parse(source);
    return {
      schema: executorSchema,
      document,
      source,
      operation: document.definitions[0] as OperationDefinitionNode,
      operationName: undefined,
      variables,
      contextValue: {},
    };
  };

  it('compiles a query text on its second run, once, and none when off', async () => {
    const executor = new OperationExecutor({ enabled: true, cacheBytes: 4 * 1024 * 1024 });
    const compiledAfter = async (source: string) => {
      expect(await executor.execute(request(source))).toEqual({ data: { [source[2]]: null } });
      return executor.compiledOperations;
    };
    // The first run goes through graphql-js, and the operation is known from then on (the accepted-query lane's test).
    expect(await compiledAfter('{ a: hello(name: "a") }')).toBe(0);
    expect(executor.accepted('{ a: hello(name: "a") }', undefined, executorSchema)?.operation.operation).toBe('query');
    expect(await compiledAfter('{ a: hello(name: "a") }')).toBe(1);
    expect(await compiledAfter('{ a: hello(name: "a") }')).toBe(1);
    expect(await compiledAfter('{ b: hello(name: "b") }')).toBe(1);
    expect(await compiledAfter('{ b: hello(name: "b") }')).toBe(2);
    const off = new OperationExecutor({ enabled: false, cacheBytes: 4 * 1024 * 1024 });
    await off.execute(request('{ a: hello(name: "a") }'));
    expect(off.compiledOperations).toBe(0);
    expect(off.cachedBytes).toBe(0);
  });

  // Distinct texts of 50 fields through a fragment, as a hostile client sends them: each is counted at about 580 KiB.
  const wide = (i: number) =>
    `query Q${i} { ...F } fragment F on Query { ${Array.from({ length: 50 }, (_, k) => `f${i}_${k}: hello(name: "${k}")`).join(' ')} }`;

  it('compiles nothing for texts run once, and keeps what it knows of them within its budget', async () => {
    const budget = 4 * 1024 * 1024;
    const executor = new OperationExecutor({ enabled: true, cacheBytes: budget });
    for (let i = 0; i < 100; i++) expect((await executor.execute(request(wide(i)))).errors).toBeUndefined();
    expect(executor.compiledOperations).toBe(0);
    expect(executor.cachedBytes).toBeLessThanOrEqual(budget);
    // Each text's document is counted: 100 of them would not fit.
    expect(executor.accepted(wide(0), undefined, executorSchema)).toBeUndefined();
    expect(executor.accepted(wide(99), undefined, executorSchema)).toBeDefined();
  });

  it('keeps compiled operations within its budget in bytes, whatever the number of texts', async () => {
    const budget = 8 * 1024 * 1024;
    const executor = new OperationExecutor({ enabled: true, cacheBytes: budget });
    // Twice each: the second run compiles.
    for (let i = 0; i < 100; i++) for (let run = 0; run < 2; run++) await executor.execute(request(wide(i)));
    expect(executor.cachedBytes).toBeLessThanOrEqual(budget);
    expect(executor.cachedBytes).toBeGreaterThan(budget / 2);
    expect(executor.compiledOperations).toBeGreaterThan(0);
    expect(executor.compiledOperations).toBeLessThan(20);
    // The latest stay: a repeated query is not compiled again.
    const before = executor.compiledOperations;
    await executor.execute(request(wide(99)));
    expect(executor.compiledOperations).toBe(before);
  });

  it('counts a compiled operation at no less than it takes on the heap', async () => {
    const executor = new OperationExecutor({ enabled: true, cacheBytes: 1024 * 1024 * 1024 });
    const taken = await heapLeftBehind(async () => {
      for (let i = 0; i < 100; i++) for (let run = 0; run < 2; run++) await executor.execute(request(wide(i)));
    });
    expect(executor.compiledOperations).toBe(100);
    expect(taken).toBeGreaterThan(0);
    // graphql-jit still hands back its generated code (GENERATED_CODE), which the count is made of.
    expect(executor.cachedBytes).toBeGreaterThanOrEqual(taken);
    expect(executor.cachedBytes).toBeLessThan(4 * taken);
  });

  it('runs through graphql-js an operation whose compiled form is too big to keep', async () => {
    // A quarter of 1 MiB is less than a text of 50 fields takes compiled.
    const executor = new OperationExecutor({ enabled: true, cacheBytes: 1024 * 1024 });
    for (let run = 0; run < 3; run++) {
      expect((await executor.execute(request(wide(1)))).data).toEqual(Object.fromEntries(Array.from({ length: 50 }, (_, k) => [`f1_${k}`, null])));
    }
    expect(executor.compiledOperations).toBe(0);
    // Still known, at the size of its document.
    expect(executor.accepted(wide(1), undefined, executorSchema)).toBeDefined();
    expect(executor.cachedBytes).toBeLessThan(256 * 1024);
  });

  it("refuses bad variables with graphql-js's error, before the compiled operation runs", async () => {
    const executor = new OperationExecutor({ enabled: true, cacheBytes: 4 * 1024 * 1024 });
    const source = 'query ($name: String!) { hello(name: $name) }';
    await executor.execute(request(source, { name: 'compiled from now on' }));
    const result = await executor.execute(request(source, { name: 3 }));
    expect(executor.compiledOperations).toBe(1);
    expect(JSON.stringify(result)).toBe(
      JSON.stringify(
        await new OperationExecutor({ enabled: false, cacheBytes: 4 * 1024 * 1024 }).execute(
          request('query ($name: String!) { hello(name: $name) }', { name: 3 }),
        ),
      ),
    );
    expect(result.errors?.[0].message).toBe('Variable "$name" got invalid value 3; String cannot represent a non string value: 3');
  });
});

describe('defaults of variables, arguments and input fields', () => {
  // Each field answers its arguments as received, so a default lost or invented shows in the data.
  const defaultsSchema = buildSchema(`
    input Options { shout: Boolean! = false, times: Int = 2, tags: [String!] = ["a"], inner: Inner = { depth: 1 } }
    input Inner { depth: Int! = 5, label: String = "inner" }
    type Query { echo(name: String = "world", options: Options = { times: 3 }): String }
  `);
  defaultsSchema.getQueryType()!.getFields().echo.resolve = (_root, args) => JSON.stringify(args);
  const run = async (enabled: boolean, source: string, variables: Record<string, unknown> | undefined) => {
    const document = parse(source);
    const executor = new OperationExecutor({ enabled, cacheBytes: 4 * 1024 * 1024 });
    const request = {
      schema: defaultsSchema,
      document,
      source,
      operation: document.definitions[0] as OperationDefinitionNode,
      operationName: undefined,
      variables,
      contextValue: {},
    };
    // The first run goes through graphql-js; the second runs the compiled operation.
    if (enabled) await executor.execute(request);
    const result = await executor.execute(request);
    expect(executor.compiledOperations).toBe(enabled ? 1 : 0);
    return result;
  };

  it.each([
    [
      'a variable left out takes its default',
      'query ($name: String = "you") { echo(name: $name) }',
      {},
      { name: 'you', options: { times: 3, shout: false, tags: ['a'], inner: { depth: 1, label: 'inner' } } },
    ],
    [
      'a variable given null stays null',
      'query ($name: String = "you") { echo(name: $name) }',
      { name: null },
      { name: null, options: { times: 3, shout: false, tags: ['a'], inner: { depth: 1, label: 'inner' } } },
    ],
    [
      'an argument whose variable is left out takes the argument’s default',
      'query ($name: String) { echo(name: $name) }',
      {},
      { name: 'world', options: { times: 3, shout: false, tags: ['a'], inner: { depth: 1, label: 'inner' } } },
    ],
    [
      'arguments left out take their defaults, input fields included',
      '{ echo }',
      undefined,
      { name: 'world', options: { times: 3, shout: false, tags: ['a'], inner: { depth: 1, label: 'inner' } } },
    ],
    [
      'an input object variable without its fields takes their defaults',
      'query ($options: Options) { echo(options: $options) }',
      { options: {} },
      { name: 'world', options: { shout: false, times: 2, tags: ['a'], inner: { depth: 1, label: 'inner' } } },
    ],
    [
      'a nested input object given empty takes its fields’ defaults',
      'query ($options: Options) { echo(options: $options) }',
      { options: { inner: {} } },
      { name: 'world', options: { inner: { depth: 5, label: 'inner' }, shout: false, times: 2, tags: ['a'] } },
    ],
    [
      'a variable’s default input object gets its fields’ defaults',
      'query ($options: Options = { shout: true }) { echo(options: $options) }',
      {},
      { name: 'world', options: { shout: true, times: 2, tags: ['a'], inner: { depth: 1, label: 'inner' } } },
    ],
    [
      'an inline input object gets its fields’ defaults',
      '{ echo(options: { times: 1 }) }',
      undefined,
      { name: 'world', options: { times: 1, shout: false, tags: ['a'], inner: { depth: 1, label: 'inner' } } },
    ],
    [
      'a variable left out inside an inline input object leaves the field’s default',
      'query ($times: Int) { echo(options: { times: $times }) }',
      {},
      { name: 'world', options: { times: 2, shout: false, tags: ['a'], inner: { depth: 1, label: 'inner' } } },
    ],
    [
      'a variable given null inside an inline input object',
      'query ($times: Int) { echo(options: { times: $times }) }',
      { times: null },
      { name: 'world', options: { times: null, shout: false, tags: ['a'], inner: { depth: 1, label: 'inner' } } },
    ],
    [
      'a variable left out inside a nested inline input object',
      'query ($label: String) { echo(options: { inner: { label: $label } }) }',
      {},
      { name: 'world', options: { inner: { depth: 5, label: 'inner' }, shout: false, times: 2, tags: ['a'] } },
    ],
    [
      'a defaulted variable inside an inline input object',
      'query ($times: Int = 7) { echo(options: { times: $times }) }',
      {},
      { name: 'world', options: { times: 7, shout: false, tags: ['a'], inner: { depth: 1, label: 'inner' } } },
    ],
  ])('%s: both executors answer the same', async (_name, source, variables, received) => {
    const interpretedResult = await run(false, source, variables);
    expect(interpretedResult.errors).toBeUndefined();
    expect(JSON.parse((interpretedResult.data as { echo: string }).echo)).toEqual(received);
    expect(JSON.stringify(await run(true, source, variables))).toBe(JSON.stringify(interpretedResult));
  });
});

describe('the accepted-query lane', () => {
  const laneCount = async () =>
    metricValue(parsePrometheus(await (await fetch(`${compiled.url}/metrics`)).text()), 'plinth_graphql_accepted_query_lane_total') ?? 0;
  const admin = { 'x-gql-admin-secret': ADMIN_SECRET };
  /** How many of `requests` to the compiled server the lane answered, each answer equal to the interpreted server's. */
  const answeredByLane = async (requests: { body: unknown; headers?: Record<string, string> }[]) => {
    const before = await laneCount();
    for (const { body, headers = admin } of requests) expect(await answer(compiled, body, headers)).toBe(await answer(interpreted, body, headers));
    return (await laneCount()) - before;
  };

  it('answers a query Apollo accepted before, not the first sight of one', async () => {
    const body = { query: '{ session { role } accepted: session { user_id } }' };
    expect(await answeredByLane([{ body }])).toBe(0);
    expect(await answeredByLane([{ body }, { body: { ...body, variables: null, operationName: null } }])).toBe(2);
  });

  it('leaves to Apollo what it cannot answer as Apollo would, with the same answers', async () => {
    const query = 'query Jobs($first: Int) { jobs(first: $first) { id } } query Role { session { role } }';
    await answeredByLane([{ body: { query, operationName: 'Jobs', variables: { first: 1 } } }, { body: { query, operationName: 'Role' } }]);
    expect(
      await answeredByLane([
        // An empty name names no operation; a name left out among several is refused.
        { body: { query, operationName: '' } },
        { body: { query } },
        // Extensions (persisted queries) and variables that are no object.
        { body: { query, operationName: 'Role', extensions: { persistedQuery: { version: 2 } } } },
        { body: { query, operationName: 'Role', variables: 'first=1' } },
        // A client that accepts no GraphQL media type, and a token that does not verify.
        { body: { query, operationName: 'Role' }, headers: { accept: 'text/csv' } },
        { body: { query, operationName: 'Role' }, headers: { authorization: 'Bearer not.a.token' } },
        // Over the complexity limit with these variables, and variables that do not coerce.
        { body: { query, operationName: 'Jobs', variables: { first: 1_000_000 } } },
        { body: { query, operationName: 'Jobs', variables: { first: 'many' } } },
        // A mutation, even accepted before.
        { body: { query: 'mutation { revokeErrorToken(id: "00000000-0000-4000-8000-000000000000") }' } },
        { body: { query: 'mutation { revokeErrorToken(id: "00000000-0000-4000-8000-000000000000") }' } },
      ]),
    ).toBe(0);
    // Still answered by the lane after all of those.
    expect(await answeredByLane([{ body: { query, operationName: 'Role' } }])).toBe(1);
  });

  it('runs an accepted query once when it answers with errors, and Apollo formats them', async () => {
    // errorProjects is refused to a user; the lane runs it, Apollo writes the answer.
    const body = { query: '{ session { role } errorProjects { id } }' };
    const user = bearer(signToken({ userId: '11111111-1111-4111-8111-111111111111' }));
    await answeredByLane([{ body, headers: user }]);
    expect(await answeredByLane([{ body, headers: user }])).toBe(0);
    const errors = (await (
      await fetch(compiled.graphqlUrl, { method: 'POST', headers: { 'content-type': 'application/json', ...user }, body: JSON.stringify(body) })
    ).json()) as {
      errors: { extensions: { code: string } }[];
    };
    expect(errors.errors.map((error) => error.extensions.code)).toEqual(['FORBIDDEN']);
  });
});
