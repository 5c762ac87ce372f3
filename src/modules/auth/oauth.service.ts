import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import type { Logger } from 'pino';
import type { DataSource, EntityManager } from 'typeorm';
import { isTooManyRequests } from '../../common/refusal';
import { sha256 } from '../../common/sha256';
import type { Config } from '../../config';
import { OAUTH_PROVIDER_NAMES, type OAuthProviderName, type OAuthProviderSettings } from '../../config/oauth-providers';
import { isDatabaseUnavailable } from '../../db/unavailable';
import type { OutboundHttp } from '../../platform/outbound-http';
import type { AccountTakeover } from './account-takeover.service';
import { AUTH_ERRORS, authError, invalidRequest, isAuthError } from './auth-errors';
import { USER_COLUMNS, userColumnsOf, type UserRow } from './auth-user';
import type { NewAccounts } from './new-accounts.service';
import { oauth1Header } from './oauth1';
import { OAUTH2_PROVIDERS, profileApi, type OAuth2Provider, type ProviderProfile, type TokenResponse } from './oauth-endpoints';
import { clearedStateCookie, cookieHoldsState, stateCookie, type StateCookieScope } from './oauth-state-cookie';
import { one, rows } from '../../db/sql';
import { withQuery, type RedirectPolicy } from './redirects';
import type { SignIn } from './sign-in.service';

/**
 * Twitter's OAuth 1.0a endpoints (its consumer key and secret, spec §2.4). AUTH_PROVIDER_TWITTER_
 * TOKEN_URL replaces the access-token URL, and the request-token URL beside it.
 */
const TWITTER = {
  authUrl: 'https://api.twitter.com/oauth/authenticate',
  tokenUrl: 'https://api.twitter.com/oauth/access_token',
  apiUrl: 'https://api.twitter.com/1.1',
};

/** The `type` of the redirect after a sign-in with a provider. */
const SIGNIN_TYPE = 'signinProvider';

const INVALID_STATE = { error: 'invalid-state', errorDescription: 'The sign-in state is invalid, used or expired: start again' };

/** A failed sign-in with a provider: the user is sent back to the app with `error` and `errorDescription`. */
class ProviderFailure extends Error {
  constructor(
    readonly code: string,
    message: string,
  ) {
    super(message);
  }
}

interface PendingSignIn {
  provider: string;
  code_verifier: string;
  redirect_to: string;
}

/** Why a callback stops short of a session: `error` and `errorDescription` of the redirect. */
export interface CallbackFailure {
  code: string;
  message: string;
}

/** Where the start sends the browser, and the Set-Cookie that binds the sign-in to it. */
export interface StartedSignIn {
  location: string;
  cookie: string;
}

/** Where a callback sends the browser, and the Set-Cookie that clears the spent state (none when another sign-in's cookie is left alone). */
export interface FinishedCallback {
  location: string;
  cookie: string | null;
}

/** What the provider's callback brings in its query. */
export interface ProviderCallback {
  code?: string;
  state?: string;
  error?: string;
  error_description?: string;
  /** Apple's form POST: the user's name, as JSON, at the first sign-in only. */
  user?: string;
  /** Twitter (OAuth 1.0a): the request token, and the verifier of the user's consent; `denied` when refused. */
  oauth_token?: string;
  oauth_verifier?: string;
  denied?: string;
}

/** A provider linked to the user (GET /auth/user/providers). */
export interface LinkedProvider {
  id: string;
  provider: string;
  createdAt: string;
}

/**
 * Sign-in with external identity providers (OAuth 2.0 authorization code flow, PKCE where the
 * provider takes it). The `state` sent to the provider is random, signed (HMAC-SHA256 under the
 * token signing key), stored as a hash with the PKCE verifier and the checked `redirectTo`, and
 * used once within AUTH_PROVIDER_STATE_TTL_SECONDS; an HttpOnly cookie holds it in the browser
 * that started, and the callback goes on only in that browser. Every exit of the callback is a
 * redirect (to `redirectTo` once the state names it, to AUTH_CLIENT_URL before). A provider
 * account is linked to an existing account only when the provider vouches for the address.
 */
export class OAuthSignIn {
  constructor(
    private readonly dataSource: DataSource,
    private readonly signIn: SignIn,
    /** A provider's user with an address no account has gets a new account. */
    private readonly newAccounts: NewAccounts,
    private readonly takeover: AccountTakeover,
    private readonly redirects: RedirectPolicy,
    private readonly http: OutboundHttp,
    private readonly config: Pick<Config, 'auth'>,
    private readonly stateKey: string,
    private readonly logger: Logger,
  ) {}

  /** GET /auth/signin/provider/{provider}: where to send the browser. A bad redirectTo is refused (no redirect to it). */
  async start(name: OAuthProviderName, redirectToInput: string | undefined): Promise<StartedSignIn> {
    if (name === 'twitter') return this.startTwitter(this.settings(name), this.redirects.target(redirectToInput));
    const { provider, settings } = this.provider(name);
    const redirectTo = this.redirects.target(redirectToInput);
    const state = this.newState();
    // RFC 7636: 32 random bytes as the verifier; the challenge is its SHA-256 (S256).
    const verifier = randomBytes(32).toString('base64url');
    await this.dataSource.query(
      `INSERT INTO auth_oauth_states (state_hash, provider, code_verifier, redirect_to, expires_at)
       VALUES ($1, $2, $3, $4, now() + make_interval(secs => $5))`,
      [sha256(state), name, verifier, redirectTo, this.config.auth.providerStateTtlSeconds],
    );
    const url = new URL(settings.authUrl ?? provider.authUrl);
    url.searchParams.set('response_type', 'code');
    url.searchParams.set('client_id', settings.credentials.CLIENT_ID);
    url.searchParams.set('redirect_uri', this.callbackUrl(name));
    if (provider.scopes.length > 0) url.searchParams.set('scope', provider.scopes.join(' '));
    url.searchParams.set('state', state);
    if (provider.formPost) url.searchParams.set('response_mode', 'form_post');
    for (const [parameter, value] of Object.entries(provider.authParameters?.(settings.credentials) ?? {})) url.searchParams.set(parameter, value);
    if (provider.pkce) {
      url.searchParams.set('code_challenge', sha256(verifier).toString('base64url'));
      url.searchParams.set('code_challenge_method', 'S256');
    }
    return { location: url.toString(), cookie: stateCookie(state, this.cookieScope(name), this.config.auth.providerStateTtlSeconds) };
  }

  /**
   * GET /auth/signin/provider/{provider}/callback: where to send the browser: `redirectTo` with
   * `refreshToken` (or `mfaTicket`) and `type`, or with `error` and `errorDescription`. Without a
   * valid state there is no trusted redirectTo: the app's AUTH_CLIENT_URL gets the error. A state
   * the browser's cookie does not hold was started elsewhere: refused, its code never redeemed.
   */
  async callback(name: string, query: ProviderCallback, ip: string, cookieHeader: string | undefined): Promise<FinishedCallback> {
    const state = typeof query.state === 'string' ? query.state : undefined;
    // The cookie of this state is spent whatever happens next; another sign-in's stays for its own callback.
    const cookie = state !== undefined && this.isProvider(name) && cookieHoldsState(cookieHeader, state) ? clearedStateCookie(this.cookieScope(name)) : null;
    const finish = (location: string): FinishedCallback => ({ location, cookie });
    let pending: PendingSignIn | null;
    try {
      pending = state ? await this.takeState(name, state) : null;
    } catch (error) {
      return finish(withQuery(this.config.auth.clientUrl, this.unexpected(error, name)));
    }
    if (!pending) return finish(withQuery(this.config.auth.clientUrl, INVALID_STATE));
    const redirectTo = this.allowedRedirect(pending.redirect_to);
    if (typeof redirectTo !== 'string') return finish(withQuery(this.config.auth.clientUrl, redirectTo));
    if (cookie === null) {
      return finish(
        withQuery(redirectTo, { error: 'invalid-state', errorDescription: 'The sign-in was started in another browser, or its cookie expired: start again' }),
      );
    }
    const provider = name as OAuthProviderName;
    try {
      if (query.error !== undefined) {
        const code = /^[a-z_]{1,64}$/.test(query.error) ? query.error : 'provider-error';
        throw new ProviderFailure(code, (query.error_description ?? 'The provider refused the sign-in').slice(0, 500));
      }
      if (query.denied !== undefined) throw new ProviderFailure('access_denied', 'The user denied the sign-in');
      const profile = provider === 'twitter' ? await this.twitterProfile(query, pending) : await this.oauth2Profile(provider, query, pending);
      const result = await this.dataSource.transaction(async (manager) => this.signIn.complete(await this.userFor(manager, provider, profile), manager, ip));
      if (result.mfa) return finish(withQuery(redirectTo, { mfaTicket: result.mfa.ticket, type: SIGNIN_TYPE }));
      return finish(withQuery(redirectTo, { refreshToken: result.session!.refreshToken, type: SIGNIN_TYPE }));
    } catch (error) {
      return finish(withQuery(redirectTo, this.failureOf(error, name)));
    }
  }

  /**
   * A callback that cannot go on (over a limit, a malformed request, an error before the
   * handler): the browser goes to the redirectTo of its state, which is used up, or to
   * AUTH_CLIENT_URL when the state is missing, not this provider's or unreadable.
   */
  async refuse(name: string, state: unknown, failure: CallbackFailure): Promise<string> {
    const error = { error: failure.code, errorDescription: failure.message };
    try {
      const pending = typeof state === 'string' && state !== '' ? await this.takeState(name, state) : null;
      const redirectTo = pending ? this.allowedRedirect(pending.redirect_to) : null;
      return withQuery(typeof redirectTo === 'string' ? redirectTo : this.config.auth.clientUrl, error);
    } catch (lookup) {
      this.logger.warn({ err: lookup, provider: name }, 'finding the redirect of a refused provider callback failed');
      return withQuery(this.config.auth.clientUrl, error);
    }
  }

  /** The Set-Cookie that clears a provider's state cookie; null for a name that is no provider. */
  clearedCookie(name: string): string | null {
    return this.isProvider(name) ? clearedStateCookie(this.cookieScope(name)) : null;
  }

  /** What the app is told of an error: a provider's or the auth service's code, a limit, or (logged) an unexpected one. */
  private failureOf(error: unknown, name: string): { error: string; errorDescription: string } {
    if (error instanceof ProviderFailure || isAuthError(error)) return { error: error.code, errorDescription: error.message };
    // The browser is on its way back to the app: a limit (the SMS code's sends) is told there too.
    if (isTooManyRequests(error)) return { error: 'too-many-requests', errorDescription: error.message };
    return this.unexpected(error, name);
  }

  private unexpected(error: unknown, name: string): { error: string; errorDescription: string } {
    if (isDatabaseUnavailable(error)) {
      this.logger.warn({ err: error, provider: name }, 'database unavailable during a provider callback');
      return { error: 'service-unavailable', errorDescription: 'The service is temporarily unavailable: try again shortly' };
    }
    this.logger.error({ err: error, provider: name }, 'a provider callback failed');
    return { error: 'internal-server-error', errorDescription: AUTH_ERRORS['internal-server-error'].message };
  }

  /** The state's redirectTo while the settings still allow it; the error for AUTH_CLIENT_URL otherwise. */
  private allowedRedirect(redirectTo: string): string | { error: string; errorDescription: string } {
    try {
      return this.redirects.target(redirectTo);
    } catch (error) {
      if (!isAuthError(error)) throw error;
      return { error: error.code, errorDescription: error.message };
    }
  }

  private isProvider(name: string): name is OAuthProviderName {
    return (OAUTH_PROVIDER_NAMES as string[]).includes(name);
  }

  /** The cookie of a provider's sign-in: sent only to its callback, Secure under an https AUTH_SERVER_URL. */
  private cookieScope(name: OAuthProviderName): StateCookieScope {
    const server = new URL(this.config.auth.serverUrl);
    return {
      path: `${server.pathname.replace(/\/+$/, '')}/signin/provider/${name}/callback`,
      secure: server.protocol === 'https:',
      formPost: OAUTH2_PROVIDERS[name]?.formPost === true,
    };
  }

  private async oauth2Profile(name: OAuthProviderName, query: ProviderCallback, pending: PendingSignIn): Promise<ProviderProfile> {
    if (!query.code) throw new ProviderFailure('invalid-request', 'The provider sent no authorization code');
    const { provider, settings } = this.provider(name);
    const tokens = await this.exchange(provider, settings, name, query.code, pending.code_verifier);
    const extraHeaders: Record<string, string> = name === 'twitch' ? { 'client-id': settings.credentials.CLIENT_ID } : {};
    const api = profileApi(this.http, settings.apiUrl ?? provider.apiUrl, tokens.access_token, extraHeaders);
    return provider.profile(api, tokens, query as Record<string, string | undefined>).catch((error: unknown) => {
      this.logger.warn({ err: error, provider: name }, 'reading the profile from an identity provider failed');
      throw new ProviderFailure('provider-error', 'The provider did not give the profile');
    });
  }

  /**
   * Twitter's OAuth 1.0a: a request token (signed with the consumer key), kept with its secret
   * under the state, which rides in the callback URL (OAuth 1.0a has no state parameter).
   */
  private async startTwitter(settings: OAuthProviderSettings, redirectTo: string): Promise<StartedSignIn> {
    const state = this.newState();
    const callback = `${this.callbackUrl('twitter')}?state=${encodeURIComponent(state)}`;
    const requestToken = await this.twitterCall(settings, 'POST', this.twitterUrl(settings, 'request_token'), {}, { oauth_callback: callback });
    if (!requestToken.oauth_token || !requestToken.oauth_token_secret) throw authError('disabled-endpoint', 'Twitter did not give a request token');
    await this.dataSource.query(
      `INSERT INTO auth_oauth_states (state_hash, provider, code_verifier, redirect_to, expires_at)
       VALUES ($1, 'twitter', $2, $3, now() + make_interval(secs => $4))`,
      [sha256(state), `${requestToken.oauth_token} ${requestToken.oauth_token_secret}`, redirectTo, this.config.auth.providerStateTtlSeconds],
    );
    const url = new URL(settings.authUrl ?? TWITTER.authUrl);
    url.searchParams.set('oauth_token', requestToken.oauth_token);
    return { location: url.toString(), cookie: stateCookie(state, this.cookieScope('twitter'), this.config.auth.providerStateTtlSeconds) };
  }

  private async twitterProfile(query: ProviderCallback, pending: PendingSignIn): Promise<ProviderProfile> {
    const settings = this.settings('twitter');
    const [token, tokenSecret] = pending.code_verifier.split(' ');
    if (query.oauth_token !== token || !query.oauth_verifier)
      throw new ProviderFailure('invalid-request', 'Twitter sent back another request token, or no verifier');
    const access = await this.twitterCall(
      settings,
      'POST',
      this.twitterUrl(settings, 'access_token'),
      { token, tokenSecret },
      { oauth_verifier: query.oauth_verifier },
    );
    if (!access.oauth_token || !access.oauth_token_secret) throw new ProviderFailure('invalid-grant', 'Twitter did not accept the verifier');
    const url = `${settings.apiUrl ?? TWITTER.apiUrl}/account/verify_credentials.json?include_email=true&skip_status=true`;
    const credentials = {
      consumerKey: settings.credentials.CONSUMER_KEY,
      consumerSecret: settings.credentials.CONSUMER_SECRET,
      token: access.oauth_token,
      tokenSecret: access.oauth_token_secret,
    };
    const response = await this.http
      .requestJson<{ id_str?: string; name?: string; email?: string; profile_image_url_https?: string }>(url, {
        method: 'GET',
        headers: { authorization: oauth1Header('GET', url, credentials) },
      })
      .catch(() => null);
    const user = response?.status === 200 ? response.body : null;
    if (!user?.id_str) throw new ProviderFailure('provider-error', 'Twitter did not give the profile');
    // Twitter returns only a verified address, and only to apps allowed to ask for it.
    return {
      id: user.id_str,
      email: user.email || null,
      emailVerified: Boolean(user.email),
      displayName: user.name ?? null,
      avatarUrl: user.profile_image_url_https ?? null,
    };
  }

  /** A signed form POST to one of Twitter's OAuth 1.0a endpoints; its form answer, empty when refused. */
  private async twitterCall(
    settings: OAuthProviderSettings,
    method: string,
    url: string,
    token: { token?: string; tokenSecret?: string },
    extra: Record<string, string>,
  ): Promise<Record<string, string>> {
    const credentials = { consumerKey: settings.credentials.CONSUMER_KEY, consumerSecret: settings.credentials.CONSUMER_SECRET, ...token };
    const response = await this.http
      .request(url, { method, headers: { authorization: oauth1Header(method, url, credentials, extra) } })
      .catch((error: unknown) => {
        this.logger.warn({ err: error, provider: 'twitter' }, 'Twitter did not answer');
        throw new ProviderFailure('provider-error', 'Twitter did not answer');
      });
    if (response.status !== 200) {
      this.logger.warn({ provider: 'twitter', status: response.status }, 'Twitter refused an OAuth request');
      return {};
    }
    return Object.fromEntries(new URLSearchParams(response.body.toString('utf8')));
  }

  private twitterUrl(settings: OAuthProviderSettings, endpoint: 'request_token' | 'access_token'): string {
    return (settings.tokenUrl ?? TWITTER.tokenUrl).replace(/[^/]+$/, endpoint);
  }

  /** GET /auth/user/providers. */
  async list(userId: string): Promise<LinkedProvider[]> {
    const linked = await rows<{ id: string; provider: string; created_at: Date }>(
      this.dataSource.manager,
      'SELECT id, provider, created_at FROM auth_user_providers WHERE user_id = $1 ORDER BY created_at, provider',
      [userId],
    );
    return linked.map((row) => ({ id: row.id, provider: row.provider, createdAt: row.created_at.toISOString() }));
  }

  /** DELETE /auth/user/providers/{provider}: refused when it is the user's only way to sign in (no password, no other provider). */
  async unlink(userId: string, provider: string): Promise<void> {
    await this.dataSource.transaction(async (manager) => {
      const user = await one<{ password_hash: string | null }>(manager, 'SELECT password_hash FROM users WHERE id = $1 FOR UPDATE', [userId]);
      if (!user) throw authError('unauthenticated-user');
      const links = await rows<{ provider: string }>(manager, 'SELECT provider FROM auth_user_providers WHERE user_id = $1', [userId]);
      if (!links.some((link) => link.provider === provider)) throw invalidRequest(`No ${provider} account is linked to this user`);
      if (user.password_hash === null && links.length === 1) throw authError('last-sign-in-method');
      await manager.query('DELETE FROM auth_user_providers WHERE user_id = $1 AND provider = $2', [userId, provider]);
    });
  }

  /**
   * The user the provider's account belongs to: linked before, linked now through a verified
   * address (an account nobody had verified is taken over: AccountTakeover.takeOver), or new.
   */
  private async userFor(manager: EntityManager, provider: OAuthProviderName, profile: ProviderProfile): Promise<UserRow> {
    const linked = await one<UserRow>(
      manager,
      `SELECT ${userColumnsOf('u')} FROM auth_user_providers p JOIN users u ON u.id = p.user_id
       WHERE p.provider = $1 AND p.provider_user_id = $2`,
      [provider, profile.id],
    );
    if (linked) return linked;
    if (!profile.email) throw new ProviderFailure('email-required', 'The provider did not share an e-mail address');
    const existing = await one<UserRow>(manager, `SELECT ${USER_COLUMNS} FROM users WHERE lower(email) = lower($1) FOR UPDATE`, [profile.email]);
    let user: UserRow;
    if (existing) {
      // Linking on an address the provider does not vouch for would hand the account to whoever typed it there.
      if (!profile.emailVerified) {
        throw new ProviderFailure('unverified-email', 'An account uses this address, and the provider has not verified it: sign in another way to link it');
      }
      if (existing.is_anonymous) throw authError('email-already-in-use');
      // The provider proved the mailbox: an account nobody had verified becomes its owner's,
      // without the password, sessions, factors and links whoever made it had set (a disabled or
      // deleted one is left for the sign-in to refuse).
      const refused = existing.disabled || existing.deleted_at !== null;
      user = existing.email_verified || refused ? existing : await this.takeover.takeOver(manager, existing, `provider:${provider}`);
    } else {
      user = await this.newAccounts.insertExternal(manager, { ...profile, email: profile.email });
    }
    await manager.query(
      `INSERT INTO auth_user_providers (user_id, provider, provider_user_id) VALUES ($1, $2, $3)
       ON CONFLICT (user_id, provider) DO UPDATE SET provider_user_id = excluded.provider_user_id`,
      [user.id, provider, profile.id],
    );
    return user;
  }

  /** The authorization code for the user's access token, through the platform's outbound client. */
  private async exchange(provider: OAuth2Provider, settings: OAuthProviderSettings, name: string, code: string, verifier: string): Promise<TokenResponse> {
    const clientId = settings.credentials.CLIENT_ID;
    const clientSecret = provider.clientSecret ? provider.clientSecret(settings.credentials) : settings.credentials.CLIENT_SECRET;
    const parameters = new URLSearchParams({ grant_type: 'authorization_code', code, redirect_uri: this.callbackUrl(name) });
    if (provider.pkce) parameters.set('code_verifier', verifier);
    const headers: Record<string, string> = { accept: 'application/json' };
    const authentication = provider.tokenAuthentication ?? 'client_secret_post';
    if (authentication === 'client_secret_basic') {
      // As Bitbucket, Discord and Spotify document it: base64 of `id:secret`, and the credentials nowhere else.
      headers.authorization = `Basic ${Buffer.from(`${clientId}:${clientSecret}`).toString('base64')}`;
    } else {
      parameters.set('client_id', clientId);
      parameters.set('client_secret', clientSecret);
    }
    const tokenUrl = new URL(settings.tokenUrl ?? provider.tokenUrl);
    if (authentication === 'query') {
      for (const [parameter, value] of parameters) tokenUrl.searchParams.set(parameter, value);
    } else headers['content-type'] = 'application/x-www-form-urlencoded';
    const response = await this.http
      .request(tokenUrl, authentication === 'query' ? { method: 'GET', headers } : { method: 'POST', headers, body: parameters.toString() })
      .catch((error: unknown) => {
        this.logger.warn({ err: error, provider: name }, 'the token endpoint of an identity provider did not answer');
        throw new ProviderFailure('provider-error', 'The provider did not answer');
      });
    let body: Record<string, unknown> = {};
    try {
      body = JSON.parse(response.body.toString('utf8')) as typeof body;
    } catch {
      // Not JSON: handled as no token below.
    }
    if (response.status !== 200 || typeof body.access_token !== 'string') {
      this.logger.warn({ provider: name, status: response.status, error: body.error }, 'an identity provider refused the authorization code');
      throw new ProviderFailure('invalid-grant', 'The provider did not accept the authorization code');
    }
    return body as TokenResponse;
  }

  /** The enabled provider with a sign-in flow; disabled-endpoint otherwise. */
  private provider(name: OAuthProviderName): { provider: OAuth2Provider; settings: OAuthProviderSettings } {
    const settings = this.settings(name);
    const provider = OAUTH2_PROVIDERS[name];
    if (!provider) throw authError('disabled-endpoint', `Sign-in with ${name} is not available yet`);
    return { provider, settings };
  }

  private settings(name: OAuthProviderName): OAuthProviderSettings {
    const settings = this.config.auth.providers[name];
    if (!settings) throw authError('disabled-endpoint', `Sign-in with ${name} is disabled (AUTH_PROVIDER_${name.toUpperCase()}_ENABLED)`);
    return settings;
  }

  private callbackUrl(name: string): string {
    return `${this.config.auth.serverUrl}/signin/provider/${name}/callback`;
  }

  /** `<random>.<HMAC of it>`: a forged state is refused before the database is asked. */
  private newState(): string {
    const nonce = randomBytes(32).toString('base64url');
    return `${nonce}.${this.sign(nonce)}`;
  }

  /** The pending sign-in of a state, used up; null when forged, unknown, used, expired or another provider's. */
  private async takeState(name: string, state: string): Promise<PendingSignIn | null> {
    const [nonce, signature, extra] = state.split('.');
    if (!nonce || !signature || extra !== undefined) return null;
    const expected = Buffer.from(this.sign(nonce));
    const given = Buffer.from(signature);
    if (given.length !== expected.length || !timingSafeEqual(given, expected)) return null;
    const row = await one<PendingSignIn & { live: boolean }>(
      this.dataSource.manager,
      'DELETE FROM auth_oauth_states WHERE state_hash = $1 RETURNING provider, code_verifier, redirect_to, expires_at > now() AS live',
      [sha256(state)],
    );
    return row?.live && row.provider === name ? row : null;
  }

  private sign(nonce: string): string {
    return createHmac('sha256', this.stateKey).update(`oauth-state:${nonce}`).digest('base64url');
  }

  /** Pending sign-ins nobody came back from. */
  async deleteExpired(): Promise<void> {
    await this.dataSource.query('DELETE FROM auth_oauth_states WHERE expires_at < now()');
  }
}
