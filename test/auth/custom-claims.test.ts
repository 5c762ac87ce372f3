import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { authPost, GENEROUS_AUTH_LIMITS, jwtPayload } from '../support/auth';
import { postGraphQL } from '../support/graphql';
import { CLAIMS_NAMESPACE, startTestServer, type TestServer } from '../support/server';
import { bearer } from '../support/tokens';

type Mode = 'claims' | 'error' | 'slow' | 'not-json' | 'array' | 'reset';

let server: TestServer;
let hook: http.Server;
let mode: Mode = 'claims';
const received: unknown[] = [];
const logLines: string[] = [];

beforeAll(async () => {
  hook = http.createServer((request, response) => {
    let body = '';
    request.on('data', (chunk: Buffer) => (body += chunk.toString('utf8')));
    request.on('end', () => {
      received.push({ method: request.method, contentType: request.headers['content-type'], body: JSON.parse(body) as unknown });
      if (mode === 'error') return void response.writeHead(500).end('{"oops":true}');
      if (mode === 'slow') return void setTimeout(() => response.writeHead(200).end('{}'), 1500);
      if (mode === 'not-json') return void response.writeHead(200, { 'content-type': 'application/json' }).end('<html>');
      if (mode === 'array') return void response.writeHead(200, { 'content-type': 'application/json' }).end('[1]');
      if (mode === 'reset') return void request.socket.destroy();
      response.writeHead(200, { 'content-type': 'application/json' }).end(
        JSON.stringify({
          'x-gql-tenant-id': 'tenant-7',
          'x-gql-plan': 'pro',
          'X-Gql-Org-Ids': ['a', 'b'],
          // Identity claims are not the hook's to set, nor names outside the x-gql- namespace.
          'x-gql-user-id': 'someone-else',
          'x-gql-allowed-roles': ['admin'],
          'x-gql-default-role': 'admin',
          email: 'x@example.com',
        }),
      );
    });
  });
  await new Promise<void>((resolve) => hook.listen(0, '127.0.0.1', resolve));
  server = await startTestServer(
    {
      ...GENEROUS_AUTH_LIMITS,
      LOG_LEVEL: 'warn',
      AUTH_EMAIL_SIGNIN_EMAIL_VERIFIED_REQUIRED: 'false',
      AUTH_CUSTOM_CLAIMS_WEBHOOK: `http://127.0.0.1:${(hook.address() as AddressInfo).port}/claims`,
      AUTH_CUSTOM_CLAIMS_WEBHOOK_TIMEOUT_MS: '300',
    },
    { logTo: { write: (line: string) => void logLines.push(line) } },
  );
});
afterAll(async () => {
  await server.close();
  hook.closeAllConnections();
  await new Promise((resolve) => hook.close(resolve));
});

let counter = 0;
async function signUp(): Promise<{ accessToken: string; refreshToken: string; user: { id: string } }> {
  counter += 1;
  const response = await authPost<{ session: { accessToken: string; refreshToken: string; user: { id: string } } }>(server.url, '/signup/email-password', {
    email: `claims${counter}@example.com`,
    password: 'claims password',
  });
  expect(response.status).toBe(200);
  return response.body.session;
}

const claimsOf = (token: string) => jwtPayload(token)[CLAIMS_NAMESPACE] as Record<string, unknown>;

describe('AUTH_CUSTOM_CLAIMS_WEBHOOK', () => {
  it("adds the hook's x-gql-* claims to each token, never its identity claims, and the engine reads them", async () => {
    mode = 'claims';
    received.splice(0);
    const session = await signUp();
    expect(received).toEqual([
      {
        method: 'POST',
        contentType: 'application/json',
        body: {
          userId: session.user.id,
          claims: {
            'x-gql-allowed-roles': ['user', 'me'],
            'x-gql-default-role': 'user',
            'x-gql-user-id': session.user.id,
            'x-gql-source-account-id': 'primary',
          },
        },
      },
    ]);
    expect(claimsOf(session.accessToken)).toEqual({
      'x-gql-allowed-roles': ['user', 'me'],
      'x-gql-default-role': 'user',
      'x-gql-user-id': session.user.id,
      'x-gql-source-account-id': 'primary',
      'x-gql-tenant-id': 'tenant-7',
      'x-gql-plan': 'pro',
      'x-gql-org-ids': ['a', 'b'],
    });
    const engine = await postGraphQL<{ session: { variables: Record<string, string> } }>(
      server.graphqlUrl,
      { query: '{ session { variables } }' },
      bearer(session.accessToken),
    );
    expect(engine.body.data!.session.variables).toMatchObject({ 'x-gql-plan': 'pro', 'x-gql-tenant-id': 'tenant-7', 'x-gql-user-id': session.user.id });

    // A refresh asks again.
    const refreshed = await authPost<{ accessToken: string }>(server.url, '/token', { refreshToken: session.refreshToken });
    expect(claimsOf(refreshed.body.accessToken)['x-gql-plan']).toBe('pro');
    expect(received).toHaveLength(2);
  });

  it.each<[Mode, string]>([
    ['error', 'answered an error'],
    ['slow', 'failed'],
    ['not-json', 'failed'],
    ['array', 'did not answer a JSON object'],
    ['reset', 'failed'],
  ])('falls back to the defaults (primary, no tenant, plan free) and logs it when the hook is %s', async (failure, logged) => {
    mode = failure;
    logLines.splice(0);
    const started = Date.now();
    const session = await signUp();
    expect(Date.now() - started).toBeLessThan(1400);
    expect(claimsOf(session.accessToken)).toEqual({
      'x-gql-allowed-roles': ['user', 'me'],
      'x-gql-default-role': 'user',
      'x-gql-user-id': session.user.id,
      'x-gql-source-account-id': 'primary',
      'x-gql-plan': 'free',
    });
    const warnings = logLines.map((line) => JSON.parse(line) as { level: number; msg: string }).filter((line) => line.level === 40);
    expect(warnings.map((line) => line.msg)).toEqual([expect.stringContaining(logged)]);
    // The URL's path is not logged (hooks carry tokens in them).
    expect(logLines.join('\n')).not.toContain('/claims');
  });
});
