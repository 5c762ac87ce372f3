import net from 'node:net';
import { ADMIN_SECRET, startTestServer, type TestServer } from '../support/server';
import { startWebhookReceiver, type WebhookReceiver } from '../support/webhook-receiver';
import { metadataRequest } from '../support/metadata';
import { eventually, sleep } from './support';

/** One second of interval_sec or Retry-After lasts this long in this file. */
const SECOND_MS = 20;
let server: TestServer;
let receiver: WebhookReceiver;
const metadata = (body: unknown) => metadataRequest(server.url, body);

beforeAll(async () => {
  receiver = await startWebhookReceiver();
  process.env.EVENTS_TEST_TOKEN = 'token-from-the-environment';
  server = await startTestServer({ EVENTS_POLL_INTERVAL_MS: '200', EVENTS_RETRY_SECOND_MS: String(SECOND_MS), EVENTS_CLEANUP_INTERVAL_SECONDS: '1' });
  await server.database.query('CREATE TABLE items (id serial PRIMARY KEY, status text NOT NULL, label text)');
});
afterAll(async () => {
  await server.close();
  await receiver.close();
  delete process.env.EVENTS_TEST_TOKEN;
});

async function createTrigger(name: string, extra: Record<string, unknown> = {}): Promise<void> {
  const created = await metadata({
    type: 'pg_create_event_trigger',
    args: { name, table: 'items', webhook: `${receiver.url}/${name}`, insert: { columns: '*' }, ...extra },
  });
  expect(created).toEqual({ status: 200, body: { message: 'success' } });
}

const insertItem = async (status: string, label: string | null = null) =>
  (await server.database.query<{ id: number }>('INSERT INTO items (status, label) VALUES ($1, $2) RETURNING id', [status, label]))[0].id;

async function eventState(trigger: string) {
  return eventually(
    async () => {
      const [row] = await server.database.query<{ id: string; delivered: boolean; error: boolean; tries: number }>(
        'SELECT id, delivered, error, tries FROM event_log WHERE trigger_name = $1 AND (delivered OR error) ORDER BY seq DESC LIMIT 1',
        [trigger],
      );
      return row;
    },
    15_000,
    `an event of ${trigger} to finish`,
  );
}

describe('retries', () => {
  it('follow the doubling delay of spec 1 §6.4 up to num_retries, then the event is dead, listed, and redelivered on request', async () => {
    receiver.answer('/doubling', { status: 500, body: { error: 'down' } });
    await createTrigger('doubling', { retry_conf: { num_retries: 3, interval_sec: 10, timeout_sec: 5 } });
    await insertItem('new');
    const attempts = await receiver.waitFor('/doubling', 4);
    const gaps = attempts.slice(1).map((attempt, index) => attempt.at - attempts[index].at);
    // 10 s, 20 s, 40 s at 20 ms a second: 200, 400 and 800 ms (plus the machine's delay, never less).
    [200, 400, 800].forEach((expected, index) => {
      expect(gaps[index]).toBeGreaterThanOrEqual(expected - 5);
      expect(gaps[index]).toBeLessThan(expected + 600);
    });
    expect(attempts.map((attempt) => attempt.body.delivery_info)).toEqual([0, 1, 2, 3].map((current) => ({ max_retries: 3, current_retry: current })));
    const dead = await eventState('doubling');
    expect(dead).toMatchObject({ delivered: false, error: true, tries: 4 });
    await sleep(300);
    expect(receiver.at('/doubling')).toHaveLength(4);

    const listed = await metadata({ type: 'pg_get_event_logs', args: { name: 'doubling', status: 'dead' } });
    expect(listed.body.map((event: { id: string }) => event.id)).toEqual([dead.id]);
    const invocations = await metadata({ type: 'pg_get_event_invocation_logs', args: { name: 'doubling' } });
    expect(invocations.body).toHaveLength(4);
    expect(invocations.body[0]).toMatchObject({
      event_id: dead.id,
      trigger_name: 'doubling',
      http_status: 500,
      response: { type: 'webhook_response', data: { status: 500, body: { error: 'down' } } },
    });
    // Hasura's keys, as the Nhost dashboard reads them (`http_status`, never `status`).
    const HASURA_INVOCATION_KEYS = ['created_at', 'event_id', 'http_status', 'id', 'request', 'response', 'trigger_name'];
    expect(Object.keys(invocations.body[0]).sort()).toEqual(HASURA_INVOCATION_KEYS);
    expect(invocations.body[0].request.payload.id).toBe(dead.id);

    receiver.answer('/doubling', { status: 200 });
    expect(await metadata({ type: 'pg_redeliver_event', args: { event_id: dead.id } })).toEqual({ status: 200, body: { message: 'success' } });
    const again = await receiver.waitFor('/doubling', 5);
    expect(again[4].body.delivery_info).toEqual({ max_retries: 3, current_retry: 0 });
    expect(await eventState('doubling')).toMatchObject({ id: dead.id, delivered: true, error: false, tries: 1 });
    const byId = await metadata({ type: 'pg_get_event_by_id', args: { event_id: dead.id, invocation_log_limit: 2 } });
    expect(byId.body.event).toMatchObject({ id: dead.id, trigger_name: 'doubling', delivered: true });
    expect(byId.body.invocations.map((invocation: { http_status: number }) => invocation.http_status)).toEqual([200, 500]);
    expect(Object.keys(byId.body.invocations[0]).sort()).toEqual(HASURA_INVOCATION_KEYS);
    expect((await metadata({ type: 'pg_redeliver_event', args: { event_id: '00000000-0000-4000-8000-000000000000' } })).body.code).toBe('not-exists');
  });

  it('take Retry-After instead of the computed delay', async () => {
    receiver.answer('/retry_after', (_request, count) => (count === 1 ? { status: 503, headers: { 'retry-after': '5' } } : { status: 200 }));
    await createTrigger('retry_after', { retry_conf: { num_retries: 1, interval_sec: 100, timeout_sec: 5 } });
    await insertItem('new');
    const [first, second] = await receiver.waitFor('/retry_after', 2);
    // 5 s at 20 ms a second, where interval_sec would have waited 2 s.
    expect(second.at - first.at).toBeGreaterThanOrEqual(95);
    expect(second.at - first.at).toBeLessThan(1500);
  });

  it('count a timeout (timeout_sec) and a refused connection as failures', async () => {
    receiver.answer('/slow', (_request, count) => (count === 1 ? { status: 200, delayMs: 2500 } : { status: 200 }));
    await createTrigger('slow', { retry_conf: { num_retries: 1, interval_sec: 1, timeout_sec: 1 } });
    await insertItem('slow');
    await receiver.waitFor('/slow', 2);
    const slow = await eventState('slow');
    expect(slow).toMatchObject({ delivered: true, tries: 2 });
    const [timedOut] = await server.database.query<{ status: number | null; response: { type: string; data: { message: string } } }>(
      'SELECT status, response FROM event_invocation_logs WHERE event_id = $1 ORDER BY created_at LIMIT 1',
      [slow.id],
    );
    expect(timedOut.status).toBeNull();
    expect(timedOut.response).toEqual({
      type: 'client_error',
      data: { message: expect.stringMatching(/^TIMEOUT: POST http:\/\/127\.0\.0\.1:\d+: timed out after 1000 ms$/) },
    });

    const closed = net.createServer();
    await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve));
    const port = (closed.address() as net.AddressInfo).port;
    await new Promise((resolve) => closed.close(resolve));
    const created = await metadata({
      type: 'pg_create_event_trigger',
      args: {
        name: 'refused',
        table: 'items',
        webhook: `http://127.0.0.1:${port}/hook`,
        insert: { columns: '*' },
        retry_conf: { num_retries: 1, interval_sec: 1 },
      },
    });
    expect(created.status).toBe(200);
    await insertItem('refused');
    const refused = await eventState('refused');
    expect(refused).toMatchObject({ delivered: false, error: true, tries: 2 });
  });

  it('stop at a 200 answering {retry: false}: the event is final, not retried', async () => {
    receiver.answer('/permanent', { status: 200, body: { status: 'error', message: 'invalid order', retry: false } });
    await createTrigger('permanent', { retry_conf: { num_retries: 5, interval_sec: 1 } });
    await insertItem('bad');
    expect(await eventState('permanent')).toMatchObject({ delivered: false, error: true, tries: 1 });
    await sleep(300);
    expect(receiver.at('/permanent')).toHaveLength(1);
  });
});

describe("what Hasura's users asked for", () => {
  it('delivers the events of one row in order when in_order is set, while other rows go on', async () => {
    // The first event of row A fails twice: A's later events wait for it; row B's do not.
    receiver.answer('/ordered', (request, _count) => {
      const failing = request.body.event.data.new.label === 'A' && request.body.event.op === 'INSERT' && request.body.delivery_info.current_retry < 2;
      return failing ? { status: 500 } : { status: 200 };
    });
    await createTrigger('ordered', { update: { columns: ['status'] }, in_order: true, retry_conf: { num_retries: 5, interval_sec: 5 } });
    const a = await insertItem('v1', 'A');
    await server.database.query("UPDATE items SET status = 'v2' WHERE id = $1", [a]);
    await server.database.query("UPDATE items SET status = 'v3' WHERE id = $1", [a]);
    const b = await insertItem('v1', 'B');
    await receiver.waitFor('/ordered', 6);
    const delivered = receiver
      .at('/ordered')
      .filter((request) => !(request.body.event.data.new.label === 'A' && request.body.event.op === 'INSERT' && request.body.delivery_info.current_retry < 2));
    const ofA = delivered.filter((request) => request.body.event.data.new.id === a).map((request) => request.body.event.data.new.status);
    expect(ofA).toEqual(['v1', 'v2', 'v3']);
    const firstOfB = receiver.at('/ordered').findIndex((request) => request.body.event.data.new.id === b);
    const lastOfA = receiver
      .at('/ordered')
      .map((request) => request.body.event.data.new.id)
      .lastIndexOf(a);
    expect(firstOfB).toBeLessThan(lastOfA);
  });

  it('fires only when the condition on the old or new row holds', async () => {
    await createTrigger('paid_only', {
      update: { columns: '*' },
      condition: { _and: [{ new: { status: { _eq: 'paid' } } }, { _not: { old: { status: { _eq: 'paid' } } } }] },
    });
    const id = await insertItem('pending', 'cond');
    await server.database.query("UPDATE items SET status = 'paid' WHERE id = $1", [id]);
    await server.database.query("UPDATE items SET label = 'still paid' WHERE id = $1", [id]);
    await insertItem('paid', 'born paid');
    await receiver.waitFor('/paid_only', 2);
    await sleep(300);
    expect(receiver.at('/paid_only').map((request) => [request.body.event.op, request.body.event.data.new.label])).toEqual([
      ['UPDATE', 'cond'],
      ['INSERT', 'born paid'],
    ]);
    const unknownColumn = await metadata({
      type: 'pg_create_event_trigger',
      args: { name: 'bad_condition', table: 'items', webhook: `${receiver.url}/x`, insert: { columns: '*' }, condition: { new: { colour: { _eq: 'red' } } } },
    });
    expect(unknownColumn.body).toEqual({
      path: '$.args.condition.new.colour',
      error: 'the event trigger "bad_condition": the table public.items has no column "colour"',
      code: 'not-exists',
    });
    const badOperator = await metadata({
      type: 'pg_create_event_trigger',
      args: { name: 'bad_condition', table: 'items', webhook: `${receiver.url}/x`, insert: { columns: '*' }, condition: { new: { status: { _like: 'x' } } } },
    });
    expect(badOperator.body).toMatchObject({ path: '$.args.condition.new.status._like', code: 'parse-failed' });
  });

  it('deletes delivered events and their logs older than EVENTS_CLEANUP_AFTER_HOURS, never pending ones', async () => {
    await createTrigger('cleanup');
    receiver.answer('/cleanup', { status: 200 });
    await insertItem('old');
    const delivered = await eventState('cleanup');
    await server.database.query(
      "INSERT INTO event_log (schema_name, table_name, trigger_name, payload, created_at, next_retry_at) VALUES ('public', 'items', 'cleanup', '{}', now() - interval '30 days', now() + interval '1 day')",
    );
    await server.database.query("UPDATE event_log SET created_at = now() - interval '8 days' WHERE id = $1", [delivered.id]);
    await eventually(async () => ((await server.database.query('SELECT 1 FROM event_log WHERE id = $1', [delivered.id])).length === 0 ? true : undefined));
    expect(await server.database.query('SELECT 1 FROM event_invocation_logs WHERE event_id = $1', [delivered.id])).toEqual([]);
    expect(await server.database.query("SELECT 1 FROM event_log WHERE trigger_name = 'cleanup' AND NOT delivered")).toHaveLength(1);
  });
});

describe('manual events and headers', () => {
  it('raises a MANUAL event when enable_manual is true, and refuses otherwise', async () => {
    await createTrigger('manual', { enable_manual: true, insert: undefined });
    const invoked = await metadata({ type: 'pg_invoke_event_trigger', args: { name: 'manual', payload: { hello: 'world' } } });
    expect(invoked).toEqual({ status: 200, body: { event_id: expect.stringMatching(/^[0-9a-f-]{36}$/) } });
    const [request] = await receiver.waitFor('/manual', 1);
    expect(request.body).toMatchObject({
      id: invoked.body.event_id,
      event: { op: 'MANUAL', data: { old: null, new: { hello: 'world' } }, session_variables: null },
    });
    await createTrigger('not_manual');
    expect(await metadata({ type: 'pg_invoke_event_trigger', args: { name: 'not_manual', payload: {} } })).toEqual({
      status: 400,
      body: { path: '$.args.name', error: 'the event trigger "not_manual" does not allow manual events (enable_manual is false)', code: 'not-supported' },
    });
    expect((await metadata({ type: 'pg_invoke_event_trigger', args: { name: 'manual' } })).body).toMatchObject({
      path: '$.args.payload',
      code: 'parse-failed',
    });
  });

  it('resolves the header templates per event, and logs the resolved ones redacted', async () => {
    await createTrigger('templated', {
      headers: [
        { name: 'X-User', value: "{{SESSION_VARIABLES['x-gql-user-id']}}" },
        { name: 'X-Request-Id', value: '{{REQUEST_ID}}' },
        { name: 'X-Gql-Admin-Secret', value: '{{ADMIN_SECRET}}' },
        { name: 'Authorization', value: 'Bearer {{EVENTS_TEST_TOKEN}}' },
        { name: 'X-From-Env', value_from_env: 'EVENTS_TEST_TOKEN' },
        { name: 'X-Plain', value: 'plain' },
      ],
    });
    await server.database.query(
      'BEGIN; SELECT set_config(\'plinth.session_variables\', \'{"x-gql-user-id":"user-7","x-gql-role":"user"}\', true); INSERT INTO items (status) VALUES (\'templated\'); COMMIT;',
    );
    const [request] = await receiver.waitFor('/templated', 1);
    expect(request.headers).toMatchObject({
      'x-user': 'user-7',
      'x-request-id': expect.stringMatching(/^[0-9a-f-]{36}$/),
      'x-gql-admin-secret': ADMIN_SECRET,
      authorization: 'Bearer token-from-the-environment',
      'x-from-env': 'token-from-the-environment',
      'x-plain': 'plain',
    });
    const event = await eventState('templated');
    const [log] = await server.database.query<{ request: { headers: { name: string; value: string }[]; request_id: string } }>(
      'SELECT request FROM event_invocation_logs WHERE event_id = $1',
      [event.id],
    );
    expect(log.request.request_id).toBe(request.headers['x-request-id']);
    expect(JSON.stringify(log.request)).not.toContain(ADMIN_SECRET);
    expect(JSON.stringify(log.request)).not.toContain('token-from-the-environment');
    expect(log.request.headers).toContainEqual({ name: 'X-Plain', value: 'plain' });
  });
});

describe('visibility', () => {
  it('counts delivered, failed, retried and dead events and times deliveries at /metrics', async () => {
    const text = await (await fetch(`${server.url}/metrics`)).text();
    expect(text).toMatch(/plinth_events_delivered_total\{kind="event_trigger",trigger="doubling"\} 1/);
    expect(text).toMatch(/plinth_events_failed_total\{kind="event_trigger",trigger="doubling"\} 4/);
    expect(text).toMatch(/plinth_events_retried_total\{kind="event_trigger",trigger="doubling"\} 3/);
    expect(text).toMatch(/plinth_events_dead_total\{kind="event_trigger",trigger="doubling"\} 1/);
    expect(text).toMatch(/plinth_events_delivery_latency_seconds_count\{kind="event_trigger",trigger="doubling"\} 1/);
  });
});
