import http from 'node:http';
import { buildSchema as buildGraphQLSchema, getIntrospectionQuery, GraphQLError, parse, type DocumentNode } from 'graphql';
import { auditServer } from 'graphql-http';
import pino from 'pino';
import { buildSchema, Field, ObjectType, Query, Resolver } from 'type-graphql';
import { createApolloServer } from '../../src/graphql/apollo';
import { authChecker } from '../../src/graphql/auth-checker';
import { createQueryLimits } from '../../src/graphql/limits';
import { chooseGraphQLMediaType } from '../../src/graphql/media-type';
import { SessionDocument } from '../generated/graphql';
import { graphql, postGraphQL } from '../support/graphql';
import { heapLeftBehind } from '../support/heap';
import { compiledExecutionEnabled, startTestServer, type TestServer } from '../support/server';

let server: TestServer;

beforeAll(async () => {
  server = await startTestServer();
});
afterAll(async () => {
  await server.close();
});

const SESSION_QUERY = '{ session { role } }';
const STACK_TRACE = /\bat \S+ \(|node_modules|\.[jt]s:\d+:\d+/;

describe('GraphQL over HTTP', () => {
  it('passes every MUST and SHOULD audit of the GraphQL-over-HTTP specification (graphql-http)', async () => {
    const results = await auditServer({ url: server.graphqlUrl });
    const failures = results.filter((result) => result.status !== 'ok').map((result) => `${result.id} ${result.name}`);
    expect(results.length).toBeGreaterThan(50);
    expect(failures).toEqual([]);
  });

  it('answers POST with application/json by default', async () => {
    const response = await graphql(server.graphqlUrl, SessionDocument);
    expect(response.status).toBe(200);
    expect(response.contentType).toBe('application/json; charset=utf-8');
    expect(response.body.data!.session.role).toBe('anonymous');
  });

  it('answers with application/graphql-response+json when the client asks for it', async () => {
    const response = await postGraphQL(server.graphqlUrl, { query: SESSION_QUERY }, { accept: 'application/graphql-response+json' });
    expect(response.status).toBe(200);
    expect(response.contentType).toBe('application/graphql-response+json; charset=utf-8');
  });

  it('answers 406 when the client accepts neither JSON media type', async () => {
    const response = await fetch(server.graphqlUrl, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'text/html' },
      body: JSON.stringify({ query: SESSION_QUERY }),
    });
    expect(response.status).toBe(406);
  });

  it.each([
    ['a parse error', '{ session { role }', 'GRAPHQL_PARSE_FAILED'],
    ['a validation error', '{ session { nope } }', 'GRAPHQL_VALIDATION_FAILED'],
  ])('answers %s with 400 for application/graphql-response+json and 200 for application/json', async (_case, query, code) => {
    const modern = await postGraphQL(server.graphqlUrl, { query }, { accept: 'application/graphql-response+json' });
    expect(modern.status).toBe(400);
    expect(modern.body.errors![0].extensions!.code).toBe(code);
    expect(modern.body.data).toBeUndefined();

    const legacy = await postGraphQL(server.graphqlUrl, { query }, { accept: 'application/json' });
    expect(legacy.status).toBe(200);
    expect(legacy.body.errors![0].extensions!.code).toBe(code);
  });

  it('answers variables of the wrong type as BAD_USER_INPUT', async () => {
    const response = await postGraphQL(
      server.graphqlUrl,
      { query: 'mutation ($input: RegisterUserInput!) { registerUser(input: $input) { success } }', variables: { input: { email: 1 } } },
      { accept: 'application/graphql-response+json' },
    );
    expect(response.status).toBe(400);
    expect(response.body.errors![0].extensions!.code).toBe('BAD_USER_INPUT');
  });

  it('serves queries over GET, and refuses mutations over GET with 405', async () => {
    const query = await fetch(`${server.graphqlUrl}?query=${encodeURIComponent(SESSION_QUERY)}`);
    expect(query.status).toBe(200);
    expect(((await query.json()) as { data: { session: { role: string } } }).data.session.role).toBe('anonymous');

    const mutation = await fetch(
      `${server.graphqlUrl}?query=${encodeURIComponent('mutation { registerUser(input: {email: "get@x.io", password: "password123", name: "G"}) { success } }')}`,
      { headers: { accept: 'application/graphql-response+json' } },
    );
    expect(mutation.status).toBe(405);
    expect(await server.database.query("SELECT 1 FROM users WHERE email = 'get@x.io'")).toHaveLength(0);
  });

  it.each([
    ['invalid JSON', '{"query": ', 'application/json', 400],
    ['an empty body', '', 'application/json', 400],
    ['a JSON array', '[]', 'application/json', 400],
    ['no query', '{"variables": {}}', 'application/json', 400],
    ['a query that is not a string', '{"query": {"kind": "Document"}}', 'application/json', 400],
    ['an unsupported media type', '<query/>', 'application/xml', 415],
  ])('answers %s with a GraphQL-shaped %#th error and no stack trace', async (_case, body, contentType, status) => {
    const response = await fetch(server.graphqlUrl, {
      method: 'POST',
      headers: { 'content-type': contentType, accept: 'application/graphql-response+json' },
      body,
    });
    const text = await response.text();
    expect(response.status).toBe(status);
    const parsed = JSON.parse(text) as { errors: { message: string; extensions: { code: string } }[] };
    expect(parsed.errors[0].message).toEqual(expect.any(String));
    expect(parsed.errors[0].extensions.code).toEqual(expect.any(String));
    expect(text).not.toMatch(STACK_TRACE);
  });

  it.each([
    ['text/plain', '{"query":"mutation { registerUser(input: {email: \\"plain@x.io\\", password: \\"password123\\", name: \\"P\\"}) { success } }"}'],
    ['text/plain; charset=utf-8', '{"query":"{ __typename }"}'],
    ['application/x-www-form-urlencoded', 'query=%7B__typename%7D'],
    ['multipart/form-data; boundary=x', '--x\r\nContent-Disposition: form-data; name="operations"\r\n\r\n{"query":"{ __typename }"}\r\n--x--\r\n'],
    ['application/graphql', '{ __typename }'],
    ['application/graphql-response+json', '{"query":"{ __typename }"}'],
    ['application/json; charset=latin1', '{"query":"{ __typename }"}'],
    ['application/json; charset=utf-16', '{"query":"{ __typename }"}'],
  ])('answers a body of a media type it does not read (%s) with 415 UNSUPPORTED_MEDIA_TYPE, and runs nothing', async (contentType, body) => {
    const response = await fetch(server.graphqlUrl, { method: 'POST', headers: { 'content-type': contentType }, body });
    expect(response.status).toBe(415);
    expect(response.headers.get('content-type')).toBe('application/json; charset=utf-8');
    expect(await response.json()).toEqual({
      errors: [{ message: `GraphQL requests are read as application/json in UTF-8, not as ${contentType}`, extensions: { code: 'UNSUPPORTED_MEDIA_TYPE' } }],
    });
    expect(await server.database.query("SELECT 1 FROM users WHERE email = 'plain@x.io'")).toHaveLength(0);
  });

  it.each(['application/json; charset=utf-8', 'Application/JSON', 'application/json;charset="UTF-8"', 'application/json; charset=utf8'])(
    'reads application/json in UTF-8 however it is written (%s)',
    async (contentType) => {
      const response = await postGraphQL(server.graphqlUrl, JSON.stringify({ query: SESSION_QUERY }), { 'content-type': contentType });
      expect([response.status, response.body]).toEqual([200, { data: { session: { role: 'anonymous' } } }]);
    },
  );

  it('runs the introspection query explorers send (GraphiQL, Altair, Insomnia)', async () => {
    const query = getIntrospectionQuery({
      descriptions: true,
      specifiedByUrl: true,
      directiveIsRepeatable: true,
      schemaDescription: true,
      inputValueDeprecation: true,
    });
    const response = await postGraphQL<{ __schema: { types: { name: string }[] } }>(server.graphqlUrl, { query });
    expect(response.status).toBe(200);
    expect(response.body.errors).toBeUndefined();
    const names = response.body.data!.__schema.types.map((type) => type.name);
    expect(names).toEqual(expect.arrayContaining(['RegisterUserInput', 'RegisterUserOutput', 'UserInfo', 'ValidationError', 'UUID']));
  });

  it('answers CORS preflights so browser explorers can call it', async () => {
    const response = await fetch(server.graphqlUrl, {
      method: 'OPTIONS',
      headers: {
        origin: 'https://explorer.example',
        'access-control-request-method': 'POST',
        'access-control-request-headers': 'authorization,content-type,x-gql-role',
      },
    });
    expect(response.status).toBe(204);
    expect(response.headers.get('access-control-allow-origin')).toBe('*');
    expect(response.headers.get('access-control-allow-headers')).toContain('authorization');
    expect(response.headers.get('access-control-allow-methods')).toContain('POST');

    const fromBrowser = await postGraphQL(server.graphqlUrl, { query: SESSION_QUERY }, { origin: 'https://explorer.example' });
    expect(fromBrowser.headers.get('access-control-allow-origin')).toBe('*');
    const fromServer = await postGraphQL(server.graphqlUrl, { query: SESSION_QUERY });
    expect(fromServer.headers.get('access-control-allow-origin')).toBeNull();
  });

  it('answers an OPTIONS request that is not a preflight with 404', async () => {
    const response = await fetch(server.graphqlUrl, { method: 'OPTIONS' });
    expect(response.status).toBe(404);
  });

  it('tells shared caches not to keep GraphQL answers', async () => {
    const response = await graphql(server.graphqlUrl, SessionDocument);
    expect(response.headers.get('cache-control')).toBe('no-store');
  });

  it('echoes a sane X-Request-Id and makes one up otherwise', async () => {
    const given = await fetch(`${server.url}/healthz`, { headers: { 'x-request-id': 'trace-123' } });
    expect(given.headers.get('x-request-id')).toBe('trace-123');
    const made = await fetch(`${server.url}/healthz`, { headers: { 'x-request-id': 'bad id with spaces' } });
    expect(made.headers.get('x-request-id')).toMatch(/^[0-9a-f-]{36}$/);
  });

  it('answers unknown routes with a JSON 404', async () => {
    const response = await fetch(`${server.url}/v2/graphql`);
    expect(response.status).toBe(404);
    expect(await response.json()).toMatchObject({ success: false, error_code: 'NOT_FOUND' });
  });

  it('does not fail on a malformed Host header', async () => {
    // fetch() will not send a Host header of our choosing; node:http will.
    const { status, body } = await new Promise<{ status: number; body: string }>((resolve, reject) => {
      const request = http.request(`${server.graphqlUrl}?query=${encodeURIComponent(SESSION_QUERY)}`, { headers: { host: 'bad host:%%' } }, (response) => {
        let text = '';
        response.on('data', (chunk) => (text += chunk));
        response.on('end', () => resolve({ status: response.statusCode!, body: text }));
      });
      request.on('error', reject);
      request.end();
    });
    expect(status).toBe(200);
    expect(JSON.parse(body)).toEqual({ data: { session: { role: 'anonymous' } } });
  });
});

describe('limits', () => {
  let limited: TestServer;
  beforeAll(async () => {
    limited = await startTestServer({
      GQL_GRAPHQL_MAX_DEPTH: '2',
      GQL_GRAPHQL_MAX_COMPLEXITY: '2',
      GQL_GRAPHQL_BODY_LIMIT: '2048',
      GQL_GRAPHQL_CORS_DOMAIN: 'https://app.example, https://admin.example',
    });
  });
  afterAll(async () => {
    await limited.close();
  });

  it('answers queries within both limits', async () => {
    const response = await postGraphQL(limited.graphqlUrl, { query: '{ session { role } }' });
    expect(response.body).toEqual({ data: { session: { role: 'anonymous' } } });
  });

  it('refuses a query deeper than GQL_GRAPHQL_MAX_DEPTH, before running it', async () => {
    const response = await postGraphQL(
      limited.graphqlUrl,
      { query: 'mutation { registerUser(input: {email: "deep@x.io", password: "password123", name: "D"}) { user { id } } }' },
      { accept: 'application/graphql-response+json' },
    );
    expect(response.status).toBe(400);
    expect(response.body.errors).toEqual([{ message: 'Query depth limit of 2 exceeded, found 3.', extensions: { code: 'GRAPHQL_VALIDATION_FAILED' } }]);
    expect(await limited.database.query("SELECT 1 FROM users WHERE email = 'deep@x.io'")).toHaveLength(0);
  });

  it('refuses a query costlier than GQL_GRAPHQL_MAX_COMPLEXITY, before running it', async () => {
    const costly = await postGraphQL(
      limited.graphqlUrl,
      { query: 'mutation { registerUser(input: {email: "cost@x.io", password: "password123", name: "C"}) { success message } }' },
      { accept: 'application/graphql-response+json' },
    );
    expect(costly.status).toBe(400);
    expect(costly.body.errors![0]).toMatchObject({
      message: 'Query complexity of 3 exceeds the limit of 2',
      extensions: { code: 'GRAPHQL_VALIDATION_FAILED' },
    });
    expect(await limited.database.query("SELECT 1 FROM users WHERE email = 'cost@x.io'")).toHaveLength(0);
  });

  it('leaves introspection outside both limits, so explorers still work', async () => {
    const response = await postGraphQL(limited.graphqlUrl, { query: getIntrospectionQuery() });
    expect(response.body.errors).toBeUndefined();
    expect(response.body.data).toHaveProperty('__schema');
  });

  it('allows only the origins of GQL_GRAPHQL_CORS_DOMAIN when it lists some', async () => {
    const preflight = (origin: string) => fetch(limited.graphqlUrl, { method: 'OPTIONS', headers: { origin, 'access-control-request-method': 'POST' } });
    const allowed = await preflight('https://admin.example');
    expect(allowed.status).toBe(204);
    expect(allowed.headers.get('access-control-allow-origin')).toBe('https://admin.example');
    expect(allowed.headers.get('vary')).toContain('Origin');
    const refused = await preflight('https://evil.example');
    expect(refused.headers.get('access-control-allow-origin')).toBeNull();
    const simple = await postGraphQL(limited.graphqlUrl, { query: '{ session { role } }' }, { origin: 'https://evil.example' });
    expect(simple.headers.get('access-control-allow-origin')).toBeNull();
  });

  it('keeps computed costs within a budget in bytes, however many documents and variables', async () => {
    const schema = buildGraphQLSchema('type Query { a(n: Int): Int }');
    const limits = createQueryLimits(schema, {
      maxDepth: 10,
      maxComplexity: 100,
      maxTokens: 1000,
      maxDocumentBytes: 10_000,
      maxAliases: 10,
      maxRootFields: 10,
      maxVariablesDepth: 64,
    });
    // Documents stay alive, as in Apollo's document cache; each gets 64 distinct variables of 2 KB.
    // A count per document would keep all of them.
    const documents: DocumentNode[] = [];
    const left = await heapLeftBehind(() => {
      for (let d = 0; d < 200; d++) {
        const document = parse('query Q { a }');
        documents.push(document);
        for (let v = 0; v < 64; v++) expect(limits.complexityError(document, 'Q', { pad: 'x'.repeat(1990), v })).toBeUndefined();
      }
    });
    expect(documents).toHaveLength(200);
    expect(left).toBeLessThan(10 * 1024 * 1024);
  });

  it('keeps no long Accept value in its memo of negotiated media types', async () => {
    // 256 distinct Accept values of 16 KB (about Node's header limit) each: a memo keeping them all would hold megabytes.
    const left = await heapLeftBehind(() => {
      for (let i = 0; i < 256; i++)
        expect(chooseGraphQLMediaType(`application/json, text/x-${i}; q=0.${'1'.repeat(16_000)}`)).toBe('application/json; charset=utf-8');
    });
    expect(left).toBeLessThan(1024 * 1024);
  });

  it('refuses a body over GQL_GRAPHQL_BODY_LIMIT with 413', async () => {
    const response = await postGraphQL(limited.graphqlUrl, { query: `{ session { role } } # ${'x'.repeat(3000)}` });
    expect(response.status).toBe(413);
    expect(response.body.errors![0].extensions!.code).toBe('PAYLOAD_TOO_LARGE');
  });
});

describe('unexpected errors', () => {
  @ObjectType()
  class Broken {
    @Field()
    value!: string;
  }

  @Resolver()
  class BrokenResolver {
    @Query(() => Broken)
    broken(): Broken {
      throw new Error('connection string postgres://secret@db leaked');
    }

    @Query(() => String)
    refused(): string {
      throw new GraphQLError('You may not', { extensions: { code: 'FORBIDDEN' } });
    }
  }

  /** Runs one operation through createApolloServer (the production error handling) on a test schema. */
  async function execute(query: string, devMode = false) {
    const schema = await buildSchema({ resolvers: [BrokenResolver], validate: false, authChecker });
    const limits = createQueryLimits(schema, {
      maxDepth: 10,
      maxComplexity: 100,
      maxTokens: 1000,
      maxDocumentBytes: 10_000,
      maxAliases: 10,
      maxRootFields: 10,
      maxVariablesDepth: 64,
    });
    const apollo = createApolloServer(
      schema,
      {
        introspection: true,
        devMode,
        documentCacheBytes: 1024 * 1024,
        compiledExecution: { enabled: compiledExecutionEnabled(), cacheBytes: 4 * 1024 * 1024 },
      },
      limits,
      pino({ level: 'silent' }),
    );
    await apollo.start();
    try {
      const response = await apollo.executeOperation({ query });
      if (response.body.kind !== 'single') throw new Error('expected a single result');
      return response.body.singleResult;
    } finally {
      await apollo.stop();
    }
  }

  it('are masked: the message and the stack never reach the client', async () => {
    const result = await execute('{ broken { value } }');
    expect(result.errors).toEqual([
      { message: 'Internal server error', path: ['broken'], locations: [{ line: 1, column: 3 }], extensions: { code: 'INTERNAL_SERVER_ERROR' } },
    ]);
    expect(JSON.stringify(result)).not.toContain('secret');
  });

  it('keep errors a resolver means to show', async () => {
    const result = await execute('{ refused }');
    expect(result.errors![0]).toMatchObject({ message: 'You may not', extensions: { code: 'FORBIDDEN' } });
  });

  it('show their message and stack under extensions.internal in GQL_GRAPHQL_DEV_MODE', async () => {
    const result = await execute('{ broken { value } }', true);
    expect(result.errors![0].message).toBe('Internal server error');
    expect(result.errors![0].extensions!.internal).toMatchObject({ message: expect.stringContaining('leaked') });
  });
});

describe('health probes', () => {
  it('GET /healthz says the process is up', async () => {
    const response = await fetch(`${server.url}/healthz`);
    expect(response.status).toBe(200);
    expect(await response.json()).toEqual({ status: 'ok' });
  });

  it('GET /readyz says the database answers, and 503 once it does not', async () => {
    const doomed = await startTestServer();
    try {
      const ready = await fetch(`${doomed.url}/readyz`);
      expect(ready.status).toBe(200);
      expect(await ready.json()).toEqual({ status: 'ready', database: 'ok' });

      await doomed.database.drop();
      const unavailable = await fetch(`${doomed.url}/readyz`);
      expect(unavailable.status).toBe(503);
      expect(await unavailable.json()).toEqual({ status: 'unavailable', database: 'unreachable' });
      expect((await fetch(`${doomed.url}/healthz`)).status).toBe(200);
    } finally {
      await doomed.close();
    }
  });
});
