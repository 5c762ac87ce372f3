import { loadConfig } from '../../src/config';
import { authCall, authPost, GENEROUS_AUTH_LIMITS, type AuthErrorBody } from '../support/auth';
import { PRODUCTION, startTestServer, testEnvironment, type TestServer } from '../support/server';

/** Each test counts from an address of its own (X-Forwarded-For, trusted here). */
const from = (ip: string) => ({ 'x-forwarded-for': ip });

let server: TestServer;

beforeAll(async () => {
  server = await startTestServer({
    TRUST_PROXY: 'true',
    AUTH_EMAIL_SIGNIN_EMAIL_VERIFIED_REQUIRED: 'false',
    AUTH_RATE_LIMIT_GLOBAL_BURST: '12',
    AUTH_RATE_LIMIT_BRUTE_FORCE_BURST: '3',
    AUTH_RATE_LIMIT_SIGNUPS_BURST: '2',
    AUTH_RATE_LIMIT_EMAIL_BURST: '2',
  });
});
afterAll(() => server.close());

function expectTooMany(response: { status: number; headers: Headers; body: unknown }, maxSeconds: number): void {
  expect(response.status).toBe(429);
  expect(response.body).toEqual({ status: 429, error: 'too-many-requests', message: expect.any(String) });
  const retryAfter = Number(response.headers.get('retry-after'));
  expect(retryAfter).toBeGreaterThan(0);
  expect(retryAfter).toBeLessThanOrEqual(maxSeconds);
}

describe('auth rate limits', () => {
  it('limits sign-in per address (brute force), sharing the count with verification links and tickets', async () => {
    const attempt = () => authPost(server.url, '/signin/email-password', { email: 'x@example.com', password: 'wrong password' }, from('10.0.0.1'));
    for (let index = 0; index < 3; index += 1) expect((await attempt()).status).toBe(401);
    expectTooMany(await attempt(), 300);
    expectTooMany(await authCall(server.url, 'GET', '/verify?ticket=x&type=emailVerify', undefined, from('10.0.0.1')), 300);
    expectTooMany(await authPost(server.url, '/user/password', { newPassword: 'whatever it is', ticket: 'x' }, from('10.0.0.1')), 300);
    // Another address is not affected.
    expect((await authPost(server.url, '/signin/email-password', { email: 'x@example.com', password: 'wrong password' }, from('10.0.0.2'))).status).toBe(401);
  });

  it('limits sign-ups per address, refused ones included, without creating the refused account', async () => {
    const signUp = (email: string) => authPost(server.url, '/signup/email-password', { email, password: 'long enough password' }, from('10.0.1.1'));
    expect((await signUp('limit1@example.com')).status).toBe(200);
    expect((await signUp('limit1@example.com')).status).toBe(409);
    expectTooMany(await signUp('limit2@example.com'), 300);
    expect(await server.database.query("SELECT 1 FROM users WHERE email = 'limit2@example.com'")).toHaveLength(0);
  });

  it('limits the routes that send mail per address', async () => {
    const reset = () => authPost(server.url, '/user/password/reset', { email: 'someone@example.com' }, from('10.0.2.1'));
    expect((await reset()).status).toBe(200);
    expect((await reset()).status).toBe(200);
    expectTooMany(await reset(), 3600);
    expectTooMany(await authPost(server.url, '/user/email/send-verification-email', { email: 'someone@example.com' }, from('10.0.2.1')), 3600);
  });

  it('limits every auth request per address overall', async () => {
    const statuses: number[] = [];
    for (let index = 0; index < 13; index += 1) {
      statuses.push((await authPost(server.url, '/token', { refreshToken: 'unknown' }, from('10.0.3.1'))).status);
    }
    expect(statuses.slice(0, 12).every((status) => status === 401)).toBe(true);
    expect(statuses[12]).toBe(429);
    expectTooMany(await authCall(server.url, 'GET', '/user', undefined, from('10.0.3.1')), 60);
    // The health check stays answered.
    expect((await authCall(server.url, 'GET', '/healthz', undefined, from('10.0.3.1'))).status).toBe(200);
  });

  it('have defaults at least as strict as 100/min overall, 10 per 5 min on sign-in, sign-up and second-factor codes, 10 mails an hour', () => {
    const { AUTH_RATE_LIMIT_SIGNUPS_BURST: _loosened, ...environment } = testEnvironment('postgres://localhost/x');
    const { rateLimits } = loadConfig(environment).auth;
    expect(rateLimits).toEqual({
      global: { points: 100, durationSeconds: 60 },
      bruteForce: { points: 10, durationSeconds: 300 },
      signups: { points: 10, durationSeconds: 300 },
      email: { points: 10, durationSeconds: 3600 },
      mfa: { points: 10, durationSeconds: 300 },
      sms: { points: 5, durationSeconds: 3600 },
      smsAddress: { points: 20, durationSeconds: 3600 },
    });
  });
});

describe('sign-up settings', () => {
  it('AUTH_DISABLE_SIGNUP refuses sign-up with signup-disabled; without verification sign-up answers a session; no gravatar when off', async () => {
    const closed = await startTestServer({ ...GENEROUS_AUTH_LIMITS, AUTH_DISABLE_SIGNUP: 'true' }, { database: server.database });
    try {
      const refused = await authPost<AuthErrorBody>(closed.url, '/signup/email-password', { email: 'closed@example.com', password: 'long enough password' });
      expect(refused).toMatchObject({ status: 403, body: { status: 403, error: 'signup-disabled' } });
      expect(await server.database.query("SELECT 1 FROM users WHERE email = 'closed@example.com'")).toHaveLength(0);
    } finally {
      await closed.close();
    }
    const open = await startTestServer(
      { ...GENEROUS_AUTH_LIMITS, AUTH_EMAIL_SIGNIN_EMAIL_VERIFIED_REQUIRED: 'false', AUTH_GRAVATAR_ENABLED: 'false' },
      { database: server.database },
    );
    try {
      const response = await authPost<{ session: { user: { avatarUrl: string; emailVerified: boolean } } }>(open.url, '/signup/email-password', {
        email: 'open@example.com',
        password: 'long enough password',
      });
      expect(response.status).toBe(200);
      expect(response.body.session.user).toMatchObject({ avatarUrl: '', emailVerified: false });
      expect(await authPost(open.url, '/signin/passwordless/email', { email: 'open@example.com' })).toMatchObject({
        status: 409,
        body: { error: 'disabled-endpoint' },
      });
    } finally {
      await open.close();
    }
  });

  it('in production without SMTP_HOST: routes that mail answer disabled-endpoint, and passwordless sign-in stops start-up', async () => {
    const production = {
      ...GENEROUS_AUTH_LIMITS,
      ...PRODUCTION,
      PLINTH_PUBLIC_URL: 'https://api.example.com',
    };
    const noMail = await startTestServer(production, { database: server.database });
    try {
      for (const [path, body] of [
        ['/signup/email-password', { email: 'prod@example.com', password: 'long enough password' }],
        ['/user/password/reset', { email: 'prod@example.com' }],
      ] as const) {
        expect(await authPost(noMail.url, path, body)).toMatchObject({ status: 409, body: { error: 'disabled-endpoint' } });
      }
      expect(await server.database.query("SELECT 1 FROM users WHERE email = 'prod@example.com'")).toHaveLength(0);
    } finally {
      await noMail.close();
    }
    await expect(startTestServer({ ...production, AUTH_EMAIL_PASSWORDLESS_EMAIL_ENABLED: 'true' }, { database: server.database })).rejects.toThrow(
      /SMTP_HOST \(or EMAIL_DELIVERY_API_KEY\) is required when NODE_ENV=production \(AUTH_EMAIL_PASSWORDLESS_EMAIL_ENABLED sends mail\)/,
    );
  });
});
