import type { Browser, BrowserContext, Page } from 'playwright-core';
import { recordErrors, recordRequests } from '../support/browser';
import { AdminClient } from './support';

export const VIEWPORT = { width: 1366, height: 768 };
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
