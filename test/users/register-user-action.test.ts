import { actionPath, actionUrl } from '../../src/http/actions';
import { ADMIN_SECRET, startTestServer, type TestServer } from '../support/server';

let server: TestServer;

beforeAll(async () => {
  server = await startTestServer();
});
afterAll(async () => {
  await server.close();
});

interface Envelope {
  success?: boolean;
  message?: string;
  status?: string;
  user?: { id: string; email: string; name: string; email_verified: boolean } | null;
  errors?: { field: string; message: string; code: string }[];
  error_code?: string;
}

/** POSTs to the handler route as an engine (Hasura) does. */
async function callAction(
  body: unknown,
  headers: Record<string, string> = { 'x-gql-admin-secret': ADMIN_SECRET, 'x-gql-role': 'anonymous' },
  path = '/actions/register-user',
): Promise<{ status: number; body: Envelope; raw: string }> {
  const response = await fetch(`${server.url}${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: typeof body === 'string' ? body : JSON.stringify(body),
  });
  const raw = await response.text();
  return { status: response.status, body: JSON.parse(raw) as Envelope, raw };
}

function engineBody(input: Record<string, unknown>) {
  return {
    action: { name: 'registerUser' },
    input: { input },
    session_variables: { 'x-gql-role': 'anonymous' },
    request_query: 'mutation ($input: RegisterUserInput!) { registerUser(input: $input) { success } }',
  };
}

async function userCount(): Promise<number> {
  const [row] = await server.database.query<{ count: string }>('SELECT count(*) FROM users');
  return Number(row.count);
}

describe('action paths', () => {
  it.each([
    ['registerUser', 'register-user'],
    ['processPayment', 'process-payment'],
    ['bulkCreateUsers', 'bulk-create-users'],
    ['uploadAndProcessFile', 'upload-and-process-file'],
    ['generateReport', 'generate-report'],
    ['getHTTPStatus', 'get-http-status'],
  ])('%s is served at %s', (name, path) => {
    expect(actionPath(name)).toBe(path);
  });

  it('joins the route prefix without doubling slashes', () => {
    expect(actionUrl('/actions', 'registerUser')).toBe('/actions/register-user');
    expect(actionUrl('/', 'registerUser')).toBe('/register-user');
  });
});

describe('POST /actions/register-user (engine-compatible handler)', () => {
  it('registers the user and answers with the spec envelope', async () => {
    const response = await callAction(engineBody({ email: 'engine@example.com', password: 'password123', name: 'Engine' }));

    expect(response.status).toBe(200);
    expect(response.body).toEqual({
      success: true,
      message: expect.any(String),
      user: { id: expect.any(String), email: 'engine@example.com', name: 'Engine', email_verified: false },
    });
    expect(await server.database.query('SELECT 1 FROM users WHERE email = $1', ['engine@example.com'])).toHaveLength(1);
  });

  it('answers a business failure with 200, success=false, per-field errors and VALIDATION_ERROR', async () => {
    const before = await userCount();
    const response = await callAction(engineBody({ email: 'bad', password: '123', name: '' }));

    expect(response.status).toBe(200);
    expect(response.body).toEqual({
      success: false,
      message: 'Validation failed',
      error_code: 'VALIDATION_ERROR',
      errors: [
        { field: 'email', code: 'INVALID_FORMAT', message: expect.any(String) },
        { field: 'password', code: 'INVALID_LENGTH', message: expect.any(String) },
        { field: 'name', code: 'REQUIRED_FIELD', message: expect.any(String) },
      ],
    });
    expect(await userCount()).toBe(before);
  });

  it('reports fields of the wrong JSON type as INVALID_FORMAT, not as a crash', async () => {
    const response = await callAction(engineBody({ email: 42, password: ['x'], name: { first: 'a' } }));
    expect(response.status).toBe(200);
    expect(response.body.errors!.map((error) => [error.field, error.code])).toEqual([
      ['email', 'INVALID_FORMAT'],
      ['password', 'INVALID_FORMAT'],
      ['name', 'INVALID_FORMAT'],
    ]);
  });

  it('answers an e-mail already registered with an error on field email', async () => {
    await callAction(engineBody({ email: 'dupe-engine@example.com', password: 'password123', name: 'One' }));
    const response = await callAction(engineBody({ email: 'Dupe-Engine@example.com', password: 'password123', name: 'Two' }));
    expect(response.status).toBe(200);
    expect(response.body).toMatchObject({ success: false, error_code: 'EMAIL_ALREADY_REGISTERED' });
    expect(response.body.errors).toEqual([{ field: 'email', code: 'ALREADY_EXISTS', message: expect.any(String) }]);
  });

  it('shares the service with GraphQL: a user registered here cannot register again over GraphQL', async () => {
    await callAction(engineBody({ email: 'shared@example.com', password: 'password123', name: 'Shared' }));
    const response = await fetch(`${server.url}/v1/graphql`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({
        query: 'mutation { registerUser(input: {email: "shared@example.com", password: "password123", name: "S"}) { success errors { field code } } }',
      }),
    });
    const body = (await response.json()) as { data: { registerUser: { success: boolean; errors: unknown[] } } };
    expect(body.data.registerUser).toEqual({ success: false, errors: [{ field: 'email', code: 'ALREADY_EXISTS' }] });
  });

  describe('admin secret', () => {
    it.each([
      ['missing', { 'x-gql-role': 'anonymous' }],
      ['wrong', { 'x-gql-admin-secret': 'not-the-secret', 'x-gql-role': 'anonymous' }],
      ['a prefix of the secret', { 'x-gql-admin-secret': ADMIN_SECRET.slice(0, -1) }],
      ['empty', { 'x-gql-admin-secret': '' }],
    ])('is refused with 401 {status: "unauthorized"} when %s, and nothing is written', async (_case, headers) => {
      const before = await userCount();
      const response = await callAction(engineBody({ email: 'intruder@example.com', password: 'password123', name: 'I' }), headers);
      expect(response.status).toBe(401);
      expect(response.body.status).toBe('unauthorized');
      expect(await userCount()).toBe(before);
    });

    it('is checked before the body: a malformed body without the secret is still 401', async () => {
      const response = await callAction('{not json', {});
      expect(response.status).toBe(401);
    });
  });

  describe('malformed envelopes get 400 VALIDATION_ERROR', () => {
    it.each([
      ['invalid JSON', '{"input": '],
      ['an array body', [1, 2]],
      ['no input', { action: { name: 'registerUser' } }],
      ['input that is not an object', { action: { name: 'registerUser' }, input: 'x' }],
      ['no input.input', { action: { name: 'registerUser' }, input: {} }],
      ['input.input that is not an object', { action: { name: 'registerUser' }, input: { input: [] } }],
      ['the name of another action', { action: { name: 'processPayment' }, input: { input: {} } }],
      ['session variables that are objects', { input: { input: {} }, session_variables: { 'x-gql-role': { a: 1 } } }],
    ])('%s', async (_case, body) => {
      const before = await userCount();
      const response = await callAction(body);
      expect(response.status).toBe(400);
      expect(response.body).toMatchObject({ success: false, error_code: 'VALIDATION_ERROR', message: expect.any(String) });
      expect(response.raw).not.toMatch(/\bat \w+ \(|node_modules|\.js:\d+/);
      expect(await userCount()).toBe(before);
    });

    it('an X-Gql-Session-Variables header that is not a JSON object', async () => {
      const response = await callAction(engineBody({ email: 'sv@example.com', password: 'password123', name: 'S' }), {
        'x-gql-admin-secret': ADMIN_SECRET,
        'x-gql-session-variables': '{broken',
      });
      expect(response.status).toBe(400);
      expect(response.body.error_code).toBe('VALIDATION_ERROR');
    });

    it('a plain-text body', async () => {
      const response = await fetch(`${server.url}/actions/register-user`, {
        method: 'POST',
        headers: { 'content-type': 'text/plain', 'x-gql-admin-secret': ADMIN_SECRET },
        body: 'hello',
      });
      expect(response.status).toBe(400);
      expect(await response.json()).toMatchObject({ success: false, error_code: 'VALIDATION_ERROR' });
    });
  });

  it('refuses a media type it cannot read with 415', async () => {
    const response = await fetch(`${server.url}/actions/register-user`, {
      method: 'POST',
      headers: { 'content-type': 'application/xml', 'x-gql-admin-secret': ADMIN_SECRET },
      body: '<input/>',
    });
    expect(response.status).toBe(415);
    expect(await response.json()).toMatchObject({ success: false, error_code: 'UNSUPPORTED_MEDIA_TYPE' });
  });

  it('accepts the session from X-Gql-* headers and X-Gql-Session-Variables, as the engine sends them', async () => {
    const response = await callAction(engineBody({ email: 'with-session@example.com', password: 'password123', name: 'W' }), {
      'x-gql-admin-secret': ADMIN_SECRET,
      'x-gql-role': 'user',
      'x-gql-user-id': '6a1f1d6e-57b5-4b47-9d5e-1f3e4a3c8b21',
      'x-gql-session-variables': JSON.stringify({ 'x-gql-role': 'user', 'x-gql-source-account-id': 'primary' }),
    });
    expect(response.status).toBe(200);
    expect(response.body.success).toBe(true);
  });

  it('is not served under another prefix or action name', async () => {
    const wrongPath = await callAction(engineBody({}), undefined, '/actions/registeruser');
    expect(wrongPath.status).toBe(404);
    expect(wrongPath.body).toMatchObject({ success: false, error_code: 'NOT_FOUND' });
  });
});

describe('the route prefix comes from the built-in service declaration', () => {
  it('serves the action under the route of the CS_<N> entry whose template is plinth', async () => {
    const custom = await startTestServer({ CS_1: 'handlers:plinth:8080:/hooks/v1/' });
    try {
      const response = await fetch(`${custom.url}/hooks/v1/register-user`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-gql-admin-secret': ADMIN_SECRET },
        body: JSON.stringify(engineBody({ email: 'prefixed@example.com', password: 'password123', name: 'P' })),
      });
      expect(response.status).toBe(200);
      expect(((await response.json()) as Envelope).success).toBe(true);
      expect((await fetch(`${custom.url}/actions/register-user`, { method: 'POST' })).status).toBe(404);
    } finally {
      await custom.close();
    }
  });
});
