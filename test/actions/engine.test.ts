import { postGraphQL } from '../support/graphql';
import { startActionHandler, type ActionHandlerServer } from '../support/action-handler';
import { ADMIN_SECRET, startTestServer, type TestServer } from '../support/server';
import { bearer, signToken } from '../support/tokens';

let server: TestServer;
let handler: ActionHandlerServer;
const userId = '7c9e6679-7425-40de-944b-e07fc1f90ae7';
const userToken = signToken({ userId, roles: ['user'] });
const viewerToken = signToken({ roles: ['viewer'] });

const customTypes = {
  input_objects: [
    {
      name: 'ThingInput',
      fields: [
        { name: 'title', type: 'String!' },
        { name: 'count', type: 'Int' },
      ],
    },
  ],
  objects: [
    {
      name: 'ThingOutput',
      description: 'A thing made',
      fields: [
        { name: 'id', type: 'uuid!' },
        { name: 'title', type: 'String!' },
        { name: 'tags', type: '[String!]' },
        { name: 'state', type: 'ThingState' },
      ],
    },
  ],
  enums: [{ name: 'ThingState', values: [{ value: 'NEW' }, { value: 'OLD' }] }],
  scalars: [],
};

function action(name: string, path: string, extra: Record<string, unknown> = {}) {
  return {
    type: 'create_action',
    args: {
      name,
      definition: {
        kind: 'synchronous',
        arguments: [{ name: 'input', type: 'ThingInput!' }],
        output_type: 'ThingOutput',
        handler: `{{ACTIONS_TEST_HANDLER_BASE}}${path}`,
        ...extra,
      },
      comment: `the ${name} action`,
    },
  };
}

async function metadata(body: unknown, secret: string | null = ADMIN_SECRET) {
  const response = await fetch(`${server.url}/v1/metadata`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...(secret ? { 'x-gql-admin-secret': secret } : {}) },
    body: JSON.stringify(body),
  });
  return { status: response.status, body: (await response.json()) as Record<string, unknown> & { error?: string; code?: string; path?: string } };
}

const exported = async () => (await metadata({ type: 'export_metadata', args: {} })).body;

const call = (name: string, headers: Record<string, string>, select = 'id title tags state') =>
  postGraphQL<Record<string, { id: string; title: string } | null>>(
    server.graphqlUrl,
    { query: `mutation Make { ${name}(input: {title: "hello", count: 2}) { ${select} } }` },
    headers,
  );

const made = { id: 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', title: 'hello', tags: ['x'], state: 'NEW' };

beforeAll(async () => {
  handler = await startActionHandler();
  process.env.ACTIONS_TEST_HANDLER_BASE = handler.url;
  process.env.ACTIONS_TEST_KEY = 'key-from-env-123';
  server = await startTestServer();
  handler.route('/make', () => ({ status: 200, body: made }));
  expect(await metadata({ type: 'set_custom_types', args: customTypes })).toEqual({ status: 200, body: { message: 'success' } });
  const created = await metadata(
    action('makeThing', '/make', {
      headers: [
        { name: 'X-Api-Key', value_from_env: 'ACTIONS_TEST_KEY' },
        { name: 'X-Static', value: 'static-{{ACTIONS_TEST_KEY}}' },
      ],
      forward_client_headers: true,
      timeout: 2,
    }),
  );
  expect(created).toEqual({ status: 200, body: { message: 'success' } });
  expect(await metadata({ type: 'create_action_permission', args: { action: 'makeThing', role: 'user' } })).toEqual({
    status: 200,
    body: { message: 'success' },
  });
});

afterAll(async () => {
  await server?.close();
  await handler?.close();
});

describe('a synchronous action', () => {
  it("POSTs Hasura's payload with the session headers, the configured ones and the forwarded client headers", async () => {
    handler.calls.length = 0;
    const response = await call('makeThing', {
      ...bearer(userToken),
      'x-client-tag': 'from-client',
      cookie: 'session=secret',
      'x-gql-role': 'user',
      // A client's own claim to an address is not passed on: the engine names the address it sees.
      'x-gql-client-address': '203.0.113.66',
    });
    expect(response.body).toEqual({ data: { makeThing: made } });
    expect(handler.calls).toHaveLength(1);
    const [received] = handler.calls;
    expect(received.path).toBe('/make');
    expect(received.body.action).toEqual({ name: 'makeThing' });
    expect(received.body.input).toEqual({ input: { title: 'hello', count: 2 } });
    expect(received.body.session_variables['x-gql-role']).toBe('user');
    expect(received.body.session_variables['x-gql-user-id']).toBe(userId);
    expect(received.body.request_query).toContain('makeThing(input: {title: "hello", count: 2})');
    expect(received.headers['content-type']).toBe('application/json');
    // No CS_<N> service: the admin secret stays with Plinth (test/actions/admin-secret.test.ts).
    expect(received.headers['x-gql-admin-secret']).toBeUndefined();
    expect(received.headers['x-gql-role']).toBe('user');
    expect(received.headers['x-gql-user-id']).toBe(userId);
    expect(JSON.parse(received.headers['x-gql-session-variables'] as string)).toEqual(received.body.session_variables);
    expect(received.headers['x-api-key']).toBe('key-from-env-123');
    expect(received.headers['x-static']).toBe('static-key-from-env-123');
    expect(received.headers['x-client-tag']).toBe('from-client');
    // The end user's address, so that the handler's limits count the user rather than this engine.
    expect(received.headers['x-gql-client-address']).toBe('127.0.0.1');
    // Credentials stay with Plinth: the handler gets the session instead.
    expect(received.headers.authorization).toBeUndefined();
    expect(received.headers.cookie).toBeUndefined();
  });

  it('is refused to a role without a permission and to the anonymous role, allowed to admin', async () => {
    handler.calls.length = 0;
    const viewer = await call('makeThing', bearer(viewerToken));
    expect(viewer.body.errors?.[0].extensions?.code).toBe('FORBIDDEN');
    const anonymous = await call('makeThing', {});
    expect(anonymous.body.errors?.[0].extensions?.code).toBe('FORBIDDEN');
    expect(handler.calls).toHaveLength(0);
    const admin = await call('makeThing', { 'x-gql-admin-secret': ADMIN_SECRET });
    expect(admin.body.data?.makeThing).toEqual(made);
    expect(handler.calls[0].headers['x-gql-role']).toBe('admin');
    expect(handler.calls[0].headers['x-gql-user-id']).toBeUndefined();
  });

  it('maps a 4xx answer to a GraphQL error with its message and extensions (its code kept)', async () => {
    handler.route('/make', () => ({ status: 400, body: { message: 'the title is taken', extensions: { code: 'TITLE_TAKEN', field: 'title' } } }));
    const response = await call('makeThing', bearer(userToken));
    expect(response.body.data).toEqual({ makeThing: null });
    expect(response.body.errors?.[0]).toMatchObject({
      message: 'the title is taken',
      path: ['makeThing'],
      extensions: { code: 'TITLE_TAKEN', field: 'title', status: 400 },
    });
  });

  it('tells 400, 401 and 403 apart when the handler names no code, and keeps spec 1 §2.3 error bodies', async () => {
    const codes: Record<number, string> = { 400: 'BAD_REQUEST', 401: 'UNAUTHENTICATED', 403: 'FORBIDDEN' };
    for (const status of [400, 401, 403]) {
      handler.route('/make', () => ({ status, body: { message: `refused with ${status}` } }));
      const response = await call('makeThing', bearer(userToken));
      expect(response.body.errors?.[0]).toMatchObject({ message: `refused with ${status}`, extensions: { code: codes[status], status } });
    }
    handler.route('/make', () => ({
      status: 400,
      body: {
        success: false,
        message: 'Validation failed',
        errors: [{ field: 'title', message: 'required', code: 'REQUIRED_FIELD' }],
        error_code: 'VALIDATION_ERROR',
      },
    }));
    const response = await call('makeThing', bearer(userToken));
    expect(response.body.errors?.[0]).toMatchObject({
      message: 'Validation failed',
      extensions: { code: 'VALIDATION_ERROR', errors: [{ field: 'title', message: 'required', code: 'REQUIRED_FIELD' }] },
    });
  });

  it('maps a 500, a body that is not JSON, a timeout and a refused connection to codes of their own without detail', async () => {
    handler.route('/make', () => ({ status: 500, body: { success: false, message: 'database password is hunter2' } }));
    let response = await call('makeThing', bearer(userToken));
    expect(response.body.errors?.[0]).toMatchObject({
      message: 'the action handler failed (HTTP 500)',
      extensions: { code: 'ACTION_HANDLER_ERROR', status: 500 },
    });
    expect(JSON.stringify(response.body)).not.toContain('hunter2');

    handler.route('/make', () => ({ status: 200, body: '<html>oops</html>' }));
    response = await call('makeThing', bearer(userToken));
    expect(response.body.errors?.[0].extensions?.code).toBe('ACTION_HANDLER_INVALID_RESPONSE');

    handler.route('/make', () => ({ status: 200, body: made, delayMs: 3_000 }));
    const started = Date.now();
    response = await call('makeThing', bearer(userToken));
    expect(response.body.errors?.[0]).toMatchObject({
      message: 'the action handler did not answer within 2 s',
      extensions: { code: 'ACTION_HANDLER_TIMEOUT' },
    });
    expect(Date.now() - started).toBeLessThan(2_900);

    expect(await metadata(action('unreachableThing', '/x', { handler: 'http://127.0.0.1:1/nothing' }))).toMatchObject({ status: 200 });
    response = await call('unreachableThing', { 'x-gql-admin-secret': ADMIN_SECRET });
    expect(response.body.errors?.[0]).toMatchObject({ message: 'the action handler could not be reached', extensions: { code: 'ACTION_HANDLER_UNREACHABLE' } });
    expect(JSON.stringify(response.body)).not.toContain('127.0.0.1');
    handler.route('/make', () => ({ status: 200, body: made }));
  });

  it('checks a 2xx answer against the output type, naming the field (code unexpected)', async () => {
    const cases: [object, string][] = [
      [{ ...made, extra: 1 }, 'unexpected field "makeThing.extra"'],
      [{ ...made, title: null }, 'expecting a not-null value for the field "makeThing.title"'],
      [{ ...made, tags: 'x' }, 'expecting a list for the field "makeThing.tags"'],
      [{ ...made, state: 'UNKNOWN' }, 'makeThing.state'],
      [{ ...made, title: { nested: true } }, 'makeThing.title'],
    ];
    for (const [body, message] of cases) {
      handler.route('/make', () => ({ status: 200, body }));
      const response = await call('makeThing', bearer(userToken));
      expect(response.body.errors?.[0].extensions?.code).toBe('unexpected');
      expect(response.body.errors?.[0].message).toContain(message);
    }
    handler.route('/make', () => ({ status: 200, body: made }));
  });
});

describe('the metadata requests', () => {
  it('refuse a declaration that does not fit, naming the entry, and change nothing', async () => {
    const before = await exported();
    const refusals: [unknown, string, RegExp][] = [
      [action('badOutput', '/x', { output_type: 'NoSuchType' }), 'validation-failed', /badOutput.*unknown type NoSuchType/],
      [action('registerUser', '/x'), 'validation-failed', /registerUser.*clashes with the built-in field/],
      [action('badUrl', '/x', { handler: 'not a url' }), 'validation-failed', /badUrl.*not a URL/],
      [
        action('badTemplate', '/x', { handler: '{{ACTIONS_TEST_UNSET_VARIABLE}}/x' }),
        'validation-failed',
        /badTemplate.*ACTIONS_TEST_UNSET_VARIABLE is not set/,
      ],
      [
        action('badHeader', '/x', { headers: [{ name: 'X-Key', value_from_env: 'ACTIONS_TEST_UNSET_VARIABLE' }] }),
        'validation-failed',
        /badHeader.*ACTIONS_TEST_UNSET_VARIABLE/,
      ],
      [action('makeThing', '/x'), 'already-exists', /makeThing/],
      [action('badArgument', '/x', { arguments: [{ name: 'input', type: 'ThingOutput' }] }), 'validation-failed', /badArgument.*cannot be an input/],
      [action('badKind', '/x', { kind: 'sometimes' }), 'parse-failed', /badKind/],
      [action('badTimeout', '/x', { timeout: -1 }), 'parse-failed', /badTimeout/],
      [{ type: 'set_custom_types', args: { objects: [{ name: 'UserInfo', fields: [{ name: 'id', type: 'ID' }] }] } }, 'validation-failed', /UserInfo.*clashes/],
      // Dropping a type an action uses would leave the action without its output.
      [{ type: 'set_custom_types', args: { ...customTypes, objects: [] } }, 'validation-failed', /makeThing.*ThingOutput/],
      [{ type: 'drop_action', args: { name: 'nothing' } }, 'not-exists', /nothing/],
      [{ type: 'create_action_permission', args: { action: 'makeThing', role: 'user' } }, 'already-exists', /user/],
      [{ type: 'drop_action_permission', args: { action: 'makeThing', role: 'nobody' } }, 'not-exists', /nobody/],
    ];
    for (const [request, code, message] of refusals) {
      const response = await metadata(request);
      expect({ request, status: response.status, code: response.body.code }).toEqual({ request, status: 400, code });
      expect(response.body.error).toMatch(message);
      expect(typeof response.body.path).toBe('string');
    }
    // A bulk is all or nothing: the good request before the bad one is not kept either.
    const bulk = await metadata({ type: 'bulk', args: [action('goodOne', '/make'), action('badOne', '/x', { output_type: 'Nope' })] });
    expect(bulk.status).toBe(400);
    expect(bulk.body.path).toMatch(/^\$\.args\[1\]/);
    expect(await exported()).toEqual(before);
    expect((await metadata({ type: 'create_action', args: {} }, null)).status).toBe(401);
  });

  it('answer malformed requests with 400 and change nothing (never a 500)', async () => {
    const before = await exported();
    const malformed: unknown[] = [
      { type: 'create_action', args: [] },
      { type: 'create_action', args: { name: 'x' } },
      { type: 'create_action', args: { name: 'x', definition: null } },
      { type: 'create_action', args: { name: 'x', definition: { output_type: 'ThingOutput', handler: 42 } } },
      { type: 'create_action', args: { name: '1x', definition: { output_type: 'ThingOutput', handler: 'http://h/x' } } },
      { type: 'create_action', args: { name: 'x', definition: { output_type: '[ThingOutput', handler: 'http://h/x' } } },
      { type: 'create_action', args: { name: 'x', definition: { output_type: 'ThingOutput', handler: 'ftp://h/x' } } },
      {
        type: 'create_action',
        args: { name: 'x', definition: { output_type: 'ThingOutput', handler: 'http://h/x', headers: [{ name: 'bad header', value: 'v' }] } },
      },
      {
        type: 'create_action',
        args: { name: 'x', definition: { output_type: 'ThingOutput', handler: 'http://h/x', headers: [{ name: 'X-A', value: 'v', value_from_env: 'HOME' }] } },
      },
      {
        type: 'create_action',
        args: {
          name: 'x',
          definition: {
            output_type: 'ThingOutput',
            handler: 'http://h/x',
            arguments: [
              { name: 'a', type: 'String' },
              { name: 'a', type: 'Int' },
            ],
          },
        },
      },
      { type: 'create_action', args: { name: 'x', definition: { output_type: 'ThingOutput', handler: 'http://h/x' }, comment: 'nul \u0000 inside' } },
      { type: 'create_action', args: { name: 'x', definition: { type: 'query', kind: 'asynchronous', output_type: 'ThingOutput', handler: 'http://h/x' } } },
      { type: 'create_action', args: { name: 'x', definition: { output_type: 'ThingOutput', handler: 'http://h/x', request_transform: {} } } },
      { type: 'set_custom_types', args: 'types' },
      { type: 'set_custom_types', args: { objects: [{ name: 'A', fields: [] }] } },
      { type: 'set_custom_types', args: { objects: [{ name: 'A', fields: [{ name: 'f', type: 7 }] }] } },
      { type: 'set_custom_types', args: { enums: [{ name: 'E', values: [{ value: 'true' }] }] } },
      { type: 'set_custom_types', args: { scalars: [{ name: 'S' }], enums: [{ name: 'S', values: [{ value: 'A' }] }] } },
      { type: 'set_custom_types', args: { objects: [{ name: '__Hidden', fields: [{ name: 'f', type: 'String' }] }] } },
      { type: 'set_custom_types', args: { input_objects: [{ name: 'I', fields: [{ name: 'f', type: 'ThingOutput' }] }] } },
      { type: 'create_action_permission', args: { action: 'makeThing', role: 'admin' } },
      { type: 'create_action_permission', args: { action: 'makeThing', role: 'a b' } },
      { type: 'create_action_permission', args: null },
      { type: 'drop_action', args: { name: 'makeThing', clear_data: 'yes' } },
    ];
    for (const request of malformed) {
      const response = await metadata(request);
      expect({ request, status: response.status }).toEqual({ request, status: 400 });
      expect(response.body).toEqual({ path: expect.any(String), error: expect.any(String), code: expect.any(String) });
    }
    expect(await exported()).toEqual(before);
  });

  it("export the actions and custom types in Hasura's shape, and replace_metadata puts them back", async () => {
    const metadataObject = await exported();
    const makeThing = (metadataObject.actions as { name: string }[]).find((entry) => entry.name === 'makeThing');
    expect(makeThing).toMatchObject({
      name: 'makeThing',
      comment: 'the makeThing action',
      definition: {
        kind: 'synchronous',
        type: 'mutation',
        output_type: 'ThingOutput',
        handler: '{{ACTIONS_TEST_HANDLER_BASE}}/make',
        forward_client_headers: true,
        timeout: 2,
      },
      permissions: [{ role: 'user' }],
    });
    expect(metadataObject.custom_types).toMatchObject({
      input_objects: [{ name: 'ThingInput' }],
      objects: [{ name: 'ThingOutput' }],
      enums: [{ name: 'ThingState' }],
    });
    expect(await metadata({ type: 'clear_metadata', args: {} })).toMatchObject({ status: 200 });
    expect((await call('makeThing', bearer(userToken))).body.errors?.[0].extensions?.code).toBe('GRAPHQL_VALIDATION_FAILED');
    expect(await metadata({ type: 'replace_metadata', version: 2, args: { metadata: metadataObject } })).toMatchObject({ status: 200 });
    expect(await exported()).toEqual(metadataObject);
    expect((await call('makeThing', bearer(userToken))).body.data?.makeThing).toEqual(made);
  });

  it('update_action changes the handler, drop_action_permission and drop_action take effect at once', async () => {
    handler.route('/make-v2', () => ({ status: 200, body: { ...made, title: 'v2' } }));
    const update = await metadata({
      type: 'update_action',
      args: {
        name: 'makeThing',
        definition: { arguments: [{ name: 'input', type: 'ThingInput!' }], output_type: 'ThingOutput', handler: `${handler.url}/make-v2` },
      },
    });
    expect(update).toEqual({ status: 200, body: { message: 'success' } });
    expect((await call('makeThing', bearer(userToken), 'title')).body.data?.makeThing).toEqual({ title: 'v2' });
    expect(await metadata({ type: 'drop_action_permission', args: { action: 'makeThing', role: 'user' } })).toMatchObject({ status: 200 });
    expect((await call('makeThing', bearer(userToken))).body.errors?.[0].extensions?.code).toBe('FORBIDDEN');
    expect(await metadata({ type: 'drop_action', args: { name: 'makeThing' } })).toMatchObject({ status: 200 });
    expect((await call('makeThing', { 'x-gql-admin-secret': ADMIN_SECRET })).body.errors?.[0].message).toMatch(/Cannot query field "makeThing"/);
  });

  it("serves a query action, and Hasura's PostgreSQL scalars without declaring them", async () => {
    handler.route('/lookup', (received) => ({ status: 200, body: { id: received.body.input.id, at: '2026-01-01T00:00:00Z' } }));
    expect(
      await metadata({
        type: 'set_custom_types',
        args: {
          ...customTypes,
          objects: [
            ...customTypes.objects,
            {
              name: 'Lookup',
              fields: [
                { name: 'id', type: 'uuid!' },
                { name: 'at', type: 'timestamptz' },
              ],
            },
          ],
        },
      }),
    ).toMatchObject({ status: 200 });
    const created = await metadata({
      type: 'create_action',
      args: {
        name: 'lookupThing',
        definition: { type: 'query', arguments: [{ name: 'id', type: 'uuid!' }], output_type: 'Lookup', handler: `${handler.url}/lookup` },
      },
    });
    expect(created).toMatchObject({ status: 200 });
    const response = await postGraphQL(
      server.graphqlUrl,
      { query: `query { lookupThing(id: "${made.id}") { id at } }` },
      { 'x-gql-admin-secret': ADMIN_SECRET },
    );
    expect(response.body).toEqual({ data: { lookupThing: { id: made.id, at: '2026-01-01T00:00:00Z' } } });
    // Without forward_client_headers the handler learns nothing of the client, its address included.
    expect(handler.calls.at(-1)!.headers['x-gql-client-address']).toBeUndefined();
  });
});
