import type http from 'node:http';
import type { OAuthProviderName } from '../../src/config/oauth-providers';
import { authPost, GENEROUS_AUTH_LIMITS } from '../support/auth';
import { expectSession, json, LocalOAuthServer, ProviderBrowser, type Consent, type OAuthClient, type TokenAuthentication } from '../support/oauth-provider';
import { startTestServer, type TestServer } from '../support/server';

const AUTH_URL = 'https://auth.plinth.test/auth';
const REDIRECT_TO = 'https://app.example.com/signed-in?from=oauth';

/**
 * One provider as its documentation describes it: its public endpoints (served on loopback under
 * `/<name>/<host><path>`), what its authorization URL takes, how the token request authenticates
 * the client, and the profile API's documented answers for the user who consented.
 */
interface DocumentedProvider {
  name: OAuthProviderName;
  authUrl: string;
  tokenUrl: string;
  /** The base of its profile API (AUTH_PROVIDER_<NAME>_API_URL). */
  apiUrl: string;
  /** The scope parameter of the authorization URL; null when the provider takes none. */
  scope: string | null;
  pkce: boolean;
  tokenAuthentication: TokenAuthentication;
  /** Extra fields of its token response. */
  tokenFields: Record<string, unknown>;
  /**
   * What it says of the address: whether it is verified (`reported`), only verified addresses
   * (`verified-only`, no address otherwise), or nothing about it (`unverified`, never vouched for).
   */
  addresses: 'reported' | 'verified-only' | 'unverified';
  /** The provider's user id for a consent, as its API gives it (what the link stores). */
  userId(consent: Consent): string;
  /** The avatar the user gets (a string, or a matcher of one). */
  avatarUrl(consent: Consent): unknown;
  /** Its profile API under apiUrl: the documented answer, or undefined (404). */
  api(path: string, url: URL, request: http.IncomingMessage, consent: Consent): { status?: number; body: unknown } | undefined;
}

const slug = (consent: Consent) => consent.name.toLowerCase().replace(/\s+/g, '');
const [givenName, familyName] = [(consent: Consent) => consent.name.split(' ')[0], (consent: Consent) => consent.name.split(' ').slice(1).join(' ')];

const PROVIDERS: DocumentedProvider[] = [
  {
    name: 'gitlab',
    authUrl: 'https://gitlab.com/oauth/authorize',
    tokenUrl: 'https://gitlab.com/oauth/token',
    apiUrl: 'https://gitlab.com/api/v4',
    scope: 'read_user',
    pkce: true,
    tokenAuthentication: 'client_secret_post',
    tokenFields: { refresh_token: 'gitlab-refresh', scope: 'read_user', created_at: 1_700_000_000 },
    addresses: 'reported',
    userId: (consent) => consent.id,
    avatarUrl: (consent) => `https://gitlab.com/uploads/-/system/user/avatar/${consent.id}/avatar.png`,
    // GET /user: the signed-in user, with its primary address and when it was confirmed.
    api: (path, _url, _request, consent) =>
      path === '/user'
        ? {
            body: {
              id: Number(consent.id),
              username: slug(consent),
              name: consent.name,
              state: 'active',
              locked: false,
              avatar_url: `https://gitlab.com/uploads/-/system/user/avatar/${consent.id}/avatar.png`,
              web_url: `https://gitlab.com/${slug(consent)}`,
              public_email: null,
              email: consent.email,
              confirmed_at: consent.verified ? '2024-11-02T09:21:10.000Z' : null,
              two_factor_enabled: false,
              external: false,
            },
          }
        : undefined,
  },
  {
    name: 'bitbucket',
    authUrl: 'https://bitbucket.org/site/oauth2/authorize',
    tokenUrl: 'https://bitbucket.org/site/oauth2/access_token',
    apiUrl: 'https://api.bitbucket.org/2.0',
    // The consumer's permissions are the scopes: the authorization URL carries none.
    scope: null,
    pkce: false,
    tokenAuthentication: 'client_secret_basic',
    tokenFields: { scopes: 'account email', refresh_token: 'bitbucket-refresh', state: 'authorization_code' },
    addresses: 'reported',
    userId: (consent) => `{00000000-0000-4000-8000-${consent.id.padStart(12, '0')}}`,
    avatarUrl: (consent) => `https://secure.gravatar.com/avatar/${consent.id}?d=identicon`,
    // GET /user (no address there), GET /user/emails (a page of addresses, each primary or not, confirmed or not).
    api: (path, _url, _request, consent) => {
      if (path === '/user') {
        return {
          body: {
            type: 'user',
            uuid: `{00000000-0000-4000-8000-${consent.id.padStart(12, '0')}}`,
            account_id: `557058:${consent.id}`,
            nickname: slug(consent),
            display_name: consent.name,
            links: {
              avatar: { href: `https://secure.gravatar.com/avatar/${consent.id}?d=identicon` },
              html: { href: `https://bitbucket.org/${slug(consent)}/` },
            },
            created_on: '2024-01-02T03:04:05.000000+00:00',
          },
        };
      }
      if (path === '/user/emails') {
        return {
          body: {
            pagelen: 10,
            page: 1,
            size: 2,
            values: [
              { type: 'email', email: `old-${consent.email}`, is_primary: false, is_confirmed: true, links: {} },
              { type: 'email', email: consent.email, is_primary: true, is_confirmed: consent.verified, links: {} },
            ],
          },
        };
      }
      return undefined;
    },
  },
  {
    name: 'linkedin',
    authUrl: 'https://www.linkedin.com/oauth/v2/authorization',
    tokenUrl: 'https://www.linkedin.com/oauth/v2/accessToken',
    apiUrl: 'https://api.linkedin.com',
    scope: 'openid profile email',
    pkce: false,
    tokenAuthentication: 'client_secret_post',
    tokenFields: { expires_in: 5_183_999, scope: 'email,openid,profile' },
    addresses: 'reported',
    userId: (consent) => `li-${consent.id}`,
    avatarUrl: (consent) => `https://media.licdn.com/dms/image/${consent.id}/profile-displayphoto`,
    // Sign In with LinkedIn using OpenID Connect: GET /v2/userinfo.
    api: (path, _url, _request, consent) =>
      path === '/v2/userinfo'
        ? {
            body: {
              sub: `li-${consent.id}`,
              email_verified: consent.verified,
              name: consent.name,
              locale: { country: 'US', language: 'en' },
              given_name: givenName(consent),
              family_name: familyName(consent),
              email: consent.email,
              picture: `https://media.licdn.com/dms/image/${consent.id}/profile-displayphoto`,
            },
          }
        : undefined,
  },
  {
    name: 'facebook',
    authUrl: 'https://www.facebook.com/v19.0/dialog/oauth',
    tokenUrl: 'https://graph.facebook.com/v19.0/oauth/access_token',
    apiUrl: 'https://graph.facebook.com/v19.0',
    scope: 'email public_profile',
    pkce: false,
    // The documented exchange: GET oauth/access_token?client_id&redirect_uri&client_secret&code.
    tokenAuthentication: 'query',
    tokenFields: { expires_in: 5_183_944 },
    addresses: 'verified-only',
    userId: (consent) => `10${consent.id}`,
    avatarUrl: (consent) => `https://platform-lookaside.fbsbx.com/platform/profilepic/?asid=10${consent.id}`,
    // GET /me answers the fields asked for (id and name by default); `email` only for a valid address.
    api: (path, url, _request, consent) => {
      if (path !== '/me') return undefined;
      const available: Record<string, unknown> = {
        id: `10${consent.id}`,
        name: consent.name,
        ...(consent.verified ? { email: consent.email } : {}),
        picture: {
          data: { height: 50, is_silhouette: false, url: `https://platform-lookaside.fbsbx.com/platform/profilepic/?asid=10${consent.id}`, width: 50 },
        },
      };
      const fields = (url.searchParams.get('fields') ?? 'id,name').split(',');
      return { body: Object.fromEntries(fields.filter((field) => field in available).map((field) => [field, available[field]])) };
    },
  },
  {
    name: 'discord',
    authUrl: 'https://discord.com/oauth2/authorize',
    tokenUrl: 'https://discord.com/api/oauth2/token',
    apiUrl: 'https://discord.com/api',
    scope: 'identify email',
    pkce: true,
    tokenAuthentication: 'client_secret_basic',
    tokenFields: { expires_in: 604_800, refresh_token: 'discord-refresh', scope: 'identify email' },
    addresses: 'reported',
    userId: (consent) => `80351110224${consent.id}`,
    avatarUrl: (consent) => `https://cdn.discordapp.com/avatars/80351110224${consent.id}/8342729096ea3675442027381ff50dfe.png`,
    // GET /users/@me: with the email scope, `email` and whether it is `verified`.
    api: (path, _url, _request, consent) =>
      path === '/users/@me'
        ? {
            body: {
              id: `80351110224${consent.id}`,
              username: slug(consent),
              discriminator: '0',
              global_name: consent.name,
              avatar: '8342729096ea3675442027381ff50dfe',
              verified: consent.verified,
              email: consent.email,
              flags: 0,
              premium_type: 0,
              public_flags: 0,
              mfa_enabled: false,
              locale: 'en-US',
            },
          }
        : undefined,
  },
  {
    name: 'spotify',
    authUrl: 'https://accounts.spotify.com/authorize',
    tokenUrl: 'https://accounts.spotify.com/api/token',
    apiUrl: 'https://api.spotify.com/v1',
    scope: 'user-read-email',
    pkce: true,
    tokenAuthentication: 'client_secret_basic',
    tokenFields: { expires_in: 3600, refresh_token: 'spotify-refresh', scope: 'user-read-email' },
    addresses: 'unverified',
    userId: (consent) => `sp${consent.id}`,
    avatarUrl: (consent) => `https://i.scdn.co/image/ab6775700000ee85${consent.id}`,
    // GET /me: the address "as entered by the user", unverified.
    api: (path, _url, _request, consent) =>
      path === '/me'
        ? {
            body: {
              id: `sp${consent.id}`,
              display_name: consent.name,
              email: consent.email,
              country: 'SE',
              product: 'premium',
              type: 'user',
              uri: `spotify:user:sp${consent.id}`,
              href: `https://api.spotify.com/v1/users/sp${consent.id}`,
              external_urls: { spotify: `https://open.spotify.com/user/sp${consent.id}` },
              followers: { href: null, total: 3 },
              images: [{ url: `https://i.scdn.co/image/ab6775700000ee85${consent.id}`, height: 300, width: 300 }],
            },
          }
        : undefined,
  },
  {
    name: 'twitch',
    authUrl: 'https://id.twitch.tv/oauth2/authorize',
    tokenUrl: 'https://id.twitch.tv/oauth2/token',
    apiUrl: 'https://api.twitch.tv/helix',
    scope: 'user:read:email',
    pkce: false,
    tokenAuthentication: 'client_secret_post',
    tokenFields: { expires_in: 14_124, refresh_token: 'twitch-refresh', scope: ['user:read:email'] },
    addresses: 'verified-only',
    userId: (consent) => `1410${consent.id}`,
    avatarUrl: (consent) => `https://static-cdn.jtvnw.net/jtv_user_pictures/${consent.id}-profile_image-300x300.png`,
    // Helix GET /users: the Client-Id header must name the token's client; `email` is the verified address.
    api: (path, _url, request, consent) => {
      if (path !== '/users') return undefined;
      if (request.headers['client-id'] !== clientOf('twitch').id)
        return { status: 401, body: { error: 'Unauthorized', status: 401, message: 'Client ID and OAuth token do not match' } };
      return {
        body: {
          data: [
            {
              id: `1410${consent.id}`,
              login: slug(consent),
              display_name: consent.name,
              type: '',
              broadcaster_type: '',
              description: '',
              profile_image_url: `https://static-cdn.jtvnw.net/jtv_user_pictures/${consent.id}-profile_image-300x300.png`,
              offline_image_url: '',
              view_count: 0,
              ...(consent.verified ? { email: consent.email } : {}),
              created_at: '2016-12-14T20:32:28Z',
            },
          ],
        },
      };
    },
  },
  {
    name: 'windowslive',
    authUrl: 'https://login.microsoftonline.com/common/oauth2/v2.0/authorize',
    tokenUrl: 'https://login.microsoftonline.com/common/oauth2/v2.0/token',
    apiUrl: 'https://graph.microsoft.com/oidc',
    scope: 'openid email profile',
    pkce: true,
    tokenAuthentication: 'client_secret_post',
    tokenFields: { expires_in: 3599, ext_expires_in: 3599, scope: 'openid email profile User.Read' },
    addresses: 'unverified',
    userId: (consent) => `AAAAAAAAAAAAAAAAAAAAA${consent.id}`,
    // Its picture needs the user's token: the user gets the default avatar (Gravatar's, from the address).
    avatarUrl: () => expect.stringMatching(/^https:\/\/www\.gravatar\.com\/avatar\/[0-9a-f]{32}\?/),
    // Microsoft Graph's OpenID Connect userinfo: no email_verified.
    api: (path, _url, _request, consent) =>
      path === '/userinfo'
        ? {
            body: {
              sub: `AAAAAAAAAAAAAAAAAAAAA${consent.id}`,
              name: consent.name,
              family_name: familyName(consent),
              given_name: givenName(consent),
              picture: 'https://graph.microsoft.com/v1.0/me/photo/$value',
              email: consent.email,
            },
          }
        : undefined,
  },
];

const clientOf = (name: OAuthProviderName): OAuthClient => ({ id: `${name}-client-id`, secret: `${name}-client-secret-Zx9` });
const documentedOf = (name: string) => PROVIDERS.find((provider) => provider.name === name);

let server: TestServer;
const idp = new LocalOAuthServer(handle);
const browser = new ProviderBrowser(() => server.url, AUTH_URL);

/** A provider's documented URL on the local server. */
const localUrl = (name: string, documented: string) => {
  const url = new URL(documented);
  return `${idp.url}/${name}/${url.host}${url.pathname}`;
};

/** Each provider's documented endpoints, on loopback under /<name>/<host>. */
function handle(request: http.IncomingMessage, response: http.ServerResponse, body: string, url: URL): void {
  const [, name, host] = url.pathname.split('/');
  const provider = documentedOf(name);
  if (!provider) return json(response, 404, {});
  const documented = `https://${host}${url.pathname.slice(`/${name}/${host}`.length)}`;
  if (documented === provider.authUrl) return idp.authorize(url, response, clientOf(provider.name), { pkce: provider.pkce });
  if (documented === provider.tokenUrl) {
    const issued = idp.token(request, response, body, url, clientOf(provider.name), provider.tokenAuthentication);
    if (issued) json(response, 200, { access_token: idp.accessToken(issued.consent), token_type: 'bearer', ...provider.tokenFields });
    return;
  }
  if (documented.startsWith(`${provider.apiUrl}/`)) {
    const consent = idp.bearer(request);
    if (!consent) return json(response, 401, { error: 'invalid_token' });
    const answer = provider.api(documented.slice(provider.apiUrl.length), url, request, consent);
    return answer ? json(response, answer.status ?? 200, answer.body) : json(response, 404, { error: 'not found' });
  }
  json(response, 404, {});
}

beforeAll(async () => {
  await idp.start();
  const settings: Record<string, string> = {};
  for (const provider of PROVIDERS) {
    const prefix = `AUTH_PROVIDER_${provider.name.toUpperCase()}`;
    Object.assign(settings, {
      [`${prefix}_ENABLED`]: 'true',
      [`${prefix}_CLIENT_ID`]: clientOf(provider.name).id,
      [`${prefix}_CLIENT_SECRET`]: clientOf(provider.name).secret,
      [`${prefix}_AUTH_URL`]: localUrl(provider.name, provider.authUrl),
      [`${prefix}_TOKEN_URL`]: localUrl(provider.name, provider.tokenUrl),
      [`${prefix}_API_URL`]: localUrl(provider.name, provider.apiUrl),
    });
  }
  server = await startTestServer({
    ...GENEROUS_AUTH_LIMITS,
    ...settings,
    AUTH_SERVER_URL: AUTH_URL,
    AUTH_CLIENT_URL: 'https://app.example.com',
    // A provider that never vouches for the address still signs a new user in (the address unverified).
    AUTH_EMAIL_SIGNIN_EMAIL_VERIFIED_REQUIRED: 'false',
  });
});
afterAll(async () => {
  await server.close();
  await idp.close();
});

const consent = (overrides: Partial<Consent> = {}) => idp.newConsent(overrides);

const linkedIds = async (userId: string) =>
  (await server.database.query('SELECT provider, provider_user_id FROM auth_user_providers WHERE user_id = $1', [userId])) as {
    provider: string;
    provider_user_id: string;
  }[];

describe.each(PROVIDERS)('$name', (provider) => {
  it('follows the documented authorization, token and profile endpoints to a new user, whose refresh token works', async () => {
    const person = consent();
    const requestsBefore = idp.tokenRequests.length;
    const { final, start } = await browser.dance(provider.name, REDIRECT_TO);

    expect(start.origin + start.pathname).toBe(localUrl(provider.name, provider.authUrl));
    expect(start.searchParams.get('response_type')).toBe('code');
    expect(start.searchParams.get('client_id')).toBe(clientOf(provider.name).id);
    expect(start.searchParams.get('redirect_uri')).toBe(`${AUTH_URL}/signin/provider/${provider.name}/callback`);
    expect(start.searchParams.get('scope')).toBe(provider.scope);
    expect(start.searchParams.get('code_challenge_method')).toBe(provider.pkce ? 'S256' : null);

    // One token request, authenticated the documented way (the local endpoint refuses any other).
    expect(idp.tokenRequests.length).toBe(requestsBefore + 1);
    const tokenRequest = idp.tokenRequests.at(-1)!;
    expect(tokenRequest.method).toBe(provider.tokenAuthentication === 'query' ? 'GET' : 'POST');
    expect(tokenRequest.authorization?.startsWith('Basic ') ?? false).toBe(provider.tokenAuthentication === 'client_secret_basic');
    expect(tokenRequest.parameters.get('code_verifier')).toEqual(provider.pkce ? expect.stringMatching(/^[\w-]{43}$/) : null);

    const session = await browser.session(expectSession(final, REDIRECT_TO));
    expect(session.user).toMatchObject({
      email: person.email,
      emailVerified: provider.addresses !== 'unverified',
      displayName: person.name,
      avatarUrl: provider.avatarUrl(person),
    });
    expect(await linkedIds(session.user.id)).toEqual([{ provider: provider.name, provider_user_id: provider.userId(person) }]);

    // Again: the same user, found by the provider's id.
    idp.consent(person);
    const again = await browser.session(expectSession((await browser.dance(provider.name, REDIRECT_TO)).final, REDIRECT_TO));
    expect(again.user.id).toBe(session.user.id);
  });

  it(
    provider.addresses === 'unverified' ? 'never links to an existing account by its address' : 'links to an existing account only through a verified address',
    async () => {
      const email = `existing-${provider.name}-${Date.now()}@example.com`;
      const signedUp = await authPost<{ session: { user: { id: string } } }>(server.url, '/signup/email-password', { email, password: 'a sound passphrase' });
      expect(signedUp.status).toBe(200);
      const userId = signedUp.body.session.user.id;

      consent({ email, verified: false });
      const refused = (await browser.dance(provider.name, REDIRECT_TO)).final;
      // A provider that gives only verified addresses gives none here: nothing to sign in with.
      expect(refused.searchParams.get('error')).toBe(provider.addresses === 'verified-only' ? 'email-required' : 'unverified-email');
      expect(refused.searchParams.get('refreshToken')).toBeNull();
      expect(await linkedIds(userId)).toEqual([]);

      const person = consent({ email: email.toUpperCase(), verified: true });
      const final = (await browser.dance(provider.name, REDIRECT_TO)).final;
      if (provider.addresses === 'unverified') {
        expect(final.searchParams.get('error')).toBe('unverified-email');
        expect(await linkedIds(userId)).toEqual([]);
        return;
      }
      const linked = await browser.session(expectSession(final, REDIRECT_TO));
      expect(linked.user).toMatchObject({ id: userId, emailVerified: true });
      expect(await linkedIds(userId)).toEqual([{ provider: provider.name, provider_user_id: provider.userId(person) }]);
    },
  );

  it('sends a denied consent back to redirectTo as an error, without asking for a token', async () => {
    consent();
    const requestsBefore = idp.tokenRequests.length;
    const denied = (await browser.dance(provider.name, REDIRECT_TO, '&deny=1')).final;
    expect(denied.origin + denied.pathname).toBe('https://app.example.com/signed-in');
    expect(Object.fromEntries(denied.searchParams)).toEqual({ from: 'oauth', error: 'access_denied', errorDescription: 'The user denied your request' });
    expect(idp.tokenRequests.length).toBe(requestsBefore);
  });
});
