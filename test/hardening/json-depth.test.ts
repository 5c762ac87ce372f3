import { projectWithKey, secretKey, sendEvent } from '../errortracking/support';
import { postGraphQL } from '../support/graphql';
import { ADMIN_SECRET, startTestServer, type TestServer } from '../support/server';
import WebSocket from 'ws';

/** REQUEST_MAX_JSON_DEPTH's default. */
const LIMIT = 64;
const ADMIN = { 'x-gql-admin-secret': ADMIN_SECRET };

/** JSON text of an object exactly `depth` deep: {} is 1, {"a":{}} is 2. */
const nested = (depth: number) => `${'{"a":'.repeat(depth - 1)}{}${'}'.repeat(depth - 1)}`;
/** A hostile request: about 30 KB of nesting, far past any limit. */
const DEEP = nested(6000);

const lines: string[] = [];
let server: TestServer;

beforeAll(async () => {
  server = await startTestServer({ LOG_LEVEL: 'warn' }, { logTo: { write: (line: string) => void lines.push(line) } });
});
afterAll(async () => {
  await server.close();
});

/** Lines logged at error level or above since `from`. */
const errorLines = (from: number) => lines.slice(from).filter((line) => (JSON.parse(line) as { level: number }).level >= 50);

const post = async (path: string, body: string, headers: Record<string, string> = {}) => {
  const response = await fetch(`${server.url}${path}`, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body });
  return { status: response.status, body: (await response.json()) as Record<string, unknown> };
};

const TOO_DEEP_VARIABLES = { message: `The variables nest more than ${LIMIT} levels deep (REQUEST_MAX_JSON_DEPTH)`, extensions: { code: 'JSON_TOO_DEEP' } };

describe('GraphQL variables nested deeper than REQUEST_MAX_JSON_DEPTH', () => {
  it.each(['application/json', 'application/graphql-response+json'])(
    'are refused with 400 JSON_TOO_DEEP before the cost check walks them (anonymous POST, Accept: %s), and nothing is logged as an error',
    async (accept) => {
      const before = lines.length;
      const answer = await post('/v1/graphql', `{"query":"{ __typename }","variables":${DEEP}}`, { accept });
      expect(answer).toEqual({ status: 400, body: { errors: [TOO_DEEP_VARIABLES] } });
      expect(errorLines(before)).toEqual([]);
    },
  );

  it('are taken up to the limit, and refused one level past it', async () => {
    const within = await post('/v1/graphql', `{"query":"{ __typename }","variables":${nested(LIMIT)}}`);
    expect(within).toEqual({ status: 200, body: { data: { __typename: 'Query' } } });
    const past = await post('/v1/graphql', `{"query":"{ __typename }","variables":${nested(LIMIT + 1)}}`);
    expect(past).toEqual({ status: 400, body: { errors: [TOO_DEEP_VARIABLES] } });
  });

  it('are refused in a GET query string too', async () => {
    const before = lines.length;
    // As deep as a request line allows (16 KiB): brackets are one character each.
    const variables = `{"a":${'['.repeat(7000)}${']'.repeat(7000)}}`;
    const response = await fetch(`${server.graphqlUrl}?query=${encodeURIComponent('{ __typename }')}&variables=${variables}`);
    expect(response.status).toBe(400);
    expect(await response.json()).toEqual({ errors: [TOO_DEEP_VARIABLES] });
    expect(errorLines(before)).toEqual([]);
  });

  it('are refused in a graphql-ws subscribe message, and the connection goes on', async () => {
    const before = lines.length;
    // Raw frames: a graphql-ws client cannot even serialise such variables.
    const socket = new WebSocket(server.wsUrl, 'graphql-transport-ws');
    const messages: { id?: string; type: string; payload?: unknown }[] = [];
    const waiters: (() => void)[] = [];
    socket.on('message', (data) => {
      messages.push(JSON.parse(String(data)) as { type: string });
      waiters.splice(0).forEach((wake) => wake());
    });
    const nextMessage = async () => {
      while (messages.length === 0) await new Promise<void>((resolve) => waiters.push(resolve));
      return messages.shift()!;
    };
    socket.on('close', (code) => {
      messages.push({ type: `closed with ${code}` });
      waiters.splice(0).forEach((wake) => wake());
    });
    await new Promise((resolve) => socket.once('open', resolve));
    try {
      socket.send('{"type":"connection_init","payload":{}}');
      expect(await nextMessage()).toEqual({ type: 'connection_ack' });
      socket.send(`{"id":"1","type":"subscribe","payload":{"query":"subscription { userRegistered { id } }","variables":${DEEP}}}`);
      expect(await nextMessage()).toMatchObject({ id: '1', type: 'error', payload: [TOO_DEEP_VARIABLES] });
      // The same connection still serves: an anonymous caller is refused the admin-only field, not dropped.
      socket.send('{"id":"2","type":"subscribe","payload":{"query":"subscription { userRegistered { id } }","variables":{}}}');
      expect(await nextMessage()).toMatchObject({ id: '2', type: 'next', payload: { errors: [{ extensions: { code: 'FORBIDDEN' } }] } });
      expect(socket.readyState).toBe(WebSocket.OPEN);
    } finally {
      socket.close();
    }
    expect(errorLines(before)).toEqual([]);
  });

  it('are refused at /api/graphql for a secret key', async () => {
    const { projectId } = await projectWithKey(server.graphqlUrl, 'deep-variables');
    const secret = await secretKey(server.graphqlUrl, projectId);
    const answer = await post('/api/graphql', `{"query":"{ incidents { edges { node { id } } } }","variables":${DEEP}}`, { authorization: `Bearer ${secret}` });
    expect(answer).toEqual({ status: 400, body: { errors: [TOO_DEEP_VARIABLES] } });
  });
});

describe('REST bodies nested deeper than REQUEST_MAX_JSON_DEPTH', () => {
  const tooDeepBody = `The body nests more than ${LIMIT} levels deep (REQUEST_MAX_JSON_DEPTH)`;

  it('are refused with 400 in the route’s own error format: sign-up (anonymous), the metadata API, an action handler', async () => {
    const before = lines.length;
    expect(await post('/auth/signup/email-password', `{"email":"deep@example.com","password":"password123","options":${DEEP}}`)).toEqual({
      status: 400,
      body: { status: 400, message: tooDeepBody, error: 'invalid-request' },
    });
    expect(await post('/v1/metadata', `{"type":"export_metadata","args":${DEEP}}`, ADMIN)).toEqual({
      status: 400,
      body: { path: '$', error: tooDeepBody, code: 'parse-failed' },
    });
    expect(await post('/actions/register-user', `{"action":{"name":"registerUser"},"input":{"input":${DEEP}}}`, ADMIN)).toEqual({
      status: 400,
      body: { success: false, message: tooDeepBody, error_code: 'JSON_TOO_DEEP' },
    });
    expect(await server.database.query("SELECT 1 FROM users WHERE email = 'deep@example.com'")).toHaveLength(0);
    expect(errorLines(before)).toEqual([]);
  });

  it('are taken up to the limit, and refused one level past it', async () => {
    // The body, `input` and `input.input` are three levels: LIMIT in all with `extra` LIMIT - 3 deep.
    const register = (email: string, extraDepth: number) =>
      post(
        '/actions/register-user',
        `{"action":{"name":"registerUser"},"input":{"input":{"email":"${email}","password":"password123","name":"Deep","extra":${nested(extraDepth)}}}}`,
        ADMIN,
      );
    expect(await register('within@example.com', LIMIT - 3)).toEqual({ status: 200, body: expect.objectContaining({ success: true }) });
    expect(await register('past@example.com', LIMIT - 2)).toEqual({ status: 400, body: { success: false, message: tooDeepBody, error_code: 'JSON_TOO_DEEP' } });
  });

  it('never get a 500 on any route that takes a body, whatever its credentials say', async () => {
    const before = lines.length;
    const routes = server.server.app.routeTable.filter((route) => route.config?.errorFormat !== 'graphql');
    const answers: string[] = [];
    for (const route of routes) {
      for (const method of [route.method].flat().filter((method) => !['GET', 'HEAD', 'OPTIONS'].includes(method))) {
        const path = route.url.replace(/:(\w+)/g, '1');
        const response = await fetch(`${server.url}${path}`, { method, headers: { 'content-type': 'application/json', ...ADMIN }, body: DEEP });
        answers.push(`${method} ${route.url} ${response.status}`);
        await response.arrayBuffer();
      }
    }
    expect(answers.length).toBeGreaterThan(30);
    expect(answers.filter((answer) => / 5\d\d$/.test(answer))).toEqual([]);
    expect(errorLines(before)).toEqual([]);
  });

  it('error ingestion reads an event of any depth without walking it (its parts are picked by name)', async () => {
    const before = lines.length;
    const { dsnKey } = await projectWithKey(server.graphqlUrl, 'deep-event');
    const response = await sendEvent(server.url, dsnKey, `{"message":"deep extra","extra":${DEEP}}`);
    expect(response.status).toBe(200);
    expect(errorLines(before)).toEqual([]);
  });
});

describe('REQUEST_MAX_JSON_DEPTH at its largest value (1000)', () => {
  let deepServer: TestServer;
  beforeAll(async () => {
    deepServer = await startTestServer({ REQUEST_MAX_JSON_DEPTH: '1000' });
  });
  afterAll(async () => {
    await deepServer.close();
  });

  it('leaves no recursive walker to overflow at that depth', async () => {
    const graphql = await postGraphQL(deepServer.graphqlUrl, `{"query":"{ __typename }","variables":${nested(1000)}}`);
    expect([graphql.status, graphql.body]).toEqual([200, { data: { __typename: 'Query' } }]);
    const signUp = await fetch(`${deepServer.url}/auth/signup/email-password`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: `{"email":"thousand@example.com","password":"password123","options":{"metadata":${nested(998)}}}`,
    });
    expect(signUp.status).toBe(200);
    const metadata = await fetch(`${deepServer.url}/v1/metadata`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...ADMIN },
      body: `{"type":"export_metadata","args":${nested(999)}}`,
    });
    expect(metadata.status).toBeLessThan(500);
  });
});
