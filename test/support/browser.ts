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
