import { cronProblem, nextCronTimes } from '../../src/modules/events/scheduled-events.service';
import { startTestServer, type TestServer } from '../support/server';
import { startWebhookReceiver, type WebhookReceiver } from '../support/webhook-receiver';
import { metadataRequest } from '../support/metadata';
import { eventually, sleep } from './support';

let server: TestServer;
let second: TestServer;
let receiver: WebhookReceiver;
const metadata = (body: unknown) => metadataRequest(server.url, body);
const SETTINGS = { EVENTS_POLL_INTERVAL_MS: '200', EVENTS_RETRY_SECOND_MS: '20', EVENTS_CRON_AHEAD: '10', EVENTS_MISSED_TOLERANCE_SECONDS: '3600' };

beforeAll(async () => {
  receiver = await startWebhookReceiver();
  server = await startTestServer(SETTINGS);
  // A second instance on the same database: generation and delivery must not double.
  second = await startTestServer(SETTINGS, { database: server.database });
});
afterAll(async () => {
  await second.close();
  await server.close();
  await receiver.close();
});

describe('cron expressions', () => {
  const from = new Date('2026-03-14T10:30:00Z');
  it.each([
    ['daily 09:00', '0 9 * * *', ['2026-03-15T09:00:00.000Z', '2026-03-16T09:00:00.000Z']],
    ['daily 02:00', '0 2 * * *', ['2026-03-15T02:00:00.000Z', '2026-03-16T02:00:00.000Z']],
    ['Monday 09:00', '0 9 * * 1', ['2026-03-16T09:00:00.000Z', '2026-03-23T09:00:00.000Z']],
    ['first of month 00:00', '0 0 1 * *', ['2026-04-01T00:00:00.000Z', '2026-05-01T00:00:00.000Z']],
    ['hourly', '0 * * * *', ['2026-03-14T11:00:00.000Z', '2026-03-14T12:00:00.000Z']],
  ])('%s (%s) fires at the right times in UTC', (_name, schedule, expected) => {
    expect(cronProblem(schedule, 'UTC')).toBeUndefined();
    expect(nextCronTimes(schedule, 'UTC', from, 2).map((date) => date.toISOString())).toEqual(expected);
  });

  it('are read in the configured time zone', () => {
    // 09:00 in Paris is 08:00 UTC in winter and 07:00 UTC in summer.
    expect(nextCronTimes('0 9 * * *', 'Europe/Paris', new Date('2026-03-27T12:00:00Z'), 3).map((date) => date.toISOString())).toEqual([
      '2026-03-28T08:00:00.000Z',
      '2026-03-29T07:00:00.000Z',
      '2026-03-30T07:00:00.000Z',
    ]);
  });

  it('refuse anything but five valid fields', () => {
    expect(cronProblem('0 9 * *', 'UTC')).toContain('five fields');
    expect(cronProblem('0 0 9 * * *', 'UTC')).toContain('five fields');
    expect(cronProblem('61 * * * *', 'UTC')).toContain('minute');
    expect(cronProblem('0 9 31 2 *', 'UTC')).toBeDefined();
  });
});

describe('cron triggers', () => {
  it('are refused with a bad expression or a duplicate name, naming the entry', async () => {
    expect(await metadata({ type: 'create_cron_trigger', args: { name: 'bad', webhook: `${receiver.url}/bad`, schedule: '0 25 * * *' } })).toEqual({
      status: 400,
      body: {
        path: '$.args.schedule',
        error: expect.stringMatching(/^the cron trigger "bad": the schedule "0 25 \* \* \*" is not a valid cron expression \(.*hour.*\)$/),
        code: 'parse-failed',
      },
    });
    const create = {
      type: 'create_cron_trigger',
      args: { name: 'nightly', webhook: `${receiver.url}/nightly`, schedule: '0 2 * * *', payload: { job: 'report' }, comment: 'nightly report' },
    };
    expect(await metadata(create)).toEqual({ status: 200, body: { message: 'success' } });
    expect(await metadata(create)).toEqual({
      status: 400,
      body: { path: '$.args.name', error: 'the cron trigger "nightly" already exists (use "replace": true to change it)', code: 'already-exists' },
    });
    const listed = await metadata({ type: 'get_cron_triggers', args: {} });
    expect(listed.body.cron_triggers).toEqual([
      {
        name: 'nightly',
        webhook: `${receiver.url}/nightly`,
        schedule: '0 2 * * *',
        include_in_metadata: true,
        payload: { job: 'report' },
        retry_conf: { num_retries: 0, interval_sec: 10, timeout_sec: 60 },
        comment: 'nightly report',
      },
    ]);
  });

  it('generate their upcoming events ahead, once per time whatever the instances', async () => {
    await metadata({ type: 'create_cron_trigger', args: { name: 'hourly', webhook: `${receiver.url}/hourly`, schedule: '0 * * * *' } });
    // Both instances' maintenance runs meanwhile.
    await sleep(600);
    const rows = await server.database.query<{ scheduled_time: Date }>(
      "SELECT scheduled_time FROM scheduled_events WHERE cron_trigger_name = 'hourly' ORDER BY scheduled_time",
    );
    expect(rows).toHaveLength(10);
    const expected = nextCronTimes('0 * * * *', 'UTC', new Date(), 10).map((date) => date.toISOString());
    expect(rows.map((row) => row.scheduled_time.toISOString())).toEqual(expected);
    const listed = await metadata({ type: 'get_scheduled_events', args: { type: 'cron', trigger_name: 'hourly', limit: 3, get_rows_count: true } });
    expect(listed.body.count).toBe(10);
    expect(listed.body.events).toHaveLength(3);
    expect(listed.body.events[0]).toMatchObject({ name: 'hourly', status: 'scheduled', tries: 0 });
  });

  it("deliver a due event once, with Hasura's body {id, name, scheduled_time, payload, comment}", async () => {
    const [{ id }] = await server.database.query<{ id: string }>(
      "INSERT INTO scheduled_events (cron_trigger_name, scheduled_time) VALUES ('nightly', now() - interval '5 seconds') RETURNING id",
    );
    const [request] = await receiver.waitFor('/nightly', 1);
    expect(request.body).toEqual({ id, name: 'nightly', scheduled_time: expect.any(String), payload: { job: 'report' }, comment: 'nightly report' });
    await sleep(500);
    expect(receiver.at('/nightly')).toHaveLength(1);
    const invocations = await metadata({ type: 'get_scheduled_event_invocations', args: { type: 'cron', event_id: id } });
    expect(invocations.body.invocations).toEqual([expect.objectContaining({ event_id: id, status: 200 })]);
  });

  it('mark events missed beyond the tolerance (downtime) dead instead of firing them late', async () => {
    const [{ id: missed }] = await server.database.query<{ id: string }>(
      "INSERT INTO scheduled_events (cron_trigger_name, scheduled_time) VALUES ('nightly', now() - interval '2 hours') RETURNING id",
    );
    const [{ id: late }] = await server.database.query<{ id: string }>(
      "INSERT INTO scheduled_events (cron_trigger_name, scheduled_time) VALUES ('nightly', now() - interval '10 minutes') RETURNING id",
    );
    await receiver.waitFor('/nightly', 2);
    await eventually(async () => {
      const [row] = await server.database.query<{ status: string }>('SELECT status FROM scheduled_events WHERE id = $1', [missed]);
      return row.status === 'dead' ? row : undefined;
    });
    await sleep(300);
    expect(receiver.at('/nightly').map((request) => request.body.id)).not.toContain(missed);
    expect(receiver.at('/nightly').map((request) => request.body.id)).toContain(late);
    const dead = await metadata({ type: 'get_scheduled_events', args: { type: 'cron', trigger_name: 'nightly', status: ['dead'] } });
    expect(dead.body.events.map((event: { id: string }) => event.id)).toEqual([missed]);
  });

  it('are deleted with their events', async () => {
    expect(await metadata({ type: 'delete_cron_trigger', args: { name: 'hourly' } })).toEqual({ status: 200, body: { message: 'success' } });
    expect(await server.database.query("SELECT 1 FROM scheduled_events WHERE cron_trigger_name = 'hourly'")).toEqual([]);
    expect((await metadata({ type: 'delete_cron_trigger', args: { name: 'hourly' } })).body.code).toBe('not-exists');
  });
});

describe('one-off scheduled events', () => {
  it('are delivered at their time with their payload, retried like event triggers', async () => {
    receiver.answer('/once', (_request, count) => (count === 1 ? { status: 500 } : { status: 200 }));
    const at = new Date(Date.now() + 1000);
    const created = await metadata({
      type: 'create_scheduled_event',
      args: {
        webhook: `${receiver.url}/once`,
        schedule_at: at.toISOString(),
        payload: { email: 'a@example.com' },
        comment: 'welcome',
        retry_conf: { num_retries: 2, interval_sec: 5 },
      },
    });
    expect(created).toEqual({ status: 200, body: { message: 'success', event_id: expect.stringMatching(/^[0-9a-f-]{36}$/) } });
    const [first, again] = await receiver.waitFor('/once', 2);
    expect(first.at).toBeGreaterThanOrEqual(at.getTime() - 5);
    expect(first.at - at.getTime()).toBeLessThan(2500);
    expect(again.at - first.at).toBeGreaterThanOrEqual(95);
    expect(first.body).toEqual({
      id: created.body.event_id,
      name: null,
      scheduled_time: at.toISOString(),
      payload: { email: 'a@example.com' },
      comment: 'welcome',
    });
    // The delivery records its outcome once the receiver's answer is in: soon after the request.
    const listed = await eventually(
      async () => {
        const events = (await metadata({ type: 'get_scheduled_events', args: { type: 'one_off' } })).body.events as { status: string }[];
        return events.every((event) => event.status === 'locked') ? undefined : events;
      },
      5000,
      'the second try recorded',
    );
    expect(listed).toEqual([expect.objectContaining({ id: created.body.event_id, status: 'delivered', tries: 2 })]);
    await sleep(300);
    expect(receiver.at('/once')).toHaveLength(2);
  });

  it('are refused with a bad time or webhook, and deleted by id', async () => {
    expect((await metadata({ type: 'create_scheduled_event', args: { webhook: `${receiver.url}/x`, schedule_at: 'tomorrow' } })).body).toMatchObject({
      path: '$.args.schedule_at',
      code: 'parse-failed',
    });
    expect((await metadata({ type: 'create_scheduled_event', args: { webhook: 'not a url', schedule_at: '2030-01-01T00:00:00Z' } })).body).toMatchObject({
      path: '$.args.webhook',
      code: 'parse-failed',
    });
    const created = await metadata({ type: 'create_scheduled_event', args: { webhook: `${receiver.url}/later`, schedule_at: '2030-01-01T00:00:00Z' } });
    expect(await metadata({ type: 'delete_scheduled_event', args: { type: 'one_off', event_id: created.body.event_id } })).toEqual({
      status: 200,
      body: { message: 'success' },
    });
    expect((await metadata({ type: 'delete_scheduled_event', args: { type: 'one_off', event_id: created.body.event_id } })).body.code).toBe('not-exists');
    expect((await metadata({ type: 'get_scheduled_events', args: { type: 'weekly' } })).body).toMatchObject({ path: '$.args.type', code: 'parse-failed' });
  });
});
