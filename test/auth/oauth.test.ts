import { generateKeyPairSync, randomUUID } from 'node:crypto';
import { createSigner, createVerifier } from 'fast-jwt';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { parseEnv } from 'node:util';
import { sha256 } from '../../src/common/sha256';
import { ConfigError, loadConfig } from '../../src/config';
import { OAUTH_PROVIDERS, OAUTH_PROVIDER_NAMES } from '../../src/config/oauth-providers';
import { AUTH_ERRORS } from '../../src/modules/auth/auth-errors';
import { oauth1Signature } from '../../src/modules/auth/oauth1';
import { authCall, authPost, GENEROUS_AUTH_LIMITS } from '../support/auth';
import { expectSession as expectSessionAt, json, LocalOAuthServer, location, ProviderBrowser, type Consent, type Visit } from '../support/oauth-provider';
import { startTestServer, testEnvironment, type TestServer } from '../support/server';
import { runCli } from '../support/spawn';

const AUTH_URL = 'https://auth.plinth.test/auth';
const CLIENT_URL = 'https://app.example.com';
const REDIRECT_TO = 'https://app.example.com/signed-in?from=oauth';
const CLIENTS = {
  github: { id: 'gh-client', secret: 'gh-secret' },
  google: { id: 'google-client', secret: 'google-secret' },
  apple: { id: 'com.example.app', secret: '' },
  workos: { id: 'client_01WORKOS', secret: 'sk_workos' },
};
const TWITTER = { consumerKey: 'tw-consumer-key', consumerSecret: 'tw-consumer-secret' };
/** Twitter's request tokens and access tokens, with their secrets and the consent they stand for. */
const twitterTokens = new Map<string, { secret: string; callback?: string; verifier?: string; consent: Consent; access?: boolean }>();
const APPLE_KEY = generateKeyPairSync('ec', { namedCurve: 'P-256' });
const APPLE = { teamId: 'TEAM123456', keyId: 'KEY1234567' };
/** The claims of each client-secret JWT Apple's token endpoint accepted. */
const appleClientSecrets: Record<string, unknown>[] = [];

let server: TestServer;
let providerUrl: string;
const idp = new LocalOAuthServer((request, response, body, url) => handleProvider(request, response, body, url));
const browser = new ProviderBrowser(() => server.url, AUTH_URL);

/** The OAuth 1.0a header's parameters, when its HMAC-SHA1 signature is right for the consumer secret and the token's secret. */
function twitterSigned(request: http.IncomingMessage, url: URL): Record<string, string> | null {
  const header = request.headers.authorization ?? '';
  if (!header.startsWith('OAuth ')) return null;
  const parameters = Object.fromEntries(
    [...header.slice(6).matchAll(/([\w]+)="([^"]*)"/g)].map(([, name, value]) => [decodeURIComponent(name), decodeURIComponent(value)]),
  );
  if (parameters.oauth_consumer_key !== TWITTER.consumerKey || parameters.oauth_signature_method !== 'HMAC-SHA1') return null;
  const tokenSecret = parameters.oauth_token ? twitterTokens.get(parameters.oauth_token)?.secret : '';
  if (tokenSecret === undefined) return null;
  const expected = oauth1Signature(request.method!, url.toString(), parameters, TWITTER.consumerSecret, tokenSecret);
  return expected === parameters.oauth_signature ? parameters : null;
}

function twitter(request: http.IncomingMessage, response: http.ServerResponse, url: URL): void {
  const form = (values: Record<string, string>) => response.writeHead(200, { 'content-type': 'text/plain' }).end(new URLSearchParams(values).toString());
  if (url.pathname === '/twitter/oauth/authenticate') {
    const pending = twitterTokens.get(url.searchParams.get('oauth_token') ?? '');
    if (!pending?.callback) return json(response, 400, {});
    const back = new URL(pending.callback);
    if (url.searchParams.has('deny')) back.searchParams.set('denied', url.searchParams.get('oauth_token')!);
    else {
      pending.verifier = randomUUID();
      back.searchParams.set('oauth_token', url.searchParams.get('oauth_token')!);
      back.searchParams.set('oauth_verifier', pending.verifier);
    }
    return void response.writeHead(302, { location: back.toString() }).end();
  }
  const signed = twitterSigned(request, url);
  if (!signed) return json(response, 401, { errors: [{ code: 32, message: 'Could not authenticate you.' }] });
  if (url.pathname === '/twitter/oauth/request_token') {
    const token = randomUUID();
    twitterTokens.set(token, { secret: randomUUID(), callback: signed.oauth_callback, consent: idp.consenting });
    return void form({ oauth_token: token, oauth_token_secret: twitterTokens.get(token)!.secret, oauth_callback_confirmed: 'true' });
  }
  if (url.pathname === '/twitter/oauth/access_token') {
    const pending = twitterTokens.get(signed.oauth_token);
    if (!pending?.verifier || pending.verifier !== signed.oauth_verifier) return json(response, 401, {});
    twitterTokens.delete(signed.oauth_token);
    const token = randomUUID();
    twitterTokens.set(token, { secret: randomUUID(), consent: pending.consent, access: true });
    return void form({ oauth_token: token, oauth_token_secret: twitterTokens.get(token)!.secret, user_id: pending.consent.id, screen_name: 'x' });
  }
  const access = twitterTokens.get(signed.oauth_token);
  if (url.pathname === '/twitter-api/account/verify_credentials.json' && access?.access && url.searchParams.get('include_email') === 'true') {
    return json(response, 200, { id_str: access.consent.id, name: access.consent.name, email: access.consent.email, profile_image_url_https: null });
  }
  json(response, 404, {});
}

/** A local server speaking GitHub's, Google's, Apple's, WorkOS's and Twitter's documented OAuth endpoints and profile APIs. */
function handleProvider(request: http.IncomingMessage, response: http.ServerResponse, body: string, url: URL): void {
  const [, service] = url.pathname.split('/');
  if (service.startsWith('twitter')) return twitter(request, response, url);
  // Twilio's Messages API, for the SMS codes of sign-ins with a second factor.
  if (service === 'twilio') return json(response, 201, { sid: 'SM1', status: 'accepted' });
  const client = CLIENTS[service as keyof typeof CLIENTS];
  if (url.pathname.endsWith('/authorize')) {
    const connectionMissing = service === 'workos' && url.searchParams.get('connection') !== 'conn_01ACME';
    return idp.authorize(url, response, client, { pkce: service !== 'apple', valid: !connectionMissing });
  }
  if (url.pathname === '/apple/auth/token') {
    // Apple's documented check: an ES256 JWT from the team's key, for this client, not expired.
    const form = new URLSearchParams(body);
    const issued = idp.take(form.get('code'));
    try {
      const verify = createVerifier({ key: APPLE_KEY.publicKey.export({ type: 'spki', format: 'pem' }).toString(), algorithms: ['ES256'], complete: true });
      const { header, payload } = verify(form.get('client_secret') ?? '') as { header: Record<string, unknown>; payload: Record<string, unknown> };
      const valid =
        header.kid === APPLE.keyId &&
        payload.iss === APPLE.teamId &&
        payload.sub === CLIENTS.apple.id &&
        payload.aud === 'https://appleid.apple.com' &&
        typeof payload.exp === 'number';
      if (!valid || !issued || form.get('client_id') !== CLIENTS.apple.id) return json(response, 400, { error: 'invalid_client' });
      appleClientSecrets.push(payload);
    } catch {
      return json(response, 400, { error: 'invalid_client' });
    }
    const idToken = createSigner({ key: 'apple-signs-with-its-own-key-here!!' })({
      iss: 'https://appleid.apple.com',
      aud: CLIENTS.apple.id,
      sub: issued.consent.id,
      email: issued.consent.email,
      email_verified: issued.consent.verified ? 'true' : 'false',
    });
    return json(response, 200, { access_token: randomUUID(), token_type: 'Bearer', id_token: idToken });
  }
  if (url.pathname === '/workos/sso/token') {
    const issued = idp.token(request, response, body, url, CLIENTS.workos, 'client_secret_post');
    if (!issued) return;
    const [first, last] = issued.consent.name.split(' ');
    return json(response, 200, {
      access_token: randomUUID(),
      profile: { id: `prof_${issued.consent.id}`, email: issued.consent.email, first_name: first, last_name: last, connection_id: 'conn_01ACME' },
    });
  }
  if (url.pathname.endsWith('/token')) {
    const issued = idp.token(request, response, body, url, client, 'client_secret_post');
    if (issued) json(response, 200, { access_token: idp.accessToken(issued.consent), token_type: 'bearer', scope: 'x' });
    return;
  }
  const consent = idp.bearer(request);
  if (!consent) return json(response, 401, { message: 'Bad credentials' });
  if (url.pathname === '/github-api/user')
    return json(response, 200, { id: Number(consent.id), login: consent.name.toLowerCase(), name: consent.name, avatar_url: null });
  if (url.pathname === '/github-api/user/emails') {
    return json(response, 200, [
      { email: `old-${consent.email}`, primary: false, verified: true },
      { email: consent.email, primary: true, verified: consent.verified },
    ]);
  }
  if (url.pathname === '/google-api/v1/userinfo') {
    return json(response, 200, {
      sub: consent.id,
      email: consent.email,
      email_verified: consent.verified,
      name: consent.name,
      picture: 'https://example.com/p.png',
    });
  }
  json(response, 404, { message: 'Not Found' });
}

/** Google's settings, on the local provider. */
function googleSettings(): Record<string, string> {
  return {
    AUTH_PROVIDER_GOOGLE_ENABLED: 'true',
    AUTH_PROVIDER_GOOGLE_CLIENT_ID: CLIENTS.google.id,
    AUTH_PROVIDER_GOOGLE_CLIENT_SECRET: CLIENTS.google.secret,
    AUTH_PROVIDER_GOOGLE_AUTH_URL: `${providerUrl}/google/o/oauth2/v2/authorize`,
    AUTH_PROVIDER_GOOGLE_TOKEN_URL: `${providerUrl}/google/token`,
    AUTH_PROVIDER_GOOGLE_API_URL: `${providerUrl}/google-api`,
  };
}

/** GitHub's settings, on the local provider. */
function githubSettings(): Record<string, string> {
  return {
    AUTH_PROVIDER_GITHUB_ENABLED: 'true',
    AUTH_PROVIDER_GITHUB_CLIENT_ID: CLIENTS.github.id,
    AUTH_PROVIDER_GITHUB_CLIENT_SECRET: CLIENTS.github.secret,
    AUTH_PROVIDER_GITHUB_AUTH_URL: `${providerUrl}/github/login/oauth/authorize`,
    AUTH_PROVIDER_GITHUB_TOKEN_URL: `${providerUrl}/github/login/oauth/token`,
    AUTH_PROVIDER_GITHUB_API_URL: `${providerUrl}/github-api`,
  };
}

beforeAll(async () => {
  await idp.start();
  providerUrl = idp.url;
  server = await startTestServer({
    ...GENEROUS_AUTH_LIMITS,
    AUTH_SERVER_URL: AUTH_URL,
    AUTH_CLIENT_URL: CLIENT_URL,
    AUTH_EMAIL_SIGNIN_EMAIL_VERIFIED_REQUIRED: 'false',
    ...githubSettings(),
    ...googleSettings(),
    AUTH_PROVIDER_WORKOS_ENABLED: 'true',
    AUTH_PROVIDER_WORKOS_CLIENT_ID: CLIENTS.workos.id,
    AUTH_PROVIDER_WORKOS_CLIENT_SECRET: CLIENTS.workos.secret,
    AUTH_PROVIDER_WORKOS_DEFAULT_CONNECTION: 'conn_01ACME',
    AUTH_PROVIDER_WORKOS_AUTH_URL: `${providerUrl}/workos/sso/authorize`,
    AUTH_PROVIDER_WORKOS_TOKEN_URL: `${providerUrl}/workos/sso/token`,
    AUTH_PROVIDER_TWITTER_ENABLED: 'true',
    AUTH_PROVIDER_TWITTER_CONSUMER_KEY: TWITTER.consumerKey,
    AUTH_PROVIDER_TWITTER_CONSUMER_SECRET: TWITTER.consumerSecret,
    AUTH_PROVIDER_TWITTER_AUTH_URL: `${providerUrl}/twitter/oauth/authenticate`,
    AUTH_PROVIDER_TWITTER_TOKEN_URL: `${providerUrl}/twitter/oauth/access_token`,
    AUTH_PROVIDER_TWITTER_API_URL: `${providerUrl}/twitter-api`,
    AUTH_PROVIDER_APPLE_ENABLED: 'true',
    AUTH_PROVIDER_APPLE_CLIENT_ID: CLIENTS.apple.id,
    AUTH_PROVIDER_APPLE_TEAM_ID: APPLE.teamId,
    AUTH_PROVIDER_APPLE_KEY_ID: APPLE.keyId,
    // As a one-line variable holds a PEM: its newlines written as \n.
    AUTH_PROVIDER_APPLE_PRIVATE_KEY: APPLE_KEY.privateKey.export({ type: 'pkcs8', format: 'pem' }).toString().replace(/\n/g, '\\n'),
    AUTH_PROVIDER_APPLE_AUTH_URL: `${providerUrl}/apple/auth/authorize`,
    AUTH_PROVIDER_APPLE_TOKEN_URL: `${providerUrl}/apple/auth/token`,
  });
});
afterAll(async () => {
  await server.close();
  await idp.close();
});

const consent = (overrides: Partial<Consent> = {}) => idp.newConsent(overrides);

const local = (url: URL) => browser.local(url);
const dance = (name: 'github' | 'google' | 'workos', redirectTo = REDIRECT_TO, authorizeExtra = '') => browser.dance(name, redirectTo, authorizeExtra);
const expectSession = (final: URL): string => expectSessionAt(final, REDIRECT_TO);
const sessionOf = (refreshToken: string) => browser.session(refreshToken);

describe('GitHub', () => {
  it('redirects with PKCE and a signed state, then creates the user from the verified primary address', async () => {
    const person = consent();
    const start = await location(`${server.url}/auth/signin/provider/github?redirectTo=${encodeURIComponent(REDIRECT_TO)}`);
    expect(start.location.origin + start.location.pathname).toBe(`${providerUrl}/github/login/oauth/authorize`);
    expect(Object.fromEntries(start.location.searchParams)).toMatchObject({
      response_type: 'code',
      client_id: CLIENTS.github.id,
      redirect_uri: `${AUTH_URL}/signin/provider/github/callback`,
      code_challenge_method: 'S256',
      scope: 'read:user user:email',
    });
    expect(start.location.searchParams.get('state')).toMatch(/^[\w-]{43}\.[\w-]{43}$/);

    const { final } = await dance('github');
    const session = await sessionOf(expectSession(final));
    expect(session.user).toMatchObject({ email: person.email, emailVerified: true, displayName: person.name });
    // The token request carried the verifier of the challenge and the client's credentials.
    expect(idp.tokenRequests.at(-1)!.parameters.get('code_verifier')).toMatch(/^[\w-]{43}$/);

    const listed = await authCall<{ providers: { provider: string }[] }>(server.url, 'GET', '/user/providers', undefined, {
      authorization: `Bearer ${session.accessToken}`,
    });
    expect(listed.body.providers.map((entry) => entry.provider)).toEqual(['github']);

    // Again: the same user, found by the link.
    consent({ id: person.id, email: person.email, name: person.name });
    const again = await sessionOf(expectSession((await dance('github')).final));
    expect(again.user.id).toBe(session.user.id);
    // The only way this user signs in: not unlinked.
    const unlink = await authCall(server.url, 'DELETE', '/user/providers/github', undefined, { authorization: `Bearer ${session.accessToken}` });
    expect(unlink).toMatchObject({ status: 409, body: { error: 'last-sign-in-method' } });
  });

  it('ends as password sign-in does: an account with a second factor gets an MFA ticket, a disabled one an error', async () => {
    const person = consent();
    const session = await sessionOf(expectSession((await dance('github')).final));
    await server.database.query("UPDATE users SET active_mfa_type = 'totp' WHERE id = $1", [session.user.id]);
    idp.consent(person);
    const mfa = (await dance('github')).final;
    expect(mfa.searchParams.get('mfaTicket')).toMatch(/^mfaTotp:[0-9a-f-]{36}$/);
    expect(mfa.searchParams.get('type')).toBe('signinProvider');
    expect(mfa.searchParams.get('refreshToken')).toBeNull();

    await server.database.query('UPDATE users SET disabled = true WHERE id = $1', [session.user.id]);
    idp.consent(person);
    const refused = (await dance('github')).final;
    expect(refused.searchParams.get('error')).toBe('disabled-user');
    expect(refused.searchParams.get('mfaTicket')).toBeNull();
    expect(refused.searchParams.get('refreshToken')).toBeNull();
  });

  it('refuses a forged state and a replayed one, sending the error to the app', async () => {
    consent();
    const { callback } = await dance('github');
    // Replayed: the state was used by the dance.
    const replayed = await location(local(callback));
    expect(replayed.location.origin).toBe(CLIENT_URL);
    expect(replayed.location.searchParams.get('error')).toBe('invalid-state');
    expect(replayed.location.searchParams.get('refreshToken')).toBeNull();

    const state = callback.searchParams.get('state')!;
    const forged = new URL(callback);
    forged.searchParams.set('state', `${state.split('.')[0]}.${'A'.repeat(43)}`);
    expect((await location(local(forged))).location.searchParams.get('error')).toBe('invalid-state');
    const noState = await location(`${server.url}/auth/signin/provider/github/callback?code=x`);
    expect(noState.location.searchParams.get('error')).toBe('invalid-state');
    // A state is good for its own provider only.
    consent();
    const start = await location(`${server.url}/auth/signin/provider/github`);
    const other = await location(`${server.url}/auth/signin/provider/google/callback?code=x&state=${start.location.searchParams.get('state')}`);
    expect(other.location.searchParams.get('error')).toBe('invalid-state');
  });

  it('refuses an open redirect before leaving for the provider', async () => {
    for (const target of ['https://evil.example.com/', 'https://app.example.com.evil.io/', 'https://app.example.com@evil.io/']) {
      const response = await authCall(server.url, 'GET', `/signin/provider/github?redirectTo=${encodeURIComponent(target)}`);
      expect(response).toMatchObject({ status: 400, body: { error: 'redirectTo-not-allowed' } });
    }
  });

  it('links to an existing account only through a verified address', async () => {
    const email = `linked${Date.now()}@example.com`;
    const signedUp = await authPost<{ session: { user: { id: string }; accessToken: string } }>(server.url, '/signup/email-password', {
      email,
      password: 'a sound passphrase',
    });
    expect(signedUp.status).toBe(200);
    // Its owner verified the address (an unverified one is taken over instead: account-takeover.test.ts).
    await server.database.query('UPDATE users SET email_verified = true WHERE id = $1', [signedUp.body.session.user.id]);

    consent({ email, verified: false });
    const refused = (await dance('github')).final;
    expect(refused.searchParams.get('error')).toBe('unverified-email');
    expect(refused.searchParams.get('errorDescription')).toContain('not verified');
    expect(refused.searchParams.get('refreshToken')).toBeNull();
    expect(await server.database.query('SELECT 1 FROM auth_user_providers WHERE user_id = $1', [signedUp.body.session.user.id])).toHaveLength(0);

    consent({ email: email.toUpperCase(), verified: true });
    const linked = await sessionOf(expectSession((await dance('github')).final));
    expect(linked.user.id).toBe(signedUp.body.session.user.id);
    expect(linked.user.emailVerified).toBe(true);
    // With a password too, unlinking leaves a way to sign in.
    const unlink = await authCall(server.url, 'DELETE', '/user/providers/github', undefined, { authorization: `Bearer ${linked.accessToken}` });
    expect(unlink).toMatchObject({ status: 200, body: 'OK' });
    const listed = await authCall<{ providers: unknown[] }>(server.url, 'GET', '/user/providers', undefined, { authorization: `Bearer ${linked.accessToken}` });
    expect(listed.body.providers).toEqual([]);
    expect((await authCall(server.url, 'DELETE', '/user/providers/github', undefined, { authorization: `Bearer ${linked.accessToken}` })).status).toBe(400);
  });

  it('sends a denied consent and a refused code back to redirectTo as errors', async () => {
    consent();
    const denied = (await dance('github', REDIRECT_TO, '&deny=1')).final;
    expect(denied.origin + denied.pathname).toBe('https://app.example.com/signed-in');
    expect(Object.fromEntries(denied.searchParams)).toEqual({ from: 'oauth', error: 'access_denied', errorDescription: 'The user denied your request' });

    consent();
    const start = await browser.start('github', REDIRECT_TO);
    const badCode = await browser.consent(start.location);
    badCode.searchParams.set('code', 'not-issued');
    const refused = (await browser.open(badCode)).location;
    expect(refused.searchParams.get('error')).toBe('invalid-grant');
  });

  it('answers disabled-endpoint for a provider not enabled and 400 for an unknown one', async () => {
    expect(await authCall(server.url, 'GET', '/signin/provider/gitlab')).toMatchObject({ status: 409, body: { error: 'disabled-endpoint' } });
    expect(await authCall(server.url, 'GET', '/signin/provider/myspace')).toMatchObject({ status: 400, body: { error: 'invalid-request' } });
    expect(AUTH_ERRORS['disabled-endpoint'].status).toBe(409);
  });
});

describe('Google (OpenID Connect)', () => {
  it('signs in with the userinfo of the access token; an unverified address still makes a new account', async () => {
    const person = consent({ id: 'google-sub-1' });
    const { final } = await dance('google');
    const session = await sessionOf(expectSession(final));
    expect(session.user).toMatchObject({ email: person.email, emailVerified: true, displayName: person.name });
    expect(idp.tokenRequests.at(-1)!.parameters.get('client_id')).toBe(CLIENTS.google.id);

    const fresh = consent({ id: 'google-sub-2', verified: false });
    const created = await sessionOf(expectSession((await dance('google')).final));
    expect(created.user).toMatchObject({ email: fresh.email, emailVerified: false });
  });
});

describe('Apple', () => {
  it('returns by form POST; the token endpoint checks the client-secret JWT signed with the team key; the profile is the id_token', async () => {
    const person = consent({ id: '001234.abcdef' });
    const start = await browser.start('apple', REDIRECT_TO);
    expect(Object.fromEntries(start.location.searchParams)).toMatchObject({ response_mode: 'form_post', scope: 'name email', client_id: CLIENTS.apple.id });
    expect(start.location.searchParams.has('code_challenge')).toBe(false);
    const consented = await browser.consent(start.location);
    // Apple's page posts the form to the callback; the browser follows.
    const form = new URLSearchParams({
      code: consented.searchParams.get('code')!,
      state: consented.searchParams.get('state')!,
      user: JSON.stringify({ name: { firstName: 'Ada', lastName: 'Lovelace' }, email: person.email }),
    });
    const posted = await browser.post(new URL(`${AUTH_URL}/signin/provider/apple/callback`), form);
    expect(posted.status).toBe(302);
    const session = await sessionOf(expectSession(posted.location));
    expect(session.user).toMatchObject({ email: person.email, emailVerified: true, displayName: 'Ada Lovelace' });
    const secret = appleClientSecrets.at(-1)!;
    expect((secret.exp as number) - (secret.iat as number)).toBeLessThanOrEqual(300);
  });
});

describe('Twitter (OAuth 1.0a)', () => {
  it("signs requests as RFC 5849 and Twitter's documentation example say", () => {
    const signature = oauth1Signature(
      'POST',
      'https://api.twitter.com/1.1/statuses/update.json?include_entities=true',
      {
        status: 'Hello Ladies + Gentlemen, a signed OAuth request!',
        oauth_consumer_key: 'xvz1evFS4wEEPTGEFPHBog',
        oauth_nonce: 'kYjzVBB8Y0ZFabxSWbWovY3uYSQ2pTgmZeNu2VS4cg',
        oauth_signature_method: 'HMAC-SHA1',
        oauth_timestamp: '1318622958',
        oauth_token: '370773112-GmHxMAgYyLbNEtIKZeRNFsMKPR9EyMZeS9weJAEb',
        oauth_version: '1.0',
      },
      'kAcSOqF21Fu85e7zjz7ZN2U4ZRhfV3WpwPAoE3Z7kBw',
      'LswwdoUaIvS8ltyTt5jkRh4J50vUPVVHtR2YPi5kE',
    );
    expect(signature).toBe('hCtSmYh+iHYCEqBWrE7C7hYmtUk=');
  });

  it('follows the request token, the consent and the access token, then reads the verified address; a refusal comes back as an error', async () => {
    const person = consent({ id: '783214' });
    const start = await browser.start('twitter', REDIRECT_TO);
    expect(start.location.origin + start.location.pathname).toBe(`${providerUrl}/twitter/oauth/authenticate`);
    const callback = await browser.consent(start.location);
    expect(callback.origin + callback.pathname).toBe(`${AUTH_URL}/signin/provider/twitter/callback`);
    expect(callback.searchParams.get('state')).toMatch(/\./);
    const final = await browser.open(callback);
    const session = await sessionOf(expectSession(final.location));
    expect(session.user).toMatchObject({ email: person.email, emailVerified: true, displayName: person.name });
    // The same callback again: the state is spent.
    expect((await location(local(callback))).location.searchParams.get('error')).toBe('invalid-state');

    consent();
    const again = await browser.start('twitter', REDIRECT_TO);
    const denied = await browser.consent(again.location, '&deny=1');
    const refused = (await browser.open(denied)).location;
    expect(refused.searchParams.get('error')).toBe('access_denied');
    expect(refused.searchParams.get('refreshToken')).toBeNull();
  });
});

describe('WorkOS', () => {
  it('signs in through the default connection with the profile of the token response, never linking on its address', async () => {
    const person = consent();
    const session = await sessionOf(expectSession((await dance('workos')).final));
    expect(session.user).toMatchObject({ email: person.email, emailVerified: false, displayName: person.name });

    // An account with that address exists now: WorkOS does not vouch for addresses, so no link.
    consent({ email: person.email });
    expect((await dance('workos')).final.searchParams.get('error')).toBe('unverified-email');
  });
});

describe('start-up validation', () => {
  const problems = (overrides: Record<string, string>) => {
    try {
      loadConfig(testEnvironment('postgres://127.0.0.1/unused', overrides));
    } catch (error) {
      if (error instanceof ConfigError) return error.problems;
      throw error;
    }
    return [];
  };

  it.each(OAUTH_PROVIDER_NAMES)('%s: enabled without credentials names every missing variable', (name) => {
    const prefix = `AUTH_PROVIDER_${name.toUpperCase()}`;
    expect(problems({ [`${prefix}_ENABLED`]: 'true' })).toEqual(
      OAUTH_PROVIDERS[name].map((suffix) => `${prefix}_${suffix} is required when ${prefix}_ENABLED=true`),
    );
    const complete = Object.fromEntries(OAUTH_PROVIDERS[name].map((suffix) => [`${prefix}_${suffix}`, 'value']));
    expect(problems({ [`${prefix}_ENABLED`]: 'true', ...complete })).toEqual([]);
    expect(problems({ [`${prefix}_ENABLED`]: 'true', ...complete, [`${prefix}_TOKEN_URL`]: 'ftp://x' })).toEqual([
      `${prefix}_TOKEN_URL must be an http(s) URL`,
    ]);
    expect(problems({ [`${prefix}_ENABLED`]: 'maybe' })).toEqual([`${prefix}_ENABLED must be true or false`]);
    // Disabled: its variables are not required.
    expect(problems({ [`${prefix}_ENABLED`]: 'false' })).toEqual([]);
  });
});

describe('plinth auth provider enable', () => {
  let folder: string;
  beforeEach(() => {
    folder = fs.mkdtempSync(path.join(os.tmpdir(), 'plinth-provider-cli-'));
  });
  afterEach(() => fs.rmSync(folder, { recursive: true, force: true }));
  const enable = (...args: string[]) => runCli(['auth', 'provider', 'enable', ...args], {}, folder);
  const file = () => path.join(folder, '.env');

  it('writes the provider and its credentials into .env, which then loads with the provider on', async () => {
    fs.writeFileSync(file(), '# mine\nAUTH_PROVIDER_GITHUB_CLIENT_ID=old\n');
    const result = await enable('github', '--client-id', 'Iv1.abc', '--client-secret', 's3cret value');
    expect(result).toMatchObject({
      code: 0,
      stdout: 'github sign-in enabled in .env: AUTH_PROVIDER_GITHUB_ENABLED, AUTH_PROVIDER_GITHUB_CLIENT_ID, AUTH_PROVIDER_GITHUB_CLIENT_SECRET\n',
    });
    expect(fs.readFileSync(file(), 'utf8')).toBe(
      '# mine\nAUTH_PROVIDER_GITHUB_CLIENT_ID=Iv1.abc\nAUTH_PROVIDER_GITHUB_ENABLED=true\nAUTH_PROVIDER_GITHUB_CLIENT_SECRET="s3cret value"\n',
    );
    expect(fs.statSync(file()).mode & 0o777).toBe(0o600);
    const config = loadConfig(parseEnv(fs.readFileSync(file(), 'utf8')) as Record<string, string>);
    expect(config.auth.providers.github?.credentials).toEqual({ CLIENT_ID: 'Iv1.abc', CLIENT_SECRET: 's3cret value' });

    expect((await enable('twitter', '--consumer-key', 'ck', '--consumer-secret', 'cs')).code).toBe(0);
    expect(fs.readFileSync(file(), 'utf8')).toContain('AUTH_PROVIDER_TWITTER_CONSUMER_KEY=ck\n');
  });

  it('refuses an unknown provider and a missing credential, writing nothing', async () => {
    const unknown = await enable('myspace', '--client-id', 'x', '--client-secret', 'y');
    expect(unknown.code).toBe(1);
    expect(unknown.stderr).toContain('unknown provider myspace');
    const missing = await enable('google', '--client-id', 'x');
    expect(missing.code).toBe(1);
    expect(missing.stderr).toContain('AUTH_PROVIDER_GOOGLE_CLIENT_SECRET is required when AUTH_PROVIDER_GOOGLE_ENABLED=true');
    expect(missing.stderr).not.toMatch(/\n\s+at \S+/);
    expect(fs.existsSync(file())).toBe(false);
  });
});

describe('a provider sign-in whose SMS code may not be sent', () => {
  let smsServer: TestServer;
  const smsBrowser = new ProviderBrowser(() => smsServer.url, AUTH_URL);
  beforeAll(async () => {
    // One SMS per client address: the second sign-in's code is over the limit.
    smsServer = await startTestServer(
      {
        ...GENEROUS_AUTH_LIMITS,
        ...githubSettings(),
        AUTH_SERVER_URL: AUTH_URL,
        AUTH_CLIENT_URL: CLIENT_URL,
        AUTH_MFA_SMS_ENABLED: 'true',
        AUTH_SMS_PROVIDER: 'twilio',
        AUTH_SMS_GATEWAY_ACCOUNT_SID: 'AC0123456789abcdef0123456789abcdef',
        AUTH_SMS_GATEWAY_AUTH_TOKEN: 'twilio-auth-token',
        AUTH_SMS_GATEWAY_MESSAGING_SERVICE_ID: 'MG0123456789abcdef0123456789abcdef',
        AUTH_SMS_GATEWAY_API_URL: `${providerUrl}/twilio`,
        AUTH_RATE_LIMIT_SMS_ADDRESS_BURST: '1',
      },
      { database: server.database },
    );
  });
  afterAll(() => smsServer.close());

  it('sends the browser back to the app with error=too-many-requests, and neither a ticket nor a session', async () => {
    const person = consent();
    const session = await smsBrowser.session(expectSession((await smsBrowser.dance('github', REDIRECT_TO)).final));
    await server.database.query("UPDATE users SET active_mfa_type = 'sms', phone_number = '+14155550100' WHERE id = $1", [session.user.id]);
    idp.consent(person);
    expect((await smsBrowser.dance('github', REDIRECT_TO)).final.searchParams.get('mfaTicket')).toMatch(/^mfaSms:/);

    idp.consent(person);
    const limited = (await smsBrowser.dance('github', REDIRECT_TO)).final;
    expect(`${limited.origin}${limited.pathname}`).toBe(new URL(REDIRECT_TO).origin + new URL(REDIRECT_TO).pathname);
    expect(limited.searchParams.get('error')).toBe('too-many-requests');
    expect(limited.searchParams.get('mfaTicket')).toBeNull();
    expect(limited.searchParams.get('refreshToken')).toBeNull();
  });
});

/** A refusal the app is sent: a redirect to `target` (origin and path) with `error` and a description, and neither a session nor a ticket. */
function expectAppError(visit: { status: number; location: URL }, target: string, error: string): void {
  const expected = new URL(target);
  expect(visit.status).toBe(302);
  expect(visit.location.origin + visit.location.pathname).toBe(expected.origin + expected.pathname);
  expect(visit.location.searchParams.get('error')).toBe(error);
  expect(visit.location.searchParams.get('errorDescription')).toEqual(expect.stringMatching(/\w/));
  expect(visit.location.searchParams.get('refreshToken')).toBeNull();
  expect(visit.location.searchParams.get('mfaTicket')).toBeNull();
}

const usersWithEmail = async (email: string) => (await server.database.query('SELECT id FROM users WHERE lower(email) = lower($1)', [email])).length;

describe('the state cookie: a sign-in finishes only in the browser that started it', () => {
  it('binds the state to an HttpOnly SameSite=Lax cookie of the callback path, for the state lifetime, Secure under https, and clears it at the callback', async () => {
    consent();
    const own = new ProviderBrowser(() => server.url, AUTH_URL);
    const start = await own.start('github', REDIRECT_TO);
    expect(start.setCookies).toEqual([
      expect.objectContaining({
        name: 'plinth_oauth_state',
        value: start.location.searchParams.get('state'),
        path: '/auth/signin/provider/github/callback',
        maxAge: 600,
        httpOnly: true,
        sameSite: 'Lax',
        secure: true,
      }),
    ]);
    // Sent to the callback only.
    expect(own.jar.header('/auth/signin/provider/github')).toBeUndefined();
    expect(own.jar.header('/auth/token')).toBeUndefined();
    const callback = await own.consent(start.location);
    const finished = await own.open(callback);
    expectSession(finished.location);
    expect(finished.setCookies).toEqual([
      expect.objectContaining({ name: 'plinth_oauth_state', value: '', path: '/auth/signin/provider/github/callback', maxAge: 0 }),
    ]);
    expect(own.jar.kept).toEqual([]);
  });

  it("refuses the attacker's callback URL in the victim's browser: no session, the code never redeemed, no account made (login CSRF)", async () => {
    // The attacker signs in with their own provider account and stops at the callback URL.
    const attackerAccount = consent();
    const attacker = new ProviderBrowser(() => server.url, AUTH_URL);
    const start = await attacker.start('github', REDIRECT_TO);
    const callback = await attacker.consent(start.location);
    const tokenRequests = idp.tokenRequests.length;

    // The victim's browser (another cookie jar) opens it: no cookie.
    const victim = new ProviderBrowser(() => server.url, AUTH_URL);
    const refused = await victim.open(callback);
    expectAppError(refused, REDIRECT_TO, 'invalid-state');
    expect(refused.location.searchParams.get('errorDescription')).toContain('another browser');
    expect(refused.setCookies).toEqual([]);
    expect(idp.tokenRequests.length).toBe(tokenRequests);
    expect(await usersWithEmail(attackerAccount.email)).toBe(0);
    // The state is spent: the attacker's own browser cannot use it afterwards either.
    expectAppError(await attacker.open(callback), CLIENT_URL, 'invalid-state');
    expect(idp.tokenRequests.length).toBe(tokenRequests);
  });

  it("refuses it in a victim's browser that has a sign-in of its own pending, whose cookie it leaves for the victim's own return", async () => {
    const attacker = new ProviderBrowser(() => server.url, AUTH_URL);
    consent();
    const attackerCallback = await attacker.consent((await attacker.start('github', REDIRECT_TO)).location);

    const victim = new ProviderBrowser(() => server.url, AUTH_URL);
    const victimAccount = consent();
    const victimCallback = await victim.consent((await victim.start('github', REDIRECT_TO)).location);
    const refused = await victim.open(attackerCallback);
    expectAppError(refused, REDIRECT_TO, 'invalid-state');
    expect(refused.setCookies).toEqual([]);
    // The victim's own sign-in still finishes, as the victim's account.
    const session = await sessionOf(expectSession((await victim.open(victimCallback)).location));
    expect(session.user.email).toBe(victimAccount.email);
  });

  it("refuses the attacker's Twitter return and Apple form POST in another browser too", async () => {
    const attacker = new ProviderBrowser(() => server.url, AUTH_URL);
    const victim = new ProviderBrowser(() => server.url, AUTH_URL);
    const twitterAccount = consent({ id: '99887766' });
    const twitterCallback = await attacker.consent((await attacker.start('twitter', REDIRECT_TO)).location);
    expectAppError(await victim.open(twitterCallback), REDIRECT_TO, 'invalid-state');
    expect(await usersWithEmail(twitterAccount.email)).toBe(0);

    const appleAccount = consent();
    const appleStart = await attacker.start('apple', REDIRECT_TO);
    // Apple returns by a cross-site form POST: a SameSite=Lax cookie would not come with it.
    expect(appleStart.setCookies).toEqual([
      expect.objectContaining({ path: '/auth/signin/provider/apple/callback', sameSite: 'None', secure: true, httpOnly: true }),
    ]);
    const appleReturn = await attacker.consent(appleStart.location);
    const form = new URLSearchParams({ code: appleReturn.searchParams.get('code')!, state: appleReturn.searchParams.get('state')! });
    expectAppError(await victim.post(new URL(`${AUTH_URL}/signin/provider/apple/callback`), form), REDIRECT_TO, 'invalid-state');
    expect(await usersWithEmail(appleAccount.email)).toBe(0);
  });
});

describe('every exit of a provider callback redirects to the app', () => {
  const HTTP_AUTH_URL = 'http://auth.plinth.test/auth';
  const OTHER_CLIENT_URL = 'https://other.example.com';
  let defaults: TestServer;
  let defaultsBrowser: ProviderBrowser;
  beforeAll(async () => {
    // The documented defaults (limits, verified addresses required), on http, with another app.
    defaults = await startTestServer(
      { ...githubSettings(), AUTH_SERVER_URL: HTTP_AUTH_URL, AUTH_CLIENT_URL: OTHER_CLIENT_URL, AUTH_PROVIDER_APPLE_ENABLED: 'false' },
      { database: server.database },
    );
    defaultsBrowser = new ProviderBrowser(() => defaults.url, HTTP_AUTH_URL);
  });
  afterAll(() => defaults.close());

  it('a redirectTo the settings no longer allow goes to AUTH_CLIENT_URL with redirectTo-not-allowed', async () => {
    consent();
    const callback = await browser.consent((await browser.start('github', REDIRECT_TO)).location);
    // The same return on a server of the same database whose app is another (the settings changed).
    const response = await fetch(`${defaults.url}/auth${callback.pathname.slice('/auth'.length)}${callback.search}`, {
      redirect: 'manual',
      headers: { cookie: browser.jar.header(callback.pathname)! },
    });
    expectAppError({ status: response.status, location: new URL(response.headers.get('location')!) }, OTHER_CLIENT_URL, 'redirectTo-not-allowed');
  });

  it('at the default brute-force limit: a callback over it goes to redirectTo with too-many-requests, the state used up', async () => {
    consent();
    const start = await defaultsBrowser.start('github', `${OTHER_CLIENT_URL}/back`);
    // Under http the cookie is not Secure.
    expect(start.setCookies).toEqual([expect.objectContaining({ name: 'plinth_oauth_state', sameSite: 'Lax', httpOnly: true })]);
    expect(start.setCookies[0].secure).toBeUndefined();
    const callback = await defaultsBrowser.consent(start.location);
    // AUTH_RATE_LIMIT_BRUTE_FORCE_BURST (10) per address: the test above took one, the start one, these eight the rest.
    for (let attempt = 0; attempt < 8; attempt += 1) {
      expectAppError(
        await defaultsBrowser.open(new URL(`${HTTP_AUTH_URL}/signin/provider/github/callback?state=forged.state`)),
        OTHER_CLIENT_URL,
        'invalid-state',
      );
    }
    const limited = await defaultsBrowser.open(callback);
    expectAppError(limited, `${OTHER_CLIENT_URL}/back`, 'too-many-requests');
    expect(limited.location.searchParams.get('errorDescription')).toMatch(/try again in \d+ s/);
    expect(await server.database.query('SELECT 1 FROM auth_oauth_states WHERE state_hash = $1', [sha256(callback.searchParams.get('state')!)])).toEqual([]);
    // Over the limit before anything else: a forged state, a malformed request go to the app as well.
    expectAppError(
      await defaultsBrowser.open(new URL(`${HTTP_AUTH_URL}/signin/provider/github/callback?state=forged.state`)),
      OTHER_CLIENT_URL,
      'too-many-requests',
    );
    const post = await defaultsBrowser.post(new URL(`${HTTP_AUTH_URL}/signin/provider/apple/callback`), new URLSearchParams({ state: 'x' }));
    expectAppError(post, OTHER_CLIENT_URL, 'too-many-requests');
  });

  it('at the default global limit: the same', async () => {
    const global = await startTestServer(
      { ...githubSettings(), AUTH_SERVER_URL: HTTP_AUTH_URL, AUTH_CLIENT_URL: OTHER_CLIENT_URL, AUTH_RATE_LIMIT_BRUTE_FORCE_BURST: '100000' },
      { database: server.database },
    );
    try {
      const globalBrowser = new ProviderBrowser(() => global.url, HTTP_AUTH_URL);
      consent();
      const start = await globalBrowser.start('github', OTHER_CLIENT_URL);
      const callback = await globalBrowser.consent(start.location);
      // AUTH_RATE_LIMIT_GLOBAL_BURST (100) per address over every auth route: the start took one.
      for (let request = 0; request < 99; request += 1) expect((await fetch(`${global.url}/auth/user`)).status).toBe(401);
      expect((await fetch(`${global.url}/auth/user`)).status).toBe(429);
      expectAppError(await globalBrowser.open(callback), OTHER_CLIENT_URL, 'too-many-requests');
    } finally {
      await global.close();
    }
  });

  it('malformed callbacks: a field too long, a repeated state, text that cannot be stored, an unknown provider, a body that does not parse', async () => {
    const signInStarted = async () => {
      consent();
      const started = await browser.start('github', REDIRECT_TO);
      return browser.consent(started.location);
    };
    // The provider's own error with a description past the field's limit: the state is good, the app is known.
    const long = await signInStarted();
    long.searchParams.delete('code');
    long.searchParams.set('error', 'access_denied');
    long.searchParams.set('error_description', 'x'.repeat(3000));
    expectAppError(await browser.open(long), REDIRECT_TO, 'invalid-request');
    // Unstorable text.
    const nul = await signInStarted();
    nul.searchParams.set('code', 'a\u0000b');
    expectAppError(await browser.open(nul), REDIRECT_TO, 'invalid-request');
    // A state sent twice: no state to trust.
    const twice = await signInStarted();
    twice.searchParams.append('state', 'again');
    expectAppError(await browser.open(twice), CLIENT_URL, 'invalid-request');
    // No such provider.
    const unknown = await signInStarted();
    expectAppError(await browser.open(new URL(unknown.toString().replace('/github/', '/myspace/'))), CLIENT_URL, 'invalid-request');
    // Bodies the form POST does not take.
    const apple = new URL(`${AUTH_URL}/signin/provider/apple/callback`);
    for (const [type, body] of [
      ['text/plain', 'state=x'],
      ['application/json', '{"state":'],
      ['application/json', '{"state":["a","b"]}'],
    ]) {
      const visit = await browser.open(apple, { method: 'POST', headers: { 'content-type': type }, body });
      expectAppError(visit, CLIENT_URL, 'invalid-request');
    }
  });

  it('refusals of the sign-in itself: sign-up disabled, an unverified address where verification is required, a profile the provider does not give', async () => {
    const noSignUp = await startTestServer(
      { ...GENEROUS_AUTH_LIMITS, ...githubSettings(), AUTH_SERVER_URL: AUTH_URL, AUTH_CLIENT_URL: CLIENT_URL, AUTH_DISABLE_SIGNUP: 'true' },
      { database: server.database },
    );
    try {
      const person = consent();
      const { final } = await new ProviderBrowser(() => noSignUp.url, AUTH_URL).dance('github', REDIRECT_TO);
      expectAppError({ status: 302, location: final }, REDIRECT_TO, 'signup-disabled');
      expect(await usersWithEmail(person.email)).toBe(0);
    } finally {
      await noSignUp.close();
    }
    // AUTH_EMAIL_SIGNIN_EMAIL_VERIFIED_REQUIRED at its default (true); GitHub's profile API elsewhere than its token endpoint says.
    const strict = await startTestServer(
      {
        ...GENEROUS_AUTH_LIMITS,
        ...googleSettings(),
        ...githubSettings(),
        AUTH_PROVIDER_GITHUB_API_URL: `${providerUrl}/nowhere`,
        AUTH_SERVER_URL: AUTH_URL,
        AUTH_CLIENT_URL: CLIENT_URL,
      },
      { database: server.database },
    );
    try {
      const strictBrowser = new ProviderBrowser(() => strict.url, AUTH_URL);
      consent({ verified: false });
      expectAppError({ status: 302, location: (await strictBrowser.dance('google', REDIRECT_TO)).final }, REDIRECT_TO, 'unverified-user');
      consent();
      expectAppError({ status: 302, location: (await strictBrowser.dance('github', REDIRECT_TO)).final }, REDIRECT_TO, 'provider-error');
    } finally {
      await strict.close();
    }
  });

  it('a database error once the state is read goes to redirectTo; a database out of reach before, to AUTH_CLIENT_URL', async () => {
    consent();
    const started = await browser.start('github', REDIRECT_TO);
    const callback = await browser.consent(started.location);
    await server.database.query('ALTER TABLE auth_user_providers RENAME TO auth_user_providers_away');
    let failed: Visit;
    try {
      failed = await browser.open(callback);
    } finally {
      await server.database.query('ALTER TABLE auth_user_providers_away RENAME TO auth_user_providers');
    }
    expectAppError(failed, REDIRECT_TO, 'internal-server-error');
    expect(failed.location.searchParams.get('errorDescription')).toBe('Internal server error');

    const outage = await startTestServer({ ...GENEROUS_AUTH_LIMITS, ...githubSettings(), AUTH_SERVER_URL: AUTH_URL, AUTH_CLIENT_URL: CLIENT_URL });
    try {
      const outageBrowser = new ProviderBrowser(() => outage.url, AUTH_URL);
      consent();
      const outageCallback = await outageBrowser.consent((await outageBrowser.start('github', REDIRECT_TO)).location);
      await outage.database.drop();
      const unavailable = await outageBrowser.open(outageCallback);
      expectAppError(unavailable, CLIENT_URL, 'service-unavailable');
      expect(unavailable.location.searchParams.get('errorDescription')).toMatch(/temporarily unavailable/);
    } finally {
      await outage.close();
    }
  });
});
