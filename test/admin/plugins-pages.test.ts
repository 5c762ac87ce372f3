import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { BROWSER_SETUP_TIMEOUT_MS, launchChromium, recordErrors, recordRequests, saveScreenshot, seriousViolations } from '../support/browser';
import { startWebhookReceiver, type WebhookReceiver } from '../support/webhook-receiver';
import { AdminClient, startAdminServer, type AdminTestServer } from './support';

const VIEWPORT = { width: 1366, height: 768 };

let browser: Browser;
let server: AdminTestServer;
let receiver: WebhookReceiver;
let pluginsDir: string;
let sources: string;
const recorded: string[][] = [];
const contexts: BrowserContext[] = [];

beforeAll(async () => {
  browser = await launchChromium();
  receiver = await startWebhookReceiver();
  const root = fs.mkdtempSync(path.join(os.tmpdir(), 'plinth-plugin-pages-'));
  pluginsDir = path.join(root, 'plugins');
  sources = path.join(root, 'sources');
  const write = (dir: string, manifest: unknown) => {
    fs.mkdirSync(dir, { recursive: true });
    fs.writeFileSync(path.join(dir, 'plugin.json'), JSON.stringify(manifest));
  };
  write(path.join(pluginsDir, 'reports'), {
    name: 'reports',
    version: '2.0.1',
    description: 'Monthly reports for the finance team',
    rest_routes: [
      { method: 'GET', path: '/reports', summary: 'The reports' },
      { method: 'POST', path: '/reports/{id}/send', summary: 'Send a report' },
    ],
    sync: `${receiver.url}/sync`,
    webhooks: ['report_requested'],
  });
  write(path.join(sources, 'invoices'), {
    name: 'invoices',
    description: 'Invoices',
    rest_routes: [{ method: 'GET', path: '/invoices', summary: 'Invoices' }],
  });
  execFileSync('tar', ['-czf', path.join(sources, 'invoices.tgz'), '-C', path.join(sources, 'invoices'), 'plugin.json']);
  // Certificates: one valid, one expiring in 3 days.
  const certs = path.join(root, 'certs');
  fs.mkdirSync(certs);
  for (const [name, days] of [
    ['api', 200],
    ['old', 3],
  ] as const) {
    execFileSync(
      'openssl',
      [
        'req',
        '-x509',
        '-newkey',
        'ec',
        '-pkeyopt',
        'ec_paramgen_curve:prime256v1',
        '-nodes',
        '-days',
        String(days),
        '-subj',
        `/CN=${name}.example.test`,
      ].concat(['-addext', `subjectAltName=DNS:${name}.example.test`, '-keyout', path.join(certs, `${name}.key`), '-out', path.join(certs, `${name}.pem`)]),
      { stdio: 'ignore' },
    );
  }
  server = await startAdminServer({
    PLINTH_PLUGINS_DIR: pluginsDir,
    PLATFORM_DEPLOY_STAGING_COMMAND: 'echo "building"; echo "uploading" >&2; echo "done"',
    PLATFORM_TLS_CERT_FILES: certs,
  });
}, BROWSER_SETUP_TIMEOUT_MS);
afterAll(async () => {
  for (const context of contexts) await context.close();
  await browser?.close();
  await server?.close();
  await receiver?.close();
});

async function loggedInPage(colorScheme: 'light' | 'dark' = 'light'): Promise<{ page: Page; errors: string[] }> {
  const context = await browser.newContext({ viewport: VIEWPORT, colorScheme });
  contexts.push(context);
  const page = await context.newPage();
  recorded.push(recordRequests(page));
  const errors = recordErrors(page);
  const client = new AdminClient(server.adminUrl);
  expect((await client.login()).status).toBe(200);
  const [name, value] = client.cookie!.split('=');
  await context.addCookies([{ name, value, url: server.adminUrl }]);
  return { page, errors };
}

describe('the plugins, deployment and certificates pages', () => {
  it('lists the plugins as cards, installs one from an archive, and opens a plugin to sync it and see its routes and events', async () => {
    const { page, errors } = await loggedInPage();
    await page.goto(`${server.adminUrl}/plugins`);
    const card = page.locator('.card', { hasText: 'reports' });
    await card.getByText('Monthly reports for the finance team').waitFor();
    await page.getByLabel('Folder or .tar.gz archive on the server').fill(path.join(sources, 'invoices.tgz'));
    await page.getByRole('button', { name: 'Install' }).click();
    await page.getByText('Installed invoices (1 route(s)).').waitFor();
    await page.locator('.card', { hasText: 'invoices' }).waitFor();
    // A refused install says why.
    await page.getByLabel('Folder or .tar.gz archive on the server').fill(path.join(sources, 'invoices.tgz'));
    await page.getByRole('button', { name: 'Install' }).click();
    await page.getByText('A plugin named invoices is already installed: remove it first').waitFor();
    expect(await seriousViolations(page)).toEqual([]);
    await saveScreenshot(page, 'admin', 'plugins');

    await card.getByRole('link', { name: 'reports' }).click();
    await page
      .getByRole('heading', { name: /reports/ })
      .first()
      .waitFor();
    await page.getByRole('cell', { name: '/reports/{id}/send' }).waitFor();
    await page.getByText('no event trigger of this name').waitFor();
    await page.getByText('Never synced.').waitFor();
    receiver.answer('/sync', { status: 200, body: { imported: 3 } });
    await page.getByRole('button', { name: 'Sync now' }).click();
    await page.getByText(/Synced .* by admin .*answered 200/).waitFor();
    expect(receiver.at('/sync')).toHaveLength(1);
    expect(await seriousViolations(page)).toEqual([]);
    await saveScreenshot(page, 'admin', 'plugin');

    // Removing asks first, then goes back to the grid.
    await page.goto(`${server.adminUrl}/plugins/invoices`);
    await page.getByRole('button', { name: 'Remove' }).click();
    await page.getByRole('button', { name: 'Yes, remove' }).click();
    await page.waitForURL(`${server.adminUrl}/plugins`);
    await card.waitFor();
    expect(await page.locator('.card', { hasText: 'invoices' }).count()).toBe(0);
    expect(fs.existsSync(path.join(pluginsDir, 'invoices'))).toBe(false);
    await page.goto(`${server.adminUrl}/plugins/nothing`);
    await page.getByRole('heading', { name: 'No plugin nothing' }).waitFor();
    // The browser logs the refused install (409) and the unknown plugin (404) it was shown; nothing else.
    expect(errors.filter((error) => !/status of (409|404)/.test(error))).toEqual([]);
  });

  it('deploys to staging after a confirmation, streams the output, and shows the history on every deployment page', async () => {
    const { page, errors } = await loggedInPage('dark');
    await page.goto(`${server.adminUrl}/deployment/staging`);
    await page.getByRole('heading', { name: 'Deploy to Staging' }).waitFor();
    await page.getByText('No deployment yet.').waitFor();
    await page.getByRole('button', { name: 'Deploy to staging' }).click();
    await page.getByText('Deploy to staging now?').waitFor();
    await page.getByRole('button', { name: 'Yes, deploy' }).click();
    const output = page.getByRole('log');
    await output.getByText('uploading').waitFor();
    await output.getByText('[plinth] succeeded (exit code 0)').waitFor();
    await page.getByRole('status').filter({ hasText: 'Ended' }).getByText('succeeded').waitFor();
    await page.locator('tr[data-run]').getByText('succeeded').waitFor();
    expect(await seriousViolations(page)).toEqual([]);
    await saveScreenshot(page, 'admin', 'deployment-staging');

    await page.goto(`${server.adminUrl}/deployment/prod`);
    await page.getByRole('heading', { name: 'Deploy to Production' }).waitFor();
    // The navigation shows the section the page belongs to.
    expect(await page.getByRole('navigation').getByRole('link', { name: 'Deployment' }).getAttribute('aria-current')).toBe('true');
    await page.getByText('PLATFORM_DEPLOY_PRODUCTION_COMMAND').waitFor();
    expect(await page.getByRole('button', { name: 'Deploy to production' }).count()).toBe(0);
    expect(await seriousViolations(page)).toEqual([]);
    await saveScreenshot(page, 'admin', 'deployment-prod');

    await page.goto(`${server.adminUrl}/deployment/environments`);
    await page.getByRole('heading', { name: 'Deployment environments' }).waitFor();
    await page
      .getByRole('row', { name: /Production/ })
      .getByText('not configured')
      .first()
      .waitFor();
    await page
      .locator('tr[data-run]')
      .first()
      .getByRole('button', { name: /Show the output/ })
      .click();
    await page.getByRole('log').getByText('building').waitFor();
    expect(await seriousViolations(page)).toEqual([]);
    await saveScreenshot(page, 'admin', 'deployment-environments');
    expect(errors).toEqual([]);
  });

  it('shows the certificates with the one expiring soon warned', async () => {
    const { page, errors } = await loggedInPage();
    await page.goto(`${server.adminUrl}/certificates`);
    await page.getByRole('heading', { name: 'Certificates' }).waitFor();
    await page.getByText('1 of 2 certificate(s) expired or expiring within 14 days').waitFor();
    await page
      .getByRole('alert')
      .getByText(/CN=old\.example\.test: Expires in [23] days/)
      .waitFor();
    await page
      .getByRole('row', { name: /CN=api\.example\.test/ })
      .getByText('valid')
      .waitFor();
    expect(await seriousViolations(page)).toEqual([]);
    await saveScreenshot(page, 'admin', 'certificates');
    expect(errors).toEqual([]);
  });

  it('made no request to any host but the admin listener', () => {
    const requested = recorded.flat();
    expect(requested.length).toBeGreaterThan(10);
    expect(requested.filter((url) => !url.startsWith(`${server.adminUrl}/`) && !url.startsWith('data:'))).toEqual([]);
  });
});
