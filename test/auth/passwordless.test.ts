import { createHash } from 'node:crypto';
import { authPost, GENEROUS_AUTH_LIMITS, linkIn } from '../support/auth';
import { startTestServer, type TestServer } from '../support/server';
import { startSmtpReceiver, type SmtpReceiver, smtpSettings, nextMailTo } from '../support/smtp';

const AUTH_URL = 'https://auth.plinth.test';
const CLIENT_URL = 'https://app.example.com';

let server: TestServer;
let receiver: SmtpReceiver;

beforeAll(async () => {
  receiver = await startSmtpReceiver();
  server = await startTestServer({
    ...GENEROUS_AUTH_LIMITS,
    ...smtpSettings(receiver.port),
    JOBS_POLL_INTERVAL_SECONDS: '1',
    AUTH_SERVER_URL: AUTH_URL,
    AUTH_CLIENT_URL: CLIENT_URL,
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

/** Asks for a link at `path` and answers the link the mail carries. */
async function magicLink(email: string, options: Record<string, unknown> = {}, path = '/signin/passwordless/email'): Promise<string> {
  expect(await authPost(server.url, path, { email, options })).toMatchObject({ status: 200, body: 'OK' });
  const mail = await nextMailTo(receiver, email);
  return linkIn(mail.parsed.text, `${AUTH_URL}/verify`);
}

describe('passwordless sign-in by e-mail', () => {
  it('creates the account of a new address and mails an otp link that signs it in at redirectTo, keeping its query', async () => {
    const link = new URL(await magicLink('magic@example.com', { redirectTo: `${CLIENT_URL}/signed-in?tab=home`, displayName: 'Magic' }));
    expect(link.origin + link.pathname).toBe(`${AUTH_URL}/verify`);
    expect(link.searchParams.get('ticket')).toMatch(/^otp:[0-9a-f-]{36}$/);
    expect(link.searchParams.get('type')).toBe('signinPasswordless');
    expect(link.searchParams.get('redirectTo')).toBe(`${CLIENT_URL}/signed-in?tab=home`);
    const [user] = await server.database.query<{ password_hash: string | null; name: string; email_verified: boolean }>(
      "SELECT password_hash, name, email_verified FROM users WHERE email = 'magic@example.com'",
    );
    expect(user).toEqual({ password_hash: null, name: 'Magic', email_verified: false });

    const landing = await follow(link.toString());
    expect(landing.origin + landing.pathname).toBe(`${CLIENT_URL}/signed-in`);
    expect(landing.searchParams.get('tab')).toBe('home');
    expect(landing.searchParams.get('type')).toBe('signinPasswordless');
    const session = await authPost<{ user: { email: string; emailVerified: boolean } }>(server.url, '/token', {
      refreshToken: landing.searchParams.get('refreshToken'),
    });
    expect(session.status).toBe(200);
    expect(session.body.user).toMatchObject({ email: 'magic@example.com', emailVerified: true });

    // Once only.
    expect((await follow(link.toString())).searchParams.get('error')).toBe('invalid-ticket');
  });

  it('signs in an existing account through the magic-link alias, which takes the same body', async () => {
    const first = await magicLink('alias@example.com', {}, '/signin/magic-link');
    await follow(first);
    const second = await magicLink('alias@example.com', {}, '/signin/magic-link');
    const landing = await follow(second);
    expect(landing.origin).toBe(CLIENT_URL);
    expect(landing.searchParams.get('refreshToken')).toMatch(/^[0-9a-f-]{36}$/);
    expect(await server.database.query("SELECT 1 FROM users WHERE email = 'alias@example.com'")).toHaveLength(1);
  });

  it('refuses an expired link, a disabled user, a redirect not allowed and a bad address', async () => {
    const link = await magicLink('expiring@example.com');
    await server.database.query("UPDATE auth_tickets SET expires_at = now() - interval '1 second' WHERE ticket_hash = $1", [
      createHash('sha256').update(new URL(link).searchParams.get('ticket')!).digest(),
    ]);
    expect((await follow(link)).searchParams.get('error')).toBe('invalid-ticket');

    await server.database.query("UPDATE users SET disabled = true WHERE email = 'expiring@example.com'");
    expect(await authPost(server.url, '/signin/passwordless/email', { email: 'expiring@example.com' })).toMatchObject({
      status: 401,
      body: { error: 'disabled-user' },
    });
    expect(await authPost(server.url, '/signin/passwordless/email', { email: 'new@example.com', options: { redirectTo: 'https://evil.io' } })).toMatchObject({
      status: 400,
      body: { error: 'redirectTo-not-allowed' },
    });
    expect(await server.database.query("SELECT 1 FROM users WHERE email = 'new@example.com'")).toHaveLength(0);
    expect(await authPost(server.url, '/signin/passwordless/email', { email: 'nope' })).toMatchObject({ status: 400, body: { error: 'invalid-request' } });
    expect(await authPost(server.url, '/signin/passwordless/email', {})).toMatchObject({ status: 400, body: { error: 'invalid-request' } });
  });

  it('leaves a passwordless account without a password: e-mail/password sign-in fails', async () => {
    await follow(await magicLink('nopassword@example.com'));
    expect(await authPost(server.url, '/signin/email-password', { email: 'nopassword@example.com', password: '' })).toMatchObject({
      status: 401,
      body: { error: 'invalid-email-password' },
    });
  });
});
