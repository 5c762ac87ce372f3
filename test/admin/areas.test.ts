import { metadataRequest } from '../support/metadata';
import { eventually, RECORDER_QUEUE, runsOf } from '../support/job-recorder';
import { AdminClient } from './support';
import { NOTES_PATH, seedDeadEvent, seedErrors, seedJobs, seedNewsletter, startAreasWorld, TRIGGER, type AreasWorld } from './areas-support';

let world: AreasWorld;
let admin: AdminClient;
let errors: Awaited<ReturnType<typeof seedErrors>>;
let jobs: Awaited<ReturnType<typeof seedJobs>>;
let newsletter: Awaited<ReturnType<typeof seedNewsletter>>;

beforeAll(async () => {
  world = await startAreasWorld();
  admin = world.admin;
  errors = await seedErrors(world, 'checkout');
  jobs = await seedJobs(world);
  newsletter = await seedNewsletter(world, ['ada', 'bob']);
}, 60_000);
afterAll(async () => {
  await world?.close();
});

const SOME_UUID = '6f1c1e7e-3b0a-4c8e-9d3f-2a1b0c9d8e7f';
/** Every route of the areas' views, with ids that exist or not (401 comes before any lookup). */
const ROUTES: { method: string; route: string }[] = [
  { method: 'GET', route: '/api/errors/projects' },
  { method: 'GET', route: '/api/errors/projects/1/errors' },
  { method: 'GET', route: '/api/errors/errors/1' },
  { method: 'POST', route: '/api/errors/errors/1/resolve' },
  { method: 'GET', route: '/api/errors/projects/1/incidents' },
  { method: 'POST', route: `/api/errors/incidents/${SOME_UUID}/acknowledge` },
  { method: 'GET', route: '/api/errors/projects/1/slos' },
  { method: 'GET', route: '/api/events/triggers' },
  { method: 'GET', route: `/api/events/triggers/${TRIGGER}/invocations` },
  { method: 'POST', route: `/api/events/events/${SOME_UUID}/redeliver` },
  { method: 'GET', route: '/api/events/cron-triggers' },
  { method: 'GET', route: '/api/events/scheduled' },
  { method: 'GET', route: '/api/jobs/queues' },
  { method: 'GET', route: `/api/jobs/queues/${RECORDER_QUEUE}/jobs` },
  { method: 'POST', route: `/api/jobs/${SOME_UUID}/retry` },
  { method: 'POST', route: `/api/jobs/${SOME_UUID}/cancel` },
  { method: 'GET', route: '/api/newsletter/subscribers' },
  { method: 'GET', route: `/api/newsletter/subscribers/${SOME_UUID}` },
  { method: 'GET', route: '/api/newsletter/issues' },
];

interface Page<T> {
  items: T[];
  hasMore: boolean;
  endCursor?: string | null;
  total?: number;
}

describe("the admin API's views of Plinth's areas: access", () => {
  it('answers 401 on every route without a session', async () => {
    const anonymous = new AdminClient(world.server.adminUrl);
    for (const { method, route } of ROUTES) {
      const answer = await anonymous.request(method, route);
      expect({ route, status: answer.status, code: answer.body.error_code }).toEqual({ route, status: 401, code: 'UNAUTHENTICATED' });
    }
  });

  it('answers 403 on every change without the CSRF token, and changes nothing', async () => {
    for (const { method, route } of ROUTES.filter((each) => each.method === 'POST')) {
      const answer = await admin.request(method, route, undefined, { 'x-csrf-token': 'not-the-token' });
      expect({ route, status: answer.status, code: answer.body.error_code }).toEqual({ route, status: 403, code: 'CSRF_TOKEN_INVALID' });
    }
    const retried = await admin.request(`POST`, `/api/jobs/${jobs.failedJobId}/retry`, undefined, { 'x-csrf-token': '' });
    expect(retried.status).toBe(403);
    expect((await world.server.server.jobs.get(jobs.failedJobId))?.state).toBe('failed');
  });

  it('refuses paging past its limits and malformed ids with a 400, and unknown ids with a 404', async () => {
    const cases: [string, string, number][] = [
      ['GET', '/api/errors/projects?limit=0', 400],
      ['GET', '/api/errors/projects?limit=101', 400],
      ['GET', '/api/errors/projects?offset=-1', 400],
      ['GET', '/api/errors/projects/abc/errors', 400],
      ['GET', '/api/errors/projects/999999/errors', 404],
      [`GET`, `/api/errors/projects/${errors.projectId}/errors?after=bm90LWEtY3Vyc29y`, 400],
      ['GET', `/api/errors/projects/${errors.projectId}/errors?level=loud`, 400],
      ['GET', '/api/errors/errors/abc', 400],
      ['GET', '/api/errors/errors/999999999', 404],
      ['POST', '/api/errors/errors/999999999/resolve', 404],
      ['POST', '/api/errors/errors/1/explode', 400],
      ['POST', '/api/errors/incidents/not-a-uuid/resolve', 400],
      ['POST', `/api/errors/incidents/${SOME_UUID}/resolve`, 404],
      ['GET', '/api/errors/projects/999999/incidents', 404],
      ['GET', '/api/errors/projects/999999/slos', 404],
      ['GET', '/api/events/triggers/no_such_trigger/invocations', 404],
      ['GET', '/api/events/triggers/bad%20name!/invocations', 400],
      ['POST', '/api/events/events/not-a-uuid/redeliver', 400],
      ['POST', `/api/events/events/${SOME_UUID}/redeliver`, 404],
      ['GET', '/api/events/scheduled?status=late', 400],
      ['GET', '/api/jobs/queues/no_such_queue/jobs', 404],
      ['GET', '/api/jobs/queues/Bad%20Queue/jobs', 400],
      ['GET', `/api/jobs/queues/${RECORDER_QUEUE}/jobs?state=sleeping`, 400],
      ['POST', '/api/jobs/not-a-uuid/retry', 400],
      ['POST', `/api/jobs/'; DROP TABLE pgboss.job; --/cancel`, 400],
      ['POST', `/api/jobs/${SOME_UUID}/retry`, 404],
      ['POST', `/api/jobs/${SOME_UUID}/cancel`, 404],
      ['POST', `/api/jobs/${SOME_UUID}/pause`, 400],
      ['GET', '/api/newsletter/subscribers?verified=perhaps', 400],
      ['GET', '/api/newsletter/subscribers?status=bounced', 400],
      ['GET', '/api/newsletter/subscribers/not-a-uuid', 400],
      ['GET', `/api/newsletter/subscribers/${SOME_UUID}`, 404],
      ['GET', '/api/newsletter/issues?limit=1000', 400],
    ];
    for (const [method, route, status] of cases) {
      const answer = await admin.request(method, route);
      expect({ route, status: answer.status }).toEqual({ route, status });
      expect(answer.body).toMatchObject({ success: false, error_code: expect.any(String), message: expect.any(String) });
      expect(JSON.stringify(answer.body)).not.toMatch(/\bat .*\.js:\d+/);
    }
  });
});

describe('error tracking', () => {
  interface ErrorItem {
    id: string;
    message: string;
    level: string;
    status: string;
    occurrenceCount: number;
    lastSeen: string;
  }

  it('lists projects with their open errors, paged', async () => {
    const page = await admin.request<Page<{ id: number; slug: string; openErrors: number; lastSeen: string | null }>>('GET', '/api/errors/projects?limit=10');
    expect(page.status).toBe(200);
    expect(page.body.items).toEqual([expect.objectContaining({ id: errors.projectId, slug: 'checkout', openErrors: 2, lastSeen: expect.any(String) })]);
    expect(page.body).toMatchObject({ total: 1, hasMore: false });
    const beyond = await admin.request<Page<unknown>>('GET', '/api/errors/projects?offset=5');
    expect(beyond.body).toMatchObject({ items: [], total: 1, hasMore: false });
  });

  it("lists a project's errors grouped with their counts and levels, filtered and paged by cursor", async () => {
    const all = await admin.request<Page<ErrorItem>>('GET', `/api/errors/projects/${errors.projectId}/errors`);
    expect(all.status).toBe(200);
    expect(all.body.items.map(({ message, level, occurrenceCount, status }) => ({ message, level, occurrenceCount, status }))).toEqual([
      { message: 'RangeError: quantity out of range', level: 'warning', occurrenceCount: 1, status: 'unresolved' },
      { message: 'TypeError: card is undefined', level: 'error', occurrenceCount: 2, status: 'unresolved' },
    ]);
    const warnings = await admin.request<Page<ErrorItem>>('GET', `/api/errors/projects/${errors.projectId}/errors?level=warning`);
    expect(warnings.body.items.map((error) => error.message)).toEqual(['RangeError: quantity out of range']);
    const first = await admin.request<Page<ErrorItem>>('GET', `/api/errors/projects/${errors.projectId}/errors?limit=1`);
    expect(first.body).toMatchObject({ hasMore: true, endCursor: expect.any(String) });
    const second = await admin.request<Page<ErrorItem>>('GET', `/api/errors/projects/${errors.projectId}/errors?limit=1&after=${first.body.endCursor}`);
    expect(second.body.items.map((error) => error.id)).toEqual([all.body.items[1].id]);
    expect(second.body.hasMore).toBe(false);
  });

  it("shows an error's details (stack, environment, release) and resolves, ignores and reopens it", async () => {
    const all = await admin.request<Page<ErrorItem>>('GET', `/api/errors/projects/${errors.projectId}/errors`);
    const typeError = all.body.items.find((error) => error.message.startsWith('TypeError'))!;
    const details = await admin.request<{
      error: ErrorItem;
      project: { slug: string };
      events: { environment: string; release: string; level: string; frames: { function: string; filename: string; lineno: number }[] }[];
    }>('GET', `/api/errors/errors/${typeError.id}`);
    expect(details.status).toBe(200);
    expect(details.body.project.slug).toBe('checkout');
    expect(details.body.events).toHaveLength(2);
    expect(details.body.events[0]).toMatchObject({ environment: 'production', release: '1.0.0', level: 'error' });
    expect(details.body.events[0].frames.map((frame) => frame.function)).toEqual(['handle', 'route', 'charge']);

    const resolved = await admin.request<ErrorItem>('POST', `/api/errors/errors/${typeError.id}/resolve`);
    expect(resolved.body).toMatchObject({ id: typeError.id, status: 'resolved', resolvedRelease: '1.0.0' });
    const onlyResolved = await admin.request<Page<ErrorItem>>('GET', `/api/errors/projects/${errors.projectId}/errors?status=resolved`);
    expect(onlyResolved.body.items.map((error) => error.id)).toEqual([typeError.id]);
    const projects = await admin.request<Page<{ openErrors: number }>>('GET', '/api/errors/projects');
    expect(projects.body.items[0].openErrors).toBe(1);
    expect((await admin.request<ErrorItem>('POST', `/api/errors/errors/${typeError.id}/ignore`)).body.status).toBe('ignored');
    expect((await admin.request<ErrorItem>('POST', `/api/errors/errors/${typeError.id}/reopen`)).body.status).toBe('unresolved');
    const again = await admin.request('POST', `/api/errors/errors/${typeError.id}/reopen`);
    expect({ status: again.status, code: again.body.error_code }).toEqual({ status: 409, code: 'INVALID_TRANSITION' });
  });

  it("lists a project's incidents and SLOs, and acknowledges and resolves an incident", async () => {
    const incidents = await admin.request<Page<{ id: string; title: string; status: string; severity: string }>>(
      'GET',
      `/api/errors/projects/${errors.projectId}/incidents`,
    );
    expect(incidents.body.items).toEqual([
      expect.objectContaining({ id: errors.incidentId, title: 'Checkout failing', status: 'triggered', severity: 'major' }),
    ]);
    const acknowledged = await admin.request('POST', `/api/errors/incidents/${errors.incidentId}/acknowledge`);
    expect(acknowledged.body).toMatchObject({ status: 'acknowledged', acknowledgedBy: 'admin dashboard (admin)' });
    const twice = await admin.request('POST', `/api/errors/incidents/${errors.incidentId}/acknowledge`);
    expect(twice.status).toBe(409);
    expect((await admin.request('POST', `/api/errors/incidents/${errors.incidentId}/resolve`)).body).toMatchObject({ status: 'resolved' });
    const open = await admin.request<Page<unknown>>('GET', `/api/errors/projects/${errors.projectId}/incidents?status=triggered`);
    expect(open.body.items).toEqual([]);

    const slos = await admin.request<Page<{ id: string; status: string; errorBudgetRemaining: number; targetPercentage: number }>>(
      'GET',
      `/api/errors/projects/${errors.projectId}/slos`,
    );
    expect(slos.body.items).toEqual([expect.objectContaining({ id: errors.sloId, targetPercentage: 99.5, status: 'ON_TRACK', errorBudgetRemaining: 1 })]);
  });
});

describe('events', () => {
  interface Invocation {
    id: string;
    eventId: string;
    attempt: number;
    status: number | null;
    event: { state: string; tries: number };
  }
  const invocationsOf = async (eventId: string) =>
    (await admin.request<Page<Invocation>>('GET', `/api/events/triggers/${TRIGGER}/invocations?limit=100`)).body.items.filter(
      (item) => item.eventId === eventId,
    );

  it('lists triggers and their recent attempts, and redelivers a dead event: a second delivery reaches the receiver', async () => {
    const { eventId } = await seedDeadEvent(world, 'first note');
    const triggers = await admin.request<Page<{ name: string; dead: number; webhook: string }>>('GET', '/api/events/triggers');
    expect(triggers.body.items).toEqual([expect.objectContaining({ name: TRIGGER, dead: 1, webhook: `${world.webhooks.url}${NOTES_PATH}` })]);
    expect(await invocationsOf(eventId)).toEqual([
      expect.objectContaining({ attempt: 1, status: 500, event: expect.objectContaining({ state: 'DEAD', tries: 1 }) }),
    ]);
    const deliveries = () => world.webhooks.at(NOTES_PATH).filter((request) => request.body?.id === eventId);
    expect(deliveries()).toHaveLength(1);

    world.accept(eventId);
    const redelivered = await admin.request('POST', `/api/events/events/${eventId}/redeliver`);
    expect(redelivered.body).toEqual({ eventId, outcome: 'queued', state: 'PENDING' });
    await eventually(async () => deliveries().length === 2);
    const after = await eventually(async () => {
      const found = await invocationsOf(eventId);
      return found[0]?.event.state === 'DELIVERED' ? found : undefined;
    });
    expect(after.map(({ attempt, status }) => ({ attempt, status }))).toEqual([
      { attempt: 2, status: 200 },
      { attempt: 1, status: 500 },
    ]);
    expect(deliveries()[1].body.event.data.new.text).toBe('first note');
  });

  it('redelivers once when asked twice at the same time, and leaves a queued event as it is', async () => {
    const { eventId } = await seedDeadEvent(world, 'second note');
    world.accept(eventId);
    const answers = await Promise.all([1, 2].map(() => admin.request<{ outcome: string }>('POST', `/api/events/events/${eventId}/redeliver`)));
    expect(answers.map((answer) => answer.status)).toEqual([200, 200]);
    expect(answers.map((answer) => answer.body.outcome).sort()).toEqual([expect.stringMatching(/^(already-queued|in-flight)$/), 'queued'].sort());
    await eventually(async () => (await invocationsOf(eventId))[0]?.event.state === 'DELIVERED');
    // Time for a double delivery to show, were there one.
    await new Promise((resolve) => setTimeout(resolve, 600));
    expect(world.webhooks.at(NOTES_PATH).filter((request) => request.body?.id === eventId)).toHaveLength(2);
    expect(await invocationsOf(eventId)).toHaveLength(2);
  });

  it('pages the attempts, and lists cron triggers and scheduled events', async () => {
    const first = await admin.request<Page<Invocation>>('GET', `/api/events/triggers/${TRIGGER}/invocations?limit=1`);
    expect(first.body).toMatchObject({ hasMore: true, limit: 1, offset: 0 });
    const rest = await admin.request<Page<Invocation>>('GET', `/api/events/triggers/${TRIGGER}/invocations?limit=100&offset=1`);
    expect(rest.body.items.map((item) => item.id)).not.toContain(first.body.items[0].id);

    const scheduleAt = new Date(Date.now() + 3_600_000).toISOString();
    const created = await metadataRequest(world.server.url, {
      type: 'create_scheduled_event',
      args: { webhook: `${world.webhooks.url}/later`, schedule_at: scheduleAt, payload: { a: 1 }, comment: 'later' },
    });
    expect(created.status).toBe(200);
    const scheduled = await admin.request<Page<{ id: string; status: string; cronTrigger: string | null }>>('GET', '/api/events/scheduled?status=scheduled');
    expect(scheduled.body.items).toEqual([expect.objectContaining({ id: created.body.event_id, status: 'scheduled', cronTrigger: null })]);
    const cron = await admin.request<Page<unknown>>('GET', '/api/events/cron-triggers');
    expect(cron.body).toMatchObject({ items: [], total: 0, hasMore: false });
  });
});

describe('jobs', () => {
  interface Job {
    id: string;
    state: string;
    error: string | null;
    retryCount: number;
  }

  it('lists queues with their jobs by state, and a queue’s jobs with the failed ones first', async () => {
    const queues = await admin.request<{ queues: { queue: string; declared: boolean; counts: Record<string, number> }[] }>('GET', '/api/jobs/queues');
    expect(queues.body.queues).toContainEqual(expect.objectContaining({ queue: RECORDER_QUEUE, declared: true }));
    const recorder = queues.body.queues.find((queue) => queue.queue === RECORDER_QUEUE)!;
    expect(recorder.counts).toMatchObject({ failed: 1, created: 1 });
    expect(Object.keys(recorder.counts).sort()).toEqual(['active', 'cancelled', 'completed', 'created', 'failed', 'retry']);

    const page = await admin.request<Page<Job>>('GET', `/api/jobs/queues/${RECORDER_QUEUE}/jobs`);
    expect(page.body.items.map((job) => job.id)).toEqual([jobs.failedJobId, jobs.waitingJobId]);
    expect(page.body.items[0]).toMatchObject({ state: 'failed', error: 'card declined' });
    const second = await admin.request<Page<Job>>('GET', `/api/jobs/queues/${RECORDER_QUEUE}/jobs?limit=1&offset=1`);
    expect(second.body).toMatchObject({ items: [expect.objectContaining({ id: jobs.waitingJobId })], hasMore: false });
    const failedOnly = await admin.request<Page<Job>>('GET', `/api/jobs/queues/${RECORDER_QUEUE}/jobs?state=failed`);
    expect(failedOnly.body.items.map((job) => job.id)).toEqual([jobs.failedJobId]);
  });

  it('retries a failed job: it runs again', async () => {
    expect(await runsOf(world.server.database, jobs.failedJobId)).toHaveLength(1);
    const retried = await admin.request<Job>('POST', `/api/jobs/${jobs.failedJobId}/retry`);
    expect(retried.status).toBe(200);
    expect(retried.body.state).toMatch(/^(created|retry|active|failed)$/);
    await eventually(async () => (await runsOf(world.server.database, jobs.failedJobId)).length === 2);
    await eventually(async () => (await world.server.server.jobs.get(jobs.failedJobId))?.state === 'failed');
    const waiting = await admin.request('POST', `/api/jobs/${jobs.waitingJobId}/retry`);
    expect({ status: waiting.status, code: waiting.body.error_code }).toEqual({ status: 409, code: 'INVALID_STATE' });
  });

  it('cancels a waiting job, and refuses to cancel it twice', async () => {
    const cancelled = await admin.request<Job>('POST', `/api/jobs/${jobs.waitingJobId}/cancel`);
    expect(cancelled.body).toMatchObject({ id: jobs.waitingJobId, state: 'cancelled' });
    expect((await world.server.server.jobs.get(jobs.waitingJobId))?.state).toBe('cancelled');
    const twice = await admin.request('POST', `/api/jobs/${jobs.waitingJobId}/cancel`);
    expect({ status: twice.status, code: twice.body.error_code }).toEqual({ status: 409, code: 'INVALID_STATE' });
    expect(await runsOf(world.server.database, jobs.waitingJobId)).toEqual([]);
  });
});

describe('the newsletter', () => {
  interface Subscriber {
    id: string;
    email: string;
    status: string;
    is_verified: boolean;
  }

  it('lists subscribers searched, filtered and paged, with the counts per status', async () => {
    const all = await admin.request<Page<Subscriber> & { counts: { status: string; count: number }[]; configured: boolean }>(
      'GET',
      '/api/newsletter/subscribers',
    );
    expect(all.status).toBe(200);
    expect(all.body).toMatchObject({ total: 2, hasMore: false, configured: true });
    expect(all.body.items.map((subscriber) => [subscriber.email, subscriber.status, subscriber.is_verified])).toEqual([
      [newsletter.pendingEmail, 'pending', false],
      [newsletter.activeEmail, 'active', true],
    ]);
    expect(all.body.counts).toEqual([
      { status: 'pending', count: 1, verified: 0 },
      { status: 'active', count: 1, verified: 1 },
      { status: 'unsubscribed', count: 0, verified: 0 },
    ]);
    const searched = await admin.request<Page<Subscriber>>('GET', '/api/newsletter/subscribers?search=ADA');
    expect(searched.body.items.map((subscriber) => subscriber.email)).toEqual([newsletter.activeEmail]);
    const verified = await admin.request<Page<Subscriber>>('GET', '/api/newsletter/subscribers?verified=true&status=active');
    expect(verified.body.items.map((subscriber) => subscriber.email)).toEqual([newsletter.activeEmail]);
    const paged = await admin.request<Page<Subscriber>>('GET', '/api/newsletter/subscribers?limit=1&offset=1');
    expect(paged.body).toMatchObject({ total: 2, hasMore: false, items: [expect.objectContaining({ email: newsletter.activeEmail })] });
    const firstPage = await admin.request<Page<Subscriber>>('GET', '/api/newsletter/subscribers?limit=1');
    expect(firstPage.body.hasMore).toBe(true);

    const details = await admin.request<{ subscriber: Subscriber; mails: { template: string }[] }>(
      'GET',
      `/api/newsletter/subscribers/${all.body.items[1].id}`,
    );
    expect(details.body.subscriber.email).toBe(newsletter.activeEmail);
    expect(details.body.mails.map((mail) => mail.template)).toContain('T1-confirm');
  });

  it('lists issues with their progress, and the schedule', async () => {
    const issues = await admin.request<Page<{ issue_number: number; recipients: number; status: string }> & { schedule: { scheduled: boolean } }>(
      'GET',
      '/api/newsletter/issues',
    );
    expect(issues.body.items).toEqual([expect.objectContaining({ issue_number: newsletter.issueNumber, recipients: 1 })]);
    expect(issues.body).toMatchObject({ hasMore: false, schedule: { scheduled: false, intervalDays: 14, nextDueAt: null } });
  });
});
