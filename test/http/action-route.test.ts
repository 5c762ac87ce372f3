import type { AddressInfo } from 'node:net';
import Fastify, { type FastifyInstance } from 'fastify';
import { buildSchema } from 'graphql';
import { registerActionRoute } from '../../src/http/actions';
import { installErrorHandling } from '../../src/http/errors';
import type { Session } from '../../src/platform/session';
import pino from 'pino';
import { RateLimits } from '../../src/platform/rate-limits';

const SECRET = 'route-test-admin-secret';
// A handler route answers with its action's GraphQL output type.
const SCHEMA = buildSchema(`
  scalar JSONObject
  type Query { alwaysFails: Outcome! }
  type Mutation { echoSession: EchoedSession! }
  type Outcome { success: Boolean! }
  type EchoedSession { success: Boolean! role: String! userId: String variables: JSONObject! }
`);
let app: FastifyInstance;
let baseUrl: string;

beforeAll(async () => {
  app = Fastify({ logger: false });
  installErrorHandling(app);
  const rateLimits = new RateLimits(
    { kind: 'memory' },
    { registration: { points: 1, durationSeconds: 60, key: 'ip' }, actionHandlers: { points: 1_000_000, durationSeconds: 60, key: 'user' } },
    pino({ level: 'silent' }),
  );
  const settings = { prefix: '/actions', adminSecret: SECRET, rateLimits, schema: SCHEMA };
  registerActionRoute(app, settings, {
    name: 'echoSession',
    roles: ['user', 'moderator'],
    argumentsSchema: { type: 'object' },
    handle: async (_args, session: Session) => ({ success: true, role: session.role, userId: session.userId, variables: session.variables }),
  });
  registerActionRoute(app, settings, {
    name: 'alwaysFails',
    roles: ['*'],
    argumentsSchema: { type: 'object' },
    handle: async () => {
      throw new Error('database password is hunter2');
    },
  });
  await app.listen({ port: 0, host: '127.0.0.1' });
  baseUrl = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
});
afterAll(async () => {
  await app.close();
});

async function call(path: string, body: unknown, headers: Record<string, string>) {
  const response = await fetch(`${baseUrl}${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-gql-admin-secret': SECRET, ...headers },
    body: JSON.stringify(body),
  });
  const text = await response.text();
  return { status: response.status, text, body: JSON.parse(text) as Record<string, unknown> };
}

describe('engine-compatible action routes', () => {
  it('build the session from body variables, overridden by X-Gql-Session-Variables, overridden by X-Gql-* headers', async () => {
    const response = await call(
      '/actions/echo-session',
      {
        input: {},
        session_variables: { 'X-Gql-Role': 'user', 'x-gql-user-id': 'from-body', 'x-gql-plan': 'free', 'x-gql-org': 7 },
      },
      {
        'x-gql-session-variables': JSON.stringify({ 'x-gql-user-id': 'from-packed-header', 'x-gql-plan': 'pro' }),
        'x-gql-role': 'moderator',
      },
    );
    expect(response.status).toBe(200);
    expect(response.body).toEqual({
      success: true,
      role: 'moderator',
      userId: 'from-packed-header',
      variables: { 'x-gql-role': 'moderator', 'x-gql-user-id': 'from-packed-header', 'x-gql-plan': 'pro', 'x-gql-org': '7' },
    });
  });

  it('refuse a role the action does not admit with 403 FORBIDDEN', async () => {
    const response = await call('/actions/echo-session', { input: {} }, { 'x-gql-role': 'anonymous' });
    expect(response.status).toBe(403);
    expect(response.body).toEqual({ success: false, message: 'the role "anonymous" may not call echoSession', error_code: 'FORBIDDEN' });
  });

  it('treat a call without a role as admin, who may call everything', async () => {
    const response = await call('/actions/echo-session', { input: {} }, {});
    expect(response.body).toMatchObject({ success: true, role: 'admin' });
  });

  it('answer an unexpected failure with 500 {success:false, message}, nothing more', async () => {
    const response = await call('/actions/always-fails', { input: {} }, {});
    expect(response.status).toBe(500);
    expect(response.body).toEqual({ success: false, message: 'Internal server error', error_code: 'INTERNAL_ERROR' });
    expect(response.text).not.toContain('hunter2');
  });
});
