import { authCall, authPost, GENEROUS_AUTH_LIMITS, jwtPayload, linkIn } from '../support/auth';
import { postGraphQL } from '../support/graphql';
import { CLAIMS_NAMESPACE, startTestServer, type TestServer } from '../support/server';
import { startSmtpReceiver, type SmtpReceiver, smtpSettings, nextMailTo } from '../support/smtp';
import { bearer } from '../support/tokens';

const AUTH_URL = 'https://auth.plinth.test';

interface Session {
  accessToken: string;
  refreshToken: string;
  user: { id: string; email: string | null; isAnonymous: boolean; defaultRole: string; roles: string[]; displayName: string };
}

let server: TestServer;
let receiver: SmtpReceiver;

beforeAll(async () => {
  receiver = await startSmtpReceiver();
  server = await startTestServer({
    ...GENEROUS_AUTH_LIMITS,
    ...smtpSettings(receiver.port),
    JOBS_POLL_INTERVAL_SECONDS: '1',
    AUTH_SERVER_URL: AUTH_URL,
    AUTH_ANONYMOUS_USERS_ENABLED: 'true',
    AUTH_EMAIL_PASSWORDLESS_EMAIL_ENABLED: 'true',
  });
});
afterAll(async () => {
  await server.close();
  await receiver.close();
});

async function follow(link: string): Promise<URL> {
  const response = await fetch(link.replace(AUTH_URL, `${server.url}/auth`), { redirect: 'manual' });
  expect(response.status).toBe(302);
  return new URL(response.headers.get('location')!);
}

async function anonymous(body: Record<string, unknown> = {}): Promise<Session> {
  const response = await authPost<{ session: Session }>(server.url, '/signin/anonymous', body);
  expect(response.status).toBe(200);
  return response.body.session;
}

describe('anonymous users', () => {
  it('get a session with the anonymous role only, an account without an address, accepted by the engine', async () => {
    const session = await anonymous({ displayName: 'Guest', locale: 'de', metadata: { cart: 3 } });
    expect(session.user).toMatchObject({ email: null, isAnonymous: true, defaultRole: 'anonymous', roles: ['anonymous'], displayName: 'Guest' });
    expect(jwtPayload(session.accessToken)[CLAIMS_NAMESPACE]).toMatchObject({
      'x-gql-allowed-roles': ['anonymous'],
      'x-gql-default-role': 'anonymous',
      'x-gql-user-id': session.user.id,
    });
    const engine = await postGraphQL<{ session: { role: string; user_id: string } }>(
      server.graphqlUrl,
      { query: '{ session { role user_id } }' },
      bearer(session.accessToken),
    );
    expect(engine.body.data!.session).toEqual({ role: 'anonymous', user_id: session.user.id });
    expect((await authCall(server.url, 'GET', '/user', undefined, bearer(session.accessToken))).body).toMatchObject({
      isAnonymous: true,
      email: null,
      locale: 'de',
      metadata: { cart: 3 },
    });
    expect((await authPost(server.url, '/token', { refreshToken: session.refreshToken })).status).toBe(200);
  });

  it('need no body: an empty one, or none', async () => {
    for (const init of [{ headers: { 'content-type': 'application/json' } }, {}, { headers: { 'content-type': 'application/json' }, body: '  ' }]) {
      const response = await fetch(`${server.url}/auth/signin/anonymous`, { method: 'POST', ...init });
      expect(response.status).toBe(200);
      expect(((await response.json()) as { session: Session }).session.user.isAnonymous).toBe(true);
    }
    // Elsewhere an empty body is one without its fields.
    const empty = await fetch(`${server.url}/auth/signin/email-password`, { method: 'POST', headers: { 'content-type': 'application/json' } });
    expect(empty.status).toBe(400);
    expect(await empty.json()).toMatchObject({ error: 'invalid-request', message: expect.stringContaining('email') });
    // A body with a prototype key is refused as Fastify refuses it everywhere.
    const poisoned = await fetch(`${server.url}/auth/signin/anonymous`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: '{"__proto__":{"x":1}}',
    });
    expect(poisoned.status).toBe(400);
  });

  it('cannot change an address or password they do not have', async () => {
    const session = await anonymous();
    expect(await authPost(server.url, '/user/email/change', { newEmail: 'guest@example.com' }, bearer(session.accessToken))).toMatchObject({
      status: 403,
      body: { error: 'forbidden-anonymous' },
    });
    expect(await authPost(server.url, '/user/password', { newPassword: 'a new password here' }, bearer(session.accessToken))).toMatchObject({
      status: 403,
      body: { error: 'forbidden-anonymous' },
    });
  });

  it('are upgraded with an e-mail and password: the anonymous sessions end, the address is verified by mail, then sign-in works', async () => {
    const session = await anonymous({ displayName: 'Guest' });
    const upgrade = await authPost(
      server.url,
      '/user/deanonymize',
      { signInMethod: 'email-password', email: 'upgraded@example.com', password: 'upgraded password' },
      bearer(session.accessToken),
    );
    expect(upgrade).toMatchObject({ status: 200, body: 'OK' });
    expect((await authPost(server.url, '/token', { refreshToken: session.refreshToken })).status).toBe(401);
    expect(await authPost(server.url, '/signin/email-password', { email: 'upgraded@example.com', password: 'upgraded password' })).toMatchObject({
      status: 401,
      body: { error: 'unverified-user' },
    });

    await follow(linkIn((await nextMailTo(receiver, 'upgraded@example.com')).parsed.text, `${AUTH_URL}/verify`));
    const signedIn = await authPost<{ session: Session }>(server.url, '/signin/email-password', {
      email: 'upgraded@example.com',
      password: 'upgraded password',
    });
    expect(signedIn.status).toBe(200);
    // The same account, now an ordinary user.
    expect(signedIn.body.session.user).toMatchObject({
      id: session.user.id,
      email: 'upgraded@example.com',
      isAnonymous: false,
      defaultRole: 'user',
      roles: ['user', 'me'],
      displayName: 'Guest',
    });
  });

  it('are upgraded passwordless: a magic link signs the upgraded account in', async () => {
    const session = await anonymous();
    expect(
      (await authPost(server.url, '/user/deanonymize', { signInMethod: 'passwordless', email: 'linked@example.com' }, bearer(session.accessToken))).status,
    ).toBe(200);
    const landing = await follow(linkIn((await nextMailTo(receiver, 'linked@example.com')).parsed.text, `${AUTH_URL}/verify`));
    const refreshed = await authPost<Session>(server.url, '/token', { refreshToken: landing.searchParams.get('refreshToken') });
    expect(refreshed.body.user).toMatchObject({ id: session.user.id, email: 'linked@example.com', isAnonymous: false, emailVerified: true });
  });

  it('refuses an upgrade of a user that is not anonymous, to a taken address, without a password, or without a bearer token', async () => {
    const session = await anonymous();
    expect(
      await authPost(
        server.url,
        '/user/deanonymize',
        { signInMethod: 'email-password', email: 'upgraded@example.com', password: 'some password' },
        bearer(session.accessToken),
      ),
    ).toMatchObject({ status: 409, body: { error: 'email-already-in-use' } });
    expect(
      await authPost(server.url, '/user/deanonymize', { signInMethod: 'email-password', email: 'fresh@example.com' }, bearer(session.accessToken)),
    ).toMatchObject({ status: 400, body: { error: 'invalid-request' } });
    expect(
      await authPost(
        server.url,
        '/user/deanonymize',
        { signInMethod: 'email-password', email: 'fresh@example.com', password: 'short' },
        bearer(session.accessToken),
      ),
    ).toMatchObject({ status: 400, body: { error: 'password-too-short' } });
    expect(await authPost(server.url, '/user/deanonymize', { signInMethod: 'sms', email: 'fresh@example.com' }, bearer(session.accessToken))).toMatchObject({
      status: 400,
      body: { error: 'invalid-request' },
    });
    expect(
      await authPost(server.url, '/user/deanonymize', { signInMethod: 'email-password', email: 'fresh@example.com', password: 'some password' }),
    ).toMatchObject({ status: 401, body: { error: 'unauthenticated-user' } });
    // The account is still anonymous and its session still works.
    expect((await authPost(server.url, '/token', { refreshToken: session.refreshToken })).status).toBe(200);

    const signedUp = await authPost(server.url, '/signin/anonymous', {});
    const other = (signedUp.body as { session: Session }).session;
    await authPost(server.url, '/user/deanonymize', { signInMethod: 'passwordless', email: 'twice@example.com' }, bearer(other.accessToken));
    const landing = await follow(linkIn((await nextMailTo(receiver, 'twice@example.com')).parsed.text, `${AUTH_URL}/verify`));
    const upgraded = await authPost<Session>(server.url, '/token', { refreshToken: landing.searchParams.get('refreshToken') });
    expect(
      await authPost(
        server.url,
        '/user/deanonymize',
        { signInMethod: 'email-password', email: 'again@example.com', password: 'some password' },
        bearer(upgraded.body.accessToken),
      ),
    ).toMatchObject({ status: 400, body: { error: 'user-not-anonymous' } });
  });

  it('are refused when AUTH_ANONYMOUS_USERS_ENABLED is off', async () => {
    const closed = await startTestServer({ ...GENEROUS_AUTH_LIMITS }, { database: server.database });
    try {
      expect(await authPost(closed.url, '/signin/anonymous', {})).toMatchObject({ status: 409, body: { error: 'disabled-endpoint' } });
    } finally {
      await closed.close();
    }
  });
});
