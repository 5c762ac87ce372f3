import type * as NhostJs from '@nhost/nhost-js' with { 'resolution-mode': 'import' };
import type * as NhostFetch from '@nhost/nhost-js/fetch' with { 'resolution-mode': 'import' };
import type * as NhostSession from '@nhost/nhost-js/session' with { 'resolution-mode': 'import' };
import { randomBytes } from 'node:crypto';
import { generate } from 'otplib';
import { GENEROUS_AUTH_LIMITS } from '../support/auth';
import { startTestServer, type TestServer } from '../support/server';

/**
 * Nhost's official JavaScript client (@nhost/nhost-js 4.3, the last release for Node 20), unchanged,
 * against Plinth: sign-up, sign-in, the user, GraphQL, refresh and sign-out.
 */
let server: TestServer;

// The package is ESM for TypeScript, and ships a CommonJS build that these compiled tests load.
const { createClient } = require('@nhost/nhost-js') as typeof NhostJs;
const { FetchError } = require('@nhost/nhost-js/fetch') as typeof NhostFetch;
const { MemoryStorage } = require('@nhost/nhost-js/session') as typeof NhostSession;
type NhostClient = NhostJs.NhostClient;

beforeAll(async () => {
  server = await startTestServer({
    ...GENEROUS_AUTH_LIMITS,
    AUTH_EMAIL_SIGNIN_EMAIL_VERIFIED_REQUIRED: 'false',
    AUTH_ANONYMOUS_USERS_ENABLED: 'true',
    AUTH_MFA_TOTP_ENABLED: 'true',
    AUTH_ENCRYPTION_KEY: randomBytes(32).toString('hex'),
  });
});
afterAll(() => server.close());

const client = (): NhostClient => createClient({ authUrl: `${server.url}/auth`, graphqlUrl: `${server.url}/v1/graphql`, storage: new MemoryStorage() });

interface SessionQuery {
  session: { role: string; user_id: string | null };
}

describe('@nhost/nhost-js against Plinth', () => {
  it('signs up, signs in, reads the user, queries GraphQL, refreshes and signs out', async () => {
    const nhost = client();
    const signUp = await nhost.auth.signUpEmailPassword({
      email: 'nhost@example.com',
      password: 'nhost client password',
      options: { displayName: 'Nhost User' },
    });
    expect(signUp.status).toBe(200);
    expect(signUp.body.session!.user).toMatchObject({ email: 'nhost@example.com', displayName: 'Nhost User', defaultRole: 'user' });
    // The client keeps the session it was answered (its middleware decodes the token).
    const stored = nhost.getUserSession();
    expect(stored?.user?.email).toBe('nhost@example.com');
    expect(stored?.decodedToken.exp).toBeGreaterThan(Date.now());
    nhost.clearSession();

    const signIn = await nhost.auth.signInEmailPassword({ email: 'nhost@example.com', password: 'nhost client password' });
    expect(signIn.status).toBe(200);
    expect(signIn.body.mfa).toBeNull();
    const session = signIn.body.session!;
    expect(nhost.getUserSession()?.accessToken).toBe(session.accessToken);

    const user = await nhost.auth.getUser();
    expect(user.body).toMatchObject({ id: session.user!.id, email: 'nhost@example.com', emailVerified: false, roles: ['user', 'me'] });

    const query = await nhost.graphql.request<SessionQuery>({ query: '{ session { role user_id } }' });
    expect(query.body.data).toEqual({ session: { role: 'user', user_id: session.user!.id } });

    const refreshed = await nhost.refreshSession(0);
    expect(refreshed?.refreshToken).toBeDefined();
    expect(refreshed!.refreshToken).not.toBe(session.refreshToken);
    expect(nhost.getUserSession()?.refreshToken).toBe(refreshed!.refreshToken);
    const again = await nhost.graphql.request<SessionQuery>({ query: '{ session { role user_id } }' });
    expect(again.body.data!.session.user_id).toBe(session.user!.id);

    const signOut = await nhost.auth.signOut({ refreshToken: refreshed!.refreshToken });
    expect(signOut.body).toBe('OK');
    nhost.clearSession();
    await expect(nhost.auth.refreshToken({ refreshToken: refreshed!.refreshToken })).rejects.toMatchObject({
      status: 401,
      body: { status: 401, error: 'invalid-refresh-token' },
    });
  });

  it('reads errors as Nhost errors', async () => {
    const nhost = client();
    const failure = await nhost.auth.signInEmailPassword({ email: 'nhost@example.com', password: 'not the password' }).catch((error: unknown) => error);
    expect(failure).toBeInstanceOf(FetchError);
    expect(failure).toMatchObject({ status: 401, body: { status: 401, error: 'invalid-email-password', message: expect.any(String) } });
    const duplicate = await nhost.auth.signUpEmailPassword({ email: 'nhost@example.com', password: 'nhost client password' }).catch((error: unknown) => error);
    expect(duplicate).toMatchObject({ status: 409, body: { error: 'email-already-in-use' } });
    expect(nhost.getUserSession()).toBeNull();
  });

  it('signs in anonymously and upgrades the account', async () => {
    const nhost = client();
    const anonymous = await nhost.auth.signInAnonymous();
    expect(anonymous.body.session!.user).toMatchObject({ isAnonymous: true, defaultRole: 'anonymous' });
    const upgrade = await nhost.auth.deanonymizeUser({ signInMethod: 'email-password', email: 'nhost-guest@example.com', password: 'nhost guest password' });
    expect(upgrade.body).toBe('OK');
    nhost.clearSession();
    const signIn = await nhost.auth.signInEmailPassword({ email: 'nhost-guest@example.com', password: 'nhost guest password' });
    expect(signIn.body.session!.user).toMatchObject({ id: anonymous.body.session!.user!.id, isAnonymous: false, defaultRole: 'user' });
  });

  it('signs out of every session', async () => {
    const nhost = client();
    const first = (await nhost.auth.signInEmailPassword({ email: 'nhost@example.com', password: 'nhost client password' })).body.session!;
    const other = client();
    const second = (await other.auth.signInEmailPassword({ email: 'nhost@example.com', password: 'nhost client password' })).body.session!;
    expect((await nhost.auth.signOut({ all: true })).body).toBe('OK');
    for (const refreshToken of [first.refreshToken, second.refreshToken]) {
      await expect(other.auth.refreshToken({ refreshToken })).rejects.toMatchObject({ status: 401 });
    }
  });

  it('turns TOTP on and off the way the client does it: activeMfaType "totp", then "" to disable', async () => {
    const nhost = client();
    await nhost.auth.signUpEmailPassword({ email: 'nhost-totp@example.com', password: 'nhost totp password' });
    const generated = await nhost.auth.changeUserMfa();
    const secret = generated.body.totpSecret;
    // An authenticator's code a step apart: each code is accepted once, and only a later step after it.
    const code = (steps: number) => generate({ secret, epoch: Math.floor(Date.now() / 1000) + steps * 30 });
    expect((await nhost.auth.verifyChangeUserMfa({ code: await code(-1), activeMfaType: 'totp' })).body).toBe('OK');
    expect((await nhost.auth.getUser()).body.activeMfaType).toBe('totp');
    const ticket = (await client().auth.signInEmailPassword({ email: 'nhost-totp@example.com', password: 'nhost totp password' })).body.mfa!.ticket;
    expect(ticket).toMatch(/^mfaTotp:/);

    // @nhost/nhost-js 4: "Use empty string to disable MFA".
    expect((await nhost.auth.verifyChangeUserMfa({ code: await code(0), activeMfaType: '' })).body).toBe('OK');
    expect((await nhost.auth.getUser()).body.activeMfaType).toBeNull();
    const signIn = await client().auth.signInEmailPassword({ email: 'nhost-totp@example.com', password: 'nhost totp password' });
    expect(signIn.body.mfa).toBeNull();
    expect(signIn.body.session!.user!.activeMfaType).toBeNull();
  });
});
