import pg from 'pg';
import { ADMIN_SECRET, startTestServer, type TestServer } from '../support/server';
import { startWebhookReceiver, type WebhookReceiver } from '../support/webhook-receiver';
import { metadataRequest } from '../support/metadata';
import { eventually, sleep } from './support';

let server: TestServer;
let receiver: WebhookReceiver;
const metadata = (body: unknown) => metadataRequest(server.url, body);

beforeAll(async () => {
  receiver = await startWebhookReceiver();
  server = await startTestServer({ EVENTS_POLL_INTERVAL_MS: '200', EVENTS_RETRY_SECOND_MS: '20' });
  await server.database.query('CREATE TABLE orders (id serial PRIMARY KEY, status text NOT NULL, amount integer, note text)');
});
afterAll(async () => {
  await server.close();
  await receiver.close();
});

function trigger(name: string, extra: Record<string, unknown> = {}) {
  return {
    type: 'pg_create_event_trigger',
    args: { name, table: { schema: 'public', name: 'orders' }, webhook: `${receiver.url}/${name}`, insert: { columns: '*' }, ...extra },
  };
}

describe('event trigger definitions', () => {
  it('refuse an unknown table, an unknown column, a duplicate name, a bad name, and no operation, naming the entry', async () => {
    expect(
      await metadata({
        type: 'pg_create_event_trigger',
        args: { name: 'ghost', table: 'no_such_table', webhook: `${receiver.url}/x`, insert: { columns: '*' } },
      }),
    ).toEqual({
      status: 400,
      body: { path: '$.args.table', error: 'the event trigger "ghost": the table public.no_such_table does not exist', code: 'not-exists' },
    });
    expect(await metadata(trigger('bad_column', { update: { columns: ['status', 'colour'] } }))).toEqual({
      status: 400,
      body: { path: '$.args.update.columns[1]', error: 'the event trigger "bad_column": the table public.orders has no column "colour"', code: 'not-exists' },
    });
    expect((await metadata(trigger('dup'))).status).toBe(200);
    expect(await metadata(trigger('dup'))).toEqual({
      status: 400,
      body: { path: '$.args.name', error: 'the event trigger "dup" already exists (use "replace": true to change it)', code: 'already-exists' },
    });
    expect(await metadata(trigger('dup', { replace: true, update: { columns: ['status'] } }))).toEqual({ status: 200, body: { message: 'success' } });
    expect((await metadata(trigger('has space'))).body).toEqual({ path: '$.args.name', error: expect.stringContaining('"has space"'), code: 'parse-failed' });
    expect((await metadata({ type: 'pg_create_event_trigger', args: { name: 'nothing', table: 'orders', webhook: `${receiver.url}/x` } })).body).toEqual({
      path: '$.args',
      error: 'the event trigger "nothing" must watch at least one of insert, update, delete, or enable_manual',
      code: 'parse-failed',
    });
    expect((await metadata(trigger('no_hook', { webhook: 'ftp://example.com' }))).body.code).toBe('parse-failed');
    expect((await metadata({ type: 'pg_delete_event_trigger', args: { name: 'dup' } })).status).toBe(200);
    expect(await metadata({ type: 'pg_delete_event_trigger', args: { name: 'dup' } })).toEqual({
      status: 400,
      body: { path: '$.args.name', error: 'the event trigger "dup" does not exist', code: 'not-exists' },
    });
    const [{ count }] = await server.database.query<{ count: string }>("SELECT count(*) FROM pg_trigger WHERE tgname LIKE 'plinth_event_%'");
    expect(count).toBe('0');
  });
});

describe('capture and delivery', () => {
  beforeAll(async () => {
    const created = await metadata(
      trigger('order_changes', {
        update: { columns: ['status'] },
        delete: { columns: '*' },
        retry_conf: { num_retries: 2, interval_sec: 1, timeout_sec: 5 },
        headers: [{ name: 'X-Static', value: 'fixed' }],
      }),
    );
    expect(created).toEqual({ status: 200, body: { message: 'success' } });
  });

  it("delivers an INSERT with Hasura's payload, exactly spec 1 §2.4", async () => {
    const [{ id }] = await server.database.query<{ id: number }>("INSERT INTO orders (status, amount) VALUES ('new', 100) RETURNING id");
    const [request] = await receiver.waitFor('/order_changes', 1);
    expect(request.headers['content-type']).toBe('application/json');
    expect(request.headers['x-static']).toBe('fixed');
    expect(request.body).toEqual({
      id: expect.stringMatching(/^[0-9a-f-]{36}$/),
      created_at: expect.stringMatching(/^\d{4}-\d\d-\d\dT/),
      event: { op: 'INSERT', data: { old: null, new: { id, status: 'new', amount: 100, note: null } }, session_variables: null },
      delivery_info: { max_retries: 2, current_retry: 0 },
      trigger: { name: 'order_changes' },
      table: { schema: 'public', name: 'orders' },
    });
    const [row] = await eventually(async () => {
      const rows = await server.database.query<{ delivered: boolean; tries: number }>('SELECT delivered, tries FROM event_log WHERE id = $1', [
        request.body.id,
      ]);
      return rows[0]?.delivered ? rows : undefined;
    });
    expect(row.tries).toBe(1);
  });

  it('fires an UPDATE only when a watched column changed, with old and new; and a DELETE', async () => {
    const before = receiver.at('/order_changes').length;
    const [{ id }] = await server.database.query<{ id: number }>("INSERT INTO orders (status, amount) VALUES ('new', 5) RETURNING id");
    await server.database.query("UPDATE orders SET note = 'unwatched' WHERE id = $1", [id]);
    await server.database.query("UPDATE orders SET status = 'new' WHERE id = $1", [id]);
    await server.database.query("UPDATE orders SET status = 'paid' WHERE id = $1", [id]);
    await server.database.query('DELETE FROM orders WHERE id = $1', [id]);
    const all = await receiver.waitFor('/order_changes', before + 3);
    await sleep(300);
    const mine = receiver.at('/order_changes').slice(before);
    expect(mine.map((request) => request.body.event.op).sort()).toEqual(['DELETE', 'INSERT', 'UPDATE']);
    const update = mine.find((request) => request.body.event.op === 'UPDATE')!;
    expect(update.body.event.data).toEqual({
      old: { id, status: 'new', amount: 5, note: 'unwatched' },
      new: { id, status: 'paid', amount: 5, note: 'unwatched' },
    });
    const deleted = mine.find((request) => request.body.event.op === 'DELETE')!;
    expect(deleted.body.event.data).toEqual({ old: { id, status: 'paid', amount: 5, note: 'unwatched' }, new: null });
    expect(all.length).toBeGreaterThanOrEqual(before + 3);
  });

  it('fires nothing for a rolled-back change', async () => {
    const [{ count: before }] = await server.database.query<{ count: string }>('SELECT count(*) FROM event_log');
    const client = new pg.Client({ connectionString: server.database.url });
    await client.connect();
    await client.query('BEGIN');
    await client.query("INSERT INTO orders (status) VALUES ('rolled back')");
    const [{ count: inside }] = (await client.query('SELECT count(*) FROM event_log')).rows;
    await client.query('ROLLBACK');
    await client.end();
    expect(Number(inside)).toBe(Number(before) + 1);
    await sleep(400);
    const [{ count: after }] = await server.database.query<{ count: string }>('SELECT count(*) FROM event_log');
    expect(after).toBe(before);
    expect(receiver.at('/order_changes').some((request) => request.body.event.data.new?.status === 'rolled back')).toBe(false);
  });

  it("records the session variables of the GraphQL call that made the change (Plinth's own writes fire too)", async () => {
    const created = await metadata({
      type: 'pg_create_event_trigger',
      args: {
        name: 'user_signups',
        table: { schema: 'public', name: 'users' },
        webhook: `${receiver.url}/user_signups`,
        insert: { columns: '*', payload: ['id', 'email'] },
      },
    });
    expect(created.status).toBe(200);
    const response = await fetch(server.graphqlUrl, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        'x-gql-admin-secret': ADMIN_SECRET,
        'x-gql-role': 'admin',
        'x-gql-user-id': 'b6a0b7a8-4a8e-4b8e-9c1e-2f9f4a3c8d11',
      },
      body: JSON.stringify({
        query: 'mutation ($input: RegisterUserInput!) { registerUser(input: $input) { success user { id } } }',
        variables: { input: { email: 'events@example.com', password: 'correct horse battery', name: 'Events' } },
      }),
    });
    const result = (await response.json()) as { data: { registerUser: { success: boolean; user: { id: string } } } };
    expect(result.data.registerUser.success).toBe(true);
    const [request] = await receiver.waitFor('/user_signups', 1);
    expect(request.body.event).toEqual({
      op: 'INSERT',
      data: { old: null, new: { id: result.data.registerUser.user.id, email: 'events@example.com' } },
      session_variables: { 'x-gql-role': 'admin', 'x-gql-user-id': 'b6a0b7a8-4a8e-4b8e-9c1e-2f9f4a3c8d11' },
    });
    // A change made in a transaction (bulkCreateUsers inserts its batch in one) carries them too.
    const bulk = await fetch(server.graphqlUrl, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-gql-admin-secret': ADMIN_SECRET, 'x-gql-user-id': 'a1a1a1a1-4a8e-4b8e-9c1e-2f9f4a3c8d11' },
      body: JSON.stringify({
        query: 'mutation ($input: BulkCreateUsersInput!) { bulkCreateUsers(input: $input) { success created_count } }',
        variables: { input: { users: [{ email: 'bulk-events@example.com', name: 'Bulk' }] } },
      }),
    });
    expect(((await bulk.json()) as { data: { bulkCreateUsers: { created_count: number } } }).data.bulkCreateUsers.created_count).toBe(1);
    const [, bulkEvent] = await receiver.waitFor('/user_signups', 2);
    expect(bulkEvent.body.event.data.new.email).toBe('bulk-events@example.com');
    expect(bulkEvent.body.event.session_variables).toEqual({ 'x-gql-role': 'admin', 'x-gql-user-id': 'a1a1a1a1-4a8e-4b8e-9c1e-2f9f4a3c8d11' });
    // A REST call's write carries the session its headers give (the route-scoped preHandler):
    // the admin's asserted variables, and the unauthorised role for a caller without credentials.
    const restSignUp = (email: string, headers: Record<string, string>) =>
      fetch(`${server.url}/auth/signup/email-password`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', ...headers },
        body: JSON.stringify({ email, password: 'correct horse battery' }),
      });
    expect(
      (await restSignUp('rest-admin@example.com', { 'x-gql-admin-secret': ADMIN_SECRET, 'x-gql-user-id': 'c2c2c2c2-4a8e-4b8e-9c1e-2f9f4a3c8d11' })).status,
    ).toBe(200);
    expect((await restSignUp('rest-anonymous@example.com', {})).status).toBe(200);
    const signUps = await receiver.waitFor('/user_signups', 4);
    const byEmail = (email: string) => signUps.find((item) => item.body.event.data.new.email === email)!.body.event.session_variables;
    expect(byEmail('rest-admin@example.com')).toEqual({ 'x-gql-role': 'admin', 'x-gql-user-id': 'c2c2c2c2-4a8e-4b8e-9c1e-2f9f4a3c8d11' });
    expect(byEmail('rest-anonymous@example.com')).toEqual({ 'x-gql-role': 'anonymous' });
    // A write outside Plinth on the same pooled connections carries none.
    await server.database.query("INSERT INTO orders (status) VALUES ('from psql')");
    const fromPsql = await eventually(async () => receiver.at('/order_changes').find((item) => item.body.event.data.new?.status === 'from psql'));
    expect(fromPsql.body.event.session_variables).toBeNull();
  });
});

describe('reload_metadata', () => {
  it('recreates the captures from the definitions (after a table was recreated, say)', async () => {
    await server.database.query('CREATE TABLE reloaded (id serial PRIMARY KEY, v text)');
    const created = await metadata({
      type: 'pg_create_event_trigger',
      args: { name: 'reloaded', table: 'reloaded', webhook: `${receiver.url}/reloaded`, insert: { columns: '*' } },
    });
    expect(created.status).toBe(200);
    await server.database.query('DROP TABLE reloaded; CREATE TABLE reloaded (id serial PRIMARY KEY, v text)');
    expect(await metadata({ type: 'reload_metadata', args: {} })).toEqual({ status: 200, body: { message: 'success', is_consistent: true } });
    await server.database.query("INSERT INTO reloaded (v) VALUES ('after reload')");
    const [request] = await receiver.waitFor('/reloaded', 1);
    expect(request.body.event.data.new.v).toBe('after reload');
    await server.database.query('DROP TABLE reloaded');
    expect(await metadata({ type: 'reload_metadata', args: {} })).toEqual({
      status: 400,
      body: { path: '$.event_triggers.reloaded.table', error: 'the event trigger "reloaded": the table public.reloaded does not exist', code: 'not-exists' },
    });
    expect((await metadata({ type: 'pg_delete_event_trigger', args: { name: 'reloaded' } })).status).toBe(200);
  });
});

describe('malformed metadata requests', () => {
  const TYPES = [
    'pg_create_event_trigger',
    'pg_delete_event_trigger',
    'pg_invoke_event_trigger',
    'pg_redeliver_event',
    'pg_get_event_logs',
    'pg_get_event_invocation_logs',
    'pg_get_event_by_id',
    'create_cron_trigger',
    'delete_cron_trigger',
    'get_cron_triggers',
    'create_scheduled_event',
    'delete_scheduled_event',
    'get_scheduled_events',
    'get_scheduled_event_invocations',
    'replace_metadata',
  ];
  const ARGS: unknown[] = [
    null,
    [],
    'text',
    5,
    {},
    { name: 'x' },
    { name: 'x', table: 'orders' },
    { name: 'x', table: { name: 7 } },
    { name: 'x', table: 'orders', webhook: 'http://h', insert: 5 },
    { name: 'x', table: 'orders', webhook: 'http://h', insert: { columns: [] } },
    { name: 'x', table: 'orders', webhook: 'http://h', insert: {}, headers: [{ name: 'a b', value: 1 }] },
    { name: 'x', table: 'orders', webhook: 'http://h', insert: {}, condition: { new: { status: { _in: 'x' } } } },
    { name: 'x', table: 'orders', webhook: 'http://h', insert: {}, retry_conf: { num_retries: -1 } },
    { event_id: 'not-a-uuid' },
    { event_id: 7 },
    { type: 'cron' },
    { type: 'one_off', limit: -1 },
    { type: 'cron', trigger_name: {} },
    { name: 'x', schedule: 7, webhook: 'http://h' },
    { webhook: 'http://h', schedule_at: 7 },
    { version: 3, sources: 'x' },
    { version: 3, sources: [{ name: 'default', tables: [{ table: { name: 'orders' }, event_triggers: 'x' }] }] },
    { version: 3, sources: [{ name: 'default', tables: [{ table: { name: 'orders' }, event_triggers: [{ name: 'y' }] }] }], cron_triggers: [{}] },
    { version: 3, cron_triggers: {} },
  ];

  it('are answered 400 {path, error, code}, never 500, for every request type', async () => {
    for (const type of TYPES) {
      for (const args of ARGS) {
        const response = await metadata({ type, args });
        expect({ type, args, status: response.status < 500 }).toEqual({ type, args, status: true });
        if (response.status === 400) expect(response.body).toEqual({ path: expect.any(String), error: expect.any(String), code: expect.any(String) });
      }
    }
  });
});
