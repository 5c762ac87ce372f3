import { createSigner } from 'fast-jwt';
import type { OAuthProviderName } from '../../config/oauth-providers';
import type { OutboundHttp } from '../../platform/outbound-http';

/** What sign-in needs from a provider's profile. */
export interface ProviderProfile {
  id: string;
  email: string | null;
  /** Whether the provider vouches that the user controls the address: only then may it link to an existing account. */
  emailVerified: boolean;
  displayName: string | null;
  avatarUrl: string | null;
}

/** A provider speaking OAuth 2.0 with a client id and secret (authorization code flow). */
export interface OAuth2Provider {
  authUrl: string;
  tokenUrl: string;
  /** The base of its profile API (AUTH_PROVIDER_<NAME>_API_URL replaces it). */
  apiUrl: string;
  scopes: string[];
  /** Whether it accepts PKCE (S256): then every sign-in sends the challenge and the verifier. */
  pkce: boolean;
  /**
   * Whether it returns by a form POST from its own site (`response_mode=form_post`): the browser
   * sends a SameSite=Lax cookie with no cross-site POST, so the state cookie is SameSite=None then.
   */
  formPost?: boolean;
  /**
   * How the token request carries the client's credentials, as the provider documents it: in the
   * form body (`client_secret_post`, the default), in an HTTP Basic header (`client_secret_basic`,
   * RFC 6749 §2.3.1), or in the query of a GET (`query`, Facebook's documented exchange).
   */
  tokenAuthentication?: 'client_secret_post' | 'client_secret_basic' | 'query';
  /** Extra parameters of the authorization URL. */
  authParameters?(credentials: Record<string, string>): Record<string, string>;
  /** The client secret sent to the token endpoint (default: the CLIENT_SECRET credential). */
  clientSecret?(credentials: Record<string, string>): string;
  /** The profile, from the provider's API or from the token response itself; `callback` is what the provider sent back. */
  profile(api: ProfileApi, tokens: TokenResponse, callback: Record<string, string | undefined>): Promise<ProviderProfile>;
}

/** The token endpoint's JSON answer. */
export type TokenResponse = Record<string, unknown> & { access_token: string };

/** GET under the provider's API base with the user's access token; the JSON answer, or an error for any other status. */
export type ProfileApi = <T>(path: string) => Promise<T>;

const text = (value: unknown): string | null => (typeof value === 'string' && value !== '' ? value : null);

/**
 * OpenID Connect's userinfo (Google, LinkedIn, Microsoft): `sub`, `email`, `email_verified`, `name`,
 * and `picture` unless it is an API address a browser cannot load without the user's token.
 */
function openIdUserInfo(path: string, picture: 'public' | 'behind-token' = 'public') {
  return async (api: ProfileApi): Promise<ProviderProfile> => {
    const info = await api<Record<string, unknown>>(path);
    return {
      id: String(info.sub),
      email: text(info.email),
      emailVerified: info.email_verified === true || info.email_verified === 'true',
      displayName: text(info.name),
      avatarUrl: picture === 'public' ? text(info.picture) : null,
    };
  };
}

/** Apple's client secret: an ES256 JWT signed with the key of AUTH_PROVIDER_APPLE_KEY_ID, valid for 5 minutes. */
function appleClientSecret(credentials: Record<string, string>): string {
  const sign = createSigner({ algorithm: 'ES256', key: credentials.PRIVATE_KEY.replace(/\\n/g, '\n'), kid: credentials.KEY_ID, expiresIn: 5 * 60 * 1000 });
  return sign({ iss: credentials.TEAM_ID, aud: 'https://appleid.apple.com', sub: credentials.CLIENT_ID });
}

/** The claims of a JWT, read without checking its signature (see the Apple provider for why that is sound there). */
function jwtClaims(token: unknown): Record<string, unknown> {
  if (typeof token !== 'string' || token.split('.').length !== 3) throw new Error('the token response has no id_token');
  return JSON.parse(Buffer.from(token.split('.')[1], 'base64url').toString('utf8')) as Record<string, unknown>;
}

/** The providers of the authorization code flow, with their public endpoints (Twitter's OAuth 1.0a is in oauth.service.ts). */
export const OAUTH2_PROVIDERS: Partial<Record<OAuthProviderName, OAuth2Provider>> = {
  github: {
    authUrl: 'https://github.com/login/oauth/authorize',
    tokenUrl: 'https://github.com/login/oauth/access_token',
    apiUrl: 'https://api.github.com',
    scopes: ['read:user', 'user:email'],
    pkce: true,
    async profile(api) {
      const user = await api<{ id: number; login: string; name: string | null; avatar_url: string | null }>('/user');
      // The profile's public address may be unverified: the verified primary address of /user/emails is the one.
      const emails = await api<{ email: string; primary: boolean; verified: boolean }[]>('/user/emails');
      const primary = emails.find((entry) => entry.primary) ?? emails.find((entry) => entry.verified) ?? null;
      return {
        id: String(user.id),
        email: primary?.email ?? null,
        emailVerified: primary?.verified === true,
        displayName: text(user.name) ?? user.login,
        avatarUrl: text(user.avatar_url),
      };
    },
  },
  google: {
    authUrl: 'https://accounts.google.com/o/oauth2/v2/auth',
    tokenUrl: 'https://oauth2.googleapis.com/token',
    apiUrl: 'https://openidconnect.googleapis.com',
    scopes: ['openid', 'email', 'profile'],
    pkce: true,
    profile: openIdUserInfo('/v1/userinfo'),
  },
  linkedin: {
    authUrl: 'https://www.linkedin.com/oauth/v2/authorization',
    tokenUrl: 'https://www.linkedin.com/oauth/v2/accessToken',
    apiUrl: 'https://api.linkedin.com',
    scopes: ['openid', 'profile', 'email'],
    pkce: false,
    profile: openIdUserInfo('/v2/userinfo'),
  },
  windowslive: {
    authUrl: 'https://login.microsoftonline.com/common/oauth2/v2.0/authorize',
    tokenUrl: 'https://login.microsoftonline.com/common/oauth2/v2.0/token',
    apiUrl: 'https://graph.microsoft.com/oidc',
    scopes: ['openid', 'email', 'profile'],
    pkce: true,
    // Microsoft does not vouch for the addresses of personal and tenant accounts; its `picture` is
    // Graph's /me/photo/$value, which answers only with the user's token (the default avatar instead).
    profile: openIdUserInfo('/userinfo', 'behind-token'),
  },
  gitlab: {
    authUrl: 'https://gitlab.com/oauth/authorize',
    tokenUrl: 'https://gitlab.com/oauth/token',
    apiUrl: 'https://gitlab.com/api/v4',
    scopes: ['read_user'],
    pkce: true,
    async profile(api) {
      const user = await api<{ id: number; email: string | null; confirmed_at: string | null; name: string; avatar_url: string | null }>('/user');
      return {
        id: String(user.id),
        email: text(user.email),
        emailVerified: user.confirmed_at !== null,
        displayName: text(user.name),
        avatarUrl: text(user.avatar_url),
      };
    },
  },
  bitbucket: {
    authUrl: 'https://bitbucket.org/site/oauth2/authorize',
    tokenUrl: 'https://bitbucket.org/site/oauth2/access_token',
    apiUrl: 'https://api.bitbucket.org/2.0',
    // Bitbucket takes no scope parameter: the consumer's permissions (Account: Email, Read) are its scopes.
    scopes: [],
    pkce: false,
    tokenAuthentication: 'client_secret_basic',
    async profile(api) {
      const user = await api<{ uuid: string; display_name: string; links?: { avatar?: { href?: string } } }>('/user');
      const emails = await api<{ values: { email: string; is_primary: boolean; is_confirmed: boolean }[] }>('/user/emails');
      const primary = emails.values.find((entry) => entry.is_primary) ?? null;
      return {
        id: user.uuid,
        email: primary?.email ?? null,
        emailVerified: primary?.is_confirmed === true,
        displayName: text(user.display_name),
        avatarUrl: text(user.links?.avatar?.href),
      };
    },
  },
  facebook: {
    authUrl: 'https://www.facebook.com/v19.0/dialog/oauth',
    tokenUrl: 'https://graph.facebook.com/v19.0/oauth/access_token',
    apiUrl: 'https://graph.facebook.com/v19.0',
    scopes: ['email', 'public_profile'],
    pkce: false,
    tokenAuthentication: 'query',
    async profile(api) {
      const user = await api<{ id: string; name?: string; email?: string; picture?: { data?: { url?: string } } }>('/me?fields=id,name,email,picture');
      // Facebook returns only confirmed addresses.
      return {
        id: user.id,
        email: text(user.email),
        emailVerified: text(user.email) !== null,
        displayName: text(user.name),
        avatarUrl: text(user.picture?.data?.url),
      };
    },
  },
  discord: {
    authUrl: 'https://discord.com/oauth2/authorize',
    tokenUrl: 'https://discord.com/api/oauth2/token',
    apiUrl: 'https://discord.com/api',
    scopes: ['identify', 'email'],
    pkce: true,
    tokenAuthentication: 'client_secret_basic',
    async profile(api) {
      const user = await api<{ id: string; username: string; global_name?: string | null; email?: string | null; verified?: boolean; avatar?: string | null }>(
        '/users/@me',
      );
      const avatarUrl = user.avatar ? `https://cdn.discordapp.com/avatars/${user.id}/${user.avatar}.png` : null;
      return { id: user.id, email: text(user.email), emailVerified: user.verified === true, displayName: text(user.global_name) ?? user.username, avatarUrl };
    },
  },
  spotify: {
    authUrl: 'https://accounts.spotify.com/authorize',
    tokenUrl: 'https://accounts.spotify.com/api/token',
    apiUrl: 'https://api.spotify.com/v1',
    scopes: ['user-read-email'],
    pkce: true,
    tokenAuthentication: 'client_secret_basic',
    async profile(api) {
      const user = await api<{ id: string; display_name?: string | null; email?: string; images?: { url: string }[] }>('/me');
      // Spotify does not say whether the address was confirmed.
      return { id: user.id, email: text(user.email), emailVerified: false, displayName: text(user.display_name), avatarUrl: text(user.images?.[0]?.url) };
    },
  },
  apple: {
    authUrl: 'https://appleid.apple.com/auth/authorize',
    tokenUrl: 'https://appleid.apple.com/auth/token',
    apiUrl: 'https://appleid.apple.com',
    scopes: ['name', 'email'],
    pkce: false,
    // Apple sends the address and name only by a form POST to the callback.
    formPost: true,
    clientSecret: appleClientSecret,
    async profile(_api, tokens, callback) {
      // The id_token comes straight from Apple's token endpoint over TLS, in answer to our own
      // authenticated request: OpenID Connect Core §3.1.3.7 lets its signature go unchecked.
      const claims = jwtClaims(tokens.id_token);
      let displayName: string | null = null;
      try {
        const user = JSON.parse(callback.user ?? 'null') as { name?: { firstName?: string; lastName?: string } } | null;
        displayName = [user?.name?.firstName, user?.name?.lastName].filter(Boolean).join(' ') || null;
      } catch {
        // The name is a courtesy of the first sign-in only.
      }
      return {
        id: String(claims.sub),
        email: text(claims.email),
        emailVerified: claims.email_verified === true || claims.email_verified === 'true',
        displayName,
        avatarUrl: null,
      };
    },
  },
  workos: {
    authUrl: 'https://api.workos.com/sso/authorize',
    tokenUrl: 'https://api.workos.com/sso/token',
    apiUrl: 'https://api.workos.com',
    scopes: [],
    // WorkOS takes the verifier with the client secret (its SDK sends both, as OAuth 2.1 advises).
    pkce: true,
    // Every sign-in goes through the organisation's connection (AUTH_PROVIDER_WORKOS_DEFAULT_CONNECTION).
    authParameters: (credentials) => ({ connection: credentials.DEFAULT_CONNECTION }),
    async profile(_api, tokens) {
      // WorkOS answers the profile with the token; it does not vouch for the address.
      const profile = (tokens.profile ?? {}) as { id?: string; email?: string; first_name?: string | null; last_name?: string | null };
      if (!profile.id) throw new Error('the token response has no profile');
      const displayName = [profile.first_name, profile.last_name].filter(Boolean).join(' ') || null;
      return { id: profile.id, email: text(profile.email), emailVerified: false, displayName, avatarUrl: null };
    },
  },
  twitch: {
    authUrl: 'https://id.twitch.tv/oauth2/authorize',
    tokenUrl: 'https://id.twitch.tv/oauth2/token',
    apiUrl: 'https://api.twitch.tv/helix',
    scopes: ['user:read:email'],
    pkce: false,
    async profile(api) {
      const { data } = await api<{ data: { id: string; display_name: string; email?: string; profile_image_url?: string }[] }>('/users');
      const user = data[0];
      // Twitch gives the address to this scope only once it is verified.
      return {
        id: user.id,
        email: text(user.email),
        emailVerified: text(user.email) !== null,
        displayName: text(user.display_name),
        avatarUrl: text(user.profile_image_url),
      };
    },
  },
};

/** The provider's API with the user's access token, through the platform's outbound client (timeouts, no redirects). */
export function profileApi(http: OutboundHttp, apiUrl: string, accessToken: string, extraHeaders: Record<string, string>): ProfileApi {
  return async <T>(path: string): Promise<T> => {
    const response = await http.requestJson<T>(`${apiUrl}${path}`, {
      method: 'GET',
      headers: { authorization: `Bearer ${accessToken}`, 'user-agent': 'Plinth', ...extraHeaders },
    });
    if (response.status !== 200 || response.body === null) throw new Error(`the provider's profile API answered ${response.status} for ${path}`);
    return response.body;
  };
}
