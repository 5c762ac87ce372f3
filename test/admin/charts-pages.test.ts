import { Writable } from 'node:stream';
import type { Browser, BrowserContext } from 'playwright-core';
import { BROWSER_SETUP_TIMEOUT_MS, launchChromium, saveScreenshot, seriousViolations } from '../support/browser';
import { createTestDatabase } from '../support/database';
import { metadataRequest } from '../support/metadata';
import { ADMIN_SECRET } from '../support/server';
import { loggedInPage } from './page-support';
import { startAdminServer, type AdminTestServer } from './support';

let browser: Browser;
let server: AdminTestServer;
const recorded: string[][] = [];
const contexts: BrowserContext[] = [];
const TABLE = 'public.shelf_books';

beforeAll(async () => {
  browser = await launchChromium();
  const database = await createTestDatabase();
  await database.query('CREATE TABLE shelf_books (id serial PRIMARY KEY, title text NOT NULL, pages int, note text)');
  await database.query("INSERT INTO shelf_books (title, pages) SELECT 'book ' || lpad(n::text, 2, '0'), n * 10 FROM generate_series(1, 30) AS n");
  server = await startAdminServer(
    { PLATFORM_ADMIN_METRICS_INTERVAL_SECONDS: '1' },
    { database, logTo: new Writable({ write: (_chunk, _encoding, done) => done() }) },
  );
  expect((await metadataRequest(server.url, { type: 'pg_track_table', args: { table: { schema: 'public', name: 'shelf_books' } } })).status).toBe(200);
}, BROWSER_SETUP_TIMEOUT_MS);
afterAll(async () => {
  for (const context of contexts) await context.close();
  await browser?.close();
  await server?.close();
  await server?.database.drop();
});

const open = (colorScheme: 'light' | 'dark' = 'light') => loggedInPage(browser, server.adminUrl, { colorScheme, contexts, recorded });

describe('the dashboard’s charts and the data browser in Chromium', () => {
  it('draws the last hour of the four series, with their values as text, in light and dark', async () => {
    // Requests to chart: GraphQL calls, some of them failing.
    const call = (query: string) =>
      fetch(server.graphqlUrl, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-gql-admin-secret': ADMIN_SECRET },
        body: JSON.stringify({ query }),
      });
    await Promise.all(Array.from({ length: 40 }, (_, index) => call(index % 4 === 0 ? '{ nothing_here }' : '{ __typename }')));
    await new Promise((resolve) => setTimeout(resolve, 2500));
    for (const colorScheme of ['light', 'dark'] as const) {
      const { page, errors } = await open(colorScheme);
      await page.goto(server.adminUrl);
      const requests = page.locator('figure.chart[data-series="requestRate"]');
      await requests.locator('path.chart-line').waitFor();
      for (const name of ['requestRate', 'errorRate', 'eventBacklog', 'jobQueueDepth']) {
        await page.locator(`figure.chart[data-series="${name}"] svg[role="img"]`).waitFor();
      }
      // The text alternative: latest, min and max, as the line shows them.
      const label = (await requests.locator('svg').getAttribute('aria-label'))!;
      expect(label).toMatch(/^Requests \(per second\) over the last \d+ minutes?: latest [\d.]+, min [\d.]+, max [\d.]+$/);
      const max = Number(/max ([\d.]+)/.exec(label)![1]);
      expect(max).toBeGreaterThan(1);
      expect(Number(/max ([\d.]+)/.exec((await page.locator('figure.chart[data-series="errorRate"] svg').getAttribute('aria-label'))!)![1])).toBeGreaterThan(0);
      expect(await page.locator('figure.chart[data-series="eventBacklog"] .chart-scope').innerText()).toBe('all instances');
      // The line has a point per sample: more than one sample, one segment at least.
      expect((await requests.locator('path.chart-line').getAttribute('d'))!.split('L').length).toBeGreaterThan(1);
      // The pointer over the chart reads the value under it.
      const svg = requests.locator('svg');
      const box = (await svg.boundingBox())!;
      await svg.hover({ position: { x: box.width - 2, y: box.height / 2 } });
      await requests.locator('.chart-readout').waitFor();
      expect(await requests.locator('.chart-readout').innerText()).toMatch(/\d:\d\d.*: [\d.]+\/s$/);
      // The line is drawn in the page's accent colour, which follows the colour scheme.
      expect(await page.evaluate('getComputedStyle(document.querySelector(\'figure[data-series="requestRate"] path.chart-line\')).stroke')).toBe(
        colorScheme === 'dark' ? 'rgb(121, 192, 255)' : 'rgb(5, 80, 174)',
      );
      expect(await seriousViolations(page)).toEqual([]);
      await saveScreenshot(page, 'admin', `charts-${colorScheme}`);
      expect(errors).toEqual([]);
    }
  });

  it('lists the tracked tables, then filters, sorts, pages and edits a row of one', async () => {
    const { page, errors } = await open();
    await page.goto(`${server.adminUrl}/data`);
    await page.getByRole('link', { name: TABLE }).click();
    await page.getByRole('heading', { name: `Data: ${TABLE}`, level: 1 }).waitFor();
    await page.getByText('Rows 1–25 of 30').waitFor();
    const firstCells = () => page.locator('.data-rows tbody tr td:first-child').allInnerTexts();
    expect((await firstCells()).slice(0, 3)).toEqual(['1', '2', '3']);

    // Filter: pages ≥ 200 leaves books 20 to 30.
    await page.getByLabel('Filter', { exact: true }).selectOption('pages');
    await page.getByLabel('Operator').selectOption('_gte');
    await page.getByLabel('Value', { exact: true }).fill('200');
    await page.getByRole('button', { name: 'Apply' }).click();
    await page.getByText('Rows 1–11 of 11 (filtered)').waitFor();

    // Sort: by title, descending.
    await page.getByLabel('Sort by').selectOption('title');
    await page.getByLabel('Direction').selectOption('desc');
    await page.locator('.data-rows tbody tr').first().getByText('book 30').waitFor();
    expect(await page.locator('th[aria-sort="descending"]').innerText()).toContain('title');

    // Pages of 10: the second holds the eleventh row.
    await page.getByLabel('Rows per page').selectOption('10');
    await page.getByText('Rows 1–10 of 11 (filtered)').waitFor();
    await page.getByRole('button', { name: 'Next page' }).click();
    await page.getByText('Rows 11–11 of 11 (filtered)').waitFor();
    expect(await firstCells()).toEqual(['20']);
    expect(await seriousViolations(page)).toEqual([]);

    // Edit that row: a new title, the pages set to null.
    await page.getByRole('button', { name: 'Edit row 20' }).click();
    await page.getByRole('heading', { name: 'Edit the row with id = 20' }).waitFor();
    await page.getByRole('textbox', { name: /^title/ }).fill('The renamed book');
    await page.locator('.row-editor .field', { hasText: 'pages' }).getByLabel('null').check();
    await page.getByRole('button', { name: 'Save' }).click();
    await page.getByRole('status').getByText('Saved the row with id = 20').waitFor();
    expect(await server.database.query('SELECT title, pages FROM shelf_books WHERE id = 20')).toEqual([{ title: 'The renamed book', pages: null }]);
    // The page reads the rows again: pages 200 is no more, the filter holds ten rows, and the page past them shows the last one.
    await page.getByText('Rows 1–10 of 10 (filtered)').waitFor();

    // A value the column's type refuses: GraphQL's error, shown as such.
    await page.getByRole('button', { name: 'Clear' }).click();
    await page.getByText('Rows 1–10 of 30').waitFor();
    await page.getByLabel('Filter', { exact: true }).selectOption('pages');
    await page.getByLabel('Operator').selectOption('_eq');
    await page.getByLabel('Value', { exact: true }).fill('many');
    await page.getByRole('button', { name: 'Apply' }).click();
    const alert = page.getByRole('alert').filter({ hasText: 'GraphQL said' });
    await alert.waitFor();
    expect(await alert.innerText()).toMatch(/Int.*many|many.*Int/);
    expect(await seriousViolations(page)).toEqual([]);
    await saveScreenshot(page, 'admin', 'data-browser');

    // An edit GraphQL refuses (pages is an Int) shows its error in the form, and the row stays as it was.
    await page.getByRole('button', { name: 'Clear' }).click();
    await page.getByLabel('Sort by').selectOption('id');
    await page.getByLabel('Direction').selectOption('asc');
    await page.getByRole('button', { name: 'Edit row 1', exact: true }).click();
    await page.getByRole('textbox', { name: /^pages/ }).fill('lots');
    await page.getByRole('button', { name: 'Save' }).click();
    const formAlert = page.locator('.row-editor').getByRole('alert').filter({ hasText: 'GraphQL said' });
    await formAlert.waitFor();
    expect(await formAlert.innerText()).toContain('lots');
    await saveScreenshot(page, 'admin', 'data-browser-edit-error');
    expect(await server.database.query('SELECT title, pages FROM shelf_books WHERE id = 1')).toEqual([{ title: 'book 01', pages: 10 }]);
    expect(errors).toEqual([]);
  });

  it('made no request to any host but the admin listener', () => {
    const requested = recorded.flat();
    expect(requested.length).toBeGreaterThan(10);
    expect(requested.filter((url) => !url.startsWith(`${server.adminUrl}/`) && !url.startsWith('data:'))).toEqual([]);
  });
});
