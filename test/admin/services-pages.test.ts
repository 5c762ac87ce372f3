import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { Writable } from 'node:stream';
import type { Browser, BrowserContext } from 'playwright-core';
import { BROWSER_SETUP_TIMEOUT_MS, launchChromium, recordErrors, recordRequests, saveScreenshot, seriousViolations } from '../support/browser';
import { createTestDatabase } from '../support/database';
import { freePort } from '../support/global-setup';
import { AdminClient, startAdminServer, type AdminTestServer } from './support';

const VIEWPORT = { width: 1366, height: 768 };

let browser: Browser;
let server: AdminTestServer;
let tiny: http.Server;
let context: BrowserContext;

beforeAll(async () => {
  browser = await launchChromium();
  tiny = http.createServer((_request, response) => response.end('ok'));
  await new Promise<void>((resolve) => tiny.listen(0, '127.0.0.1', resolve));
  server = await startAdminServer(
    {
      CS_1: `tiny:express-ts:${(tiny.address() as AddressInfo).port}:/tiny`,
      CS_1_HOST: '127.0.0.1',
      CS_2: `gone:fastify-ts:${await freePort()}:/gone`,
      CS_2_HOST: '127.0.0.1',
    },
    { database: await createTestDatabase(), logTo: new Writable({ write: (_chunk, _encoding, done) => done() }) },
  );
}, BROWSER_SETUP_TIMEOUT_MS);
afterAll(async () => {
  await context?.close();
  await browser?.close();
  await server?.close();
  await server?.database.drop();
  tiny?.close();
});

/** axe-core's serious and critical violations in the page (evaluated through the debugging protocol: the CSP refuses an injected script). */
describe('the services page', () => {
  it('shows the scheduler and the custom services with their buttons, pauses the scheduler here and resumes it on all instances', async () => {
    context = await browser.newContext({ viewport: VIEWPORT });
    const page = await context.newPage();
    const requests = recordRequests(page);
    const errors = recordErrors(page);
    const client = new AdminClient(server.adminUrl);
    expect((await client.login()).status).toBe(200);
    const [name, value] = client.cookie!.split('=');
    await context.addCookies([{ name, value, url: server.adminUrl }]);

    await page.goto(`${server.adminUrl}/services`);
    const scheduler = page.locator('[data-part="scheduler"]');
    await scheduler.locator('.state', { hasText: 'running' }).waitFor();
    const tinyRow = page.locator('[data-part="cs.tiny"]');
    await tinyRow.locator('.state', { hasText: 'running' }).waitFor();
    expect(await tinyRow.innerText()).toMatch(/\/healthz answered 200.*\(\d+(\.\d)? ms\)/s);
    // Health-checked only: no buttons.
    expect(await tinyRow.getByRole('button').count()).toBe(0);
    await page.locator('[data-part="cs.gone"]').locator('.state', { hasText: 'unavailable' }).waitFor();
    expect(await scheduler.getByRole('button').allInnerTexts()).toEqual(['stop', 'restart']);
    expect(await seriousViolations(page)).toEqual([]);
    await tinyRow.scrollIntoViewIfNeeded();
    await saveScreenshot(page, 'admin', 'services-scheduler-custom');

    await page.getByRole('button', { name: 'stop scheduler', exact: true }).click();
    await scheduler.locator('.state', { hasText: 'stopped' }).waitFor();
    await page.getByRole('status').filter({ hasText: 'stop done, now stopped' }).waitFor();
    expect(await scheduler.getByRole('button').allInnerTexts()).toEqual(['start', 'restart']);

    // On all instances (this one is the only one): the answer says who acknowledged.
    await page.getByLabel('all instances').check();
    await page.getByRole('button', { name: 'start scheduler', exact: true }).click();
    await page.getByRole('status').filter({ hasText: 'start sent to all instances; 1 of 1 answered' }).waitFor();
    await scheduler.locator('.state', { hasText: 'running' }).waitFor();
    await page.getByRole('button', { name: 'stop scheduler', exact: true }).click();
    await scheduler.getByText('stopped on all instances').waitFor();
    expect(await seriousViolations(page)).toEqual([]);
    await saveScreenshot(page, 'admin', 'services-stopped-on-all');
    await page.getByRole('button', { name: 'start scheduler', exact: true }).click();
    await scheduler.locator('.state', { hasText: 'running' }).waitFor();
    expect(await scheduler.getByText('stopped on all instances').count()).toBe(0);

    expect(errors).toEqual([]);
    expect(requests.filter((url) => !url.startsWith(`${server.adminUrl}/`) && !url.startsWith('data:'))).toEqual([]);
  });
});
