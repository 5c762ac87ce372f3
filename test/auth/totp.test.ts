import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseEnv } from 'node:util';
import { generate } from 'otplib';
import { SecretBox } from '../../src/common/encryption';
import { ConfigError, loadConfig } from '../../src/config';
import { withDevelopmentSecrets } from '../../src/config/dev-secrets';
import { AUTH_ERRORS } from '../../src/modules/auth/auth-errors';
import { authCall, authPost, GENEROUS_AUTH_LIMITS, jwtPayload } from '../support/auth';
import { CLAIMS_NAMESPACE, startTestServer, testEnvironment, type TestServer } from '../support/server';
import { runCli } from '../support/spawn';

interface Session {
  accessToken: string;
  refreshToken: string;
  user: { id: string; email: string; activeMfaType: string | null };
}
interface SignIn {
  session: Session | null;
  mfa: { ticket: string } | null;
}

const ENCRYPTION_KEY = randomBytes(32).toString('hex');
const PASSWORD = 'a sound passphrase';
const MAX_ATTEMPTS_PER_TICKET = 3;
const MFA_BURST_PER_USER = 7;
const STEP = 30;

let server: TestServer;
let counter = 0;

beforeAll(async () => {
  server = await startTestServer({
    ...GENEROUS_AUTH_LIMITS,
    AUTH_EMAIL_SIGNIN_EMAIL_VERIFIED_REQUIRED: 'false',
    AUTH_MFA_TOTP_ENABLED: 'true',
    AUTH_MFA_TOTP_ISSUER: 'Plinth Test',
    AUTH_ENCRYPTION_KEY: ENCRYPTION_KEY,
    AUTH_MFA_REQUIRED_ROLES: 'admin',
    AUTH_MFA_MAX_ATTEMPTS_PER_TICKET: String(MAX_ATTEMPTS_PER_TICKET),
    AUTH_RATE_LIMIT_MFA_BURST: String(MFA_BURST_PER_USER),
    AUTH_RATE_LIMIT_MFA_INTERVAL_SECONDS: '600',
    AUTH_ANONYMOUS_USERS_ENABLED: 'true',
  });
});
afterAll(async () => {
  await server.close();
});

function expectAuthError(response: { status: number; body: unknown }, code: keyof typeof AUTH_ERRORS): void {
  expect({ status: response.status, body: response.body }).toEqual({
    status: AUTH_ERRORS[code].status,
    body: { status: AUTH_ERRORS[code].status, error: code, message: expect.any(String) },
  });
}

const now = () => Math.floor(Date.now() / 1000);
/** The code of `secret` `steps` time steps from now (RFC 6238, computed by otplib as an authenticator app does). */
const codeAt = (secret: string, steps = 0) => generate({ secret, epoch: now() + steps * STEP });
const auth = (accessToken: string) => ({ authorization: `Bearer ${accessToken}` });

async function signUp(options: Record<string, unknown> = {}): Promise<Session> {
  const email = `totp${(counter += 1)}@example.com`;
  const response = await authPost<{ session: Session }>(server.url, '/signup/email-password', { email, password: PASSWORD, options });
  expect(response.status).toBe(200);
  return response.body.session;
}

const signIn = (email: string) => authPost<SignIn>(server.url, '/signin/email-password', { email, password: PASSWORD });
const signInTotp = (ticket: string, otp: string) => authPost<SignIn>(server.url, '/signin/mfa/totp', { ticket, otp });

/** A user with TOTP on, activated with the code of the previous step (one step of skew), and its secret. */
async function enrolledUser(options: Record<string, unknown> = {}): Promise<{ session: Session; secret: string }> {
  const session = await signUp(options);
  const generated = await authPost<{ totpSecret: string }>(server.url, '/mfa/totp/generate', undefined, auth(session.accessToken));
  expect(generated.status).toBe(200);
  const secret = generated.body.totpSecret;
  const activated = await authPost(server.url, '/mfa/totp/activate', { code: await codeAt(secret, -1) }, auth(session.accessToken));
  expect(activated.status).toBe(200);
  return { session, secret };
}

async function ticketFor(email: string): Promise<string> {
  const response = await signIn(email);
  expect(response.status).toBe(200);
  expect(response.body.session).toBeNull();
  return response.body.mfa!.ticket;
}

describe('enrolment', () => {
  it('generates a base32 secret and a PNG QR code of its otpauth URI, kept encrypted until activated by a valid code', async () => {
    const session = await signUp();
    const generated = await authPost<{ totpSecret: string; qrCodeDataUrl: string; imageUrl: string }>(
      server.url,
      '/mfa/totp/generate',
      undefined,
      auth(session.accessToken),
    );
    expect(generated.status).toBe(200);
    const { totpSecret, qrCodeDataUrl, imageUrl } = generated.body;
    expect(totpSecret).toMatch(/^[A-Z2-7]{32}$/);
    expect(qrCodeDataUrl).toMatch(/^data:image\/png;base64,/);
    const png = Buffer.from(qrCodeDataUrl.split(',')[1], 'base64');
    expect(png.subarray(0, 8)).toEqual(Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]));
    expect(imageUrl).toBe(qrCodeDataUrl);

    // The row holds the secret sealed with AUTH_ENCRYPTION_KEY, bound to the user: never the secret itself.
    const [row] = await server.database.query<{ totp_secret_sealed: Buffer; active_mfa_type: string | null }>(
      'SELECT totp_secret_sealed, active_mfa_type FROM users WHERE id = $1',
      [session.user.id],
    );
    expect(row.active_mfa_type).toBeNull();
    expect(row.totp_secret_sealed.includes(Buffer.from(totpSecret))).toBe(false);
    expect(row.totp_secret_sealed.toString('latin1')).not.toContain(totpSecret);
    const box = new SecretBox(ENCRYPTION_KEY);
    expect(box.open(row.totp_secret_sealed, session.user.id)).toBe(totpSecret);
    expect(box.open(row.totp_secret_sealed, '00000000-0000-0000-0000-000000000000')).toBeNull();
    expect(new SecretBox(randomBytes(32).toString('hex')).open(row.totp_secret_sealed, session.user.id)).toBeNull();

    // Until activation sign-in needs no second factor.
    expect((await signIn(session.user.email)).body.session).not.toBeNull();

    const wrong = await authPost(server.url, '/mfa/totp/activate', { code: '000000' }, auth(session.accessToken));
    expectAuthError(wrong, 'invalid-otp');
    const notDigits = await authPost(server.url, '/mfa/totp/activate', { code: 'abcdef' }, auth(session.accessToken));
    expectAuthError(notDigits, 'invalid-otp');
    const activated = await authPost(server.url, '/mfa/totp/activate', { code: await codeAt(totpSecret) }, auth(session.accessToken));
    expect(activated).toMatchObject({ status: 200, body: 'OK' });
    const user = await authCall<{ activeMfaType: string }>(server.url, 'GET', '/user', undefined, auth(session.accessToken));
    expect(user.body.activeMfaType).toBe('totp');

    // Active: a new secret would lock the user out of the one the app has.
    expectAuthError(await authPost(server.url, '/mfa/totp/generate', undefined, auth(session.accessToken)), 'totp-already-active');
    expectAuthError(await authPost(server.url, '/mfa/totp/activate', { code: await codeAt(totpSecret) }, auth(session.accessToken)), 'totp-already-active');
  });

  it("answers Nhost's GET generate and POST /user/mfa activation", async () => {
    const session = await signUp();
    const generated = await authCall<{ totpSecret: string; imageUrl: string }>(server.url, 'GET', '/mfa/totp/generate', undefined, auth(session.accessToken));
    expect(generated.status).toBe(200);
    const activated = await authPost(
      server.url,
      '/user/mfa',
      { code: await codeAt(generated.body.totpSecret), activeMfaType: 'totp' },
      auth(session.accessToken),
    );
    expect(activated).toMatchObject({ status: 200, body: 'OK' });
    expect((await signIn(session.user.email)).body.mfa!.ticket).toMatch(/^mfaTotp:/);
  });

  it('refuses without a bearer token, for anonymous users, and without a generated secret', async () => {
    expectAuthError(await authPost(server.url, '/mfa/totp/generate', undefined), 'unauthenticated-user');
    expectAuthError(await authPost(server.url, '/mfa/totp/activate', { code: '123456' }), 'unauthenticated-user');
    expectAuthError(await authPost(server.url, '/mfa/totp/generate', undefined, { authorization: 'Bearer not.a.token' }), 'unauthenticated-user');

    const anonymous = await authPost<{ session: Session }>(server.url, '/signin/anonymous', {});
    expectAuthError(await authPost(server.url, '/mfa/totp/generate', undefined, auth(anonymous.body.session.accessToken)), 'forbidden-anonymous');

    const session = await signUp();
    expectAuthError(await authPost(server.url, '/mfa/totp/activate', { code: '123456' }, auth(session.accessToken)), 'no-totp-secret');
    expectAuthError(await authPost(server.url, '/user/mfa', { code: '123456', activeMfaType: null }, auth(session.accessToken)), 'mfa-type-not-found');
    const badType = await authPost(server.url, '/user/mfa', { code: '123456', activeMfaType: 'sms' }, auth(session.accessToken));
    expectAuthError(badType, 'invalid-request');
    expectAuthError(await authPost(server.url, '/mfa/totp/activate', {}, auth(session.accessToken)), 'invalid-request');
  });
});

describe('sign-in with TOTP', () => {
  it('answers an mfaTotp ticket, then the same session as password sign-in for a current code; the ticket works once', async () => {
    const { session, secret } = await enrolledUser();
    const ticket = await ticketFor(session.user.email);
    expect(ticket).toMatch(/^mfaTotp:[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/);

    const signedIn = await signInTotp(ticket, await codeAt(secret));
    expect(signedIn.status).toBe(200);
    expect(signedIn.body.mfa).toBeNull();
    const claims = jwtPayload(signedIn.body.session!.accessToken)[CLAIMS_NAMESPACE] as Record<string, unknown>;
    expect(claims).toMatchObject({ 'x-gql-user-id': session.user.id, 'x-gql-default-role': 'user', 'x-gql-allowed-roles': ['user', 'me'] });
    expect(signedIn.body.session!.user).toMatchObject({ id: session.user.id, activeMfaType: 'totp' });
    // The refresh token is a real session.
    expect((await authPost(server.url, '/token', { refreshToken: signedIn.body.session!.refreshToken })).status).toBe(200);

    // Used: neither the same code nor a new one opens it again.
    expectAuthError(await signInTotp(ticket, await codeAt(secret, 1)), 'invalid-ticket');
  });

  it('refuses a code already accepted (replay), even with a new ticket, and codes older than it', async () => {
    const { session, secret } = await enrolledUser();
    const code = await codeAt(secret);
    expect((await signInTotp(await ticketFor(session.user.email), code)).status).toBe(200);
    const replayTicket = await ticketFor(session.user.email);
    expectAuthError(await signInTotp(replayTicket, code), 'invalid-otp');
    // The activation's code (the previous step) is older still.
    expectAuthError(await signInTotp(replayTicket, await codeAt(secret, -1)), 'invalid-otp');
    // The ticket survived the wrong codes: the next step's code (one step of skew ahead) opens it.
    expect((await signInTotp(replayTicket, await codeAt(secret, 1))).status).toBe(200);
  });

  it('accepts one step of clock skew either way, not two', async () => {
    // enrolledUser activated with the previous step's code; here a fresh user tries the far ones first.
    const session = await signUp();
    const generated = await authPost<{ totpSecret: string }>(server.url, '/mfa/totp/generate', undefined, auth(session.accessToken));
    const secret = generated.body.totpSecret;
    expectAuthError(await authPost(server.url, '/mfa/totp/activate', { code: await codeAt(secret, -2) }, auth(session.accessToken)), 'invalid-otp');
    expectAuthError(await authPost(server.url, '/mfa/totp/activate', { code: await codeAt(secret, 2) }, auth(session.accessToken)), 'invalid-otp');
    expect((await authPost(server.url, '/mfa/totp/activate', { code: await codeAt(secret, -1) }, auth(session.accessToken))).status).toBe(200);
    const ticket = await ticketFor(session.user.email);
    expectAuthError(await signInTotp(ticket, await codeAt(secret, 2)), 'invalid-otp');
    expect((await signInTotp(ticket, await codeAt(secret, 1))).status).toBe(200);
  });

  it('voids a ticket after its wrong codes, and limits wrong codes per user across tickets', async () => {
    const { session, secret } = await enrolledUser();
    const first = await ticketFor(session.user.email);
    for (let attempt = 0; attempt < MAX_ATTEMPTS_PER_TICKET; attempt += 1) {
      expectAuthError(await signInTotp(first, '000000'), 'invalid-otp');
    }
    // The right code no longer helps with that ticket.
    expectAuthError(await signInTotp(first, await codeAt(secret)), 'invalid-ticket');

    // The user's limit counts every code presented, whichever ticket: the activation's, the 3 above, and these.
    const second = await ticketFor(session.user.email);
    for (let attempt = 0; attempt < MFA_BURST_PER_USER - 1 - MAX_ATTEMPTS_PER_TICKET - 1; attempt += 1) {
      expectAuthError(await signInTotp(second, '000000'), 'invalid-otp');
    }
    const third = await ticketFor(session.user.email);
    expectAuthError(await signInTotp(third, '000000'), 'invalid-otp');
    const limited = await signInTotp(third, await codeAt(secret));
    expectAuthError(limited, 'too-many-requests');
    expect(Number(limited.headers.get('retry-after'))).toBeGreaterThan(0);
  });

  it('refuses an expired ticket, a forged one, one of another kind, and a disabled user', async () => {
    const { session, secret } = await enrolledUser();
    const ticket = await ticketFor(session.user.email);
    await server.database.query("UPDATE auth_tickets SET expires_at = now() - interval '1 second' WHERE user_id = $1", [session.user.id]);
    expectAuthError(await signInTotp(ticket, await codeAt(secret)), 'invalid-ticket');
    expectAuthError(await signInTotp('mfaTotp:00000000-0000-4000-8000-000000000000', await codeAt(secret)), 'invalid-ticket');
    expectAuthError(await signInTotp(ticket.replace('mfaTotp:', 'mfaSms:'), await codeAt(secret)), 'invalid-ticket');
    expectAuthError(await authPost(server.url, '/signin/mfa/totp', { ticket }), 'invalid-request');

    const live = await ticketFor(session.user.email);
    await server.database.query('UPDATE users SET disabled = true WHERE id = $1', [session.user.id]);
    expectAuthError(await signInTotp(live, await codeAt(secret)), 'disabled-user');
  });

  it('is turned off only with a current code; sign-in then answers a session at once', async () => {
    const { session, secret } = await enrolledUser();
    const off = (code: string) => authPost(server.url, '/user/mfa', { code, activeMfaType: null }, auth(session.accessToken));
    expectAuthError(await off('000000'), 'invalid-otp');
    expect(await off(await codeAt(secret))).toMatchObject({ status: 200, body: 'OK' });
    const [row] = await server.database.query<{ totp_secret_sealed: Buffer | null; active_mfa_type: string | null }>(
      'SELECT totp_secret_sealed, active_mfa_type FROM users WHERE id = $1',
      [session.user.id],
    );
    expect(row).toEqual({ totp_secret_sealed: null, active_mfa_type: null });
    const signedIn = await signIn(session.user.email);
    expect(signedIn.body.mfa).toBeNull();
    expect(signedIn.body.session).not.toBeNull();
  });

  it('is turned off by Nhost\'s forms of the body too: activeMfaType "" (its client\'s), or none', async () => {
    for (const body of [(code: string) => ({ code, activeMfaType: '' }), (code: string) => ({ code })]) {
      const { session, secret } = await enrolledUser();
      expectAuthError(await authPost(server.url, '/user/mfa', body('000000'), auth(session.accessToken)), 'invalid-otp');
      expect(await authPost(server.url, '/user/mfa', body(await codeAt(secret)), auth(session.accessToken))).toMatchObject({ status: 200, body: 'OK' });
      const [row] = await server.database.query<{ active_mfa_type: string | null }>('SELECT active_mfa_type FROM users WHERE id = $1', [session.user.id]);
      expect(row.active_mfa_type).toBeNull();
    }
  });
});

describe('AUTH_MFA_REQUIRED_ROLES', () => {
  /** A new user whose roles an operator set (admin is never a sign-up's to ask for), signed in afresh. */
  async function operatorGrantsAdmin(roles: string[]): Promise<Session> {
    const { user } = await signUp();
    await server.database.query("UPDATE users SET allowed_roles = $2, default_role = 'admin' WHERE id = $1", [user.id, roles]);
    const signedIn = await signIn(user.email);
    expect(signedIn.status).toBe(200);
    return signedIn.body.session!;
  }

  it('withholds a required role from the tokens of a user without a second factor, and grants it once TOTP is on', async () => {
    const session = await operatorGrantsAdmin(['admin', 'user', 'me']);
    const before = jwtPayload(session.accessToken)[CLAIMS_NAMESPACE] as Record<string, unknown>;
    expect(before).toMatchObject({ 'x-gql-allowed-roles': ['user', 'me'], 'x-gql-default-role': 'user' });

    const generated = await authPost<{ totpSecret: string }>(server.url, '/mfa/totp/generate', undefined, auth(session.accessToken));
    expect((await authPost(server.url, '/mfa/totp/activate', { code: await codeAt(generated.body.totpSecret) }, auth(session.accessToken))).status).toBe(200);
    const refreshed = await authPost<Session>(server.url, '/token', { refreshToken: session.refreshToken });
    const after = jwtPayload(refreshed.body.accessToken)[CLAIMS_NAMESPACE] as Record<string, unknown>;
    expect(after).toMatchObject({ 'x-gql-allowed-roles': ['admin', 'user', 'me'], 'x-gql-default-role': 'admin' });
  });

  it('leaves a user with only required roles the self-service role me', async () => {
    const session = await operatorGrantsAdmin(['admin']);
    const claims = jwtPayload(session.accessToken)[CLAIMS_NAMESPACE] as Record<string, unknown>;
    expect(claims).toMatchObject({ 'x-gql-allowed-roles': ['me'], 'x-gql-default-role': 'me' });
  });
});

describe('settings', () => {
  const environment = (overrides: Record<string, string>) => testEnvironment('postgres://127.0.0.1/unused', overrides);
  const problems = (overrides: Record<string, string>) => {
    try {
      loadConfig(environment(overrides));
    } catch (error) {
      if (error instanceof ConfigError) return error.problems.join('\n');
      throw error;
    }
    return '';
  };

  it('requires AUTH_ENCRYPTION_KEY in production when TOTP is on, and a well-formed one always', () => {
    expect(problems({ NODE_ENV: 'production', AUTH_MFA_TOTP_ENABLED: 'true' })).toContain('AUTH_ENCRYPTION_KEY is required');
    expect(problems({ NODE_ENV: 'production', AUTH_MFA_TOTP_ENABLED: 'true', AUTH_ENCRYPTION_KEY: ENCRYPTION_KEY })).not.toContain('AUTH_ENCRYPTION_KEY');
    expect(problems({ AUTH_ENCRYPTION_KEY: 'short' })).toMatch(/^AUTH_ENCRYPTION_KEY must be 32 random bytes/m);
    expect(problems({ AUTH_ENCRYPTION_KEY: 'short' })).not.toContain('short');
  });

  it('generates AUTH_ENCRYPTION_KEY into the data folder outside production, once, and never in production', () => {
    const folder = fs.mkdtempSync(path.join(os.tmpdir(), 'plinth-mfa-key-'));
    try {
      const settings = { PLINTH_DATA_DIR: folder, AUTH_MFA_TOTP_ENABLED: 'true' };
      const first = withDevelopmentSecrets(loadConfig(settings), () => undefined).auth.mfa.encryptionKey;
      expect(first).toMatch(/^[0-9a-f]{64}$/);
      expect(fs.statSync(path.join(folder, 'auth-encryption-key')).mode & 0o777).toBe(0o600);
      expect(withDevelopmentSecrets(loadConfig(settings), () => undefined).auth.mfa.encryptionKey).toBe(first);
      const given = withDevelopmentSecrets(loadConfig({ ...settings, AUTH_ENCRYPTION_KEY: ENCRYPTION_KEY }), () => undefined);
      expect(given.auth.mfa.encryptionKey).toBe(ENCRYPTION_KEY);
    } finally {
      fs.rmSync(folder, { recursive: true, force: true });
    }
  });

  it('refuses AUTH_MFA_REQUIRED_ROLES without TOTP, and names a bad role list or issuer', () => {
    expect(problems({ AUTH_MFA_REQUIRED_ROLES: 'admin' })).toContain('AUTH_MFA_REQUIRED_ROLES needs a second factor');
    expect(problems({ AUTH_MFA_TOTP_ENABLED: 'true', AUTH_ENCRYPTION_KEY: ENCRYPTION_KEY, AUTH_MFA_REQUIRED_ROLES: 'admin,bad role' })).toContain(
      'AUTH_MFA_REQUIRED_ROLES',
    );
    expect(problems({ AUTH_MFA_TOTP_ENABLED: 'maybe' })).toContain('AUTH_MFA_TOTP_ENABLED');
    expect(problems({ AUTH_MFA_MAX_ATTEMPTS_PER_TICKET: '0' })).toContain('AUTH_MFA_MAX_ATTEMPTS_PER_TICKET');
  });
});

describe('plinth auth mfa enable', () => {
  let folder: string;
  beforeEach(() => {
    folder = fs.mkdtempSync(path.join(os.tmpdir(), 'plinth-mfa-cli-'));
  });
  afterEach(() => fs.rmSync(folder, { recursive: true, force: true }));
  const enable = (...args: string[]) => runCli(['auth', 'mfa', 'enable', ...args], {}, folder);

  it('turns TOTP on in .env with the development key, keeping the other lines, readable only by its owner', async () => {
    const file = path.join(folder, '.env');
    fs.writeFileSync(file, '# mine\nPORT=9000\n');
    const result = await enable('--type', 'totp', '--issuer', 'Acme Inc');
    expect(result).toMatchObject({
      code: 0,
      stdout: expect.stringContaining('TOTP enabled in .env: AUTH_MFA_TOTP_ENABLED, AUTH_MFA_TOTP_ISSUER, AUTH_ENCRYPTION_KEY'),
    });
    const developmentKey = fs.readFileSync(path.join(folder, '.data', 'auth-encryption-key'), 'utf8').trim();
    expect(developmentKey).toMatch(/^[0-9a-f]{64}$/);
    expect(result.stdout).not.toContain(developmentKey);
    expect(fs.readFileSync(file, 'utf8')).toBe(
      `# mine\nPORT=9000\nAUTH_MFA_TOTP_ENABLED=true\nAUTH_MFA_TOTP_ISSUER="Acme Inc"\nAUTH_ENCRYPTION_KEY=${developmentKey}\n`,
    );
    expect(fs.statSync(file).mode & 0o777).toBe(0o600);
    expect(loadConfig(parseEnv(fs.readFileSync(file, 'utf8')) as Record<string, string>).auth.mfa).toMatchObject({
      totpEnabled: true,
      totpIssuer: 'Acme Inc',
      encryptionKey: developmentKey,
    });

    // Again: the key configured is kept.
    expect((await enable('--type', 'totp')).code).toBe(0);
    expect(fs.readFileSync(file, 'utf8')).toBe(
      `# mine\nPORT=9000\nAUTH_MFA_TOTP_ENABLED=true\nAUTH_MFA_TOTP_ISSUER="Acme Inc"\nAUTH_ENCRYPTION_KEY=${developmentKey}\n`,
    );
  });

  it('refuses another type and a bad issuer, writing nothing', async () => {
    const other = await enable('--type', 'email');
    expect(other.code).not.toBe(0);
    expect(other.stderr).toContain('Allowed choices are totp');
    const badIssuer = await enable('--type', 'totp', '--issuer', 'two\nlines');
    expect(badIssuer.code).toBe(1);
    expect(badIssuer.stderr).toContain('AUTH_MFA_TOTP_ISSUER must be one line');
    expect(fs.existsSync(path.join(folder, '.env'))).toBe(false);
  });
});
