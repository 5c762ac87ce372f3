import { RegisterUserDocument, UserRegisteredDocument, type UserRegisteredSubscription } from '../generated/graphql';
import { graphql } from '../support/graphql';
import { ADMIN_SECRET, startTestServer, type TestServer } from '../support/server';
import { signToken } from '../support/tokens';
import { rawSocket, subscribe, subscriptionClient, type Subscription } from '../support/ws';

let server: TestServer;

beforeAll(async () => {
  server = await startTestServer({ GQL_GRAPHQL_WS_INIT_TIMEOUT_MS: '800', GQL_GRAPHQL_MAX_TOKENS: '10000', GQL_GRAPHQL_MAX_ALIASES: '2000' });
});
afterAll(async () => {
  await server.close();
});

const register = (email: string) => graphql(server.graphqlUrl, RegisterUserDocument, { input: { email, password: 'password123', name: 'Sub Scriber' } });

/** Runs `body` with a live userRegistered subscription made with the given connection_init payload. */
async function withSubscription(
  connectionParams: Record<string, unknown>,
  body: (subscription: Subscription<UserRegisteredSubscription>) => Promise<void>,
): Promise<void> {
  const client = subscriptionClient(server.wsUrl, connectionParams);
  const subscription = subscribe(client, UserRegisteredDocument);
  try {
    await subscription.ready;
    await body(subscription);
  } finally {
    subscription.dispose();
    await client.dispose();
  }
}

const SUBSCRIBE_MESSAGE = { id: '1', type: 'subscribe', payload: { query: 'subscription { userRegistered { id email } }' } };

describe('userRegistered over graphql-ws', () => {
  it('reaches an admin subscriber for each registration', async () => {
    await withSubscription({ headers: { 'X-Gql-Admin-Secret': ADMIN_SECRET } }, async (subscription) => {
      const registered = await register('first-sub@example.com');
      const userId = registered.body.data!.registerUser.user!.id;
      await register('second-sub@example.com');

      expect(await subscription.next()).toEqual({
        data: { userRegistered: { id: userId, email: 'first-sub@example.com', name: 'Sub Scriber', email_verified: false } },
      });
      expect((await subscription.next()).data!.userRegistered.email).toBe('second-sub@example.com');
    });
  });

  it('sends nothing for a failed registration', async () => {
    await withSubscription({ headers: { 'x-gql-admin-secret': ADMIN_SECRET } }, async (subscription) => {
      await graphql(server.graphqlUrl, RegisterUserDocument, { input: { email: 'nope', password: 'x', name: '' } });
      await register('after-failure@example.com');
      expect((await subscription.next()).data!.userRegistered.email).toBe('after-failure@example.com');
    });
  });

  it('accepts an admin token (role admin from its claims), with headers at the top level of the payload', async () => {
    await withSubscription({ Authorization: `Bearer ${signToken({ roles: ['admin'] })}` }, async (subscription) => {
      await register('token-admin@example.com');
      expect((await subscription.next()).data!.userRegistered.email).toBe('token-admin@example.com');
    });
  });

  it('refuses the subscription to a role other than admin with FORBIDDEN', async () => {
    const { received } = await rawSocket(
      server.wsUrl,
      [{ type: 'connection_init', payload: { headers: { Authorization: `Bearer ${signToken({ roles: ['user'] })}` } } }, SUBSCRIBE_MESSAGE],
      { closeAfterMs: 1000 },
    );
    expect(received[0]).toEqual({ type: 'connection_ack' });
    const refusal = received.find((message) => (message as { type: string }).type !== 'connection_ack') as {
      type: string;
      payload: { errors?: { extensions: { code: string } }[] } | { extensions: { code: string } }[];
    };
    const errors = Array.isArray(refusal.payload) ? refusal.payload : refusal.payload.errors!;
    expect(errors[0].extensions.code).toBe('FORBIDDEN');
  });

  it('refuses an anonymous subscriber too', async () => {
    const { received } = await rawSocket(server.wsUrl, [{ type: 'connection_init' }, SUBSCRIBE_MESSAGE], { closeAfterMs: 1000 });
    expect(JSON.stringify(received)).toContain('FORBIDDEN');
  });
});

describe('graphql-ws authentication and protocol', () => {
  it.each([
    ['an expired token', { headers: { authorization: `Bearer ${signToken({ expiresIn: -5 })}` } }, 'JWT_EXPIRED'],
    ['a token signed with another key', { headers: { authorization: `Bearer ${signToken({ key: 'x'.repeat(40) })}` } }, 'INVALID_JWT'],
    ['a wrong admin secret', { headers: { 'x-gql-admin-secret': 'wrong' } }, 'INVALID_ADMIN_SECRET'],
    ['a role the token does not allow', { headers: { authorization: `Bearer ${signToken()}`, 'x-gql-role': 'admin' } }, 'ROLE_NOT_ALLOWED'],
  ])('closes the connection with 4403 for %s', async (_case, payload, code) => {
    const { code: closeCode, reason, received } = await rawSocket(server.wsUrl, [{ type: 'connection_init', payload }]);
    expect(closeCode).toBe(4403);
    expect(reason).toBe(`Forbidden: ${code}`);
    expect(received).toEqual([]);
  });

  it("applies the server's complexity limit (GQL_GRAPHQL_MAX_COMPLEXITY) to subscriptions too", async () => {
    const aliases = Array.from({ length: 1000 }, (_, index) => `a${index}: id`).join(' ');
    const { received } = await rawSocket(
      server.wsUrl,
      [
        { type: 'connection_init', payload: { headers: { 'x-gql-admin-secret': ADMIN_SECRET } } },
        { id: '1', type: 'subscribe', payload: { query: `subscription { userRegistered { ${aliases} } }` } },
      ],
      { closeAfterMs: 1000 },
    );
    expect(received[1]).toEqual({
      id: '1',
      type: 'error',
      payload: [{ message: 'Query complexity of 1001 exceeds the limit of 1000', extensions: { code: 'GRAPHQL_VALIDATION_FAILED', http: { status: 400 } } }],
    });
  });

  it.each([
    ['a value that does not coerce', { id: 'nope' }, 'BAD_USER_INPUT', /^Variable "\$id" got invalid value "nope"/],
    ['a required variable left out', {}, 'BAD_USER_INPUT', /^Variable "\$id" of required type "UUID!" was not provided\.$/],
  ])("answers %s with HTTP's code", async (_case, variables, code, message) => {
    const { received } = await rawSocket(
      server.wsUrl,
      [
        { type: 'connection_init', payload: { headers: { 'x-gql-admin-secret': ADMIN_SECRET } } },
        { id: '1', type: 'subscribe', payload: { query: 'subscription ($id: UUID!) { reportJobUpdated(job_id: $id) { job_id } }', variables } },
      ],
      { closeAfterMs: 1000 },
    );
    const [error] = (received[1] as { payload: { errors: { message: string; extensions?: { code?: string } }[] } }).payload.errors;
    expect(error.extensions?.code).toBe(code);
    expect(error.message).toMatch(message);
  });

  it('answers a variable used where its type does not fit with GRAPHQL_VALIDATION_FAILED', async () => {
    const { received } = await rawSocket(
      server.wsUrl,
      [
        { type: 'connection_init', payload: { headers: { 'x-gql-admin-secret': ADMIN_SECRET } } },
        { id: '1', type: 'subscribe', payload: { query: 'subscription ($id: String!) { reportJobUpdated(job_id: $id) { job_id } }', variables: { id: 'x' } } },
      ],
      { closeAfterMs: 1000 },
    );
    expect(received[1]).toMatchObject({
      type: 'error',
      payload: [{ message: 'Variable "$id" of type "String!" used in position expecting type "UUID!".', extensions: { code: 'GRAPHQL_VALIDATION_FAILED' } }],
    });
  });

  it('closes with 4401 when a client subscribes before connection_init', async () => {
    const { code } = await rawSocket(server.wsUrl, [SUBSCRIBE_MESSAGE]);
    expect(code).toBe(4401);
  });

  it('closes with 4408 when connection_init does not come in time (GQL_GRAPHQL_WS_INIT_TIMEOUT_MS)', async () => {
    const { code } = await rawSocket(server.wsUrl, []);
    expect(code).toBe(4408);
  });

  it('closes with 4406 for a client that does not speak graphql-transport-ws', async () => {
    const { code } = await rawSocket(server.wsUrl, [{ type: 'connection_init' }], { protocol: null });
    expect(code).toBe(4406);
  });

  it('closes with 4400 on a message that is not JSON of the protocol', async () => {
    const { code } = await rawSocket(server.wsUrl, ['not a message']);
    expect(code).toBe(4400);
  });

  it('closes a token-authenticated connection with 4403 when the token expires', async () => {
    const started = Date.now();
    const { code, reason } = await rawSocket(
      server.wsUrl,
      [{ type: 'connection_init', payload: { headers: { authorization: `Bearer ${signToken({ roles: ['admin'], expiresIn: 2 })}` } } }],
      { closeAfterMs: 6000 },
    );
    expect(code).toBe(4403);
    expect(reason).toBe('Forbidden: JWT_EXPIRED');
    expect(Date.now() - started).toBeGreaterThanOrEqual(900);
  });
});
