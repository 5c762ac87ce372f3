import { randomUUID } from 'node:crypto';
import type { Client as WsClient } from 'graphql-ws';
import pg from 'pg';
import { postGraphQL } from '../support/graphql';
import { parsePrometheus, sampleValue } from '../support/prometheus';
import { metadataRequest } from '../support/metadata';
import { ADMIN_SECRET, startTestServer, type TestServer } from '../support/server';
import { bearer, signToken } from '../support/tokens';
import { until } from '../support/until';
import { subscriptionClient } from '../support/ws';

/* Streaming subscriptions (`<table>_stream`) over a real graphql-ws client and PostgreSQL. */

const INTERVAL_MS = 100;
let server: TestServer;
const alice = randomUUID();
const bob = randomUUID();
const asAdmin = { 'x-gql-admin-secret': ADMIN_SECRET };
const asUser = (userId = alice) => bearer(signToken({ roles: ['user'], userId }));
const clients: WsClient[] = [];

interface Row {
  id: number;
  body?: string;
  created_at?: string;
  owner_id?: string;
}

/** What a stream sent: each `next` message's rows or errors, and whether it ended (complete or error). */
class Stream {
  private readonly messages: { rows?: Row[]; errors?: readonly { message: string; extensions?: Record<string, unknown> }[] }[] = [];
  private waiting?: () => void;
  ended = false;
  readonly dispose: () => void;

  constructor(query: string, headers: Record<string, string> = asAdmin, variables?: Record<string, unknown>, wsUrl = server.wsUrl) {
    const client = subscriptionClient(wsUrl, { headers });
    clients.push(client);
    this.dispose = client.subscribe(
      { query, ...(variables ? { variables } : {}) },
      {
        next: (result) => {
          const data = result.data as Record<string, Row[]> | null | undefined;
          this.messages.push({ rows: data ? Object.values(data)[0] : undefined, errors: result.errors as never });
          this.waiting?.();
        },
        error: (error) => {
          const errors = Array.isArray(error) ? error : [{ message: String((error as Error).message ?? error) }];
          this.messages.push({ errors });
          this.ended = true;
          this.waiting?.();
        },
        complete: () => {
          this.ended = true;
          this.waiting?.();
        },
      },
    );
  }

  /** The next message, waiting up to `timeoutMs`. */
  async next(timeoutMs = 5000): Promise<{ rows?: Row[]; errors?: readonly { message: string; extensions?: Record<string, unknown> }[] }> {
    const deadline = Date.now() + timeoutMs;
    while (this.messages.length === 0) {
      if (Date.now() > deadline) throw new Error('no stream message within the time limit');
      await new Promise<void>((resolve) => {
        this.waiting = resolve;
        setTimeout(resolve, 50);
      });
    }
    return this.messages.shift()!;
  }

  async rows(timeoutMs?: number): Promise<Row[]> {
    const message = await this.next(timeoutMs);
    expect(message.errors).toBeUndefined();
    return message.rows!;
  }

  /** Ids of the next message's rows. */
  async ids(timeoutMs?: number): Promise<number[]> {
    return (await this.rows(timeoutMs)).map((row) => row.id);
  }

  /** Asserts that nothing arrives for `ms`. */
  async quiet(ms = 5 * INTERVAL_MS): Promise<void> {
    await new Promise((resolve) => setTimeout(resolve, ms));
    expect(this.messages).toEqual([]);
  }

  /** The first error the stream sent (as `error`, or inside a `next`). */
  async error(): Promise<{ message: string; code: unknown }> {
    const message = await this.next();
    expect(message.errors?.length).toBeGreaterThan(0);
    return { message: message.errors![0].message, code: message.errors![0].extensions?.code };
  }
}

const rows = (sql: string, values: unknown[] = []) => server.database.query<Record<string, any>>(sql, values);
const insert = async (owner: string, count: number, body = 'x') =>
  (await rows('INSERT INTO s_events (owner_id, body) SELECT $1, $2 || n FROM generate_series(1, $3) AS n RETURNING id', [owner, body, count])).map(
    (row) => row.id as number,
  );

const stream = (args: string, fields = 'id') => `subscription { s_events_stream(${args}) { ${fields} } }`;

beforeAll(async () => {
  server = await startTestServer({ GQL_GRAPHQL_STREAMING_QUERIES_REFETCH_INTERVAL_MS: String(INTERVAL_MS) });
  await server.database.query(`
    CREATE TABLE s_events (
      id serial PRIMARY KEY, owner_id uuid NOT NULL, body text NOT NULL, created_at timestamptz NOT NULL DEFAULT clock_timestamp(),
      payload json, tags text[], secret text);
    CREATE TABLE s_owners (id uuid PRIMARY KEY, name text NOT NULL);
  `);
  const requests = [
    { type: 'pg_track_table', args: { table: 's_events' } },
    { type: 'pg_track_table', args: { table: 's_owners' } },
    {
      type: 'pg_create_object_relationship',
      args: { table: 's_events', name: 'owner', using: { manual_configuration: { remote_table: 's_owners', column_mapping: { owner_id: 'id' } } } },
    },
    // A viewer reads every event, and only its own owner row.
    { type: 'pg_create_select_permission', args: { table: 's_events', role: 'viewer', permission: { columns: ['id', 'owner_id'], filter: {} } } },
    {
      type: 'pg_create_select_permission',
      args: { table: 's_owners', role: 'viewer', permission: { columns: ['name'], filter: { id: { _eq: 'X-Gql-User-Id' } } } },
    },
    {
      type: 'pg_create_select_permission',
      args: {
        table: 's_events',
        role: 'user',
        permission: { columns: ['id', 'owner_id', 'body', 'created_at', 'payload'], filter: { owner_id: { _eq: 'X-Gql-User-Id' } } },
      },
    },
    // Live queries only: no stream.
    {
      type: 'pg_create_select_permission',
      args: { table: 's_events', role: 'reader', permission: { columns: ['id'], filter: {}, subscription_root_fields: ['select'] } },
    },
  ];
  expect(await metadataRequest(server.url, { type: 'bulk', args: requests })).toEqual({ status: 200, body: requests.map(() => ({ message: 'success' })) });
});

afterEach(async () => {
  for (const client of clients.splice(0)) await client.dispose();
  await server.database.query('TRUNCATE s_events, s_owners RESTART IDENTITY');
});

afterAll(async () => {
  await server.close();
});

describe('the schema', () => {
  it("declares Hasura's stream field and types, per role", async () => {
    const query = `{
      __schema { subscriptionType { fields { name args { name type { kind name ofType { kind name ofType { kind name } } } } } } }
      cursor: __type(name: "s_events_stream_cursor_input") { inputFields { name type { kind name ofType { name } } } }
      value: __type(name: "s_events_stream_cursor_value_input") { inputFields { name type { name } } }
      ordering: __type(name: "cursor_ordering") { enumValues { name } }
    }`;
    const admin = (await postGraphQL<any>(server.graphqlUrl, { query }, asAdmin)).body.data;
    const field = admin.__schema.subscriptionType.fields.find((candidate: { name: string }) => candidate.name === 's_events_stream');
    expect(field.args).toEqual([
      { name: 'batch_size', type: { kind: 'NON_NULL', name: null, ofType: { kind: 'SCALAR', name: 'Int', ofType: null } } },
      {
        name: 'cursor',
        type: { kind: 'NON_NULL', name: null, ofType: { kind: 'LIST', name: null, ofType: { kind: 'INPUT_OBJECT', name: 's_events_stream_cursor_input' } } },
      },
      { name: 'where', type: { kind: 'INPUT_OBJECT', name: 's_events_bool_exp', ofType: null } },
    ]);
    expect(admin.cursor.inputFields).toEqual([
      { name: 'initial_value', type: { kind: 'NON_NULL', name: null, ofType: { name: 's_events_stream_cursor_value_input' } } },
      { name: 'ordering', type: { kind: 'ENUM', name: 'cursor_ordering', ofType: null } },
    ]);
    // json and array columns have no order a cursor could follow.
    expect(admin.value.inputFields).toEqual([
      { name: 'id', type: { name: 'Int' } },
      { name: 'owner_id', type: { name: 'uuid' } },
      { name: 'body', type: { name: 'String' } },
      { name: 'created_at', type: { name: 'timestamptz' } },
      { name: 'secret', type: { name: 'String' } },
    ]);
    expect(admin.ordering.enumValues).toEqual([{ name: 'ASC' }, { name: 'DESC' }]);

    const user = (await postGraphQL<any>(server.graphqlUrl, { query }, asUser())).body.data;
    expect(user.value.inputFields.map((input: { name: string }) => input.name)).toEqual(['id', 'owner_id', 'body', 'created_at']);
    const reader = (await postGraphQL<any>(server.graphqlUrl, { query }, bearer(signToken({ roles: ['reader'], userId: bob })))).body.data;
    expect((reader.__schema.subscriptionType?.fields ?? []).map((candidate: { name: string }) => candidate.name)).not.toContain('s_events_stream');
    expect(reader.cursor).toBeNull();
  });
});

describe('batches', () => {
  it('sends the rows after the initial value in ascending order, batch by batch, then new rows', async () => {
    await insert(alice, 10);
    const subscription = new Stream(stream('batch_size: 4, cursor: { initial_value: { id: 3 } }'));
    expect(await subscription.ids()).toEqual([4, 5, 6, 7]);
    expect(await subscription.ids()).toEqual([8, 9, 10]);
    await subscription.quiet();
    await insert(bob, 5);
    expect(await subscription.ids()).toEqual([11, 12, 13, 14]);
    expect(await subscription.ids()).toEqual([15]);
    await insert(alice, 1);
    expect(await subscription.ids()).toEqual([16]);
  });

  it('sends the rows before the initial value in descending order, and never the rows after it', async () => {
    await insert(alice, 10);
    const subscription = new Stream(stream('batch_size: 3, cursor: [{ initial_value: { id: 8 }, ordering: DESC }]', 'id body'));
    expect(await subscription.ids()).toEqual([7, 6, 5]);
    expect(await subscription.ids()).toEqual([4, 3, 2]);
    expect(await subscription.rows()).toEqual([{ id: 1, body: 'x1' }]);
    await insert(alice, 2);
    await subscription.quiet();
  });

  it('sends nothing while no row follows the cursor, and a batch per poll of what committed since', async () => {
    await insert(alice, 2);
    const subscription = new Stream(stream('batch_size: 100, cursor: { initial_value: { id: 2 } }'));
    await subscription.quiet();
    const client = new pg.Client({ connectionString: server.database.url });
    await client.connect();
    try {
      await client.query('BEGIN');
      await client.query("INSERT INTO s_events (owner_id, body) SELECT $1, 'tx' FROM generate_series(1, 3)", [alice]);
      await subscription.quiet();
      await client.query('COMMIT');
    } finally {
      await client.end();
    }
    expect(await subscription.ids()).toEqual([3, 4, 5]);
  });

  it('holds back a row committed before an earlier one still in a running transaction, then sends both in order', async () => {
    await insert(alice, 1);
    const subscription = new Stream(stream('batch_size: 10, cursor: { initial_value: { id: 0 } }'));
    expect(await subscription.ids()).toEqual([1]);
    const slow = new pg.Client({ connectionString: server.database.url });
    await slow.connect();
    try {
      await slow.query('BEGIN');
      // Takes id 2 and stays open while id 3 commits.
      await slow.query("INSERT INTO s_events (owner_id, body) VALUES ($1, 'slow')", [alice]);
      expect(await insert(alice, 1)).toEqual([3]);
      await subscription.quiet();
      await slow.query('COMMIT');
    } finally {
      await slow.end();
    }
    expect(await subscription.ids()).toEqual([2, 3]);
  });
});

describe('concurrent writers', () => {
  it('delivers every row exactly once and in order while transactions commit out of id order', async () => {
    const subscription = new Stream(stream('batch_size: 7, cursor: { initial_value: { id: 0 } }'));
    const writers = Array.from({ length: 4 }, async () => {
      const client = new pg.Client({ connectionString: server.database.url });
      await client.connect();
      try {
        for (let index = 0; index < 25; index++) {
          await client.query('BEGIN');
          await client.query("INSERT INTO s_events (owner_id, body) VALUES ($1, 'w')", [alice]);
          // Holds its id for a while, so that later ids commit first.
          await client.query('SELECT pg_sleep($1)', [Math.random() * 0.03]);
          await client.query('COMMIT');
        }
      } finally {
        await client.end();
      }
    });
    const received: number[] = [];
    const writing = Promise.all(writers);
    while (received.length < 100) received.push(...(await subscription.ids(10_000)));
    await writing;
    expect(received).toEqual(Array.from({ length: 100 }, (_, index) => index + 1));
    await subscription.quiet();
  });
});

describe('reconnecting with the last cursor value', () => {
  it('gives every row once, with no gap, by id and by timestamp', async () => {
    for (const [column, fields] of [
      ['id', 'id'],
      ['created_at', 'id created_at'],
    ] as const) {
      await insert(alice, 5);
      const received: Row[] = [];
      let cursor: unknown = column === 'id' ? 0 : '1970-01-01T00:00:00Z';
      const query =
        'subscription ($cursor: s_events_stream_cursor_value_input!) { s_events_stream(batch_size: 2, cursor: { initial_value: $cursor }) { FIELDS } }';
      for (let round = 0; round < 4; round++) {
        const subscription = new Stream(query.replace('FIELDS', fields), asAdmin, { cursor: { [column]: cursor } });
        const batch = await subscription.rows();
        received.push(...batch);
        cursor = batch.at(-1)![column];
        subscription.dispose();
        // Rows committed while no one listens.
        await insert(alice, 2);
      }
      const subscription = new Stream(query.replace('FIELDS', fields), asAdmin, { cursor: { [column]: cursor } });
      for (let batch = await subscription.rows(); ; batch = await subscription.rows()) {
        received.push(...batch);
        if (received.at(-1)!.id === 13) break;
      }
      expect(received.map((row) => row.id)).toEqual(Array.from({ length: 13 }, (_, index) => index + 1));
      await subscription.quiet();
      await server.database.query('TRUNCATE s_events RESTART IDENTITY');
    }
  });
});

describe('permissions', () => {
  it("applies the role's row filter and the where argument: another owner's row never arrives", async () => {
    await insert(bob, 3);
    await insert(alice, 3, 'a');
    const subscription = new Stream(stream('batch_size: 10, cursor: { initial_value: { id: 0 } }', 'id owner_id'), asUser());
    expect(await subscription.rows()).toEqual([4, 5, 6].map((id) => ({ id, owner_id: alice })));
    await insert(bob, 2);
    await insert(alice, 1);
    expect(await subscription.ids()).toEqual([9]);
    const filtered = new Stream(stream('batch_size: 10, cursor: { initial_value: { id: 0 } }, where: { body: { _like: "a%" } }'), asUser(bob));
    await filtered.quiet();
    await insert(bob, 1, 'a');
    expect(await filtered.ids()).toEqual([10]);
    await subscription.quiet(INTERVAL_MS);
  });

  it("builds relationships' JSON under the target's permission", async () => {
    await rows("INSERT INTO s_owners (id, name) VALUES ($1, 'Alice'), ($2, 'Bob')", [alice, bob]);
    await insert(alice, 1);
    await insert(bob, 1);
    const admin = new Stream(stream('batch_size: 10, cursor: { initial_value: { id: 0 } }', 'id author: owner { name }'));
    expect(await admin.rows()).toEqual([
      { id: 1, author: { name: 'Alice' } },
      { id: 2, author: { name: 'Bob' } },
    ]);
    // Every event, and of the owners only the viewer's own.
    const viewer = new Stream(
      stream('batch_size: 10, cursor: { initial_value: { id: 0 } }', 'id owner { name }'),
      bearer(signToken({ roles: ['viewer'], userId: bob })),
    );
    expect(await viewer.rows()).toEqual([
      { id: 1, owner: null },
      { id: 2, owner: { name: 'Bob' } },
    ]);
  });

  it('refuses a column outside the role\u2019s permission and a role without the stream', async () => {
    const hidden = new Stream(stream('batch_size: 10, cursor: { initial_value: { secret: "a" } }'), asUser());
    expect(await hidden.error()).toEqual({ message: expect.stringContaining('"secret"'), code: 'GRAPHQL_VALIDATION_FAILED' });
    const reader = new Stream(stream('batch_size: 10, cursor: { initial_value: { id: 0 } }'), bearer(signToken({ roles: ['reader'], userId: bob })));
    expect(await reader.error()).toEqual({ message: expect.stringContaining('s_events_stream'), code: 'GRAPHQL_VALIDATION_FAILED' });
  });
});

describe('a change of the metadata under an open stream', () => {
  const userPermission = (filter: Record<string, unknown>) => ({
    type: 'pg_create_select_permission',
    args: { table: 's_events', role: 'user', permission: { columns: ['id', 'owner_id', 'body', 'created_at', 'payload'], filter } },
  });
  const dropUserPermission = { type: 'pg_drop_select_permission', args: { table: 's_events', role: 'user' } };
  const ownRows = { owner_id: { _eq: 'X-Gql-User-Id' } };
  /** Waits until this instance serves the user the ids `expected` of its rows (null: no s_events at all). */
  const servedToUser = (expected: number[] | null) =>
    until(async () => {
      const body = (await postGraphQL<{ s_events: Row[] }>(server.graphqlUrl, { query: '{ s_events(order_by: { id: asc }) { id } }' }, asUser())).body;
      return JSON.stringify(body.data ? body.data.s_events.map((row) => row.id) : null) === JSON.stringify(expected);
    });

  it('applies the new permission from the next poll, from the same cursor', async () => {
    await insert(alice, 2);
    const subscription = new Stream(stream('batch_size: 10, cursor: { initial_value: { id: 0 } }', 'id body'), asUser());
    expect(await subscription.ids()).toEqual([1, 2]);
    // One replace (a bulk of drop and create would serve the table without the permission between its steps).
    const exported = (await metadataRequest(server.url, { type: 'export_metadata', args: {} })).body as any;
    const tightened = structuredClone(exported);
    const entry = tightened.sources[0].tables.find((candidate: any) => candidate.table.name === 's_events');
    entry.select_permissions.find((permission: any) => permission.role === 'user').permission.filter = { _and: [ownRows, { body: { _like: 'keep%' } }] };
    expect((await metadataRequest(server.url, { type: 'replace_metadata', args: tightened })).status).toBe(200);
    try {
      await servedToUser([]);
      await insert(alice, 1, 'drop');
      await insert(alice, 1, 'keep');
      expect(await subscription.rows()).toEqual([{ id: 4, body: 'keep1' }]);
      await subscription.quiet();
    } finally {
      await metadataRequest(server.url, { type: 'replace_metadata', args: exported });
      await servedToUser([1, 2, 3, 4]);
    }
  });

  it('ends the stream with METADATA_CHANGED when the role may no longer read the table', async () => {
    const subscription = new Stream(stream('batch_size: 10, cursor: { initial_value: { id: 0 } }'), asUser());
    await subscription.quiet(2 * INTERVAL_MS);
    expect((await metadataRequest(server.url, dropUserPermission)).status).toBe(200);
    try {
      await insert(alice, 1);
      expect(await subscription.error()).toEqual({ message: expect.stringContaining('subscribe again'), code: 'METADATA_CHANGED' });
      await until(() => subscription.ended, 5000, 'the stream ending');
    } finally {
      await metadataRequest(server.url, userPermission(ownRows));
      await servedToUser([1]);
    }
  });
});

describe('bad arguments', () => {
  const cases: [string, string, Record<string, unknown> | undefined, string, RegExp][] = [
    ['two columns in one cursor', 'batch_size: 1, cursor: { initial_value: { id: 1, body: "a" } }', undefined, 'BAD_USER_INPUT', /multiple column cursors/],
    [
      'two cursors',
      'batch_size: 1, cursor: [{ initial_value: { id: 1 } }, { initial_value: { body: "a" } }]',
      undefined,
      'BAD_USER_INPUT',
      /multiple column cursors/,
    ],
    ['no cursor column', 'batch_size: 1, cursor: { initial_value: {} }', undefined, 'BAD_USER_INPUT', /one streaming column field is expected/],
    ['an empty cursor list', 'batch_size: 1, cursor: []', undefined, 'BAD_USER_INPUT', /one streaming column field is expected/],
    ['a null initial value', 'batch_size: 1, cursor: { initial_value: { id: null } }', undefined, 'BAD_USER_INPUT', /cannot be null/],
    ['batch_size 0', 'batch_size: 0, cursor: { initial_value: { id: 1 } }', undefined, 'BAD_USER_INPUT', /"batch_size" must be a positive integer/],
    ['a negative batch_size', 'batch_size: -5, cursor: { initial_value: { id: 1 } }', undefined, 'BAD_USER_INPUT', /positive integer/],
    ['an unknown column', 'batch_size: 1, cursor: { initial_value: { nope: 1 } }', undefined, 'GRAPHQL_VALIDATION_FAILED', /nope/],
    ['a json column', 'batch_size: 1, cursor: { initial_value: { payload: 1 } }', undefined, 'GRAPHQL_VALIDATION_FAILED', /payload/],
    ['a string batch_size', 'batch_size: "2", cursor: { initial_value: { id: 1 } }', undefined, 'GRAPHQL_VALIDATION_FAILED', /Int/],
    ['a string id', 'batch_size: 1, cursor: { initial_value: { id: "1" } }', undefined, 'GRAPHQL_VALIDATION_FAILED', /Int/],
    ['an unknown ordering', 'batch_size: 1, cursor: { initial_value: { id: 1 }, ordering: UP }', undefined, 'GRAPHQL_VALIDATION_FAILED', /cursor_ordering/],
    ['no batch_size', 'cursor: { initial_value: { id: 1 } }', undefined, 'GRAPHQL_VALIDATION_FAILED', /batch_size/],
    ['a uuid that is not one', 'batch_size: 1, cursor: { initial_value: { owner_id: "not-a-uuid" } }', undefined, 'BAD_USER_INPUT', /uuid/],
  ];
  it.each(cases)('%s is a clear error', async (_name, args, variables, code, message) => {
    const subscription = new Stream(stream(args), asAdmin, variables);
    const error = await subscription.error();
    expect(error.code).toBe(code);
    expect(error.message).toMatch(message);
  });

  it('refuses the same mistakes given through variables, and still serves afterwards', async () => {
    const query = 'subscription ($size: Int!, $cursor: [s_events_stream_cursor_input]!) { s_events_stream(batch_size: $size, cursor: $cursor) { id } }';
    const twoColumns = new Stream(query, asAdmin, { size: 1, cursor: [{ initial_value: { id: 1, created_at: 'now' } }] });
    expect((await twoColumns.error()).message).toMatch(/multiple column cursors/);
    const negative = new Stream(query, asAdmin, { size: -1, cursor: [{ initial_value: { id: 1 } }] });
    expect((await negative.error()).message).toMatch(/positive integer/);
    // graphql-js's coercion errors, with HTTP's code (graphql-ws alone would send them without one).
    const wrongType = new Stream(query, asAdmin, { size: 1, cursor: [{ initial_value: { id: 'abc' } }] });
    expect(await wrongType.error()).toEqual({
      message: 'Variable "$cursor" got invalid value "abc" at "cursor[0].initial_value.id"; Int cannot represent non-integer value: "abc"',
      code: 'BAD_USER_INPUT',
    });
    const missing = new Stream(query, asAdmin, { cursor: [{ initial_value: { id: 1 } }] });
    expect(await missing.error()).toEqual({ message: 'Variable "$size" of required type "Int!" was not provided.', code: 'BAD_USER_INPUT' });
    const misused = new Stream('subscription ($size: String!) { s_events_stream(batch_size: $size, cursor: { initial_value: { id: 1 } }) { id } }', asAdmin, {
      size: '1',
    });
    expect(await misused.error()).toEqual({
      message: 'Variable "$size" of type "String!" used in position expecting type "Int!".',
      code: 'GRAPHQL_VALIDATION_FAILED',
    });
    // HTTP answers the same mistakes with the same codes.
    const overHttp = async (text: string, variables: Record<string, unknown>) =>
      (await postGraphQL(server.graphqlUrl, { query: text, variables }, asAdmin)).body.errors?.map((error) => error.extensions?.code);
    expect(await overHttp('query ($limit: Int) { s_events(limit: $limit) { id } }', { limit: 'ten' })).toEqual(['BAD_USER_INPUT']);
    expect(await overHttp('query ($limit: Int!) { s_events(limit: $limit) { id } }', {})).toEqual(['BAD_USER_INPUT']);
    expect(await overHttp('query ($limit: String) { s_events(limit: $limit) { id } }', {})).toEqual(['GRAPHQL_VALIDATION_FAILED']);
    await insert(alice, 2);
    const good = new Stream(query, asAdmin, { size: 5, cursor: [{ initial_value: { id: 0 } }] });
    expect(await good.ids()).toEqual([1, 2]);
  });
});

describe('hostile values', () => {
  const hostile = ["'; DROP TABLE s_events; --", "x' OR '1'='1", '\\', '"', '$1', "') ; SELECT pg_sleep(10); --"];
  it.each(hostile)('a cursor value or filter of %j is a value, nothing else', async (value) => {
    await rows('INSERT INTO s_events (owner_id, body) VALUES ($1, $2), ($1, $3)', [alice, value, `${value}~`]);
    const query =
      'subscription ($cursor: s_events_stream_cursor_value_input!, $body: String!) { s_events_stream(batch_size: 10, cursor: { initial_value: $cursor }, where: { body: { _neq: $body } }) { id body } }';
    const byBody = new Stream(query, asAdmin, { cursor: { body: value }, body: 'none' });
    expect(await byBody.rows()).toEqual([{ id: 2, body: `${value}~` }]);
    const inline = new Stream(stream(`batch_size: 10, cursor: { initial_value: { body: ${JSON.stringify(value)} } }`, 'id'));
    expect(await inline.ids()).toEqual([2]);
    const asUuid = new Stream(stream(`batch_size: 10, cursor: { initial_value: { owner_id: ${JSON.stringify(value)} } }`));
    expect((await asUuid.error()).code).toBe('BAD_USER_INPUT');
    expect(await rows('SELECT count(*)::int AS n FROM s_events')).toEqual([{ n: 2 }]);
  });
});

describe('a poll shared by equal subscribers, woken by commits', () => {
  /** An instance on the same database whose streams poll every 5 s: a delivery faster than that came from the table's NOTIFY. */
  let slow: TestServer;
  const SLOW_INTERVAL_MS = 5000;
  /** Well under the interval, with room for a loaded machine. */
  const PROMPT_MS = 1500;
  const metric = async (name: string, labels?: Record<string, string>) =>
    sampleValue(parsePrometheus(await (await fetch(`${slow.url}/metrics`)).text()), name, labels) ?? 0;

  beforeAll(async () => {
    slow = await startTestServer({ GQL_GRAPHQL_STREAMING_QUERIES_REFETCH_INTERVAL_MS: String(SLOW_INTERVAL_MS) }, { database: server.database });
  });

  afterAll(async () => {
    await slow.close();
  });

  it('delivers a commit well under the interval, and still holds back a row a running transaction may precede', async () => {
    await insert(alice, 1);
    const subscription = new Stream(stream('batch_size: 10, cursor: { initial_value: { id: 0 } }'), asAdmin, undefined, slow.wsUrl);
    expect(await subscription.ids()).toEqual([1]);
    for (let round = 0; round < 3; round++) {
      const committed = Date.now();
      const [id] = await insert(alice, 1);
      expect(await subscription.ids(SLOW_INTERVAL_MS - 500)).toEqual([id]);
      expect(Date.now() - committed).toBeLessThan(PROMPT_MS);
    }
    const holder = new pg.Client({ connectionString: server.database.url });
    await holder.connect();
    try {
      await holder.query('BEGIN');
      // Takes id 5 and stays open while id 6 commits (and announces it): 6 waits for 5.
      await holder.query("INSERT INTO s_events (owner_id, body) VALUES ($1, 'held')", [alice]);
      expect(await insert(alice, 1)).toEqual([6]);
      await subscription.quiet(PROMPT_MS);
      const committed = Date.now();
      await holder.query('COMMIT');
      expect(await subscription.ids(SLOW_INTERVAL_MS - 500)).toEqual([5, 6]);
      expect(Date.now() - committed).toBeLessThan(PROMPT_MS);
    } finally {
      await holder.end();
    }
  });

  it('runs one statement per poll for 20 subscribers of the same stream and session values, joined at different cursors', async () => {
    await insert(alice, 2);
    // Each with a token of its own (another session, the same user): the statement reads only the user id.
    const subscriptions = Array.from(
      { length: 20 },
      () => new Stream(stream('batch_size: 10, cursor: { initial_value: { id: 0 } }'), asUser(), undefined, slow.wsUrl),
    );
    for (const subscription of subscriptions) expect(await subscription.ids()).toEqual([1, 2]);
    // Those that joined after the first poll moved on polled from 0 alone, then joined it at id 2.
    await until(async () => (await metric('plinth_streams', { kind: 'polls' })) === 1, 10_000, 'one poll for the 20 subscribers');
    expect(await metric('plinth_streams', { kind: 'subscribers' })).toBe(20);
    const before = await metric('plinth_stream_statements_total');
    for (let round = 0; round < 3; round++) {
      const committed = Date.now();
      const [id] = await insert(alice, 1);
      for (const subscription of subscriptions) expect(await subscription.ids(SLOW_INTERVAL_MS - 500)).toEqual([id]);
      expect(Date.now() - committed).toBeLessThan(PROMPT_MS);
    }
    const statements = (await metric('plinth_stream_statements_total')) - before;
    // A poll per commit, and perhaps the interval's or a notification's during a poll: not 20 per commit.
    expect(statements).toBeGreaterThanOrEqual(3);
    expect(statements).toBeLessThanOrEqual(8);
    // Another user's rows are another statement's values: a poll of its own, and none of alice's rows.
    const other = new Stream(stream('batch_size: 10, cursor: { initial_value: { id: 0 } }'), asUser(bob), undefined, slow.wsUrl);
    await insert(bob, 1);
    expect(await other.ids(SLOW_INTERVAL_MS - 500)).toEqual([6]);
    expect(await metric('plinth_streams', { kind: 'polls' })).toBe(2);
    for (const subscription of subscriptions) await subscription.quiet(0);
  });
});
