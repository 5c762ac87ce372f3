import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { BROWSER_SETUP_TIMEOUT_MS, launchChromium, recordErrors, recordRequests, saveScreenshot, seriousViolations } from '../support/browser';
import type { TestDatabase } from '../support/database';
import { metadataRequest } from '../support/metadata';
import { backupCapableDatabase } from './database-support';
import { AdminClient, startAdminServer, type AdminTestServer } from './support';

let browser: Browser;
let context: BrowserContext;
let database: TestDatabase;
let server: AdminTestServer;
let backupsDir: string;

const labels = async () => (await database.query<{ label: string }>('SELECT label FROM page_rows ORDER BY id')).map((row) => row.label);

beforeAll(async () => {
  browser = await launchChromium();
  database = await backupCapableDatabase();
  backupsDir = fs.mkdtempSync(path.join(os.tmpdir(), 'plinth-backups-'));
  server = await startAdminServer({ PLATFORM_ADMIN_BACKUPS_DIR: backupsDir }, { database });
  await database.query('CREATE TABLE page_rows (id integer PRIMARY KEY, label text NOT NULL)');
  await database.query("INSERT INTO page_rows VALUES (1, 'kept'), (2, 'deleted after the backup')");
  expect((await metadataRequest(server.url, { type: 'pg_track_table', args: { table: 'page_rows' } })).status).toBe(200);
  context = await browser.newContext({ viewport: { width: 1366, height: 768 } });
  const client = new AdminClient(server.adminUrl);
  expect((await client.login()).status).toBe(200);
  const [name, value] = client.cookie!.split('=');
  await context.addCookies([{ name, value, url: server.adminUrl }]);
}, BROWSER_SETUP_TIMEOUT_MS);
afterAll(async () => {
  await context?.close();
  await browser?.close();
  await server?.close();
  await database?.drop();
  fs.rmSync(backupsDir, { recursive: true, force: true });
});

async function openDatabasePage(): Promise<{ page: Page; requests: string[]; errors: string[] }> {
  const page = await context.newPage();
  const requests = recordRequests(page);
  const errors = recordErrors(page);
  await page.goto(`${server.adminUrl}/database`);
  await page.getByRole('heading', { name: 'Database', level: 1 }).waitFor();
  return { page, requests, errors };
}

describe('the database page in Chromium', () => {
  it('takes a backup, and restores it after a confirm step, bringing back rows deleted since', async () => {
    const { page, requests, errors } = await openDatabasePage();
    await page.getByText('No backups yet.').waitFor();
    expect(await seriousViolations(page)).toEqual([]);

    await page.getByRole('button', { name: 'Take a backup' }).click();
    await page
      .getByRole('status')
      .filter({ hasText: /Backup plinth-.*\.dump taken/ })
      .waitFor();
    const row = page.locator('tr[data-backup]');
    await expect(row.count()).resolves.toBe(1);
    const file = (await row.getAttribute('data-backup'))!;

    await database.query('DELETE FROM page_rows WHERE id = 2');
    expect(await labels()).toEqual(['kept']);

    // With the keyboard: the restore button, then the confirm step (Escape cancels it, changing nothing).
    await page.getByRole('button', { name: `Restore ${file}` }).focus();
    await page.keyboard.press('Enter');
    const confirm = page.getByRole('alertdialog', { name: `Restore ${file}?` });
    await confirm.waitFor();
    // The cancel button has the focus: Enter now would not restore.
    await page.waitForFunction("document.activeElement.textContent.trim() === 'Cancel'", undefined, { timeout: 5000 });
    await page.keyboard.press('Escape');
    await expect(confirm.count()).resolves.toBe(0);
    // The focus is back on the button that opened it.
    await page.waitForFunction(`document.activeElement.getAttribute('aria-label') === 'Restore ${file}'`);
    expect(await labels()).toEqual(['kept']);

    await page.getByRole('button', { name: `Restore ${file}` }).click();
    await confirm.waitFor();
    expect(await seriousViolations(page)).toEqual([]);
    await saveScreenshot(page, 'admin', 'database-restore-confirm');
    await confirm.getByRole('button', { name: 'Restore now' }).click();
    await page
      .getByRole('status')
      .filter({ hasText: new RegExp(`Restored ${file.replace(/\./g, '\\.')} in .* safety backup plinth-.*-safety\\.dump`) })
      .waitFor({ timeout: 30_000 });
    expect(await labels()).toEqual(['kept', 'deleted after the backup']);
    // The list shows the safety backup beside the restored one.
    await expect(page.locator('tr[data-backup]').count()).resolves.toBe(2);
    await page.locator('tr[data-backup]', { hasText: 'safety' }).waitFor();
    await saveScreenshot(page, 'admin', 'database-restored');

    expect(errors).toEqual([]);
    expect(requests.every((url) => url.startsWith(`${server.adminUrl}/`))).toBe(true);
  }, 60_000);

  it('shows the migrations and the schema: tables with their columns and indexes, tracked ones marked', async () => {
    const { page, requests, errors } = await openDatabasePage();
    await page.getByText(/\d+ of \d+ applied/).waitFor();
    const known = server.server.dataSource.migrations.length;
    expect(await page.getByText(/\d+ of \d+ applied/).innerText()).toBe(`${known} of ${known} applied`);
    expect(await page.getByRole('button', { name: 'Run pending (0)' }).isDisabled()).toBe(true);
    await page.getByText('Every migration').click();
    await page.locator('tr[data-migration="CreateUsers1763700000000"]', { hasText: 'applied' }).waitFor();

    await page.getByLabel('Find a table').fill('page_');
    const tables = page.getByRole('navigation', { name: 'Tables' });
    await tables.getByRole('button', { name: 'page_rows' }).click();
    const detail = page.locator('.table-detail');
    await detail.getByRole('heading', { name: /public\.page_rows/ }).waitFor();
    expect(await detail.locator('h3 .state').innerText()).toBe('tracked');
    expect(await detail.getByRole('table', { name: 'Columns' }).innerText()).toMatch(/id\s+integer\s+no[\s\S]*label\s+text\s+no/);
    expect(await detail.locator('.indexes').innerText()).toContain('CREATE UNIQUE INDEX page_rows_pkey');
    expect(await detail.innerText()).toContain('primary key (id)');
    expect(await seriousViolations(page)).toEqual([]);
    await saveScreenshot(page, 'admin', 'database-schema');

    // A pending migration (the last one reverted) is shown, and run from its button.
    await server.server.dataSource.undoLastMigration({ transaction: 'each' });
    const last = server.server.dataSource.migrations[known - 1].name!;
    await page.reload();
    const run = page.getByRole('button', { name: 'Run pending (1)' });
    await run.waitFor();
    await page.locator(`tr[data-migration="${last}"]`, { hasText: 'pending' }).waitFor();
    await run.click();
    await page
      .getByRole('status')
      .filter({ hasText: `Ran ${last}.` })
      .waitFor();
    await page.locator(`tr[data-migration="${last}"]`, { hasText: 'applied' }).waitFor();
    await page.getByRole('button', { name: 'Run pending (0)' }).waitFor();

    // The page is in the navigation.
    expect(await page.getByRole('navigation', { name: 'Pages' }).getByRole('link', { name: 'Database' }).getAttribute('aria-current')).toBe('page');
    expect(errors).toEqual([]);
    expect(requests.every((url) => url.startsWith(`${server.adminUrl}/`))).toBe(true);
  });
});
