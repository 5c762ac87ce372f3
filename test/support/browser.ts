import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { chromium, type Browser, type Page } from 'playwright-core';

/** Debian's Chromium, which scripts/ensure-chromium.sh installs when it is missing. */
export const CHROMIUM = '/usr/bin/chromium';
const ENSURE_CHROMIUM = path.resolve(__dirname, '..', '..', '..', 'scripts', 'ensure-chromium.sh');

/** Screenshots the browser tests take, to look at (git-ignored). */
export const ARTIFACTS = path.resolve(__dirname, '..', '..', '..', 'test-artifacts');

/** Browser tests may wait for apt-get to install Chromium on a fresh machine. */
export const BROWSER_SETUP_TIMEOUT_MS = 15 * 60 * 1000;

/** Headless Chromium, installed first when it is missing; fails, never skips, when it cannot be. */
export async function launchChromium(): Promise<Browser> {
  execFileSync('sh', [ENSURE_CHROMIUM], { stdio: 'inherit' });
  return chromium.launch({ executablePath: CHROMIUM });
}

/** Saves a screenshot under test-artifacts/<folder>/<name>.png and returns its path. */
export async function saveScreenshot(page: Page, folder: string, name: string): Promise<string> {
  const file = path.join(ARTIFACTS, folder, `${name}.png`);
  fs.mkdirSync(path.dirname(file), { recursive: true });
  await page.screenshot({ path: file });
  return file;
}

/**
 * Records the URL of every request the page makes (documents, scripts, fonts, fetches,
 * WebSockets), so a test can tell which hosts it reached.
 */
export function recordRequests(page: Page): string[] {
  const urls: string[] = [];
  page.on('request', (request) => urls.push(request.url()));
  page.on('websocket', (socket) => urls.push(socket.url()));
  return urls;
}

/** Collects what the page logs as errors (a blocked load, a failed request, an exception). */
export function recordErrors(page: Page): string[] {
  const errors: string[] = [];
  page.on('console', (message) => message.type() === 'error' && errors.push(message.text()));
  page.on('pageerror', (error) => errors.push(error.message));
  return errors;
}
