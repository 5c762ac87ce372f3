import { randomUUID } from 'node:crypto';
import WebSocket from 'ws';
import { ADMIN, projectWithKey, secretKey } from '../errortracking/support';
import { startTestServer, type TestServer } from '../support/server';
import { signToken } from '../support/tokens';

/**
 * A refusal thrown by a service is answered in one place per transport (common/refusal.ts): the
 * bytes of those answers, in each REST error format, on GraphQL through the executor of this run
 * and over graphql-ws, with Retry-After for every limit.
 */

const INGEST_LIMIT = 2;
const API_LIMIT = 3;
let server: TestServer;

beforeAll(async () => {
  server = await startTestServer({
    ERRORS_INGEST_RATE_LIMIT_PER_MINUTE: String(INGEST_LIMIT),
    ERRORS_API_RATE_LIMIT_PER_MINUTE: String(API_LIMIT),
    RATE_LIMIT_REGISTRATION_POINTS: '1',
    RATE_LIMIT_REPORTS_POINTS: '1',
    RATE_LIMIT_ACTION_HANDLERS_POINTS: '2',
    NEWSLETTER_SUBSCRIBE_RATE_LIMIT_POINTS: '1',
    AUTH_RATE_LIMIT_BRUTE_FORCE_BURST: '1',
  });
});
afterAll(() => server?.close());

interface Answer {
  status: number;
  headers: Headers;
  text: string;
}

async function send(method: string, path: string, options: { headers?: Record<string, string>; body?: unknown; raw?: string } = {}): Promise<Answer> {
  const headers: Record<string, string> = { ...options.headers };
  let body: string | undefined = options.raw;
  if (options.body !== undefined) {
    body = JSON.stringify(options.body);
    headers['content-type'] ??= 'application/json';
  }
  const response = await fetch(`${server.url}${path}`, { method, headers, body, redirect: 'manual' });
  return { status: response.status, headers: response.headers, text: await response.text() };
}

const graphql = (query: string, headers: Record<string, string> = ADMIN) => send('POST', '/v1/graphql', { headers, body: { query } });

/** The whole seconds of Retry-After, checked to be one, at least 1. */
function retryAfter(answer: Answer): number {
  const value = answer.headers.get('retry-after');
  expect(value).toMatch(/^[1-9]\d*$/);
  return Number(value);
}

describe('GraphQL', () => {
  it('fails the field with the refusal code, its field and retryAfter; nothing else is added', async () => {
    const first = await graphql('{ jobs(first: 0) { id } }');
    expect(first.status).toBe(200);
    expect(first.text).toBe(
      '{"errors":[{"message":"first must be a whole number from 1 to 500","locations":[{"line":1,"column":3}],"path":["jobs"],"extensions":{"code":"BAD_REQUEST"}}],"data":null}\n',
    );

    const { projectId } = await projectWithKey(server.graphqlUrl, 'refusals-graphql');
    const cursor = await graphql(`{ errors(filter: {project: ${projectId}}, after: "bad") { edges { cursor } } }`);
    expect(cursor.text).toBe(
      '{"errors":[{"message":"after is not a cursor this connection gave","locations":[{"line":1,"column":3}],"path":["errors"],"extensions":{"code":"BAD_USER_INPUT","field":"after"}}],"data":null}\n',
    );

    const register = (email: string) =>
      graphql(`mutation { registerUser(input: {email: "${email}", name: "R", password: "long enough password"}) { success } }`, {});
    expect((await register('refusals-1@example.com')).text).toBe('{"data":{"registerUser":{"success":true}}}\n');
    const limited = await register('refusals-2@example.com');
    const seconds = JSON.parse(limited.text).errors[0].extensions.retryAfter as number;
    expect(seconds).toBeGreaterThan(0);
    expect(limited.text).toBe(
      `{"errors":[{"message":"Too many requests; try again in ${seconds} s","locations":[{"line":1,"column":12}],"path":["registerUser"],"extensions":{"code":"RATE_LIMITED","retryAfter":${seconds}}}],"data":null}\n`,
    );
  });

  it('answers a refused session with its status before anything runs', async () => {
    const wrong = await graphql('{ jobs { id } }', { 'x-gql-admin-secret': 'wrong' });
    expect(wrong.status).toBe(401);
    expect(wrong.text).toBe('{"errors":[{"message":"invalid x-gql-admin-secret","extensions":{"code":"INVALID_ADMIN_SECRET"}}]}\n');
    const role = await graphql('{ jobs { id } }', { authorization: `Bearer ${signToken()}`, 'x-gql-role': 'admin' });
    expect(role.status).toBe(403);
    expect(role.text).toBe(
      '{"errors":[{"message":"the role \\"admin\\" is not among the token\'s allowed roles","extensions":{"code":"ROLE_NOT_ALLOWED"}}]}\n',
    );
  });

  it('closes a graphql-ws connection whose session is refused with 4403 and the code', async () => {
    const socket = new WebSocket(server.wsUrl, 'graphql-transport-ws');
    socket.on('open', () => socket.send(JSON.stringify({ type: 'connection_init', payload: { headers: { authorization: 'Bearer not.a.jwt' } } })));
    const [code, reason] = await new Promise<[number, string]>((resolve) =>
      socket.on('close', (closeCode, closeReason) => resolve([closeCode, closeReason.toString()])),
    );
    expect([code, reason]).toEqual([4403, 'Forbidden: INVALID_JWT']);
  });
});

describe('REST, the envelope', () => {
  it('names the field at fault, and answers a session refusal with its status and code', async () => {
    const { projectId } = await projectWithKey(server.graphqlUrl, 'refusals-rest');
    const secret = await secretKey(server.graphqlUrl, projectId);
    const incident = await send('POST', '/api/incidents', { headers: { authorization: `Bearer ${secret}` }, body: { title: 't', severity: 'nope' } });
    expect(incident.status).toBe(400);
    expect(incident.text).toBe(
      '{"success":false,"message":"severity must be one of critical, major, minor, info, maintenance","error_code":"VALIDATION_ERROR","errors":[{"field":"severity","message":"severity must be one of critical, major, minor, info, maintenance","code":"INVALID_FORMAT"}]}',
    );
    const expired = await send('GET', `/files/${randomUUID()}/content`, { headers: { authorization: `Bearer ${signToken({ expiresIn: -60 })}` } });
    expect(expired.status).toBe(401);
    expect(expired.text).toBe('{"success":false,"message":"the JWT has expired","error_code":"JWT_EXPIRED"}');
  });

  it('answers a limit with 429, Retry-After and error rate-limited where the route documents it', async () => {
    const call = (userId: string) =>
      send('POST', '/actions/generate-report', {
        headers: { ...ADMIN, 'x-gql-role': 'user', 'x-gql-user-id': userId },
        body: { action: { name: 'generateReport' }, input: { input: { kind: 'FILES', format: 'JSON' } }, session_variables: {} },
      });
    const userId = randomUUID();
    expect((await call(userId)).status).toBe(200);
    const quota = await call(userId);
    expect(quota.status).toBe(429);
    const quotaSeconds = retryAfter(quota);
    expect(quota.text).toBe(
      `{"success":false,"error":"rate-limited","message":"Too many report requests: at most 1 per hour for each user; try again in ${quotaSeconds} s","error_code":"RATE_LIMITED"}`,
    );
    const limit = await call(userId);
    const limitSeconds = retryAfter(limit);
    expect(limit.text).toBe(
      `{"success":false,"error":"rate-limited","message":"Too many requests; try again in ${limitSeconds} s","error_code":"RATE_LIMITED"}`,
    );
  });

  it("keeps error tracking's 429 to its documented body, with X-Sentry-Rate-Limits on ingestion", async () => {
    const { dsnKey } = await projectWithKey(server.graphqlUrl, 'refusals-ingest');
    const ingest = () => send('POST', '/api/errors/events', { headers: { authorization: `Bearer ${dsnKey}` }, body: { message: 'boom' } });
    for (let index = 0; index < INGEST_LIMIT; index++) expect((await ingest()).status).toBe(200);
    const refused = await ingest();
    expect(refused.status).toBe(429);
    const seconds = retryAfter(refused);
    expect(refused.headers.get('x-sentry-rate-limits')).toBe(`${seconds}::key`);
    expect(refused.text).toBe(
      `{"success":false,"message":"this DSN key sent more than its ${INGEST_LIMIT} events this minute; retry in ${seconds} s","error_code":"RATE_LIMITED"}`,
    );
  });
});

describe('REST, the GraphQL format of /api/graphql', () => {
  it('answers a refused key and its limit as GraphQL errors with the status', async () => {
    const none = await send('POST', '/api/graphql', { body: { query: '{ incidents { edges { cursor } } }' } });
    expect(none.status).toBe(401);
    expect(none.text).toBe('{"errors":[{"message":"a secret key is required: Authorization: Bearer sk_...","extensions":{"code":"UNAUTHENTICATED"}}]}');
    const { projectId } = await projectWithKey(server.graphqlUrl, 'refusals-api');
    const secret = await secretKey(server.graphqlUrl, projectId);
    const call = () => send('POST', '/api/graphql', { headers: { authorization: `Bearer ${secret}` }, body: { query: '{ incidents { edges { cursor } } }' } });
    for (let index = 0; index < API_LIMIT; index++) expect((await call()).status).toBe(200);
    const refused = await call();
    expect(refused.status).toBe(429);
    const seconds = retryAfter(refused);
    expect(refused.text).toBe(
      `{"errors":[{"message":"this secret key made more than its ${API_LIMIT} calls this minute; retry in ${seconds} s","extensions":{"code":"RATE_LIMITED"}}]}`,
    );
  });
});

describe('REST, the auth routes (Nhost)', () => {
  it("answers the service's refusals, a limit and OK in Nhost's shapes", async () => {
    const user = await send('GET', '/auth/user', { headers: { authorization: 'Basic abc' } });
    expect(user.status).toBe(401);
    expect(user.text).toBe(
      '{"status":401,"message":"User is not authenticated: the Authorization header must be \\"Bearer <token>\\"","error":"unauthenticated-user"}',
    );
    const healthy = await send('GET', '/auth/healthz');
    expect([healthy.headers.get('content-type'), healthy.text]).toEqual(['application/json; charset=utf-8', '"OK"']);

    const signIn = () => send('POST', '/auth/signin/email-password', { body: { email: 'nobody@example.com', password: 'wrong password' } });
    const wrong = await signIn();
    expect(wrong.text).toBe('{"status":401,"message":"Incorrect email or password","error":"invalid-email-password"}');
    const limited = await signIn();
    expect(limited.status).toBe(429);
    const seconds = retryAfter(limited);
    expect(limited.text).toBe(`{"status":429,"message":"Too many requests; try again in ${seconds} s","error":"too-many-requests"}`);
  });
});

describe('REST, the newsletter (JSON and pages)', () => {
  it('answers a refusal and a limit as a page for people, as the envelope for JSON clients', async () => {
    const page = { 'content-type': 'application/x-www-form-urlencoded', accept: 'text/html' };
    const invalid = await send('POST', '/newsletter/subscribe', { headers: page, raw: 'email=nope' });
    expect(invalid.status).toBe(400);
    expect(invalid.headers.get('content-type')).toBe('text/html; charset=utf-8');
    expect(invalid.headers.get('cache-control')).toBe('no-store');
    expect(invalid.text).toContain('<title>That did not work</title>');
    expect(invalid.text).toContain('<p>email must be an e-mail address such as ada@example.com</p>');

    const limited = await send('POST', '/newsletter/subscribe', { headers: page, raw: 'email=someone%40example.com' });
    expect(limited.status).toBe(429);
    const seconds = retryAfter(limited);
    expect(limited.text).toContain(`<title>Too many attempts</title>`);
    expect(limited.text).toContain(`<p>Please try again in ${Math.ceil(seconds / 60)} minutes.</p>`);

    const json = await send('POST', '/newsletter/subscribe', { body: { email: 'someone@example.com' }, headers: { accept: 'application/json' } });
    expect(json.status).toBe(429);
    const jsonSeconds = retryAfter(json);
    expect(json.text).toBe(`{"success":false,"message":"Too many requests; try again in ${jsonSeconds} s","error_code":"RATE_LIMITED"}`);
  });
});
