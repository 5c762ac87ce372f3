import os from 'node:os';
import path from 'node:path';
import type { Browser, Page } from 'playwright-core';
import { API_DOCS_THEMES } from '../../src/config';
import { ARTIFACTS, BROWSER_SETUP_TIMEOUT_MS, launchChromium, recordErrors, recordRequests, saveScreenshot } from '../support/browser';
import { createTestDatabase, type TestDatabase } from '../support/database';
import { startTestServer, type TestServer } from '../support/server';
import { signToken } from '../support/tokens';

const VIEWPORT = { width: 1400, height: 900 };
const USER_ID = '0b9a1f3e-2c4d-4e5f-8a6b-7c8d9e0f1a2b';

let browser: Browser;
let database: TestDatabase;
const servers: TestServer[] = [];

beforeAll(async () => {
  browser = await launchChromium();
  database = await createTestDatabase();
}, BROWSER_SETUP_TIMEOUT_MS);
afterAll(async () => {
  await browser?.close();
  for (const server of servers) await server.close();
  await database?.drop();
});

/** A server whose page pre-fills `token`, generating its reference (never an earlier build's). */
async function serverWith(token: string, environment: Record<string, string> = {}): Promise<TestServer> {
  const server = await startTestServer(
    { API_DOCS_AUTH_ENV_VAR: 'DOCS_JWT', DOCS_JWT: token, PLINTH_DIST_DIR: path.join(os.tmpdir(), 'plinth-never-built'), ...environment },
    { database },
  );
  servers.push(server);
  return server;
}

/** Fails naming every request the page made to another origin (http or WebSocket). */
function expectOnlyOrigin(urls: string[], origin: string): void {
  const wsOrigin = origin.replace(/^http/, 'ws');
  expect(
    urls.filter((url) => !url.startsWith(`${origin}/`) && !url.startsWith(`${wsOrigin}/`) && !url.startsWith('data:') && !url.startsWith('blob:')),
  ).toEqual([]);
}

async function openReference(page: Page, server: TestServer): Promise<void> {
  await page.goto(`${server.url}/docs`, { waitUntil: 'networkidle' });
  await page.getByRole('heading', { name: 'Plinth API', level: 1 }).waitFor();
}

describe('the reference page in Chromium', () => {
  // What each theme looks like: the colour mode Scalar puts on <body>, in a browser whose system mode is light and dark.
  const modes: Record<string, { light: string; dark: string }> = {
    default: { light: 'light-mode', dark: 'dark-mode' },
    moon: { light: 'dark-mode', dark: 'dark-mode' },
    purple: { light: 'dark-mode', dark: 'dark-mode' },
    solarized: { light: 'light-mode', dark: 'light-mode' },
  };

  it.each(API_DOCS_THEMES)('renders with the %s theme and the GraphQL section, asking no other host for anything', async (theme) => {
    const server = await serverWith(signToken({ roles: ['user'], userId: USER_ID }), { API_DOCS_THEME: theme });
    for (const colorScheme of ['light', 'dark'] as const) {
      const page = await browser.newPage({ viewport: VIEWPORT, colorScheme });
      const urls = recordRequests(page);
      const errors = recordErrors(page);
      await openReference(page, server);
      expect(await page.locator('body').getAttribute('class')).toContain(modes[theme][colorScheme]);
      // The GraphQL section: its operations, with their types, printed from the schema.
      await page.getByRole('heading', { name: 'registerUser', exact: true }).scrollIntoViewIfNeeded();
      await expect(page.getByText('registerUser(input: RegisterUserInput!): RegisterUserOutput!').first().isVisible()).resolves.toBe(true);
      await expect(page.getByRole('heading', { name: 'userRegistered', exact: true }).isVisible()).resolves.toBe(true);
      await saveScreenshot(page, 'apidocs', `reference-${theme}-${colorScheme}`);
      expectOnlyOrigin(urls, server.url);
      expect(errors).toEqual([]);
      await page.close();
    }
  });

  it('runs a GraphQL query from the try-out panel with the pre-filled token, and shows the result', async () => {
    const token = signToken({ roles: ['user'], userId: USER_ID });
    const server = await serverWith(token);
    const page = await browser.newPage({ viewport: VIEWPORT });
    const urls = recordRequests(page);
    const errors = recordErrors(page);
    const sent = page.waitForRequest((request) => request.method() === 'POST' && request.url() === `${server.url}/v1/graphql`);
    await openReference(page, server);
    await page.getByText('Run a query or mutation').first().click();
    await page.getByRole('button', { name: /Test Request.*post \/v1\/graphql/i }).click();
    await page.getByRole('button', { name: /Send post request/i }).click();
    const request = await sent;
    expect(request.headers().authorization).toBe(`Bearer ${token}`);
    expect(JSON.parse(request.postData()!)).toMatchObject({ operationName: 'Session' });
    // The panel shows the answer: the session the token gives.
    await page.getByText('200 OK').waitFor();
    await page.getByText(`"${USER_ID}"`).first().waitFor();
    await saveScreenshot(page, 'apidocs', 'try-out-graphql');
    expectOnlyOrigin(urls, server.url);
    expect(errors).toEqual([]);
    await page.close();
  });
});

describe('GraphiQL in Chromium', () => {
  it('runs a query and a subscription against the server with the pre-filled token', async () => {
    const server = await serverWith(signToken({ roles: ['admin'], userId: USER_ID }));
    const page = await browser.newPage({ viewport: VIEWPORT });
    const urls = recordRequests(page);
    const errors = recordErrors(page);
    const explorer = (query: string) => `${server.url}/v1/graphql?query=${encodeURIComponent(query)}`;

    await page.goto(explorer('query Session { session { role user_id } }'), { waitUntil: 'networkidle' });
    await page.getByRole('button', { name: /Execute query/i }).click();
    await page.locator('.result-window').getByText(`"${USER_ID}"`).waitFor();
    expect(await page.locator('.result-window').innerText()).toContain('"role": "admin"');
    await saveScreenshot(page, 'apidocs', 'graphiql-query');

    await page.goto(explorer('subscription Registered { userRegistered { email name } }'), { waitUntil: 'networkidle' });
    const subscribed = new Promise<void>((resolve) =>
      page.on('websocket', (socket) => socket.on('framesent', (frame) => String(frame.payload).includes('"subscribe"') && resolve())),
    );
    await page.getByRole('button', { name: /Execute query/i }).click();
    await subscribed;
    const email = `graphiql-${Date.now()}@example.com`;
    const registered = await fetch(`${server.url}/v1/graphql`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ query: `mutation { registerUser(input: {email: "${email}", password: "correct horse", name: "Grace"}) { success } }` }),
    });
    expect(await registered.json()).toEqual({ data: { registerUser: { success: true } } });
    await page.locator('.result-window').getByText(`"${email}"`).waitFor();
    await saveScreenshot(page, 'apidocs', 'graphiql-subscription');
    expectOnlyOrigin(urls, server.url);
    expect(urls).toContain(`${server.url.replace(/^http/, 'ws')}/v1/graphql/subscriptions`);
    expect(errors).toEqual([]);
    await page.close();
  });
});

afterAll(() => process.stdout.write(`screenshots: ${path.join(ARTIFACTS, 'apidocs')}\n`));
