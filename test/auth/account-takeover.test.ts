import { randomBytes } from 'node:crypto';
import type http from 'node:http';
import { generate } from 'otplib';
import { AUTH_ERRORS } from '../../src/modules/auth/auth-errors';
import { RegisterUserDocument } from '../generated/graphql';
import { authCall, authPost, GENEROUS_AUTH_LIMITS, jwtPayload, linkIn } from '../support/auth';
import { graphql } from '../support/graphql';
import { expectSession, json, LocalOAuthServer, ProviderBrowser } from '../support/oauth-provider';
import { startTestServer, type TestServer } from '../support/server';
import { nextMailTo, smtpSettings, startSmtpReceiver, type SmtpReceiver } from '../support/smtp';

/**
 * Account pre-hijacking: someone registers the victim's address with a password of theirs; the
 * owner of the address later proves the mailbox (a provider vouching for it, a sign-in link, a
 * password reset) and must get the account without anything the first party set on it.
 */

const AUTH_URL = 'https://auth.plinth.test/auth';
const CLIENT_URL = 'https://app.example.com';
const REDIRECT_TO = `${CLIENT_URL}/signed-in`;
const ATTACKER_PASSWORD = 'the attacker chose this';
const VICTIM_PASSWORD = 'the owner chose this one';
const CLIENTS = { github: { id: 'gh-client', secret: 'gh-secret' }, google: { id: 'google-client', secret: 'google-secret' } };
const SMS_ACCOUNT = 'AC0123456789abcdef0123456789abcdef';

/** Twilio messages the local provider accepted (To and Body). */
const texts: { To: string; Body: string }[] = [];

/** GitHub's and Google's documented OAuth endpoints and profile APIs, and Twilio's Messages API. */
function handleProvider(request: http.IncomingMessage, response: http.ServerResponse, body: string, url: URL): void {
  const [, service] = url.pathname.split('/');
  if (service === 'twilio') {
    const form = Object.fromEntries(new URLSearchParams(body)) as { To: string; Body: string };
    texts.push(form);
    return json(response, 201, { sid: 'SM1', status: 'accepted', to: form.To });
  }
  const client = CLIENTS[service as keyof typeof CLIENTS];
  if (client && url.pathname.endsWith('/authorize')) return idp.authorize(url, response, client, { pkce: true });
  if (client && url.pathname.endsWith('/token')) {
    const issued = idp.token(request, response, body, url, client, 'client_secret_post');
    if (issued) json(response, 200, { access_token: idp.accessToken(issued.consent), token_type: 'bearer' });
    return;
  }
  const consent = idp.bearer(request);
  if (!consent) return json(response, 401, { message: 'Bad credentials' });
  if (url.pathname === '/github-api/user') return json(response, 200, { id: Number(consent.id), login: 'someone', name: consent.name, avatar_url: null });
  if (url.pathname === '/github-api/user/emails') return json(response, 200, [{ email: consent.email, primary: true, verified: consent.verified }]);
  if (url.pathname === '/google-api/v1/userinfo') {
    return json(response, 200, { sub: consent.id, email: consent.email, email_verified: consent.verified, name: consent.name });
  }
  json(response, 404, {});
}

const idp = new LocalOAuthServer(handleProvider);
let receiver: SmtpReceiver;
/** AUTH_EMAIL_SIGNIN_EMAIL_VERIFIED_REQUIRED on (the default): nobody signs in before the address is verified. */
let strict: TestServer;
/** AUTH_EMAIL_SIGNIN_EMAIL_VERIFIED_REQUIRED off: an account is used (sessions, factors) before its address is verified. */
let lenient: TestServer;
const strictLog: string[] = [];

function settings(): Record<string, string> {
  const provider = (name: 'GITHUB' | 'GOOGLE', service: 'github' | 'google') => ({
    [`AUTH_PROVIDER_${name}_ENABLED`]: 'true',
    [`AUTH_PROVIDER_${name}_CLIENT_ID`]: CLIENTS[service].id,
    [`AUTH_PROVIDER_${name}_CLIENT_SECRET`]: CLIENTS[service].secret,
    [`AUTH_PROVIDER_${name}_AUTH_URL`]: `${idp.url}/${service}/authorize`,
    [`AUTH_PROVIDER_${name}_TOKEN_URL`]: `${idp.url}/${service}/token`,
    [`AUTH_PROVIDER_${name}_API_URL`]: `${idp.url}/${service}-api`,
  });
  return {
    ...GENEROUS_AUTH_LIMITS,
    ...smtpSettings(receiver.port),
    ...provider('GITHUB', 'github'),
    ...provider('GOOGLE', 'google'),
    JOBS_POLL_INTERVAL_SECONDS: '1',
    AUTH_SERVER_URL: AUTH_URL,
    AUTH_CLIENT_URL: CLIENT_URL,
    AUTH_EMAIL_PASSWORDLESS_EMAIL_ENABLED: 'true',
    AUTH_ANONYMOUS_USERS_ENABLED: 'true',
    AUTH_MFA_TOTP_ENABLED: 'true',
    AUTH_ENCRYPTION_KEY: randomBytes(32).toString('hex'),
    AUTH_MFA_SMS_ENABLED: 'true',
    AUTH_SMS_PROVIDER: 'twilio',
    AUTH_SMS_GATEWAY_ACCOUNT_SID: SMS_ACCOUNT,
    AUTH_SMS_GATEWAY_AUTH_TOKEN: 'twilio-token',
    AUTH_SMS_GATEWAY_MESSAGING_SERVICE_ID: 'MG0123456789abcdef0123456789abcdef',
    AUTH_SMS_GATEWAY_API_URL: `${idp.url}/twilio`,
    AUTH_RATE_LIMIT_MFA_BURST: '1000',
    AUTH_RATE_LIMIT_SMS_BURST: '1000',
    AUTH_RATE_LIMIT_SMS_ADDRESS_BURST: '1000',
  };
}

beforeAll(async () => {
  await idp.start();
  receiver = await startSmtpReceiver();
  strict = await startTestServer({ ...settings(), LOG_LEVEL: 'warn' }, { logTo: { write: (line: string) => void strictLog.push(line) } });
  lenient = await startTestServer({ ...settings(), AUTH_EMAIL_SIGNIN_EMAIL_VERIFIED_REQUIRED: 'false' });
});
afterAll(async () => {
  await strict.close();
  await lenient.close();
  await receiver.close();
  await idp.close();
});

interface Session {
  accessToken: string;
  refreshToken: string;
  user: { id: string; email: string; emailVerified: boolean; activeMfaType: string | null; phoneNumber: string | null };
}
interface SignIn {
  session: Session | null;
  mfa: { ticket: string } | null;
}

function expectAuthError(response: { status: number; body: unknown }, code: keyof typeof AUTH_ERRORS): void {
  expect({ status: response.status, body: response.body }).toEqual({
    status: AUTH_ERRORS[code].status,
    body: { status: AUTH_ERRORS[code].status, error: code, message: expect.any(String) },
  });
}

let counter = 0;
const victimAddress = () => `victim${Date.now() % 100_000}-${(counter += 1)}@example.com`;
const bearer = (token: string) => ({ authorization: `Bearer ${token}` });
const signIn = (server: TestServer, email: string, password: string) => authPost<SignIn>(server.url, '/signin/email-password', { email, password });
const browserOf = (server: TestServer) => new ProviderBrowser(() => server.url, AUTH_URL);

/** The owner signs in with `provider`, which vouches for the address: the session it ends in. */
async function ownerSignsInWith(server: TestServer, provider: 'github' | 'google', email: string): Promise<Session> {
  idp.newConsent({ email, verified: true, name: 'The Owner' });
  const browser = browserOf(server);
  return (await browser.session(expectSession((await browser.dance(provider, REDIRECT_TO)).final, REDIRECT_TO))) as unknown as Session;
}

/** A GET of a mailed link (its AUTH_SERVER_URL mapped to the server): where it redirects. */
async function follow(server: TestServer, link: string): Promise<URL> {
  const response = await fetch(link.replace(AUTH_URL, `${server.url}/auth`), { redirect: 'manual' });
  expect(response.status).toBe(302);
  return new URL(response.headers.get('location')!);
}

/** The link of the next mail to `address` that leads to /verify. */
async function mailedLink(address: string): Promise<string> {
  return linkIn((await nextMailTo(receiver, address)).parsed.text, `${AUTH_URL}/verify`);
}

/** The owner asks for a sign-in link and follows it: the session of the redirect. */
async function ownerFollowsMagicLink(server: TestServer, email: string): Promise<Session> {
  expect(await authPost(server.url, '/signin/passwordless/email', { email })).toMatchObject({ status: 200, body: 'OK' });
  const landing = await follow(server, await mailedLink(email));
  expect(landing.searchParams.get('error')).toBeNull();
  const refreshed = await authPost<Session>(server.url, '/token', { refreshToken: landing.searchParams.get('refreshToken') });
  expect(refreshed.status).toBe(200);
  return refreshed.body;
}

/** The attacker signs up with the victim's address and their own password; the mail it sends goes to the victim, unread. */
async function attackerSignsUp(server: TestServer, email: string): Promise<{ session: Session | null }> {
  const signedUp = await authPost<{ session: Session | null }>(server.url, '/signup/email-password', { email, password: ATTACKER_PASSWORD });
  expect(signedUp.status).toBe(200);
  if (server === strict) await nextMailTo(receiver, email);
  return signedUp.body;
}

describe('with verified addresses required (the default)', () => {
  it('OAuth: an account registered through registerUser loses the password its registrant set when the owner signs in with a provider', async () => {
    const email = victimAddress();
    const registered = await graphql(strict.graphqlUrl, RegisterUserDocument, { input: { email, password: ATTACKER_PASSWORD, name: 'Mallory' } });
    expect(registered.body.data!.registerUser.success).toBe(true);
    expectAuthError(await signIn(strict, email, ATTACKER_PASSWORD), 'unverified-user');

    const owner = await ownerSignsInWith(strict, 'github', email);
    expect(owner.user).toMatchObject({ id: registered.body.data!.registerUser.user!.id, email, emailVerified: true });
    // The registrant's password no longer opens the account it would now open as verified.
    expectAuthError(await signIn(strict, email, ATTACKER_PASSWORD), 'invalid-email-password');
    const [row] = await strict.database.query<{ password_hash: string | null }>('SELECT password_hash FROM users WHERE id = $1', [owner.user.id]);
    expect(row.password_hash).toBeNull();

    // Recorded: who, how, what was cleared; never the hash.
    const line = strictLog.find((entry) => entry.includes(owner.user.id) && entry.includes('took over'));
    expect(JSON.parse(line!)).toMatchObject({ level: 40, userId: owner.user.id, proof: 'provider:github', cleared: { password: true, sessions: 0 } });
    expect(line).not.toContain('$argon2');
  });

  it('magic link: the sign-up password and the tickets its author asked for go when the owner signs in with a link', async () => {
    const email = victimAddress();
    await attackerSignsUp(strict, email);
    expectAuthError(await signIn(strict, email, ATTACKER_PASSWORD), 'unverified-user');
    // A reset the attacker asked for: its mail went to the owner, who does not use it.
    expect(await authPost(strict.url, '/user/password/reset', { email })).toMatchObject({ status: 200 });
    const unusedReset = await mailedLink(email);

    const owner = await ownerFollowsMagicLink(strict, email);
    expect(owner.user).toMatchObject({ email, emailVerified: true });
    expectAuthError(await signIn(strict, email, ATTACKER_PASSWORD), 'invalid-email-password');
    expect(await strict.database.query('SELECT kind FROM auth_tickets WHERE user_id = $1', [owner.user.id])).toEqual([]);
    expect((await follow(strict, unusedReset)).searchParams.get('error')).toBe('invalid-ticket');
    expect(strictLog.some((entry) => entry.includes(owner.user.id) && entry.includes('"proof":"magic-link"'))).toBe(true);
  });

  it('verification mail: it confirms the sign-up it was sent for, password included, and says so to whoever did not sign up', async () => {
    const email = victimAddress();
    await authPost(strict.url, '/signup/email-password', { email, password: VICTIM_PASSWORD });
    const mail = await nextMailTo(receiver, email);
    const text = mail.parsed.text!.replace(/\s+/g, ' ');
    expect(text).toContain('the account opens with the password chosen then');
    expect(text).toContain('If you did not sign up, do not follow the link');
    const landing = await follow(strict, linkIn(mail.parsed.text, `${AUTH_URL}/verify`));
    expect(landing.searchParams.get('type')).toBe('emailVerify');
    expect((await signIn(strict, email, VICTIM_PASSWORD)).status).toBe(200);
  });

  it('a disabled account is refused as before, nothing cleared and nothing logged as taken over', async () => {
    const email = victimAddress();
    const signedUp = await attackerSignsUp(strict, email);
    expect(signedUp.session).toBeNull();
    await strict.database.query('UPDATE users SET disabled = true WHERE lower(email) = $1', [email]);
    idp.newConsent({ email, verified: true, name: 'The Owner' });
    const browser = browserOf(strict);
    expect((await browser.dance('github', REDIRECT_TO)).final.searchParams.get('error')).toBe('disabled-user');
    const [row] = await strict.database.query<{ id: string; password_hash: string | null; email_verified: boolean }>(
      'SELECT id, password_hash, email_verified FROM users WHERE lower(email) = $1',
      [email],
    );
    expect(row).toMatchObject({ password_hash: expect.stringMatching(/^\$argon2id\$/), email_verified: false });
    expect(strictLog.some((entry) => entry.includes(row.id))).toBe(false);
  });

  it('a verified account is linked as before: its password stays', async () => {
    const email = victimAddress();
    await authPost(strict.url, '/signup/email-password', { email, password: VICTIM_PASSWORD });
    await follow(strict, await mailedLink(email));
    const owner = await ownerSignsInWith(strict, 'google', email);
    expect((await signIn(strict, email, VICTIM_PASSWORD)).body.session!.user.id).toBe(owner.user.id);
  });
});

describe('with unverified accounts usable (AUTH_EMAIL_SIGNIN_EMAIL_VERIFIED_REQUIRED=false)', () => {
  /** The attacker's account under the victim's address, used as an owner would: a session, TOTP on, a phone, an address change pending. */
  async function attackerSettlesIn(email: string) {
    const { session } = await attackerSignsUp(lenient, email);
    const attacker = session!;
    const generated = await authPost<{ totpSecret: string }>(lenient.url, '/mfa/totp/generate', undefined, bearer(attacker.accessToken));
    const totpSecret = generated.body.totpSecret;
    expect((await authPost(lenient.url, '/mfa/totp/activate', { code: await generate({ secret: totpSecret }) }, bearer(attacker.accessToken))).status).toBe(
      200,
    );
    const phone = `+1415555${String(counter).padStart(4, '0')}`;
    expect((await authPost(lenient.url, '/user/phone', { phoneNumber: phone }, bearer(attacker.accessToken))).status).toBe(200);
    const code = /(\d{6})/.exec(texts.filter((text) => text.To === phone).at(-1)!.Body)![1];
    expect((await authPost(lenient.url, '/user/phone/verify', { code }, bearer(attacker.accessToken))).status).toBe(200);
    const attackerMailbox = `mallory${counter}@evil.example`;
    expect((await authPost(lenient.url, '/user/email/change', { newEmail: attackerMailbox }, bearer(attacker.accessToken))).status).toBe(200);
    const emailChange = await mailedLink(attackerMailbox);
    return { attacker, totpSecret, phone, emailChange };
  }

  /** Nothing the attacker holds opens the account any more. */
  async function expectLockedOut(email: string, attacker: Session, emailChange: string, owner: Session): Promise<void> {
    expectAuthError(await signIn(lenient, email, ATTACKER_PASSWORD), 'invalid-email-password');
    expectAuthError(await authPost(lenient.url, '/token', { refreshToken: attacker.refreshToken }), 'invalid-refresh-token');
    // The attacker's access token lives on until it expires, but its session has ended: it changes nothing.
    expectAuthError(
      await authPost(lenient.url, '/user/password', { newPassword: 'the attacker tries again' }, bearer(attacker.accessToken)),
      'unauthenticated-user',
    );
    expectAuthError(
      await authPost(lenient.url, '/user/email/change', { newEmail: 'again@evil.example' }, bearer(attacker.accessToken)),
      'unauthenticated-user',
    );
    expectAuthError(await authPost(lenient.url, '/mfa/totp/generate', undefined, bearer(attacker.accessToken)), 'unauthenticated-user');
    expectAuthError(await authPost(lenient.url, '/user/phone', { phoneNumber: '+14155550199' }, bearer(attacker.accessToken)), 'unauthenticated-user');
    // The address change the attacker started does not move the account to their mailbox.
    expect((await follow(lenient, emailChange)).searchParams.get('error')).toBe('invalid-ticket');
    const [row] = await lenient.database.query<Record<string, unknown>>(
      'SELECT email, new_email, active_mfa_type, totp_secret_sealed, phone_number, phone_number_verified FROM users WHERE id = $1',
      [owner.user.id],
    );
    expect(row).toEqual({ email, new_email: null, active_mfa_type: null, totp_secret_sealed: null, phone_number: null, phone_number_verified: false });
    // The owner's own session may change the account.
    expect((await authPost(lenient.url, '/mfa/totp/generate', undefined, bearer(owner.accessToken))).status).toBe(200);
  }

  it('OAuth: the owner signs in without the attacker second factor, and the attacker keeps no session, factor, phone or pending change', async () => {
    const email = victimAddress();
    const { attacker, emailChange } = await attackerSettlesIn(email);

    // Without the clean-up the owner would be asked for the attacker's TOTP code.
    const owner = await ownerSignsInWith(lenient, 'github', email);
    expect(owner.user).toMatchObject({ id: attacker.user.id, emailVerified: true, activeMfaType: null, phoneNumber: null });
    await expectLockedOut(email, attacker, emailChange, owner);
    const [row] = await lenient.database.query<{ password_hash: string | null }>('SELECT password_hash FROM users WHERE id = $1', [owner.user.id]);
    expect(row.password_hash).toBeNull();
  });

  it('password reset: the owner sets a password through the mailed ticket and the attacker factors, sessions and change go', async () => {
    const email = victimAddress();
    const { attacker, emailChange } = await attackerSettlesIn(email);

    expect(await authPost(lenient.url, '/user/password/reset', { email })).toMatchObject({ status: 200 });
    const ticket = new URL(await mailedLink(email)).searchParams.get('ticket');
    expect(await authPost(lenient.url, '/user/password', { ticket, newPassword: VICTIM_PASSWORD })).toMatchObject({ status: 200 });
    const signedIn = await signIn(lenient, email, VICTIM_PASSWORD);
    // Not an MFA ticket for the attacker's TOTP: a session.
    expect(signedIn.body.mfa).toBeNull();
    const owner = signedIn.body.session!;
    expect(owner.user).toMatchObject({ id: attacker.user.id, emailVerified: true, activeMfaType: null });
    await expectLockedOut(email, attacker, emailChange, owner);
  });

  it('magic link: an account an anonymous user upgraded to the victim address loses that password and session', async () => {
    const email = victimAddress();
    const anonymous = await authPost<{ session: Session }>(lenient.url, '/signin/anonymous', {});
    const upgraded = await authPost(
      lenient.url,
      '/user/deanonymize',
      { signInMethod: 'email-password', email, password: ATTACKER_PASSWORD },
      bearer(anonymous.body.session.accessToken),
    );
    expect(upgraded.status).toBe(200);
    const attacker = (await signIn(lenient, email, ATTACKER_PASSWORD)).body.session!;

    const owner = await ownerFollowsMagicLink(lenient, email);
    expect(owner.user.id).toBe(anonymous.body.session.user.id);
    expectAuthError(await signIn(lenient, email, ATTACKER_PASSWORD), 'invalid-email-password');
    expectAuthError(await authPost(lenient.url, '/token', { refreshToken: attacker.refreshToken }), 'invalid-refresh-token');
  });

  it('OAuth: a provider that did not verify the address leaves no link behind once the owner proves it with another', async () => {
    const email = victimAddress();
    // The attacker's Google account claims the address without verifying it: an account is made for it.
    const claimed = idp.newConsent({ email, verified: false, name: 'Mallory' });
    const browser = browserOf(lenient);
    const attacker = (await browser.session(expectSession((await browser.dance('google', REDIRECT_TO)).final, REDIRECT_TO))) as unknown as Session;
    expect(attacker.user).toMatchObject({ email, emailVerified: false });

    const owner = await ownerSignsInWith(lenient, 'github', email);
    expect(owner.user.id).toBe(attacker.user.id);
    const listed = await authCall<{ providers: { provider: string }[] }>(lenient.url, 'GET', '/user/providers', undefined, bearer(owner.accessToken));
    expect(listed.body.providers.map((entry) => entry.provider)).toEqual(['github']);
    // The attacker's Google account no longer signs in to it.
    idp.consent(claimed);
    expect((await browser.dance('google', REDIRECT_TO)).final.searchParams.get('error')).toBe('unverified-email');
  });

  it('access tokens carry their session, which must live for a change of the account', async () => {
    const { session } = await attackerSignsUp(lenient, victimAddress());
    expect(jwtPayload(session!.accessToken).sid).toEqual(expect.stringMatching(/^[0-9a-f-]{36}$/));
    const refreshed = await authPost<Session>(lenient.url, '/token', { refreshToken: session!.refreshToken });
    expect(jwtPayload(refreshed.body.accessToken).sid).toBe(jwtPayload(session!.accessToken).sid);
    expect(await authPost(lenient.url, '/signout', { refreshToken: refreshed.body.refreshToken })).toMatchObject({ status: 200 });
    expectAuthError(await authPost(lenient.url, '/mfa/totp/generate', undefined, bearer(refreshed.body.accessToken)), 'unauthenticated-user');
    // Reading the user is not a change: the token serves until it expires.
    expect((await authCall(lenient.url, 'GET', '/user', undefined, bearer(refreshed.body.accessToken))).status).toBe(200);
  });
});
