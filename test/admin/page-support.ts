import fs from 'node:fs';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { recordErrors, recordRequests } from '../support/browser';
import { AdminClient } from './support';

export const VIEWPORT = { width: 1366, height: 768 };
const AXE_SOURCE = fs.readFileSync(require.resolve('axe-core/axe.min.js'), 'utf8');

/** Runs axe-core in the page and answers its serious and critical violations (with the nodes they were found on). */
export async function seriousViolations(page: Page): Promise<{ id: string; impact: string; nodes: string[] }[]> {
  // Evaluated through the debugging protocol: the page's Content-Security-Policy would refuse an injected <script>.
  await page.evaluate(AXE_SOURCE);
  // The tests compile without the DOM's types: what runs in the page is given as text.
  const violations = (await page.evaluate(
    'axe.run().then((result) => result.violations.map(({ id, impact, nodes }) => ({ id, impact, nodes: nodes.map((node) => ({ target: node.target })) })))',
  )) as { id: string; impact: string; nodes: { target: string[] }[] }[];
  return violations
    .filter((violation) => violation.impact === 'serious' || violation.impact === 'critical')
    .map((violation) => ({ id: violation.id, impact: violation.impact, nodes: violation.nodes.map((node) => node.target.join(' ')) }));
}

/**
 * A page in a browser context of its own (light or dark) holding an admin session (logged in
 * through the API), recording its requests (into `recorded`) and its errors.
 */
export async function loggedInPage(
  browser: Browser,
  adminUrl: string,
  options: { colorScheme?: 'light' | 'dark'; contexts: BrowserContext[]; recorded: string[][] },
): Promise<{ page: Page; errors: string[] }> {
  const context = await browser.newContext({ viewport: VIEWPORT, colorScheme: options.colorScheme ?? 'light' });
  options.contexts.push(context);
  const page = await context.newPage();
  options.recorded.push(recordRequests(page));
  const errors = recordErrors(page);
  const client = new AdminClient(adminUrl);
  if ((await client.login()).status !== 200) throw new Error('the admin login failed');
  const [name, value] = client.cookie!.split('=');
  await context.addCookies([{ name, value, url: adminUrl }]);
  return { page, errors };
}
