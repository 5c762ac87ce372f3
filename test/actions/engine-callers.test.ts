import { RegisterUserDocument } from '../generated/graphql';
import { graphql } from '../support/graphql';
import { ADMIN_SECRET, startTestServer, type TestServer } from '../support/server';

/**
 * One engine, many users. Every call here comes from one address, the test's (127.0.0.1), as
 * every call from an engine does. With the admin secret the engine names the end user's address
 * in X-Gql-Client-Address and each user has the limits to itself; an engine that names no one
 * counts in the engine budget; anyone else's X-Gql-Client-Address is ignored.
 */

/** Spec 1 §8's numbers and the auth service's, the documented defaults (the test environment raises them). */
const DEFAULT_LIMITS = { RATE_LIMIT_REGISTRATION_POINTS: '5', RATE_LIMIT_ACTION_HANDLERS_POINTS: '5', AUTH_RATE_LIMIT_SIGNUPS_BURST: '10' };

interface Envelope {
  success: boolean;
  message: string;
  error?: string;
  error_code?: string;
}

let serial = 0;
const input = () => ({ email: `visitor-${(serial += 1)}@example.com`, password: 'a sound passphrase', name: 'Visitor' });

/** registerUser through its handler route, as an engine calls it for an anonymous visitor. */
async function engineRegisters(server: TestServer, headers: Record<string, string>): Promise<{ status: number; body: Envelope }> {
  const response = await fetch(`${server.url}/actions/register-user`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-gql-admin-secret': ADMIN_SECRET, 'x-gql-role': 'anonymous', ...headers },
    body: JSON.stringify({ action: { name: 'registerUser' }, input: { input: input() }, session_variables: { 'x-gql-role': 'anonymous' } }),
  });
  return { status: response.status, body: (await response.json()) as Envelope };
}

const viaGraphQL = (server: TestServer, headers: Record<string, string>) => graphql(server.graphqlUrl, RegisterUserDocument, { input: input() }, headers);

const userCount = async (server: TestServer) => Number((await server.database.query<{ count: string }>('SELECT count(*) FROM users'))[0].count);

describe('at the default limits', () => {
  let server: TestServer;

  beforeAll(async () => {
    server = await startTestServer(DEFAULT_LIMITS);
  });
  afterAll(async () => {
    await server?.close();
  });

  it('two end users behind one engine have five registrations a minute each, told apart by X-Gql-Client-Address', async () => {
    const alice = { 'x-gql-client-address': '198.51.100.7' };
    const bob = { 'x-gql-client-address': '2001:db8::b0b' };
    for (let round = 0; round < 5; round += 1) {
      expect(await engineRegisters(server, alice)).toMatchObject({ status: 200, body: { success: true } });
      expect(await engineRegisters(server, bob)).toMatchObject({ status: 200, body: { success: true } });
    }
    const before = await userCount(server);

    for (const user of [alice, bob]) {
      const refused = await engineRegisters(server, user);
      expect(refused).toEqual({
        status: 429,
        body: { success: false, error: 'rate-limited', message: expect.stringMatching(/^Too many requests/), error_code: 'RATE_LIMITED' },
      });
    }
    expect(await userCount(server)).toBe(before);
    // A third user behind the same engine still has its own.
    expect(await engineRegisters(server, { 'x-gql-client-address': '198.51.100.8' })).toMatchObject({ status: 200, body: { success: true } });
  });

  it('counts a user the same over GraphQL with the admin secret and on the handler route', async () => {
    const carol = { 'x-gql-admin-secret': ADMIN_SECRET, 'x-gql-client-address': '203.0.113.30' };
    for (let index = 0; index < 3; index += 1) expect((await viaGraphQL(server, carol)).body.data!.registerUser.success).toBe(true);
    for (let index = 0; index < 2; index += 1) expect((await engineRegisters(server, carol)).body.success).toBe(true);

    expect((await engineRegisters(server, carol)).status).toBe(429);
    expect((await viaGraphQL(server, carol)).body.errors![0].extensions!.code).toBe('RATE_LIMITED');
    expect((await viaGraphQL(server, { ...carol, 'x-gql-client-address': '203.0.113.31' })).body.data!.registerUser.success).toBe(true);
  });

  it('ignores X-Gql-Client-Address without the admin secret: an anonymous caller is its own address whatever it claims', async () => {
    for (let index = 0; index < 5; index += 1) {
      const response = await viaGraphQL(server, { 'x-gql-client-address': `192.0.2.${index + 1}` });
      expect(response.body.data!.registerUser.success).toBe(true);
    }
    const refused = await viaGraphQL(server, { 'x-gql-client-address': '192.0.2.99' });
    expect(refused.body.errors![0].extensions).toEqual({ code: 'RATE_LIMITED', retryAfter: expect.any(Number) });
  });

  it('counts an engine that names no one in the engine budget (1000 a minute), not in the five of its address', async () => {
    for (let index = 0; index < 7; index += 1) {
      expect(await engineRegisters(server, {})).toMatchObject({ status: 200, body: { success: true } });
    }
  });

  it('refuses an X-Gql-Client-Address that is not one IP address with 400, creating nothing', async () => {
    const before = await userCount(server);
    for (const value of ['not-an-address', '198.51.100.7, 198.51.100.8', '', '198.51.100.300']) {
      const response = await engineRegisters(server, { 'x-gql-client-address': value });
      expect(response).toEqual({
        status: 400,
        body: expect.objectContaining({ success: false, message: expect.stringContaining('x-gql-client-address'), error_code: 'VALIDATION_ERROR' }),
      });
      const graphQL = await viaGraphQL(server, { 'x-gql-admin-secret': ADMIN_SECRET, 'x-gql-client-address': value });
      expect(graphQL.body).toEqual({
        data: null,
        errors: [expect.objectContaining({ message: expect.stringContaining('x-gql-client-address'), extensions: { code: 'BAD_REQUEST' } })],
      });
    }
    expect(await userCount(server)).toBe(before);
  });
});

describe('the engine budget (RATE_LIMIT_ENGINE_*)', () => {
  let server: TestServer;

  beforeAll(async () => {
    server = await startTestServer({ ...DEFAULT_LIMITS, RATE_LIMIT_ENGINE_POINTS: '8' });
  });
  afterAll(async () => {
    await server?.close();
  });

  it("is a count of its own: spent, the engine's anonymous calls are refused while its named users and its address's own callers go on", async () => {
    for (let index = 0; index < 8; index += 1) expect((await engineRegisters(server, {})).status).toBe(200);
    const refused = await engineRegisters(server, {});
    expect(refused).toMatchObject({ status: 429, body: { error_code: 'RATE_LIMITED' } });

    expect((await engineRegisters(server, { 'x-gql-client-address': '198.51.100.7' })).body.success).toBe(true);
    expect((await viaGraphQL(server, {})).body.data!.registerUser.success).toBe(true);
  });
});
