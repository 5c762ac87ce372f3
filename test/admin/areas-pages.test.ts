import type { Browser, BrowserContext, Page } from 'playwright-core';
import { BROWSER_SETUP_TIMEOUT_MS, launchChromium, recordErrors, recordRequests, saveScreenshot, seriousViolations } from '../support/browser';
import { eventually, RECORDER_QUEUE, runsOf } from '../support/job-recorder';
import { AdminClient } from './support';
import { NOTES_PATH, seedDeadEvent, seedErrors, seedJobs, seedNewsletter, startAreasWorld, TRIGGER, type AreasWorld } from './areas-support';

const VIEWPORT = { width: 1366, height: 768 };

let browser: Browser;
let world: AreasWorld;
let seeded: {
  errors: Awaited<ReturnType<typeof seedErrors>>;
  event: Awaited<ReturnType<typeof seedDeadEvent>>;
  jobs: Awaited<ReturnType<typeof seedJobs>>;
  newsletter: Awaited<ReturnType<typeof seedNewsletter>>;
};
const recorded: string[][] = [];
const contexts: BrowserContext[] = [];

beforeAll(async () => {
  [browser, world] = await Promise.all([launchChromium(), startAreasWorld()]);
  const [errors, event, jobs, newsletter] = await Promise.all([
    seedErrors(world, 'checkout'),
    seedDeadEvent(world, 'a note'),
    seedJobs(world),
    seedNewsletter(world, ['ada', 'bob']),
  ]);
  seeded = { errors, event, jobs, newsletter };
}, BROWSER_SETUP_TIMEOUT_MS);
afterAll(async () => {
  for (const context of contexts) await context.close();
  await browser?.close();
  await world?.close();
});

/** A page logged in (the session cookie of a login through the API), recording its requests and errors. */
async function loggedInPage(colorScheme: 'light' | 'dark' = 'light'): Promise<{ page: Page; errors: string[] }> {
  const context = await browser.newContext({ viewport: VIEWPORT, colorScheme });
  contexts.push(context);
  const page = await context.newPage();
  recorded.push(recordRequests(page));
  const client = new AdminClient(world.server.adminUrl);
  expect((await client.login()).status).toBe(200);
  const [name, value] = client.cookie!.split('=');
  await context.addCookies([{ name, value, url: world.server.adminUrl }]);
  return { page, errors: recordErrors(page) };
}

/** axe-core's serious and critical violations on the page as it is now. */
describe("the dashboard's pages of Plinth's areas in Chromium", () => {
  it("shows projects, a project's grouped errors (filtered), its incidents and SLOs, and an error's stack; resolves it", async () => {
    const { page, errors } = await loggedInPage();
    await page.goto(`${world.server.adminUrl}/errors`);
    const project = page.locator('tr[data-project="checkout"]');
    await project.waitFor();
    expect(await project.innerText()).toMatch(/checkout-api\s+2\s/);
    expect(await seriousViolations(page)).toEqual([]);
    await saveScreenshot(page, 'admin-areas', 'errors-projects');

    await project.getByRole('link', { name: 'Shop checkout' }).click();
    await page.getByRole('heading', { name: 'Errors of Shop checkout', level: 1 }).waitFor();
    const rows = page.locator('tr[data-error]');
    await rows.nth(1).waitFor();
    expect(await rows.allInnerTexts()).toEqual([
      expect.stringMatching(/^RangeError: quantity out of range\s+warning\s+unresolved\s+1\s/),
      expect.stringMatching(/^TypeError: card is undefined\s+error\s+unresolved\s+2\s/),
    ]);
    await page.locator('[data-incident]').getByText('Checkout failing').waitFor();
    await page
      .getByRole('row', { name: /Checkout availability/ })
      .getByText('on_track')
      .waitFor();
    expect(await seriousViolations(page)).toEqual([]);
    await saveScreenshot(page, 'admin-areas', 'errors-project');

    await page.getByLabel('Level').selectOption('warning');
    await eventually(async () => (await rows.count()) === 1);
    expect(await rows.first().innerText()).toContain('RangeError');
    await page.getByLabel('Level').selectOption('');
    await rows.nth(1).waitFor();

    await page.getByRole('button', { name: 'acknowledge incident Checkout failing' }).click();
    await page.getByRole('status').getByText('Checkout failing: acknowledged.').waitFor();

    await page.getByRole('link', { name: 'TypeError: card is undefined' }).click();
    await page.getByRole('heading', { name: 'TypeError: card is undefined', level: 1 }).waitFor();
    await page.getByText('environment: production').waitFor();
    expect(await page.locator('.frames li').allInnerTexts()).toEqual([
      expect.stringContaining('charge /app/src/checkout.js:12:9'),
      expect.stringContaining('route /app/src/server.js:40:5'),
      expect.stringContaining('handle /app/node_modules/express/lib/router.js:10:3'),
    ]);
    expect(await seriousViolations(page)).toEqual([]);
    await saveScreenshot(page, 'admin-areas', 'error-details');
    await page.getByRole('button', { name: 'resolve' }).click();
    await page.getByRole('status').getByText('Now resolved.').waitFor();
    await page.getByRole('button', { name: 'reopen' }).waitFor();
    const resolved = await world.admin.request<{ error: { status: string } }>('GET', page.url().replace(/^.*\/errors\/\d+\//, '/api/errors/errors/'));
    expect(resolved.body.error.status).toBe('resolved');
    expect(errors).toEqual([]);
  });

  it("shows a trigger's attempts, and Redeliver sends the event again: the receiver gets it and the new attempt shows", async () => {
    const { page, errors } = await loggedInPage('dark');
    const { eventId } = seeded.event;
    await page.goto(`${world.server.adminUrl}/events`);
    await page.locator(`tr[data-trigger="${TRIGGER}"]`).waitFor();
    const attempts = page.locator(`tr[data-event="${eventId}"]`);
    await attempts.first().waitFor();
    expect(await attempts.first().innerText()).toMatch(/\s1\s+500\s.*dead/s);
    expect(await seriousViolations(page)).toEqual([]);
    await saveScreenshot(page, 'admin-areas', 'events-dark');

    world.accept(eventId);
    await page.getByRole('button', { name: `Redeliver event ${eventId} (attempt 1)` }).click();
    await page.getByRole('status').getByText('queued again').waitFor();
    // The page reads the attempts again by itself: the new one, answered 200, comes first.
    await eventually(async () => (await attempts.count()) === 2, 10_000);
    expect(await attempts.first().innerText()).toMatch(/\s2\s+200\s.*delivered/s);
    expect(world.webhooks.at(NOTES_PATH).filter((request) => request.body?.id === eventId)).toHaveLength(2);
    await saveScreenshot(page, 'admin-areas', 'events-redelivered');
    expect(errors).toEqual([]);
  });

  it('shows the queues, retries a failed job (it runs again) and cancels a waiting one', async () => {
    const { page, errors } = await loggedInPage();
    const { failedJobId, waitingJobId } = seeded.jobs;
    await page.goto(`${world.server.adminUrl}/jobs`);
    await page.locator(`tr[data-queue="${RECORDER_QUEUE}"]`).waitFor();
    const failed = page.locator(`tr[data-job="${failedJobId}"]`);
    await failed.waitFor();
    // Failed first.
    expect(await page.locator('tr[data-job]').first().getAttribute('data-job')).toBe(failedJobId);
    expect(await failed.innerText()).toContain('card declined');
    expect(await seriousViolations(page)).toEqual([]);
    await saveScreenshot(page, 'admin-areas', 'jobs');

    await page.getByRole('button', { name: `retry job ${failedJobId}` }).click();
    await page.getByRole('status').getByText('queued to run again').waitFor();
    await eventually(async () => (await runsOf(world.server.database, failedJobId)).length === 2);
    await eventually(async () => (await world.server.server.jobs.get(failedJobId))?.state === 'failed');

    await page.getByRole('button', { name: `cancel job ${waitingJobId}` }).click();
    await page
      .getByRole('status')
      .getByText(`Job ${waitingJobId.slice(0, 8)} cancelled.`)
      .waitFor();
    await page.locator(`tr[data-job="${waitingJobId}"] .state`, { hasText: 'cancelled' }).waitFor();
    expect((await world.server.server.jobs.get(waitingJobId))?.state).toBe('cancelled');
    await saveScreenshot(page, 'admin-areas', 'jobs-after');
    expect(errors).toEqual([]);
  });

  it('shows subscribers (searched) and issues', async () => {
    const { page, errors } = await loggedInPage();
    await page.goto(`${world.server.adminUrl}/newsletter`);
    const subscribers = page.locator('tr[data-subscriber]');
    await subscribers.nth(1).waitFor();
    expect(await Promise.all([0, 1].map((index) => subscribers.nth(index).getAttribute('data-subscriber')))).toEqual([
      seeded.newsletter.pendingEmail,
      seeded.newsletter.activeEmail,
    ]);
    await page.locator(`tr[data-issue="${seeded.newsletter.issueNumber}"]`).waitFor();
    expect(await seriousViolations(page)).toEqual([]);
    await saveScreenshot(page, 'admin-areas', 'newsletter');

    await page.getByLabel('Address').fill('ADA');
    await page.getByRole('button', { name: 'Search' }).click();
    await page.getByText('1 matching').waitFor();
    expect(await subscribers.count()).toBe(1);
    expect(await subscribers.first().innerText()).toContain(seeded.newsletter.activeEmail);
    expect(errors).toEqual([]);
  });

  it('made no request to any host but the admin listener', () => {
    const requested = recorded.flat();
    expect(requested.length).toBeGreaterThan(20);
    expect(requested.filter((url) => !url.startsWith(`${world.server.adminUrl}/`) && !url.startsWith('data:'))).toEqual([]);
  });
});
