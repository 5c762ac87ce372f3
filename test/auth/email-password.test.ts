import { createHash } from 'node:crypto';
import { verify } from '@node-rs/argon2';
import pg from 'pg';
import { PasswordHasher } from '../../src/common/passwords';
import { loadConfig } from '../../src/config';
import { AUTH_ERRORS } from '../../src/modules/auth/auth-errors';
import { authCall, authPost, GENEROUS_AUTH_LIMITS, linkIn, type AuthErrorBody } from '../support/auth';
import { startBreachList, type BreachList } from '../support/breach-list';
import { ADMIN_SECRET, startTestServer, type TestServer } from '../support/server';
import { startSmtpReceiver, type SmtpReceiver, smtpSettings, nextMailTo } from '../support/smtp';
import { bearer, signToken } from '../support/tokens';

interface Session {
  accessToken: string;
  refreshToken: string;
  user: Record<string, unknown> & { id: string; email: string };
}

const AUTH_URL = 'https://auth.plinth.test';
const CLIENT_URL = 'https://app.example.com';
const PASSWORD = 'a sound passphrase';
const BREACHED = 'password123';

let server: TestServer;
let receiver: SmtpReceiver;
let breachList: BreachList;
let counter = 0;

// This file is about passwords: its server hashes at the default cost, not the tests' cheaper one
// (TEST_PASSWORD_HASH): the timing test measures the hash, the rehash test asserts the cost.
const DEFAULT_PASSWORD_HASH = loadConfig({}).auth.passwordHash;

beforeAll(async () => {
  receiver = await startSmtpReceiver();
  breachList = await startBreachList(BREACHED);
  server = await startTestServer({
    ...GENEROUS_AUTH_LIMITS,
    ...smtpSettings(receiver.port),
    JOBS_POLL_INTERVAL_SECONDS: '1',
    AUTH_SERVER_URL: AUTH_URL,
    AUTH_CLIENT_URL: CLIENT_URL,
    AUTH_ALLOWED_REDIRECT_URLS: 'https://*.example.org/callback,myapp://auth',
    AUTH_ALLOWED_ROLES: 'user,me,editor',
    AUTH_PASSWORD_HIBP_ENABLED: 'true',
    AUTH_PASSWORD_HIBP_API_URL: breachList.url,
    AUTH_PASSWORD_HASH_MEMORY_KIB: String(DEFAULT_PASSWORD_HASH.memoryKib),
    AUTH_PASSWORD_HASH_ITERATIONS: String(DEFAULT_PASSWORD_HASH.iterations),
  });
});
afterAll(async () => {
  await server.close();
  await receiver.close();
  await breachList.close();
});

const nextEmail = () => `person${(counter += 1)}@example.com`;

function expectAuthError(response: { status: number; body: unknown }, code: keyof typeof AUTH_ERRORS): void {
  expect({ status: response.status, body: response.body }).toEqual({
    status: AUTH_ERRORS[code].status,
    body: { status: AUTH_ERRORS[code].status, error: code, message: expect.any(String) },
  });
}

/** Follows a link of a mail (under AUTH_SERVER_URL) against the test server, without following its redirect. */
async function follow(link: string): Promise<{ status: number; location: URL | null; body: unknown }> {
  const response = await fetch(link.replace(AUTH_URL, `${server.url}/auth`), { redirect: 'manual' });
  const location = response.headers.get('location');
  const text = await response.text();
  return { status: response.status, location: location ? new URL(location) : null, body: text ? (JSON.parse(text) as unknown) : null };
}

const signIn = (email: string, password = PASSWORD) =>
  authPost<{ session: Session | null; mfa: { ticket: string } | null } & AuthErrorBody>(server.url, '/signin/email-password', { email, password });
const signUp = (body: Record<string, unknown>) => authPost<{ session: Session | null } & AuthErrorBody>(server.url, '/signup/email-password', body);
const refresh = (refreshToken: string) => authPost<Session>(server.url, '/token', { refreshToken });

/** A verified account, signed in. */
async function verifiedAccount(email = nextEmail()): Promise<Session> {
  expect((await signUp({ email, password: PASSWORD })).status).toBe(200);
  const link = linkIn((await nextMailTo(receiver, email)).parsed.text, `${AUTH_URL}/verify`);
  expect((await follow(link)).status).toBe(302);
  const response = await signIn(email);
  expect(response.status).toBe(200);
  return response.body.session!;
}

describe('sign-up and verification', () => {
  it('creates the account without a session, mails a verification link, and signs in once it is followed', async () => {
    const email = nextEmail();
    const response = await signUp({
      email: `  ${email.toUpperCase()} `,
      password: PASSWORD,
      options: { displayName: 'Ada Lovelace', locale: 'fr', metadata: { plan: 'early' }, redirectTo: `${CLIENT_URL}/welcome?from=mail` },
    });
    expect(response).toMatchObject({ status: 200, body: { session: null } });
    expectAuthError(await signIn(email), 'unverified-user');

    const mail = await nextMailTo(receiver, email);
    expect(mail.parsed.subject).toMatch(/verify/i);
    expect(mail.parsed.text).toContain('Ada Lovelace');
    const link = new URL(linkIn(mail.parsed.text, `${AUTH_URL}/verify`));
    expect(link.searchParams.get('type')).toBe('emailVerify');
    expect(link.searchParams.get('ticket')).toMatch(/^verifyEmail:[0-9a-f-]{36}$/);
    expect(link.searchParams.get('redirectTo')).toBe(`${CLIENT_URL}/welcome?from=mail`);
    const [ticketRow] = await server.database.query<{ n: string }>('SELECT count(*) AS n FROM auth_tickets WHERE ticket_hash = $1', [
      createHash('sha256').update(link.searchParams.get('ticket')!).digest(),
    ]);
    expect(Number(ticketRow.n)).toBe(1);

    const followed = await follow(link.toString());
    expect(followed.status).toBe(302);
    expect(followed.location!.origin + followed.location!.pathname).toBe(`${CLIENT_URL}/welcome`);
    expect(followed.location!.searchParams.get('from')).toBe('mail');
    expect(followed.location!.searchParams.get('type')).toBe('emailVerify');
    // The link signs the user in: its refresh token gives a session.
    const session = await refresh(followed.location!.searchParams.get('refreshToken')!);
    expect(session.status).toBe(200);
    expect(session.body.user).toMatchObject({ email, displayName: 'Ada Lovelace', locale: 'fr', emailVerified: true, metadata: { plan: 'early' } });

    const signedIn = await signIn(email);
    expect(signedIn.status).toBe(200);
    expect(signedIn.body.mfa).toBeNull();
    expect(signedIn.body.session!.user.id).toBe(session.body.user.id);

    // The link works once.
    const again = await follow(link.toString());
    expect(again.status).toBe(302);
    expect(again.location!.searchParams.get('error')).toBe('invalid-ticket');
    expect(again.location!.searchParams.get('refreshToken')).toBeNull();
  });

  it('lets one of two simultaneous uses of a link through, never both', async () => {
    const email = nextEmail();
    await signUp({ email, password: PASSWORD });
    const link = linkIn((await nextMailTo(receiver, email)).parsed.text, `${AUTH_URL}/verify`);
    const results = await Promise.all([follow(link), follow(link), follow(link)]);
    const signedIn = results.filter((result) => result.location!.searchParams.get('refreshToken'));
    expect(signedIn).toHaveLength(1);
    expect(results.filter((result) => result.location!.searchParams.get('error') === 'invalid-ticket')).toHaveLength(2);
  });

  it('refuses an expired verification link, and a new link voids the previous one', async () => {
    const email = nextEmail();
    await signUp({ email, password: PASSWORD });
    const first = linkIn((await nextMailTo(receiver, email)).parsed.text, `${AUTH_URL}/verify`);
    expect(await authPost(server.url, '/user/email/send-verification-email', { email })).toMatchObject({ status: 200, body: 'OK' });
    const second = linkIn((await nextMailTo(receiver, email)).parsed.text, `${AUTH_URL}/verify`);
    expect((await follow(first)).location!.searchParams.get('error')).toBe('invalid-ticket');

    await server.database.query("UPDATE auth_tickets SET expires_at = now() - interval '1 second' WHERE kind = 'emailVerify'");
    const expired = await follow(second);
    expect(expired.location!.searchParams.get('error')).toBe('invalid-ticket');
    expectAuthError(await signIn(email), 'unverified-user');
  });

  it('answers the user with its profile: display name, gravatar, locale, roles, metadata', async () => {
    const session = await verifiedAccount();
    const response = await authCall(server.url, 'GET', '/user', undefined, bearer(session.accessToken));
    const md5 = createHash('md5').update(session.user.email).digest('hex');
    expect(response.status).toBe(200);
    expect(response.body).toEqual({
      id: session.user.id,
      createdAt: expect.stringMatching(/^\d{4}-\d\d-\d\dT/),
      displayName: session.user.email,
      avatarUrl: `https://www.gravatar.com/avatar/${md5}?r=g&default=blank`,
      locale: 'en',
      email: session.user.email,
      isAnonymous: false,
      defaultRole: 'user',
      roles: ['user', 'me'],
      metadata: {},
      emailVerified: true,
      phoneNumber: null,
      phoneNumberVerified: false,
      activeMfaType: null,
    });
  });

  it('refuses a taken address (whatever its case), a bad address, and a short or long password, creating nothing', async () => {
    const email = nextEmail();
    await signUp({ email, password: PASSWORD });
    expectAuthError(await signUp({ email: email.toUpperCase(), password: PASSWORD }), 'email-already-in-use');
    expectAuthError(await signUp({ email: 'not-an-address', password: PASSWORD }), 'invalid-request');
    expectAuthError(await signUp({ email: 'a@b@example.com', password: PASSWORD }), 'invalid-request');
    const refused = [nextEmail(), nextEmail(), nextEmail(), nextEmail()];
    const short = await signUp({ email: refused[0], password: 'seven77' });
    expectAuthError(short, 'password-too-short');
    expect(short.body.message).toContain('at least 8');
    expectAuthError(await signUp({ email: refused[1], password: 'x'.repeat(257) }), 'invalid-request');
    const missing = await signUp({ email: refused[2] });
    expectAuthError(missing, 'invalid-request');
    expect(missing.body.message).toContain('password');
    expectAuthError(await signUp({ email: refused[3], password: PASSWORD, options: { locale: 'english' } }), 'invalid-request');
    expect(await server.database.query('SELECT email FROM users WHERE email = ANY($1)', [refused])).toEqual([]);
    expect(await server.database.query('SELECT email FROM users WHERE lower(email) = $1', [email])).toHaveLength(1);
  });

  it('gives the roles asked for only within AUTH_ALLOWED_ROLES, the default among them', async () => {
    const editor = await signUp({ email: nextEmail(), password: PASSWORD, options: { defaultRole: 'editor', allowedRoles: ['editor', 'user'] } });
    expect(editor.status).toBe(200);
    const [row] = await server.database.query<{ default_role: string; allowed_roles: string[] }>(
      'SELECT default_role, allowed_roles FROM users WHERE email = $1',
      [`person${counter}@example.com`],
    );
    expect(row).toEqual({ default_role: 'editor', allowed_roles: ['editor', 'user'] });
    expectAuthError(await signUp({ email: nextEmail(), password: PASSWORD, options: { allowedRoles: ['user', 'admin'] } }), 'role-not-allowed');
    expectAuthError(await signUp({ email: nextEmail(), password: PASSWORD, options: { defaultRole: 'admin' } }), 'role-not-allowed');
    expectAuthError(
      await signUp({ email: nextEmail(), password: PASSWORD, options: { defaultRole: 'editor', allowedRoles: ['user'] } }),
      'default-role-must-be-in-allowed-roles',
    );
  });

  it('checks passwords against the breach list by the first five hex digits of their SHA-1 only, and accepts them when the list is down', async () => {
    breachList.requests.splice(0);
    const refused = await signUp({ email: nextEmail(), password: BREACHED });
    expectAuthError(refused, 'password-in-hibp-database');
    const sha1 = createHash('sha1').update(BREACHED).digest('hex').toUpperCase();
    expect(breachList.requests).toEqual([`/range/${sha1.slice(0, 5)}`]);

    breachList.failing = true;
    try {
      expect((await signUp({ email: nextEmail(), password: BREACHED })).status).toBe(200);
    } finally {
      breachList.failing = false;
    }
  });
});

describe('redirectTo', () => {
  it.each([
    ['a look-alike host', 'https://app.example.com.evil.io'],
    ['the allowed URL in the query', 'https://evil.io/?https://app.example.com'],
    ['the allowed host as credentials', 'https://app.example.com@evil.io'],
    ['another scheme', 'http://app.example.com'],
    ['another port', 'https://app.example.com:8443'],
    ['a scheme-relative URL', '//evil.io'],
    ['a script', 'javascript:alert(1)'],
    ['a wildcard over two labels', 'https://a.b.example.org/callback'],
    ['a wildcard over none', 'https://example.org/callback'],
    ['a path that only starts like the allowed one', 'https://a.example.org/callbacks'],
  ])('refuses %s (%s) with redirectTo-not-allowed, creating nothing and sending nothing', async (_name, redirectTo) => {
    const email = nextEmail();
    expectAuthError(await signUp({ email, password: PASSWORD, options: { redirectTo } }), 'redirectTo-not-allowed');
    expect(await server.database.query('SELECT 1 FROM users WHERE email = $1', [email])).toHaveLength(0);
    expectAuthError(await authPost(server.url, '/user/password/reset', { email, options: { redirectTo } }), 'redirectTo-not-allowed');
  });

  it('allows AUTH_CLIENT_URL and its sub-paths, a wildcard label, and an app scheme', async () => {
    for (const redirectTo of [CLIENT_URL, `${CLIENT_URL}/deep/path?x=1`, 'https://tenant-1.example.org/callback/done', 'myapp://auth/callback']) {
      const response = await signUp({ email: nextEmail(), password: PASSWORD, options: { redirectTo } });
      expect({ redirectTo, status: response.status }).toEqual({ redirectTo, status: 200 });
    }
  });

  it('is checked on the verification link too: a tampered redirectTo gets a 400, not a redirect, and the ticket stays usable', async () => {
    const email = nextEmail();
    await signUp({ email, password: PASSWORD });
    const link = new URL(linkIn((await nextMailTo(receiver, email)).parsed.text, `${AUTH_URL}/verify`));
    link.searchParams.set('redirectTo', 'https://evil.io/steal');
    const tampered = await follow(link.toString());
    expect(tampered).toMatchObject({ status: 400, location: null, body: { error: 'redirectTo-not-allowed' } });
    link.searchParams.delete('redirectTo');
    const followed = await follow(link.toString());
    expect(followed.location!.origin).toBe(CLIENT_URL);
    expect(followed.location!.searchParams.get('refreshToken')).toMatch(/^[0-9a-f-]{36}$/);
  });

  it('refuses a bad verify request: unknown type, missing ticket', async () => {
    expectAuthError(await authCall(server.url, 'GET', '/verify?ticket=x&type=other'), 'invalid-request');
    expectAuthError(await authCall(server.url, 'GET', '/verify?type=emailVerify'), 'invalid-request');
  });
});

describe('sign-in', () => {
  it('refuses a wrong password, an unknown address, a disabled user, a deleted user and an invited user without a password', async () => {
    const session = await verifiedAccount();
    const email = session.user.email;
    expectAuthError(await signIn(email, 'wrong password!'), 'invalid-email-password');
    expectAuthError(await signIn('nobody@example.com'), 'invalid-email-password');
    expectAuthError(await signIn(email.toUpperCase(), 'wrong password!'), 'invalid-email-password');

    await server.database.query('UPDATE users SET disabled = true WHERE id = $1', [session.user.id]);
    expectAuthError(await signIn(email), 'disabled-user');
    expectAuthError(await signIn(email, 'wrong password!'), 'invalid-email-password');
    await server.database.query('UPDATE users SET disabled = false, deleted_at = now() WHERE id = $1', [session.user.id]);
    expectAuthError(await signIn(email), 'invalid-email-password');

    await server.database.query("INSERT INTO users (email, name) VALUES ('invited@example.com', 'Invited')");
    expectAuthError(await signIn('invited@example.com', ''), 'invalid-email-password');
    expectAuthError(await signIn('invited@example.com', PASSWORD), 'invalid-email-password');
  });

  it('asks for the second factor after a mailed link too: the redirect carries an MFA ticket, not a session', async () => {
    const session = await verifiedAccount();
    await server.database.query("UPDATE users SET active_mfa_type = 'totp' WHERE id = $1", [session.user.id]);
    await authPost(server.url, '/user/password/reset', { email: session.user.email });
    const landing = await follow(linkIn((await nextMailTo(receiver, session.user.email)).parsed.text, `${AUTH_URL}/verify`));
    expect(landing.location!.searchParams.get('refreshToken')).toBeNull();
    expect(landing.location!.searchParams.get('mfaTicket')).toMatch(/^mfaTotp:[0-9a-f-]{36}$/);
    expect(landing.location!.searchParams.get('type')).toBe('passwordReset');
  });

  it('answers an MFA ticket instead of a session when the user has a second factor on', async () => {
    const session = await verifiedAccount();
    await server.database.query("UPDATE users SET active_mfa_type = 'totp' WHERE id = $1", [session.user.id]);
    const response = await signIn(session.user.email);
    expect(response.status).toBe(200);
    expect(response.body).toEqual({ session: null, mfa: { ticket: expect.stringMatching(/^mfaTotp:[0-9a-f-]{36}$/) } });
    const [row] = await server.database.query<{ kind: string; live: boolean }>(
      'SELECT kind, expires_at > now() AS live FROM auth_tickets WHERE ticket_hash = $1',
      [createHash('sha256').update(response.body.mfa!.ticket).digest()],
    );
    expect(row).toEqual({ kind: 'mfaTotp', live: true });
  });

  it('replaces a hash made at another cost at the first sign-in that proves the password, and only then', async () => {
    const session = await verifiedAccount();
    const hashOf = async () =>
      (await server.database.query<{ password_hash: string }>('SELECT password_hash FROM users WHERE id = $1', [session.user.id]))[0]!.password_hash;
    // A hash at another cost: OWASP's minimum.
    const earlier = await new PasswordHasher({ memoryKib: 19_456, iterations: 2, parallelism: 1 }).hash(PASSWORD);
    await server.database.query('UPDATE users SET password_hash = $2 WHERE id = $1', [session.user.id, earlier]);

    expect((await signIn(session.user.email, 'wrong password!')).status).toBe(401);
    expect(await hashOf()).toBe(earlier);

    const proved = await signIn(session.user.email);
    expect(proved.status).toBe(200);
    expect(proved.body.session?.user.id).toBe(session.user.id);
    const current = await hashOf();
    expect(current).toMatch(/^\$argon2id\$v=19\$m=65536,t=2,p=1\$/);
    expect(await verify(current, PASSWORD)).toBe(true);

    expect((await signIn(session.user.email)).status).toBe(200);
    expect(await hashOf()).toBe(current);
  });

  it('keeps a password changed while the sign-in that proved the old one was rehashing it', async () => {
    const session = await verifiedAccount();
    const earlier = await new PasswordHasher({ memoryKib: 19_456, iterations: 2, parallelism: 1 }).hash(PASSWORD);
    await server.database.query('UPDATE users SET password_hash = $2 WHERE id = $1', [session.user.id, earlier]);
    const changed = await new PasswordHasher({ memoryKib: 19_456, iterations: 2, parallelism: 1 }).hash('changed meanwhile!');
    // The change holds the row, uncommitted: sign-in reads the committed (old) hash, proves it, and
    // its rehash then waits for the row; the change commits while it waits.
    const other = new pg.Client({ connectionString: server.database.url });
    await other.connect();
    try {
      await other.query('BEGIN');
      await other.query('UPDATE users SET password_hash = $2 WHERE id = $1', [session.user.id, changed]);
      const signingIn = signIn(session.user.email);
      const waiting = async (): Promise<boolean> => {
        const [row] = await server.database.query<{ waiting: boolean }>(
          "SELECT count(*) > 0 AS waiting FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE 'UPDATE users SET password_hash = $3%'",
        );
        return row!.waiting;
      };
      for (let tries = 0; !(await waiting()); tries += 1) {
        if (tries > 200) throw new Error('the rehash never waited for the row');
        await new Promise((resolve) => setTimeout(resolve, 25));
      }
      await other.query('COMMIT');
      expect((await signingIn).status).toBe(200);
    } finally {
      await other.end();
    }
    const [row] = await server.database.query<{ password_hash: string }>('SELECT password_hash FROM users WHERE id = $1', [session.user.id]);
    expect(row!.password_hash).toBe(changed);
  });

  it('takes as long for an unknown address as for a wrong password (one argon2 hash each)', async () => {
    const session = await verifiedAccount();
    const timed = async (email: string) => {
      const start = process.hrtime.bigint();
      expect((await signIn(email, 'wrong password!')).status).toBe(401);
      return Number(process.hrtime.bigint() - start) / 1e6;
    };
    const known: number[] = [];
    const unknown: number[] = [];
    for (let round = 0; round < 6; round += 1) {
      known.push(await timed(session.user.email));
      unknown.push(await timed(`nobody${round}@example.com`));
    }
    // The fastest of each is its own cost, whatever else the machine was doing: a shortcut for
    // unknown addresses would answer in a small fraction of the hash's time (under a tenth), a
    // second hash in twice it.
    const ratio = Math.min(...unknown) / Math.min(...known);
    expect(ratio).toBeGreaterThan(0.5);
    expect(ratio).toBeLessThan(1.8);
  });

  it('refuses malformed bodies with invalid-request naming the field', async () => {
    const response = await authPost<AuthErrorBody>(server.url, '/signin/email-password', { email: 'a@example.com' });
    expectAuthError(response, 'invalid-request');
    expect(response.body.message).toContain('password');
    expectAuthError(await authPost(server.url, '/signin/email-password', { email: ['x'], password: 'y' }), 'invalid-request');
    expectAuthError(await authPost(server.url, '/signin/email-password', 'null'), 'invalid-request');
  });
});

describe('password reset and change', () => {
  it('mails a link that signs the user in to set a new password; the old one stops working', async () => {
    const session = await verifiedAccount();
    const email = session.user.email;
    expect(await authPost(server.url, '/user/password/reset', { email, options: { redirectTo: `${CLIENT_URL}/reset` } })).toMatchObject({
      status: 200,
      body: 'OK',
    });
    const mail = await nextMailTo(receiver, email);
    const link = new URL(linkIn(mail.parsed.text, `${AUTH_URL}/verify`));
    expect(link.searchParams.get('type')).toBe('passwordReset');
    expect(link.searchParams.get('ticket')).toMatch(/^passwordReset:/);
    const followed = await follow(link.toString());
    expect(followed.location!.pathname).toBe('/reset');
    expect(followed.location!.searchParams.get('type')).toBe('passwordReset');
    const resetSession = await refresh(followed.location!.searchParams.get('refreshToken')!);

    expect(await authPost(server.url, '/user/password', { newPassword: 'a brand new passphrase' }, bearer(resetSession.body.accessToken))).toMatchObject({
      status: 200,
      body: 'OK',
    });
    expectAuthError(await signIn(email), 'invalid-email-password');
    expect((await signIn(email, 'a brand new passphrase')).status).toBe(200);
  });

  it('sets the password with the ticket alone, once, ending every session of the account', async () => {
    const session = await verifiedAccount();
    const email = session.user.email;
    await authPost(server.url, '/user/password/reset', { email });
    const ticket = new URL(linkIn((await nextMailTo(receiver, email)).parsed.text, `${AUTH_URL}/verify`)).searchParams.get('ticket')!;
    expectAuthError(await authPost(server.url, '/user/password', { newPassword: 'short', ticket }), 'password-too-short');
    expect(await authPost(server.url, '/user/password', { newPassword: 'reset by ticket', ticket })).toMatchObject({ status: 200, body: 'OK' });
    expectAuthError(await authPost(server.url, '/user/password', { newPassword: 'reset by ticket again', ticket }), 'invalid-ticket');
    expectAuthError(await refresh(session.refreshToken), 'invalid-refresh-token');
    expect((await signIn(email, 'reset by ticket')).status).toBe(200);
    expectAuthError(
      await authPost(server.url, '/user/password', { newPassword: 'whatever it is', ticket: 'passwordReset:6f1c9e0a-4b1e-4c55-9a0e-2f8f8d7c1a11' }),
      'invalid-ticket',
    );
    expectAuthError(
      await authPost(server.url, '/user/password', { newPassword: 'whatever it is', ticket: 'verifyEmail:6f1c9e0a-4b1e-4c55-9a0e-2f8f8d7c1a11' }),
      'invalid-ticket',
    );
  });

  it('refuses an expired reset ticket', async () => {
    const session = await verifiedAccount();
    await authPost(server.url, '/user/password/reset', { email: session.user.email });
    const ticket = new URL(linkIn((await nextMailTo(receiver, session.user.email)).parsed.text, `${AUTH_URL}/verify`)).searchParams.get('ticket')!;
    await server.database.query("UPDATE auth_tickets SET expires_at = now() - interval '1 second' WHERE kind = 'passwordReset'");
    expectAuthError(await authPost(server.url, '/user/password', { newPassword: 'too late for this', ticket }), 'invalid-ticket');
    expect((await signIn(session.user.email)).status).toBe(200);
  });

  it('answers OK for an unknown address and mails nothing', async () => {
    const before = receiver.received.length;
    expect(await authPost(server.url, '/user/password/reset', { email: 'nobody-here@example.com' })).toMatchObject({ status: 200, body: 'OK' });
    await new Promise((resolve) => setTimeout(resolve, 1500));
    expect(receiver.received.slice(before).filter((mail) => mail.recipients.includes('nobody-here@example.com'))).toHaveLength(0);
  });

  it('ends every other session of the user at a change with the bearer token, which needs a sign-in within AUTH_RECENT_SIGN_IN_SECONDS', async () => {
    const session = await verifiedAccount();
    const other = (await signIn(session.user.email)).body.session!;
    expect(await authPost(server.url, '/user/password', { newPassword: 'changed while signed in' }, bearer(session.accessToken))).toMatchObject({
      status: 200,
      body: 'OK',
    });
    expectAuthError(await refresh(other.refreshToken), 'invalid-refresh-token');
    const kept = await refresh(session.refreshToken);
    expect(kept.status).toBe(200);

    // A day and a second after the sign-in (the default AUTH_RECENT_SIGN_IN_SECONDS), refreshes notwithstanding: sign in again first.
    await server.database.query("UPDATE auth_refresh_tokens SET created_at = created_at - interval '86401 seconds' WHERE user_id = $1", [session.user.id]);
    expectAuthError(
      await authPost(server.url, '/user/password', { newPassword: 'changed a day later' }, bearer(kept.body.accessToken)),
      'reauthentication-required',
    );
    expectAuthError(await authPost(server.url, '/user/email/change', { newEmail: nextEmail() }, bearer(kept.body.accessToken)), 'reauthentication-required');
    expectAuthError(await signIn(session.user.email, 'changed a day later'), 'invalid-email-password');
    const again = (await signIn(session.user.email, 'changed while signed in')).body.session!;
    expect(await authPost(server.url, '/user/password', { newPassword: 'changed after signing in again' }, bearer(again.accessToken))).toMatchObject({
      status: 200,
    });
    expect((await signIn(session.user.email, 'changed after signing in again')).status).toBe(200);
  });

  it('takes no change from a token that names no session or an unknown one; the admin secret acts for any user', async () => {
    const session = await verifiedAccount();
    const userId = session.user.id;
    const roles = { userId, roles: ['user', 'me'] };
    expectAuthError(
      await authPost(server.url, '/user/password', { newPassword: 'from a foreign token' }, bearer(signToken(roles))),
      'reauthentication-required',
    );
    expectAuthError(
      await authPost(server.url, '/user/password', { newPassword: 'from a made-up session' }, bearer(signToken({ ...roles, sessionId: 'not-a-session' }))),
      'unauthenticated-user',
    );
    const unknown = signToken({ ...roles, sessionId: '6f1c9e0a-4b1e-4c55-9a0e-2f8f8d7c1a11' });
    expectAuthError(await authPost(server.url, '/user/email/change', { newEmail: nextEmail() }, bearer(unknown)), 'unauthenticated-user');
    expect((await signIn(session.user.email)).status).toBe(200);

    const asAdmin = { 'x-gql-admin-secret': ADMIN_SECRET, 'x-gql-user-id': userId };
    expect(await authPost(server.url, '/user/password', { newPassword: 'set by the operator' }, asAdmin)).toMatchObject({ status: 200, body: 'OK' });
    expectAuthError(await refresh(session.refreshToken), 'invalid-refresh-token');
    expect((await signIn(session.user.email, 'set by the operator')).status).toBe(200);
  });

  it('refuses a change without a bearer token or ticket, and a short password', async () => {
    const session = await verifiedAccount();
    expectAuthError(await authPost(server.url, '/user/password', { newPassword: 'no credentials at all' }), 'unauthenticated-user');
    expectAuthError(await authPost(server.url, '/user/password', { newPassword: 'short' }, bearer(session.accessToken)), 'password-too-short');
    expectAuthError(await authPost(server.url, '/user/password', {}, bearer(session.accessToken)), 'invalid-request');
  });
});

describe('e-mail change', () => {
  it('mails the new address a link; following it moves the account there', async () => {
    const session = await verifiedAccount();
    const newEmail = nextEmail();
    expect(await authPost(server.url, '/user/email/change', { newEmail, options: { redirectTo: CLIENT_URL } }, bearer(session.accessToken))).toMatchObject({
      status: 200,
      body: 'OK',
    });
    const mail = await nextMailTo(receiver, newEmail);
    expect(mail.parsed.text).toContain(newEmail);
    const followed = await follow(linkIn(mail.parsed.text, `${AUTH_URL}/verify`));
    expect(followed.location!.searchParams.get('type')).toBe('emailConfirmChange');
    expectAuthError(await signIn(session.user.email), 'invalid-email-password');
    const signedIn = await signIn(newEmail);
    expect(signedIn.status).toBe(200);
    expect(signedIn.body.session!.user).toMatchObject({ id: session.user.id, email: newEmail, emailVerified: true });
  });

  it('refuses a taken or invalid address and an unauthenticated caller; an address taken meanwhile fails at the link', async () => {
    const session = await verifiedAccount();
    const other = await verifiedAccount();
    expectAuthError(await authPost(server.url, '/user/email/change', { newEmail: other.user.email }, bearer(session.accessToken)), 'email-already-in-use');
    expectAuthError(await authPost(server.url, '/user/email/change', { newEmail: 'nope' }, bearer(session.accessToken)), 'invalid-request');
    expectAuthError(await authPost(server.url, '/user/email/change', { newEmail: nextEmail() }), 'unauthenticated-user');

    const wanted = nextEmail();
    await authPost(server.url, '/user/email/change', { newEmail: wanted }, bearer(session.accessToken));
    const link = linkIn((await nextMailTo(receiver, wanted)).parsed.text, `${AUTH_URL}/verify`);
    await verifiedAccount(wanted);
    const followed = await follow(link);
    expect(followed.location!.searchParams.get('error')).toBe('email-already-in-use');
    expect((await signIn(session.user.email)).status).toBe(200);
  });

  it('answers a resend for a verified address as for any other, and mails nothing: the answer does not tell whether it is verified', async () => {
    const session = await verifiedAccount();
    const email = session.user.email;
    const before = receiver.received.length;
    expect(await authPost(server.url, '/user/email/send-verification-email', { email })).toMatchObject({ status: 200, body: 'OK' });
    expect(await authPost(server.url, '/user/email/send-verification-email', { email: 'nobody-at-all@example.com' })).toMatchObject({
      status: 200,
      body: 'OK',
    });
    await new Promise((resolve) => setTimeout(resolve, 1500));
    expect(
      receiver.received.slice(before).filter((mail) => mail.recipients.includes(email) || mail.recipients.includes('nobody-at-all@example.com')),
    ).toHaveLength(0);
  });
});
