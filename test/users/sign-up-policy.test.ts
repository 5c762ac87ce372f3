import { createHash } from 'node:crypto';
import { BulkCreateUsersDocument, RegisterUserDocument } from '../generated/graphql';
import { authPost, GENEROUS_AUTH_LIMITS, type AuthErrorBody } from '../support/auth';
import { startBreachList, type BreachList } from '../support/breach-list';
import { graphql } from '../support/graphql';
import { ADMIN_SECRET, startTestServer, type TestServer } from '../support/server';
import { nextMailTo, smtpSettings, startSmtpReceiver, type SmtpReceiver } from '../support/smtp';
import { bearer, signToken } from '../support/tokens';

/**
 * registerUser is a sign-up like the auth service's: AUTH_DISABLE_SIGNUP, the breached-password
 * check and the sign-up limit apply to it as to every other way in.
 */

const ADMIN = { 'x-gql-admin-secret': ADMIN_SECRET };

interface Envelope {
  success: boolean;
  message: string;
  user?: unknown;
  errors?: { field: string; message: string; code: string }[];
  error_code?: string;
}

/** registerUser through its handler route, as an engine calls it for an anonymous visitor. */
async function registerByAction(server: TestServer, input: Record<string, unknown>): Promise<{ status: number; body: Envelope }> {
  const response = await fetch(`${server.url}/actions/register-user`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...ADMIN, 'x-gql-role': 'anonymous' },
    body: JSON.stringify({ action: { name: 'registerUser' }, input: { input } }),
  });
  return { status: response.status, body: (await response.json()) as Envelope };
}

const userCount = async (server: TestServer) => Number((await server.database.query<{ count: string }>('SELECT count(*) FROM users'))[0].count);

describe('with AUTH_DISABLE_SIGNUP', () => {
  let server: TestServer;
  let receiver: SmtpReceiver;

  beforeAll(async () => {
    receiver = await startSmtpReceiver();
    server = await startTestServer({
      ...GENEROUS_AUTH_LIMITS,
      ...smtpSettings(receiver.port),
      JOBS_POLL_INTERVAL_SECONDS: '1',
      AUTH_DISABLE_SIGNUP: 'true',
      AUTH_ANONYMOUS_USERS_ENABLED: 'true',
      AUTH_EMAIL_PASSWORDLESS_EMAIL_ENABLED: 'true',
    });
  });
  afterAll(async () => {
    await server?.close();
    await receiver?.close();
  });

  const refusal = { field: 'general', message: 'Sign up is disabled', code: 'SIGNUP_DISABLED' };

  it('registerUser is refused like every other sign-up, over GraphQL (any role) and its handler route, and creates nothing', async () => {
    const input = { email: 'closed@example.com', password: 'a sound passphrase', name: 'Closed' };

    for (const headers of [{}, bearer(signToken({ roles: ['user'] })), ADMIN]) {
      const response = await graphql(server.graphqlUrl, RegisterUserDocument, { input }, headers);
      expect(response.body).toEqual({ data: { registerUser: { success: false, message: 'Sign up is disabled', user: null, errors: [refusal] } } });
    }
    expect(await registerByAction(server, input)).toEqual({
      status: 200,
      body: { success: false, message: 'Sign up is disabled', errors: [refusal], error_code: 'SIGNUP_DISABLED' },
    });
    // Invalid input gets the same answer: whether sign-up is open is decided first.
    expect((await registerByAction(server, { email: 'nope' })).body.error_code).toBe('SIGNUP_DISABLED');

    const signUp = await authPost<AuthErrorBody>(server.url, '/signup/email-password', input);
    expect(signUp).toMatchObject({ status: 403, body: { status: 403, error: 'signup-disabled' } });
    expect(await userCount(server)).toBe(0);
  });

  it('refuses anonymous and passwordless sign-up of a new address, while an account an administrator made still signs in', async () => {
    const anonymous = await authPost<AuthErrorBody>(server.url, '/signin/anonymous', {});
    expect(anonymous).toMatchObject({ status: 403, body: { status: 403, error: 'signup-disabled' } });
    const passwordless = await authPost<AuthErrorBody>(server.url, '/signin/passwordless/email', { email: 'stranger@example.com' });
    expect(passwordless).toMatchObject({ status: 403, body: { status: 403, error: 'signup-disabled' } });
    expect(await userCount(server)).toBe(0);

    // bulkCreateUsers is an administrator's, not a sign-up: it works with sign-up closed.
    const created = await graphql(server.graphqlUrl, BulkCreateUsersDocument, { input: { users: [{ email: 'member@example.com', name: 'Member' }] } }, ADMIN);
    expect(created.body.data!.bulkCreateUsers).toMatchObject({ success: true, created_count: 1 });
    expect((await authPost(server.url, '/signin/passwordless/email', { email: 'member@example.com' })).status).toBe(200);
    expect((await nextMailTo(receiver, 'member@example.com')).parsed.text).toContain('signinPasswordless');
    expect(await userCount(server)).toBe(1);
  });
});

describe('with AUTH_PASSWORD_HIBP_ENABLED', () => {
  const BREACHED = 'correct horse battery staple';
  let server: TestServer;
  let breachList: BreachList;

  beforeAll(async () => {
    breachList = await startBreachList(BREACHED);
    server = await startTestServer({ AUTH_PASSWORD_HIBP_ENABLED: 'true', AUTH_PASSWORD_HIBP_API_URL: breachList.url });
  });
  afterAll(async () => {
    await server?.close();
    await breachList?.close();
  });

  const breachedError = { field: 'password', message: 'Password is too weak: it appears in a list of breached passwords', code: 'BREACHED_PASSWORD' };

  it('registerUser refuses a breached password on the password field, over GraphQL and its handler route, creating nothing', async () => {
    breachList.requests.splice(0);
    const input = { email: 'breached@example.com', password: BREACHED, name: 'Breached' };

    const response = await graphql(server.graphqlUrl, RegisterUserDocument, { input });
    expect(response.body).toEqual({ data: { registerUser: { success: false, message: 'Validation failed', user: null, errors: [breachedError] } } });
    const sha1 = createHash('sha1').update(BREACHED).digest('hex').toUpperCase();
    expect(breachList.requests).toEqual([`/range/${sha1.slice(0, 5)}`]);
    expect(await registerByAction(server, input)).toEqual({
      status: 200,
      body: { success: false, message: 'Validation failed', errors: [breachedError], error_code: 'VALIDATION_ERROR' },
    });
    expect(await userCount(server)).toBe(0);

    const fine = await graphql(server.graphqlUrl, RegisterUserDocument, { input: { ...input, password: 'a sound passphrase' } });
    expect(fine.body.data!.registerUser.success).toBe(true);
  });

  it('asks the breach list nothing about input that is invalid anyway', async () => {
    breachList.requests.splice(0);
    const response = await registerByAction(server, { email: 'not-an-address', password: BREACHED, name: 'X' });
    expect(response.body.errors).toEqual([{ field: 'email', message: 'email must be a valid e-mail address', code: 'INVALID_FORMAT' }]);
    expect(breachList.requests).toEqual([]);
  });
});

describe('the sign-up limit at its defaults (AUTH_RATE_LIMIT_SIGNUPS_*: 10 per 300 s per address)', () => {
  let server: TestServer;

  beforeAll(async () => {
    // The documented defaults, which the test environment raises for other files.
    server = await startTestServer({
      AUTH_RATE_LIMIT_SIGNUPS_BURST: '10',
      RATE_LIMIT_REGISTRATION_POINTS: '5',
      AUTH_EMAIL_SIGNIN_EMAIL_VERIFIED_REQUIRED: 'false',
    });
  });
  afterAll(async () => {
    await server?.close();
  });

  it('is one count for the auth routes and registerUser: the eleventh sign-up from an address is refused, whichever way it comes', async () => {
    let serial = 0;
    const input = () => ({ email: `limited-${(serial += 1)}@example.com`, password: 'a sound passphrase', name: 'Limited' });
    for (let index = 0; index < 5; index += 1) {
      expect((await authPost(server.url, '/signup/email-password', input())).status).toBe(200);
    }
    // Each registration by another signed-in user, so that the registration limit (per user) does not stop them first.
    for (let index = 0; index < 5; index += 1) {
      const response = await graphql(server.graphqlUrl, RegisterUserDocument, { input: input() }, bearer(signToken({ roles: ['user'] })));
      expect(response.body.data!.registerUser.success).toBe(true);
    }
    expect(await userCount(server)).toBe(10);

    const refused = await graphql(server.graphqlUrl, RegisterUserDocument, { input: input() }, bearer(signToken({ roles: ['user'] })));
    expect(refused.body.data).toBeNull();
    expect(refused.body.errors).toEqual([
      expect.objectContaining({ path: ['registerUser'], extensions: { code: 'RATE_LIMITED', retryAfter: expect.any(Number) } }),
    ]);
    expect(refused.body.errors![0].extensions!.retryAfter).toBeGreaterThan(250);
    const signUp = await authPost<AuthErrorBody>(server.url, '/signup/email-password', input());
    expect(signUp).toMatchObject({ status: 429, body: { status: 429, error: 'too-many-requests' } });
    expect(await userCount(server)).toBe(10);
  });
});
