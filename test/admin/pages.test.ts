import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { Writable } from 'node:stream';
import { generate, generateSecret } from 'otplib';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { BROWSER_SETUP_TIMEOUT_MS, ARTIFACTS, launchChromium, recordErrors, recordRequests, saveScreenshot, seriousViolations } from '../support/browser';
import { createTestDatabase } from '../support/database';
import { createRunsTable, recorderModule, RECORDER_QUEUE } from '../support/job-recorder';
import { ADMIN_PASSWORD, AdminClient, startAdminServer, type AdminTestServer } from './support';

const VIEWPORT = { width: 1366, height: 768 };
/** A failed login makes the next one wait this long: long enough for the page to show the wait. */
const LOGIN_DELAY_MS = 3000;
/** The issue's budget for the pages' assets, compressed. */
const ASSET_BUDGET_BYTES = 300 * 1024;
const WORKER = `jobs.${RECORDER_QUEUE}`;

let browser: Browser;
let server: AdminTestServer;
/** The requests of every page these tests open. */
const recorded: string[][] = [];
/** The admin listeners these tests started: the only hosts the pages may ask. */
const adminOrigins: string[] = [];
const contexts: BrowserContext[] = [];

beforeAll(async () => {
  browser = await launchChromium();
  const database = await createTestDatabase();
  await createRunsTable(database);
  server = await startAdminServer(
    { JOBS_POLL_INTERVAL_SECONDS: '1', LOG_LEVEL: 'info', PLATFORM_ADMIN_LOGIN_DELAY_MS: String(LOGIN_DELAY_MS) },
    { database, modules: [recorderModule()], logTo: new Writable({ write: (_chunk, _encoding, done) => done() }) },
  );
}, BROWSER_SETUP_TIMEOUT_MS);
afterAll(async () => {
  for (const context of contexts) await context.close();
  await browser?.close();
  await server?.close();
  await server?.database.drop();
});

/** A page in a context of its own (light or dark), recording its requests and errors. */
async function newPage(colorScheme: 'light' | 'dark' = 'light'): Promise<{ page: Page; errors: string[] }> {
  const context = await browser.newContext({ viewport: VIEWPORT, colorScheme });
  contexts.push(context);
  const page = await context.newPage();
  recorded.push(recordRequests(page));
  return { page, errors: recordErrors(page) };
}

/** A page whose context holds a session (logged in through the API, as the login test does through the form). */
async function loggedInPage(colorScheme: 'light' | 'dark' = 'light'): Promise<{ page: Page; errors: string[] }> {
  const opened = await newPage(colorScheme);
  const client = new AdminClient(server.adminUrl);
  expect((await client.login()).status).toBe(200);
  const [name, value] = client.cookie!.split('=');
  await opened.page.context().addCookies([{ name, value, url: server.adminUrl }]);
  return opened;
}

/** The bytes of an answer as sent (gzip asked for), not as decoded. */
function compressedSize(url: string): Promise<{ bytes: number; encoding: string | undefined }> {
  return new Promise((resolve, reject) => {
    http
      .get(url, { headers: { 'accept-encoding': 'gzip' } }, (response) => {
        let bytes = 0;
        response.on('data', (chunk: Buffer) => (bytes += chunk.length));
        response.on('end', () => resolve({ bytes, encoding: response.headers['content-encoding'] }));
      })
      .on('error', reject);
  });
}

describe('the admin dashboard in Chromium', () => {
  it('refuses a wrong password with a clear error, shows the wait a failure imposes, then logs in with the right one', async () => {
    const { page, errors } = await newPage();
    const response = await page.goto(server.adminUrl, { waitUntil: 'networkidle' });
    expect(response!.headers()['content-security-policy']).toContain("script-src 'self'");
    await page.getByLabel('Password').waitFor();
    expect(await seriousViolations(page)).toEqual([]);
    await saveScreenshot(page, 'admin', 'login');

    await page.getByLabel('User name').fill('admin');
    await page.getByLabel('Password').fill('not the password');
    await page.getByRole('button', { name: 'Log in' }).click();
    await expect(page.getByRole('alert').filter({ hasText: 'Wrong user name or password' }).waitFor()).resolves.toBeUndefined();
    await saveScreenshot(page, 'admin', 'login-wrong-password');

    // At once with the right password: the failure's delay is shown, with its wait.
    await page.getByLabel('Password').fill(ADMIN_PASSWORD);
    await page.getByRole('button', { name: 'Log in' }).click();
    await page
      .getByRole('alert')
      .filter({ hasText: /try again in \d+ s/ })
      .waitFor();
    await expect(page.getByRole('heading', { name: 'Dashboard' }).count()).resolves.toBe(0);

    await page.waitForTimeout(LOGIN_DELAY_MS);
    await page.getByRole('button', { name: 'Log in' }).click();
    await page.getByRole('heading', { name: 'Dashboard', level: 1 }).waitFor();
    // A reload keeps the session: the page asks for it again.
    await page.reload({ waitUntil: 'networkidle' });
    await page.getByRole('heading', { name: 'Dashboard', level: 1 }).waitFor();
    expect(errors.filter((error) => !/status of 40[13]|status of 429/.test(error))).toEqual([]);
  });

  it("shows each part's health, refreshed as it changes, in light and dark", async () => {
    for (const colorScheme of ['light', 'dark'] as const) {
      const { page, errors } = await loggedInPage(colorScheme);
      const started = performance.now();
      await page.goto(server.adminUrl);
      const worker = page.locator(`[data-part="${WORKER}"]`);
      await worker.locator('.state', { hasText: 'running' }).waitFor();
      // A first load (nothing cached) to every part's state shown: the benchmark wants it under 300 ms.
      process.stdout.write(`dashboard first load (${colorScheme}, to the parts shown): ${Math.round(performance.now() - started)} ms\n`);
      await page
        .locator('[data-part="database"]')
        .getByText(/\d+\.\d ms/)
        .waitFor();
      expect(await page.locator('.summary').innerText()).toContain('ok');
      expect(await seriousViolations(page)).toEqual([]);
      await saveScreenshot(page, 'admin', `dashboard-${colorScheme}`);
      expect(await page.evaluate('getComputedStyle(document.body).backgroundColor')).toBe(colorScheme === 'dark' ? 'rgb(13, 17, 23)' : 'rgb(255, 255, 255)');
      if (colorScheme === 'light') {
        // Stopped elsewhere (another admin, the API): the page shows it at its next refresh, without a reload.
        const client = new AdminClient(server.adminUrl);
        await client.login();
        expect((await client.request('POST', `/api/services/${WORKER}/stop`)).status).toBe(200);
        await worker.locator('.state', { hasText: 'stopped' }).waitFor({ timeout: 10_000 });
        await page.locator('.summary').getByText('degraded').waitFor();
        expect((await client.request('POST', `/api/services/${WORKER}/start`)).status).toBe(200);
        await worker.locator('.state', { hasText: 'running' }).waitFor({ timeout: 10_000 });
      }
      expect(errors).toEqual([]);
    }
  });

  it("stops and starts a queue's worker from its buttons, and streams the log line each change writes", async () => {
    const { page, errors } = await loggedInPage();
    const sent: Record<string, string>[] = [];
    page.on('request', (request) => request.method() === 'POST' && sent.push(request.headers()));
    await page.goto(`${server.adminUrl}/services`, { waitUntil: 'domcontentloaded' });
    const row = page.locator(`tr[data-part="${WORKER}"]`);
    await row.locator('.state', { hasText: 'running' }).waitFor();
    await page.getByText('streaming').waitFor();
    expect(await seriousViolations(page)).toEqual([]);

    // The recent lines come first: the changes below add to them.
    const logs = page.getByRole('log');
    const changes = logs.locator('li', { hasText: 'admin changed a service' });
    await page.waitForTimeout(500);
    const before = await changes.count();

    // Keyboard only: focus the button and press Enter.
    await page.getByRole('button', { name: `stop ${WORKER}`, exact: true }).focus();
    await page.keyboard.press('Enter');
    await row.locator('.state', { hasText: 'stopped' }).waitFor();
    await page.getByRole('status').getByText('now stopped').waitFor();
    await changes.nth(before).waitFor();
    expect(await changes.nth(before).innerText()).toContain(`service=${WORKER} action=stop`);

    await page.getByRole('button', { name: `start ${WORKER}`, exact: true }).click();
    await row.locator('.state', { hasText: 'running' }).waitFor();
    await changes.nth(before + 1).waitFor();
    expect(await changes.nth(before + 1).innerText()).toContain(`service=${WORKER} action=start`);
    expect(sent.length).toBe(2);
    for (const headers of sent) expect(headers['x-csrf-token']).toMatch(/\S{20,}/);
    // The server says so too.
    const client = new AdminClient(server.adminUrl);
    await client.login();
    const services = await client.request<{ services: { name: string; state: string }[] }>('GET', '/api/services');
    expect(services.body.services.find((part) => part.name === WORKER)!.state).toBe('running');

    // A part the dashboard does not stop offers no button.
    await expect(page.locator('tr[data-part="database"] button').count()).resolves.toBe(0);
    await saveScreenshot(page, 'admin', 'services');

    // The level filter: at warn, an info line no longer shows; a warn line (a failed login) does.
    await page.getByLabel('Lowest level').selectOption('warn');
    await page.getByText('streaming').waitFor();
    await expect(changes.count()).resolves.toBe(0);
    await new AdminClient(server.adminUrl).login({ username: 'admin', password: 'wrong' });
    await logs.getByText('failed admin login').first().waitFor();
    await page.waitForTimeout(LOGIN_DELAY_MS);
    expect(errors).toEqual([]);
  });

  it('changes a setting through the form, shows that it needs a restart, and shows a refused value', async () => {
    const { page, errors } = await loggedInPage();
    await page.goto(`${server.adminUrl}/config`, { waitUntil: 'networkidle' });
    await page.locator('tr[data-setting="PLATFORM_ADMIN_LOG_LINES"]').waitFor();
    // Secrets are masked.
    expect(await page.locator('tr[data-setting="PLATFORM_ADMIN_PASSWORD"] td').first().innerText()).toBe('********');
    expect(await page.content()).not.toContain('$argon2id');
    expect(await seriousViolations(page)).toEqual([]);

    await page.getByRole('button', { name: 'Edit PLATFORM_ADMIN_LOG_LINES' }).click();
    expect(await page.evaluate('document.activeElement.id')).toBe('setting-value');
    await page.getByLabel('Value (empty unsets it)').fill('many');
    await page.getByRole('button', { name: 'Save' }).click();
    await page.getByRole('alert').filter({ hasText: 'PLATFORM_ADMIN_LOG_LINES' }).waitFor();
    expect(await page.getByRole('alert').getAttribute('class')).toBe('error');
    expect(fs.existsSync(path.join(server.project, '.env'))).toBe(false);

    await page.getByLabel('Value (empty unsets it)').fill('500');
    await page.getByRole('button', { name: 'Save' }).click();
    await page.getByRole('alert').filter({ hasText: 'Needs restart: PLATFORM_ADMIN_LOG_LINES' }).waitFor();
    expect(fs.readFileSync(path.join(server.project, '.env'), 'utf8')).toContain('PLATFORM_ADMIN_LOG_LINES=500');
    const row = page.locator('tr[data-setting="PLATFORM_ADMIN_LOG_LINES"]');
    await row.getByText('needs restart').waitFor();
    expect(await row.locator('td').nth(1).innerText()).toContain('500');
    await saveScreenshot(page, 'admin', 'configuration');
    // The refused value's answer, and nothing else.
    expect(errors).toEqual(['Failed to load resource: the server responded with a status of 400 (Bad Request)']);
  });

  it('serves the pages and assets from the admin listener only, with long-lived caching and a small compressed size', async () => {
    // The main port has none of it.
    expect((await fetch(`${server.url}/_admin/`)).status).toBe(404);
    const { page } = await loggedInPage();
    const assets = new Set<string>();
    page.on('request', (request) => request.url().includes('/assets/') && assets.add(request.url()));
    await page.goto(`${server.adminUrl}/services`, { waitUntil: 'networkidle' });
    // The document names every asset the page loads (the script, the preloaded modules, the style sheet): none is found only after another is read.
    const named = [...(await (await fetch(`${server.adminUrl}/services`)).text()).matchAll(/(?:href|src)="(\/assets\/[^"]+)"/g)].map(
      (match) => `${server.adminUrl}${match[1]}`,
    );
    expect([...assets].sort()).toEqual(named.sort());
    expect(named.length).toBeGreaterThanOrEqual(5);
    let total = 0;
    const sizes: string[] = [];
    for (const url of [`${server.adminUrl}/`, ...assets]) {
      const { bytes, encoding } = await compressedSize(url);
      expect(encoding).toBe('gzip');
      total += bytes;
      sizes.push(`${new URL(url).pathname.split('/').pop() || 'page'} ${bytes} B`);
    }
    process.stdout.write(`admin pages, gzipped: ${sizes.join(', ')}; total ${total} B\n`);
    expect(total).toBeLessThan(ASSET_BUDGET_BYTES);
    const asset = await fetch([...assets][0]);
    expect(asset.headers.get('cache-control')).toBe('public, max-age=31536000, immutable');
    // Another version's URL is not answered with today's file.
    expect((await fetch([...assets][0].replace(/\/assets\/[^/]+\//, '/assets/0000000000000000/'))).status).toBe(404);
    expect((await fetch(`${server.adminUrl}/assets/x/nothing.js`)).status).toBe(404);
  });

  it('asks for the TOTP code when the server wants one, and shows the lock-out after repeated wrong codes', async () => {
    const secret = generateSecret();
    const totpServer = await startAdminServer({
      PLATFORM_ADMIN_TOTP_SECRET: secret,
      PLATFORM_ADMIN_LOGIN_DELAY_MS: '0',
      PLATFORM_ADMIN_LOGIN_MAX_FAILURES: '2',
    });
    adminOrigins.push(totpServer.adminUrl);
    try {
      const code = () => generate({ secret });
      const logIn = async (page: Page, otp?: string) => {
        if (otp !== undefined) await page.getByLabel('Authenticator code').fill(otp);
        await page.getByRole('button', { name: 'Log in' }).click();
      };
      const { page, errors } = await newPage();
      await page.goto(totpServer.adminUrl, { waitUntil: 'networkidle' });
      // No code field until the server asks for one.
      await expect(page.getByLabel('Authenticator code').count()).resolves.toBe(0);
      await page.getByLabel('Password').fill(ADMIN_PASSWORD);
      await logIn(page);
      await page.getByRole('alert').filter({ hasText: 'Enter the 6-digit code' }).waitFor();
      expect(await page.evaluate('document.activeElement.id')).toBe('otp');
      expect(await seriousViolations(page)).toEqual([]);
      await saveScreenshot(page, 'admin', 'login-totp');
      await logIn(page, await code());
      await page.getByRole('heading', { name: 'Dashboard', level: 1 }).waitFor();

      const { page: other } = await newPage();
      await other.goto(totpServer.adminUrl, { waitUntil: 'networkidle' });
      await other.getByLabel('Password').fill(ADMIN_PASSWORD);
      await logIn(other);
      await logIn(other, '000000');
      await other.getByRole('alert').filter({ hasText: 'Wrong user name, password or code' }).waitFor();
      // The second failure reaches PLATFORM_ADMIN_LOGIN_MAX_FAILURES: locked, with the wait shown.
      await logIn(other, '000001');
      await other
        .getByRole('alert')
        .filter({ hasText: /logins are locked for \d+ s/ })
        .waitFor();
      // The right code is refused too while locked.
      const answered = other.waitForResponse((response) => response.url().endsWith('/api/auth/login'));
      await logIn(other, await code());
      expect((await answered).status()).toBe(429);
      await other
        .getByRole('alert')
        .filter({ hasText: /logins are locked for \d+ s/ })
        .waitFor();
      await expect(other.getByRole('heading', { name: 'Dashboard' }).count()).resolves.toBe(0);
      await saveScreenshot(other, 'admin', 'login-locked');
      expect(errors.filter((error) => !/status of 401/.test(error))).toEqual([]);
    } finally {
      await totpServer.close();
    }
  });

  it('made no request to any host but the admin listener', () => {
    const requested = recorded.flat();
    expect(requested.length).toBeGreaterThan(20);
    const origins = [server.adminUrl, ...adminOrigins];
    expect(requested.filter((url) => !origins.some((origin) => url.startsWith(`${origin}/`)) && !url.startsWith('data:'))).toEqual([]);
  });
});

afterAll(() => process.stdout.write(`screenshots: ${path.join(ARTIFACTS, 'admin')}\n`));
