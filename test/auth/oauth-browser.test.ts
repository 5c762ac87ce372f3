import { generateKeyPairSync, randomUUID } from 'node:crypto';
import type http from 'node:http';
import { createSigner } from 'fast-jwt';
import type { Browser } from 'playwright-core';
import { GENEROUS_AUTH_LIMITS } from '../support/auth';
import { BROWSER_SETUP_TIMEOUT_MS, launchChromium } from '../support/browser';
import { freePort } from '../support/global-setup';
import { json, LocalOAuthServer, location } from '../support/oauth-provider';
import { startTestServer, type TestServer } from '../support/server';

/**
 * The state cookie in a real browser (Chromium), where SameSite is the browser's to apply: Plinth
 * on http://localhost (a secure context, so a Secure cookie is kept), the provider and the app on
 * http://127.0.0.1, another site. GitHub returns by a cross-site redirect (a top-level GET, which
 * carries a SameSite=Lax cookie); Apple by a cross-site form POST, which carries only a
 * SameSite=None one.
 */
const GITHUB = { id: 'gh-browser-client', secret: 'gh-browser-secret' };
const APPLE = { id: 'com.example.browser', teamId: 'TEAM123456', keyId: 'KEY1234567', key: generateKeyPairSync('ec', { namedCurve: 'P-256' }) };

let chromium: Browser;
let server: TestServer;
let authUrl: string;
const idp = new LocalOAuthServer((request, response, body, url) => provider(request, response, body, url));

/** The app the browser lands on (AUTH_CLIENT_URL), GitHub's endpoints, and Apple's, whose page posts the return as Apple's does. */
function provider(request: http.IncomingMessage, response: http.ServerResponse, body: string, url: URL): void {
  if (url.pathname === '/app') return void response.writeHead(200, { 'content-type': 'text/html' }).end('<p>The app</p>');
  if (url.pathname === '/github/authorize') return idp.authorize(url, response, GITHUB, { pkce: true });
  if (url.pathname === '/github/token') {
    const issued = idp.token(request, response, body, url, GITHUB, 'client_secret_post');
    if (issued) json(response, 200, { access_token: idp.accessToken(issued.consent), token_type: 'bearer' });
    return;
  }
  if (url.pathname === '/apple/authorize') {
    // Apple's page answers with a form that the browser posts to redirect_uri (response_mode=form_post).
    const code = randomUUID();
    idp.issue(code, { clientId: APPLE.id, redirectUri: url.searchParams.get('redirect_uri')!, challenge: null, consent: idp.consenting });
    const field = (name: string, value: string) => `<input type="hidden" name="${name}" value="${value.replace(/"/g, '&quot;')}">`;
    const page = `<form method="post" action="${url.searchParams.get('redirect_uri')}">${field('code', code)}${field('state', url.searchParams.get('state')!)}</form><script>document.forms[0].submit()</script>`;
    return void response.writeHead(200, { 'content-type': 'text/html' }).end(page);
  }
  if (url.pathname === '/apple/token') {
    const issued = idp.take(new URLSearchParams(body).get('code'));
    if (!issued) return json(response, 400, { error: 'invalid_grant' });
    const idToken = createSigner({ key: 'apple-signs-with-its-own-key-here!!' })({
      iss: 'https://appleid.apple.com',
      aud: APPLE.id,
      sub: issued.consent.id,
      email: issued.consent.email,
      email_verified: 'true',
    });
    return json(response, 200, { access_token: randomUUID(), token_type: 'Bearer', id_token: idToken });
  }
  const consent = idp.bearer(request);
  if (!consent) return json(response, 401, {});
  if (url.pathname === '/github-api/user') return json(response, 200, { id: Number(consent.id), login: 'someone', name: consent.name, avatar_url: null });
  if (url.pathname === '/github-api/user/emails') return json(response, 200, [{ email: consent.email, primary: true, verified: true }]);
  json(response, 404, {});
}

beforeAll(async () => {
  chromium = await launchChromium();
  await idp.start();
  const port = await freePort();
  authUrl = `http://localhost:${port}/auth`;
  server = await startTestServer({
    ...GENEROUS_AUTH_LIMITS,
    PORT: String(port),
    AUTH_SERVER_URL: authUrl,
    AUTH_CLIENT_URL: `${idp.url}/app`,
    AUTH_PROVIDER_GITHUB_ENABLED: 'true',
    AUTH_PROVIDER_GITHUB_CLIENT_ID: GITHUB.id,
    AUTH_PROVIDER_GITHUB_CLIENT_SECRET: GITHUB.secret,
    AUTH_PROVIDER_GITHUB_AUTH_URL: `${idp.url}/github/authorize`,
    AUTH_PROVIDER_GITHUB_TOKEN_URL: `${idp.url}/github/token`,
    AUTH_PROVIDER_GITHUB_API_URL: `${idp.url}/github-api`,
    AUTH_PROVIDER_APPLE_ENABLED: 'true',
    AUTH_PROVIDER_APPLE_CLIENT_ID: APPLE.id,
    AUTH_PROVIDER_APPLE_TEAM_ID: APPLE.teamId,
    AUTH_PROVIDER_APPLE_KEY_ID: APPLE.keyId,
    AUTH_PROVIDER_APPLE_PRIVATE_KEY: APPLE.key.privateKey.export({ type: 'pkcs8', format: 'pem' }).toString().replace(/\n/g, '\\n'),
    AUTH_PROVIDER_APPLE_AUTH_URL: `${idp.url}/apple/authorize`,
    AUTH_PROVIDER_APPLE_TOKEN_URL: `${idp.url}/apple/token`,
  });
}, BROWSER_SETUP_TIMEOUT_MS);
afterAll(async () => {
  await chromium?.close();
  await server?.close();
  await idp.close();
});

/** Where a new browser (its own cookies) lands on the app after following `url`. */
async function landing(url: string): Promise<URL> {
  const context = await chromium.newContext();
  try {
    const page = await context.newPage();
    await page.goto(url);
    await page.waitForURL((address) => address.pathname === '/app');
    return new URL(page.url());
  } finally {
    await context.close();
  }
}

const start = (name: string) => `${authUrl}/signin/provider/${name}`;

describe('a provider sign-in in Chromium', () => {
  it("finishes GitHub's return by a cross-site redirect: the SameSite=Lax cookie comes with the top-level GET", async () => {
    idp.newConsent();
    const landed = await landing(start('github'));
    expect(landed.searchParams.get('error')).toBeNull();
    expect(landed.searchParams.get('refreshToken')).toEqual(expect.any(String));
  });

  it("finishes Apple's return by a cross-site form POST: the cookie is SameSite=None", async () => {
    idp.newConsent();
    const landed = await landing(start('apple'));
    expect(landed.searchParams.get('error')).toBeNull();
    expect(landed.searchParams.get('refreshToken')).toEqual(expect.any(String));
  });

  it("refuses the callback URL of an attacker's sign-in in the victim's browser", async () => {
    // The attacker starts and consents outside any browser, and keeps the callback URL.
    idp.newConsent();
    const started = await location(`${server.url}/auth/signin/provider/github`);
    const callback = (await location(started.location.toString())).location;
    expect(callback.toString().startsWith(`${authUrl}/signin/provider/github/callback?`)).toBe(true);
    const landed = await landing(callback.toString());
    expect(landed.searchParams.get('error')).toBe('invalid-state');
    expect(landed.searchParams.get('refreshToken')).toBeNull();
  });
});
