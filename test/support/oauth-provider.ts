import { createHash, randomUUID, timingSafeEqual } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { getSetCookies } from 'undici';
import { authPost } from './auth';

/** What the local provider will say about the user who consents next. */
export interface Consent {
  id: string;
  email: string;
  verified: boolean;
  name: string;
}

/** A client registered at the local provider. */
export interface OAuthClient {
  id: string;
  secret: string;
}

/** How the client authenticates at the token endpoint, as the provider documents it. */
export type TokenAuthentication = 'client_secret_post' | 'client_secret_basic' | 'query';

/** A code the local provider issued, with what the token request must match (RFC 6749 §4.1.3, RFC 7636 §4.6). */
export interface IssuedCode {
  clientId: string;
  redirectUri: string;
  challenge: string | null;
  consent: Consent;
}

/** A token request as the local provider received it. */
export interface TokenRequest {
  method: string;
  parameters: URLSearchParams;
  authorization: string | undefined;
}

/** A handler of the local provider's requests (the body read whole). */
export type ProviderHandler = (request: http.IncomingMessage, response: http.ServerResponse, body: string, url: URL) => void;

export function json(response: http.ServerResponse, status: number, body: unknown): void {
  response.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(body));
}

function sameSecret(given: string | null | undefined, expected: string): boolean {
  const a = Buffer.from(given ?? '');
  const b = Buffer.from(expected);
  return a.length === b.length && timingSafeEqual(a, b);
}

/**
 * A local OAuth 2.0 authorization server on loopback, for the providers' documented endpoints:
 * the authorization endpoint (the user consents, or denies with `deny` in the query), the token
 * endpoint (RFC 6749 §4.1.3 with the provider's client authentication, RFC 7636's verifier), and
 * the bearer access tokens it issued. Each test routes its providers' paths to these pieces.
 */
export class LocalOAuthServer {
  url = '';
  readonly tokenRequests: TokenRequest[] = [];
  private readonly codes = new Map<string, IssuedCode>();
  private readonly accessTokens = new Map<string, Consent>();
  private nextConsent: Consent | null = null;
  private readonly server: http.Server;

  constructor(handler: ProviderHandler) {
    this.server = http.createServer((request, response) => {
      let body = '';
      request.on('data', (chunk: Buffer) => (body += chunk.toString('utf8')));
      request.on('end', () => handler(request, response, body, new URL(request.url ?? '/', this.url)));
    });
  }

  async start(): Promise<void> {
    await new Promise<void>((resolve) => this.server.listen(0, '127.0.0.1', resolve));
    this.url = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
  }

  async close(): Promise<void> {
    await new Promise((resolve) => this.server.close(resolve));
  }

  private people = 0;
  /** Ids and addresses unlike those of earlier runs on the same database. */
  private readonly peopleBase = (Date.now() % 1_000_000) * 1000;

  /** A new user of the provider (unique id and address, verified unless overridden), who consents next. */
  newConsent(overrides: Partial<Consent> = {}): Consent {
    this.people += 1;
    const id = String(this.peopleBase + this.people);
    return this.consent({ id, email: `person${id}@example.com`, verified: true, name: `Person ${this.people}`, ...overrides });
  }

  /** The user who consents next. */
  consent(consent: Consent): Consent {
    this.nextConsent = consent;
    return consent;
  }

  get consenting(): Consent {
    if (!this.nextConsent) throw new Error('no consent set for the local provider');
    return this.nextConsent;
  }

  /**
   * The authorization endpoint: back to redirect_uri with a code and the state, or the provider's
   * `access_denied` when the user refuses, or `invalid_request` for a request the provider would refuse.
   */
  authorize(url: URL, response: http.ServerResponse, client: OAuthClient, options: { pkce: boolean; valid?: boolean }): void {
    const back = new URL(url.searchParams.get('redirect_uri')!);
    back.searchParams.set('state', url.searchParams.get('state')!);
    const challenge = url.searchParams.get('code_challenge');
    // RFC 7636 §4.2-4.3: the challenge of S256 is BASE64URL(SHA-256(verifier)), 43 characters; the
    // providers here accept no other method (GitHub: "only the S256 code challenge method is
    // accepted"). A provider that takes PKCE refuses an authorization without it, as X does, so a
    // client that stops sending it fails here.
    const pkceWrong = options.pkce && (url.searchParams.get('code_challenge_method') !== 'S256' || !/^[\w-]{43}$/.test(challenge ?? ''));
    if (url.searchParams.get('client_id') !== client.id || url.searchParams.get('response_type') !== 'code' || pkceWrong || options.valid === false) {
      back.searchParams.set('error', 'invalid_request');
    } else if (url.searchParams.has('deny')) {
      back.searchParams.set('error', 'access_denied');
      back.searchParams.set('error_description', 'The user denied your request');
    } else {
      const code = randomUUID();
      this.codes.set(code, { clientId: client.id, redirectUri: url.searchParams.get('redirect_uri')!, challenge, consent: this.consenting });
      back.searchParams.set('code', code);
    }
    response.writeHead(302, { location: back.toString() }).end();
  }

  /** Issues `code` for a grant (an authorization endpoint that answers with a page of its own, as Apple's). */
  issue(code: string, issued: IssuedCode): void {
    this.codes.set(code, issued);
  }

  /** The code's grant, used up: a code works once. */
  take(code: string | null): IssuedCode | undefined {
    const issued = this.codes.get(code ?? '');
    this.codes.delete(code ?? '');
    return issued;
  }

  /**
   * The token endpoint: the code for a bearer access token, when the client authenticates the
   * documented way (and only that way, RFC 6749 §2.3), the redirect_uri is the authorization's and
   * the verifier matches the challenge the authorization carried. Answers the issued grant, or null
   * after answering the provider's error.
   */
  token(
    request: http.IncomingMessage,
    response: http.ServerResponse,
    body: string,
    url: URL,
    client: OAuthClient,
    authentication: TokenAuthentication,
  ): IssuedCode | null {
    const parameters = authentication === 'query' ? url.searchParams : new URLSearchParams(body);
    this.tokenRequests.push({ method: request.method!, parameters, authorization: request.headers.authorization });
    const methodRight =
      authentication === 'query'
        ? request.method === 'GET'
        : request.method === 'POST' && request.headers['content-type'] === 'application/x-www-form-urlencoded';
    let clientRight: boolean;
    if (authentication === 'client_secret_basic') {
      const [scheme, encoded] = (request.headers.authorization ?? '').split(' ');
      const pair = Buffer.from(encoded ?? '', 'base64').toString('utf8');
      const [id, secret] = [pair.slice(0, pair.indexOf(':')), pair.slice(pair.indexOf(':') + 1)];
      clientRight = scheme === 'Basic' && id === client.id && sameSecret(secret, client.secret) && !parameters.has('client_secret');
    } else {
      clientRight =
        request.headers.authorization === undefined && parameters.get('client_id') === client.id && sameSecret(parameters.get('client_secret'), client.secret);
    }
    if (!methodRight || !clientRight) {
      json(response, 401, { error: 'invalid_client' });
      return null;
    }
    const issued = this.take(parameters.get('code'));
    // Facebook's documented exchange has no grant_type; a grant_type present must be this one.
    const grantType = parameters.get('grant_type');
    const verifier = parameters.get('code_verifier');
    // RFC 7636 §4.1 and §4.6: 43 to 128 unreserved characters, whose SHA-256 is the challenge; a
    // code issued with a challenge is refused without its verifier.
    const verified =
      issued?.challenge === null ||
      (/^[\w.~-]{43,128}$/.test(verifier ?? '') && createHash('sha256').update(verifier!).digest('base64url') === issued?.challenge);
    if (
      !issued ||
      issued.clientId !== client.id ||
      (grantType !== null && grantType !== 'authorization_code') ||
      parameters.get('redirect_uri') !== issued.redirectUri ||
      !verified
    ) {
      json(response, 400, { error: 'invalid_grant' });
      return null;
    }
    return issued;
  }

  /** A new bearer access token for the consent. */
  accessToken(consent: Consent): string {
    const token = randomUUID();
    this.accessTokens.set(token, consent);
    return token;
  }

  /** The consent behind the request's bearer token; null when none was issued. */
  bearer(request: http.IncomingMessage): Consent | null {
    const header = request.headers.authorization ?? '';
    return header.startsWith('Bearer ') ? (this.accessTokens.get(header.slice(7)) ?? null) : null;
  }
}

/** A GET without following redirects; the Location it answers. */
export async function location(url: string): Promise<{ status: number; location: URL }> {
  const response = await fetch(url, { redirect: 'manual' });
  return { status: response.status, location: new URL(response.headers.get('location') ?? 'about:blank') };
}

/** A cookie as the browser keeps it. */
interface KeptCookie {
  name: string;
  value: string;
  path: string;
  /** Date.now() after which it is gone (Max-Age). */
  expires: number;
  attributes: SetCookie;
}

type SetCookie = ReturnType<typeof getSetCookies>[number];

/**
 * A browser's cookies for AUTH_SERVER_URL's host: kept from Set-Cookie, forgotten at Max-Age=0 or
 * when expired, sent to the paths RFC 6265 §5.1.4 path-matches. One jar is one browser.
 */
export class CookieJar {
  private readonly cookies = new Map<string, KeptCookie>();

  /** Keeps what an answer sets; answers what it set. */
  keep(headers: Headers): SetCookie[] {
    const set = getSetCookies(headers as unknown as Parameters<typeof getSetCookies>[0]);
    for (const cookie of set) {
      const path = cookie.path ?? '/';
      const key = `${cookie.name} ${path}`;
      if (cookie.maxAge !== undefined && cookie.maxAge <= 0) this.cookies.delete(key);
      else this.cookies.set(key, { name: cookie.name, value: cookie.value, path, expires: Date.now() + (cookie.maxAge ?? 86_400) * 1000, attributes: cookie });
    }
    return set;
  }

  /** The Cookie header for a request to `path`; undefined when no cookie goes there. */
  header(path: string): string | undefined {
    const sent = [...this.cookies.values()].filter((cookie) => cookie.expires > Date.now() && pathMatches(path, cookie.path));
    return sent.length > 0 ? sent.map((cookie) => `${cookie.name}=${cookie.value}`).join('; ') : undefined;
  }

  /** The cookies kept now. */
  get kept(): KeptCookie[] {
    return [...this.cookies.values()].filter((cookie) => cookie.expires > Date.now());
  }
}

function pathMatches(requestPath: string, cookiePath: string): boolean {
  if (requestPath === cookiePath) return true;
  return requestPath.startsWith(cookiePath) && (cookiePath.endsWith('/') || requestPath[cookiePath.length] === '/');
}

/** Where a request of the browser went: the status, the Location, what it set. */
export interface Visit {
  status: number;
  location: URL;
  setCookies: SetCookie[];
}

/**
 * The browser of a sign-in with a provider, on the test server whose AUTH_SERVER_URL is `authUrl`
 * (where the provider sends the browser back, mapped to the test server's own address). It keeps
 * the cookies the server sets, as a browser does; two instances are two browsers.
 */
export class ProviderBrowser {
  readonly jar = new CookieJar();

  constructor(
    private readonly serverUrl: () => string,
    private readonly authUrl: string,
  ) {}

  /** An AUTH_SERVER_URL address, on the test server. */
  local(url: URL): string {
    return `${this.serverUrl()}/auth${url.pathname.slice(new URL(this.authUrl).pathname.length)}${url.search}`;
  }

  /** A GET on the test server (an AUTH_SERVER_URL address), with this browser's cookies, without following the redirect. */
  async open(url: URL, init: RequestInit = {}): Promise<Visit> {
    const cookie = this.jar.header(url.pathname);
    const response = await fetch(this.local(url), {
      redirect: 'manual',
      ...init,
      headers: { ...(cookie ? { cookie } : {}), ...(init.headers as Record<string, string>) },
    });
    await response.arrayBuffer();
    const setCookies = this.jar.keep(response.headers);
    return { status: response.status, location: new URL(response.headers.get('location') ?? 'about:blank'), setCookies };
  }

  /** A form POST to the test server (Apple's return), with this browser's cookies. */
  post(url: URL, form: URLSearchParams): Promise<Visit> {
    return this.open(url, { method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded' }, body: form.toString() });
  }

  start(provider: string, redirectTo: string): Promise<Visit> {
    return this.open(new URL(`${this.authUrl}/signin/provider/${provider}?redirectTo=${encodeURIComponent(redirectTo)}`));
  }

  /** The provider's consent: where it sends the browser back (its callback URL, for GET returns). */
  async consent(start: URL, authorizeExtra = ''): Promise<URL> {
    const consented = await location(`${start.toString()}${authorizeExtra}`);
    expect(consented.status).toBe(302);
    return consented.location;
  }

  /** Our start, the provider's consent, our callback: where the app is sent, and the provider's callback URL. */
  async dance(provider: string, redirectTo: string, authorizeExtra = ''): Promise<{ final: URL; callback: URL; start: URL }> {
    const start = await this.start(provider, redirectTo);
    expect(start.status).toBe(302);
    const callback = await this.consent(start.location, authorizeExtra);
    expect(callback.origin + callback.pathname).toBe(`${this.authUrl}/signin/provider/${provider}/callback`);
    const final = await this.open(callback);
    expect(final.status).toBe(302);
    return { final: final.location, callback, start: start.location };
  }

  /** The session a sign-in's refresh token opens at POST /auth/token. */
  async session(refreshToken: string) {
    const refreshed = await authPost<{
      accessToken: string;
      user: { id: string; email: string; emailVerified: boolean; displayName: string; avatarUrl: string };
    }>(this.serverUrl(), '/token', { refreshToken });
    expect(refreshed.status).toBe(200);
    return refreshed.body;
  }
}

/** The refresh token of a successful sign-in's redirect to `redirectTo` (with its own query kept). */
export function expectSession(final: URL, redirectTo: string): string {
  const expected = new URL(redirectTo);
  expect(final.origin + final.pathname).toBe(expected.origin + expected.pathname);
  for (const [name, value] of expected.searchParams) expect(final.searchParams.get(name)).toBe(value);
  expect(final.searchParams.get('type')).toBe('signinProvider');
  expect(final.searchParams.get('error')).toBeNull();
  const refreshToken = final.searchParams.get('refreshToken');
  expect(refreshToken).toEqual(expect.any(String));
  return refreshToken!;
}
