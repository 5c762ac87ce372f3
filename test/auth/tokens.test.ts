import { randomUUID } from 'node:crypto';
import pg from 'pg';
import { loadConfig } from '../../src/config';
import { AUTH_ERRORS } from '../../src/modules/auth/auth-errors';
import { authCall, authPost, GENEROUS_AUTH_LIMITS, jwtHeader, jwtPayload, type AuthErrorBody } from '../support/auth';
import { postGraphQL } from '../support/graphql';
import { ADMIN_SECRET, CLAIMS_NAMESPACE, JWT_KEY, startTestServer, testEnvironment, type TestServer } from '../support/server';
import { eventually } from '../support/job-recorder';
import { bearer, signToken } from '../support/tokens';

interface Session {
  accessToken: string;
  accessTokenExpiresIn: number;
  refreshToken: string;
  refreshTokenId: string;
  user: { id: string; email: string; defaultRole: string; roles: string[] };
}

const GRACE_SECONDS = 1;
let server: TestServer;
let counter = 0;

beforeAll(async () => {
  server = await startTestServer({
    ...GENEROUS_AUTH_LIMITS,
    AUTH_EMAIL_SIGNIN_EMAIL_VERIFIED_REQUIRED: 'false',
    AUTH_REFRESH_TOKEN_REUSE_GRACE_SECONDS: String(GRACE_SECONDS),
    AUTH_ALLOWED_ROLES: 'user,me,editor',
    AUTH_CLEANUP_INTERVAL_SECONDS: '1',
  });
});
afterAll(() => server.close());

const PASSWORD = 'correct horse battery';

/** A new account and its first session. */
async function signUp(options: Record<string, unknown> = {}): Promise<Session> {
  counter += 1;
  const response = await authPost<{ session: Session }>(server.url, '/signup/email-password', {
    email: `tokens${counter}@example.com`,
    password: PASSWORD,
    options,
  });
  expect(response.status).toBe(200);
  return response.body.session;
}

async function signIn(email: string): Promise<Session> {
  const response = await authPost<{ session: Session }>(server.url, '/signin/email-password', { email, password: PASSWORD });
  expect(response.status).toBe(200);
  return response.body.session;
}

const refresh = (refreshToken: unknown) => authPost<Session & AuthErrorBody>(server.url, '/token', { refreshToken });
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

async function graphqlSession(accessToken: string, headers: Record<string, string> = {}) {
  return postGraphQL<{ session: { role: string; user_id: string; allowed_roles: string[]; variables: Record<string, string> } }>(
    server.graphqlUrl,
    { query: '{ session { role user_id allowed_roles variables } }' },
    { ...bearer(accessToken), ...headers },
  );
}

function expectAuthError(response: { status: number; body: unknown }, code: keyof typeof AUTH_ERRORS): void {
  expect(response.status).toBe(AUTH_ERRORS[code].status);
  expect(response.body).toEqual({ status: AUTH_ERRORS[code].status, error: code, message: expect.any(String) });
}

describe('access tokens', () => {
  it('are HS256 JWTs with sub, iat, exp (900 s) and the engine claims under its namespace', async () => {
    const session = await signUp();
    expect(session.accessTokenExpiresIn).toBe(900);
    expect(session.refreshToken).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    expect(jwtHeader(session.accessToken)).toMatchObject({ alg: 'HS256', typ: 'JWT' });
    const payload = jwtPayload(session.accessToken);
    expect(payload.sub).toBe(session.user.id);
    expect((payload.exp as number) - (payload.iat as number)).toBe(900);
    expect(Math.abs((payload.iat as number) - Date.now() / 1000)).toBeLessThan(5);
    expect(payload[CLAIMS_NAMESPACE]).toEqual({
      'x-gql-allowed-roles': ['user', 'me'],
      'x-gql-default-role': 'user',
      'x-gql-user-id': session.user.id,
      'x-gql-source-account-id': 'primary',
    });
  });

  it('are accepted by /v1/graphql with the roles they carry, X-Gql-Role choosing among them', async () => {
    const session = await signUp({ allowedRoles: ['user', 'me', 'editor'], defaultRole: 'editor' });
    const response = await graphqlSession(session.accessToken);
    expect(response.body.errors).toBeUndefined();
    expect(response.body.data!.session).toMatchObject({ role: 'editor', user_id: session.user.id, allowed_roles: ['user', 'me', 'editor'] });
    expect(response.body.data!.session.variables['x-gql-source-account-id']).toBe('primary');

    const asMe = await graphqlSession(session.accessToken, { 'x-gql-role': 'me' });
    expect(asMe.body.data!.session.role).toBe('me');
    const asAdmin = await graphqlSession(session.accessToken, { 'x-gql-role': 'admin' });
    expect(asAdmin.body.errors![0].extensions!.code).toBe('ROLE_NOT_ALLOWED');
  });

  it('are refused by GET /auth/user when signed with another secret, expired, or missing', async () => {
    const session = await signUp();
    expect((await authCall(server.url, 'GET', '/user', undefined, bearer(session.accessToken))).status).toBe(200);
    const forged = signToken({ userId: session.user.id, key: 'another-key-of-at-least-thirty-two-bytes!!' });
    expectAuthError(await authCall(server.url, 'GET', '/user', undefined, bearer(forged)), 'unauthenticated-user');
    const expired = signToken({ userId: session.user.id, expiresIn: -60 });
    expectAuthError(await authCall(server.url, 'GET', '/user', undefined, bearer(expired)), 'unauthenticated-user');
    expectAuthError(await authCall(server.url, 'GET', '/user'), 'unauthenticated-user');
    expectAuthError(await authCall(server.url, 'GET', '/user', undefined, { authorization: 'Basic abc' }), 'unauthenticated-user');
    // The admin secret may act as a user, by a user id that must be one.
    const asUser = (id: string) => authCall(server.url, 'GET', '/user', undefined, { 'x-gql-admin-secret': ADMIN_SECRET, 'x-gql-user-id': id });
    expect((await asUser(session.user.id)).status).toBe(200);
    expectAuthError(await asUser('l:Rb_~3y3'), 'unauthenticated-user');
    expectAuthError(await asUser('6f1c9e0a-4b1e-4c55-9a0e-2f8f8d7c1a11'), 'unauthenticated-user');
    expectAuthError(await authCall(server.url, 'GET', '/user', undefined, { 'x-gql-admin-secret': 'wrong' }), 'unauthenticated-user');
  });
});

describe('POST /auth/token', () => {
  it('answers a new session and rotates the refresh token', async () => {
    const first = await signUp();
    const second = await refresh(first.refreshToken);
    expect(second.status).toBe(200);
    expect(second.body.refreshToken).not.toBe(first.refreshToken);
    expect(second.body.refreshTokenId).not.toBe(first.refreshTokenId);
    expect(second.body.user.id).toBe(first.user.id);
    expect((await graphqlSession(second.body.accessToken)).body.data!.session.user_id).toBe(first.user.id);
    // Rotation chains: the new token refreshes in turn.
    expect((await refresh(second.body.refreshToken)).status).toBe(200);
  });

  it('stores refresh tokens only as hashes', async () => {
    const session = await signUp();
    const rows = await server.database.query<{ token_hash: Buffer }>('SELECT token_hash FROM auth_refresh_tokens WHERE id = $1', [session.refreshTokenId]);
    expect(rows).toHaveLength(1);
    expect(rows[0].token_hash.toString('hex')).not.toContain(session.refreshToken.replace(/-/g, ''));
    const text = await server.database.query(`SELECT 1 FROM auth_refresh_tokens WHERE token_hash::text LIKE '%' || $1 || '%'`, [session.refreshToken]);
    expect(text).toHaveLength(0);
  });

  it('lets a concurrent retry of a rotated token through within the grace window', async () => {
    const first = await signUp();
    const [a, b] = await Promise.all([refresh(first.refreshToken), refresh(first.refreshToken)]);
    expect([a.status, b.status]).toEqual([200, 200]);
    expect(a.body.refreshToken).not.toBe(b.body.refreshToken);
    expect((await refresh(a.body.refreshToken)).status).toBe(200);
    expect((await refresh(b.body.refreshToken)).status).toBe(200);
  });

  it('revokes the whole session when a rotated token comes back after the grace window (reuse detection)', async () => {
    const first = await signUp();
    const other = await signIn(first.user.email);
    const second = await refresh(first.refreshToken);
    expect(second.status).toBe(200);
    await sleep(GRACE_SECONDS * 1000 + 200);

    expectAuthError(await refresh(first.refreshToken), 'invalid-refresh-token');
    // The thief's copy and the rightful holder's token are both dead now...
    expectAuthError(await refresh(second.body.refreshToken), 'invalid-refresh-token');
    const family = await server.database.query<{ revoked: boolean }>(
      'SELECT revoked_at IS NOT NULL AS revoked FROM auth_refresh_tokens WHERE family_id = (SELECT family_id FROM auth_refresh_tokens WHERE id = $1)',
      [first.refreshTokenId],
    );
    expect(family.map((row) => row.revoked)).toEqual([true, true]);
    // ...while the user's other session (another sign-in) lives on.
    expect((await refresh(other.refreshToken)).status).toBe(200);
  });

  it('refuses unknown, expired and malformed refresh tokens', async () => {
    expectAuthError(await refresh('6f1c9e0a-4b1e-4c55-9a0e-2f8f8d7c1a11'), 'invalid-refresh-token');
    expectAuthError(await refresh('not-a-uuid'), 'invalid-refresh-token');
    const session = await signUp();
    await server.database.query("UPDATE auth_refresh_tokens SET expires_at = now() - interval '1 second' WHERE id = $1", [session.refreshTokenId]);
    expectAuthError(await refresh(session.refreshToken), 'invalid-refresh-token');

    for (const body of [{}, { refreshToken: 42 }, { refreshToken: null }, 'not json', [1]]) {
      const response = await authPost(server.url, '/token', body);
      // A number is read as its text (then unknown); everything else is an invalid request.
      expect([400, 401]).toContain(response.status);
      expect(response.body).toEqual({ status: response.status, error: expect.any(String), message: expect.any(String) });
    }
    const missing = await authPost<AuthErrorBody>(server.url, '/token', {});
    expect(missing.body).toEqual({ status: 400, error: 'invalid-request', message: expect.stringContaining('refreshToken') });
  });

  it('are deleted once expired, by each process in the background; live ones stay', async () => {
    const expired = await signUp();
    const live = await signUp();
    await server.database.query("UPDATE auth_refresh_tokens SET expires_at = now() - interval '1 second' WHERE id = $1", [expired.refreshTokenId]);
    const deadline = Date.now() + 10_000;
    while ((await server.database.query('SELECT 1 FROM auth_refresh_tokens WHERE id = $1', [expired.refreshTokenId])).length > 0) {
      if (Date.now() > deadline) throw new Error('the expired refresh token was not deleted');
      await sleep(200);
    }
    expect(await server.database.query('SELECT 1 FROM auth_refresh_tokens WHERE id = $1', [live.refreshTokenId])).toHaveLength(1);
  });

  it('refuses the refresh tokens of a disabled user', async () => {
    const session = await signUp();
    await server.database.query('UPDATE users SET disabled = true WHERE id = $1', [session.user.id]);
    expectAuthError(await refresh(session.refreshToken), 'invalid-refresh-token');
  });

  it('answers each refresh written in one batch with its own user and token, a token presented twice and refused ones included', async () => {
    const blockers = [await signUp(), await signUp()];
    const sessions = await Promise.all(Array.from({ length: 8 }, () => signUp()));
    const disabled = await signUp();
    await server.database.query('UPDATE users SET disabled = true WHERE id = $1', [disabled.user.id]);
    // A transaction holding the blockers' token rows keeps two batches waiting (as many as may be
    // in flight), so the refreshes sent meanwhile are written together in the next batch.
    const locker = new pg.Client({ connectionString: server.database.url });
    await locker.connect();
    try {
      await locker.query('BEGIN');
      await locker.query('SELECT 1 FROM auth_refresh_tokens WHERE id = ANY($1::uuid[]) FOR UPDATE', [blockers.map((blocker) => blocker.refreshTokenId)]);
      const waitingOnLocks = async (count: number) =>
        (await locker.query<{ n: number }>("SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'"))
          .rows[0].n === count;
      const blocked: ReturnType<typeof refresh>[] = [];
      for (const [index, blocker] of blockers.entries()) {
        blocked.push(refresh(blocker.refreshToken));
        await eventually(() => waitingOnLocks(index + 1), 10_000, `${index + 1} batch(es) waiting`);
      }
      const burst = Promise.all([
        ...sessions.map((session) => refresh(session.refreshToken)),
        refresh(sessions[0].refreshToken),
        refresh(disabled.refreshToken),
        refresh(randomUUID()),
      ]);
      await sleep(300);
      expect(await waitingOnLocks(2)).toBe(true);
      await locker.query('COMMIT');

      for (const [index, answer] of (await Promise.all(blocked)).entries()) {
        expect(answer.status).toBe(200);
        expect(answer.body.user.id).toBe(blockers[index].user.id);
      }
      const answers = await burst;
      const [twice, ofDisabled, unknown] = answers.slice(sessions.length);
      expectAuthError(ofDisabled, 'invalid-refresh-token');
      expectAuthError(unknown, 'invalid-refresh-token');
      // The token sent twice: one presentation rotated it, the other was a retry within the grace window.
      expect(twice.status).toBe(200);
      expect(twice.body.user.id).toBe(sessions[0].user.id);
      const issued = [...answers.slice(0, sessions.length), twice];
      expect(new Set(issued.map((answer) => answer.body.refreshToken)).size).toBe(issued.length);
      for (const [index, answer] of issued.entries()) {
        const owner = sessions[index % sessions.length];
        expect(answer.status).toBe(200);
        expect(answer.body.user.id).toBe(owner.user.id);
        expect(jwtPayload(answer.body.accessToken).sub).toBe(owner.user.id);
        // The token answered is the one stored: it refreshes again, for the same user.
        const next = await refresh(answer.body.refreshToken);
        expect(next.status).toBe(200);
        expect(next.body.user.id).toBe(owner.user.id);
      }
    } finally {
      await locker.end();
    }
  });
});

describe('POST /auth/signout', () => {
  it('revokes one session with {refreshToken}, leaving the others', async () => {
    const first = await signUp();
    const second = await signIn(first.user.email);
    const response = await authPost(server.url, '/signout', { refreshToken: first.refreshToken }, bearer(first.accessToken));
    expect(response).toMatchObject({ status: 200, body: 'OK' });
    expectAuthError(await refresh(first.refreshToken), 'invalid-refresh-token');
    expect((await refresh(second.refreshToken)).status).toBe(200);
    // Signing out again is harmless.
    expect((await authPost(server.url, '/signout', { refreshToken: first.refreshToken })).status).toBe(200);
  });

  it('revokes every session of the user with {all: true} and the bearer token', async () => {
    const first = await signUp();
    const second = await signIn(first.user.email);
    const bystander = await signUp();
    expectAuthError(await authPost(server.url, '/signout', { all: true }), 'unauthenticated-user');
    expect((await refresh(first.refreshToken)).status).toBe(200);

    const response = await authPost(server.url, '/signout', { all: true }, bearer(second.accessToken));
    expect(response).toMatchObject({ status: 200, body: 'OK' });
    const [rows] = await server.database.query<{ live: string }>(
      'SELECT count(*) FILTER (WHERE revoked_at IS NULL) AS live FROM auth_refresh_tokens WHERE user_id = $1',
      [first.user.id],
    );
    expect(Number(rows.live)).toBe(0);
    expectAuthError(await refresh(second.refreshToken), 'invalid-refresh-token');
    expect((await refresh(bystander.refreshToken)).status).toBe(200);
  });

  it("refuses another user's refresh token, an unknown one, and an empty request", async () => {
    const mine = await signUp();
    const theirs = await signUp();
    expectAuthError(await authPost(server.url, '/signout', { refreshToken: theirs.refreshToken }, bearer(mine.accessToken)), 'invalid-refresh-token');
    expect((await refresh(theirs.refreshToken)).status).toBe(200);
    expectAuthError(await authPost(server.url, '/signout', { refreshToken: '6f1c9e0a-4b1e-4c55-9a0e-2f8f8d7c1a11' }), 'invalid-refresh-token');
    expectAuthError(await authPost(server.url, '/signout', {}), 'invalid-request');
    expectAuthError(await authPost(server.url, '/signout', { all: true }, bearer('not.a.jwt')), 'unauthenticated-user');
  });
});

describe('errors', () => {
  it('are JSON {status, message, error} on every auth path, unknown ones included', async () => {
    const response = await authCall(server.url, 'GET', '/no-such-route');
    expect(response.status).toBe(404);
    expect(response.body).toMatchObject({ message: expect.any(String) });
    const wrongType = await authCall(server.url, 'POST', '/token', 'refreshToken=x', { 'content-type': 'application/x-www-form-urlencoded' });
    expect(wrongType.status).toBe(415);
    expect(wrongType.body).toEqual({ status: 415, error: 'invalid-request', message: expect.any(String) });
    const unstorable = await authPost(server.url, '/signin/email-password', { email: 'a\u0000@example.com', password: 'x' });
    expect(unstorable.body).toEqual({ status: 400, error: 'invalid-request', message: expect.stringContaining('body.email') });
  });
});

describe('signing secret', () => {
  it('is the key of GQL_GRAPHQL_JWT_SECRET unless AUTH_JWT_SECRET is set; changing it invalidates every access token at once', async () => {
    const session = await signUp();
    const rotated = await startTestServer(
      {
        ...GENEROUS_AUTH_LIMITS,
        AUTH_JWT_SECRET: 'a-brand-new-signing-key-of-32-bytes-or-more',
        GQL_GRAPHQL_JWT_SECRET: JSON.stringify({ type: 'HS256', key: 'a-brand-new-signing-key-of-32-bytes-or-more', claims_namespace: CLAIMS_NAMESPACE }),
      },
      { database: server.database },
    );
    try {
      expectAuthError(await authCall(rotated.url, 'GET', '/user', undefined, bearer(session.accessToken)), 'unauthenticated-user');
      const engine = await postGraphQL(rotated.graphqlUrl, { query: '{ session { role } }' }, bearer(session.accessToken));
      expect(engine.status).toBe(401);
      // The session itself survives: a refresh gives a token signed with the new key.
      const renewed = await authPost<Session>(rotated.url, '/token', { refreshToken: session.refreshToken });
      expect(renewed.status).toBe(200);
      expect((await authCall(rotated.url, 'GET', '/user', undefined, bearer(renewed.body.accessToken))).status).toBe(200);
    } finally {
      await rotated.close();
    }
    expect(JWT_KEY).not.toBe('a-brand-new-signing-key-of-32-bytes-or-more');
  });
});

describe('token settings', () => {
  const config = (extra: Record<string, string>) => loadConfig(testEnvironment('postgres://localhost/x', extra));

  it('takes AUTH_ACCESS_TOKEN_EXPIRES_IN, or its alias AUTH_TOKEN_EXPIRY_SECONDS, and refuses the two when they differ', () => {
    expect(config({}).auth.accessTokenExpiresInSeconds).toBe(900);
    expect(config({ AUTH_ACCESS_TOKEN_EXPIRES_IN: '300' }).auth.accessTokenExpiresInSeconds).toBe(300);
    expect(config({ AUTH_TOKEN_EXPIRY_SECONDS: '120' }).auth.accessTokenExpiresInSeconds).toBe(120);
    expect(config({ AUTH_ACCESS_TOKEN_EXPIRES_IN: '300', AUTH_TOKEN_EXPIRY_SECONDS: '300' }).auth.accessTokenExpiresInSeconds).toBe(300);
    expect(() => config({ AUTH_ACCESS_TOKEN_EXPIRES_IN: '300', AUTH_TOKEN_EXPIRY_SECONDS: '120' })).toThrow(
      /AUTH_ACCESS_TOKEN_EXPIRES_IN and AUTH_TOKEN_EXPIRY_SECONDS/,
    );
  });

  it('refuses a short AUTH_JWT_SECRET, an asymmetric one, and a default role outside the allowed roles, without echoing secrets', () => {
    expect(() => config({ AUTH_JWT_SECRET: 'short' })).toThrow(/AUTH_JWT_SECRET must be at least 32 bytes$/m);
    expect(() => config({ AUTH_JWT_SECRET: JSON.stringify({ type: 'RS256', key: 'x' }) })).toThrow(/AUTH_JWT_SECRET/);
    expect(() => config({ AUTH_DEFAULT_ROLE: 'editor' })).toThrow(/AUTH_DEFAULT_ROLE \(editor\) must be one of AUTH_ALLOWED_ROLES/);
    expect(config({ AUTH_REFRESH_TOKEN_EXPIRES_IN: '60' }).auth.refreshTokenExpiresInMinutes).toBe(60);
  });

  it('refuses bad redirect, role, hook and port settings, naming the variable', () => {
    expect(() => config({ AUTH_CLIENT_URL: 'not a url' })).toThrow(/AUTH_CLIENT_URL must be an absolute URL/);
    expect(() => config({ AUTH_ALLOWED_REDIRECT_URLS: 'https://ok.example.com,nope' })).toThrow(
      /AUTH_ALLOWED_REDIRECT_URLS must be a comma-separated list of URLs/,
    );
    expect(() => config({ AUTH_ALLOWED_ROLES: 'user,no spaces' })).toThrow(/AUTH_ALLOWED_ROLES must be a comma-separated list of role names/);
    // Any sign-up may ask for a role of the list: admin, which passes every permission, is granted by an operator only.
    expect(() => config({ AUTH_ALLOWED_ROLES: 'user,me,admin,moderator' })).toThrow(
      /- AUTH_ALLOWED_ROLES must not contain admin: any sign-up could ask for it; grant it with plinth auth user role add$/m,
    );
    expect(config({ AUTH_ALLOWED_ROLES: 'user,me,Admin' }).auth.allowedRoles).toEqual(['user', 'me', 'Admin']);
    expect(config({}).auth.recentSignInSeconds).toBe(86_400);
    expect(config({ AUTH_RECENT_SIGN_IN_SECONDS: '0' }).auth.recentSignInSeconds).toBe(0);
    expect(() => config({ AUTH_RECENT_SIGN_IN_SECONDS: 'a day' })).toThrow(/AUTH_RECENT_SIGN_IN_SECONDS/);
    expect(() => config({ AUTH_RECENT_SIGN_IN_SECONDS: '-1' })).toThrow(/AUTH_RECENT_SIGN_IN_SECONDS/);
    expect(() => config({ AUTH_CUSTOM_CLAIMS_WEBHOOK: 'ftp://hook.example.com' })).toThrow(/AUTH_CUSTOM_CLAIMS_WEBHOOK must be an http\(s\) URL/);
    expect(() => config({ AUTH_PORT: '70000' })).toThrow(/AUTH_PORT must be at most 65535/);
    expect(() => config({ AUTH_EMAIL_SIGNIN_EMAIL_VERIFIED_REQUIRED: 'maybe' })).toThrow(/AUTH_EMAIL_SIGNIN_EMAIL_VERIFIED_REQUIRED must be true or false/);
    const settings = config({ AUTH_CLIENT_URL: 'https://app.example.com', AUTH_ALLOWED_REDIRECT_URLS: 'https://*.example.org/cb, myapp://auth' }).auth;
    expect(settings.allowedRedirectUrls).toEqual(['https://app.example.com', 'https://*.example.org/cb', 'myapp://auth']);
    expect(config({}).auth.clientUrl).toBe('http://localhost:0');
  });
});
