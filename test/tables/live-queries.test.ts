import { createClient, type Client } from 'graphql-ws';
import pg from 'pg';
import WebSocket from 'ws';
import { createTestDatabase, type TestDatabase } from '../support/database';
import { metadataRequest } from '../support/metadata';
import { parsePrometheus, sampleValue } from '../support/prometheus';
import { ADMIN_SECRET, startTestServer, testEnvironment, type TestServer } from '../support/server';
import { spawnServer, type SpawnedServer } from '../support/spawn';
import { bearer, signToken } from '../support/tokens';
import { until } from '../support/until';

/* Live queries of the generated API (issue 32 point 4): graphql-ws subscriptions on the query root fields. */

let database: TestDatabase;
let first: TestServer;
let second: TestServer;
const clients: Client[] = [];
const admin = { 'x-gql-admin-secret': ADMIN_SECRET };
/** No fallback refetch: every message these tests see comes from a change announced by the trigger. */
const SETTINGS = {
  GQL_GRAPHQL_LIVE_QUERIES_FALLBACK_INTERVAL_MS: '0',
  GQL_GRAPHQL_LIVE_QUERIES_BATCH_SIZE: '4',
  GQL_GRAPHQL_WS_MAX_LIVE_QUERIES_PER_CONNECTION: '3',
};

interface Message {
  data?: Record<string, unknown> | null;
  errors?: { message: string; extensions?: { code?: string } }[];
}

/** One subscription's messages as they come: `next` waits for one, `quiet` asserts none comes. */
class Watch {
  readonly received: Message[] = [];
  failure?: unknown;
  completed = false;
  readonly unsubscribe: () => void;
  private waiting?: () => void;

  constructor(client: Client, query: string, variables?: Record<string, unknown>) {
    this.unsubscribe = client.subscribe(
      { query, variables },
      {
        next: (message) => this.push(message as Message),
        error: (error) => {
          this.failure = error;
          this.waiting?.();
        },
        complete: () => {
          this.completed = true;
          this.waiting?.();
        },
      },
    );
  }

  private push(message: Message): void {
    this.received.push(message);
    this.waiting?.();
  }

  async next(timeoutMs = 10_000): Promise<Message> {
    const started = Date.now();
    while (this.received.length === 0) {
      if (this.failure) throw new Error(`the subscription failed: ${JSON.stringify(this.failure)}`);
      if (Date.now() - started > timeoutMs) throw new Error('no message within the time limit');
      await new Promise<void>((resolve) => {
        this.waiting = resolve;
        setTimeout(resolve, 50);
      });
    }
    return this.received.shift()!;
  }

  /** Resolves after `ms` without a message; fails on one. */
  async quiet(ms = 700): Promise<void> {
    await new Promise((resolve) => setTimeout(resolve, ms));
    expect(this.received).toEqual([]);
  }

  /**
   * The errors the subscribe was refused with: an `error` message (refused before it ran), or a
   * `next` with errors followed by `complete` (refused as it started, graphql-ws's form of an
   * execution's errors).
   */
  async refusal(): Promise<{ message: string; extensions?: { code?: string } }[]> {
    await until(() => this.failure !== undefined || this.completed, 10_000, 'an error');
    if (this.failure) return this.failure as { message: string; extensions?: { code?: string } }[];
    expect(this.received).toEqual([{ errors: expect.any(Array) }]);
    return this.received[0].errors!;
  }
}

function connect(url: string, headers: Record<string, string>): Client {
  const client = createClient({ url, webSocketImpl: WebSocket, connectionParams: { headers }, retryAttempts: 0, lazy: true });
  clients.push(client);
  return client;
}

const userHeaders = (userId: string) => bearer(signToken({ roles: ['user'], userId }));

async function liveStatements(server: { url: string }): Promise<number> {
  return sampleValue(parsePrometheus(await (await fetch(`${server.url}/metrics`)).text()), 'plinth_live_query_statements_total') ?? 0;
}

async function metrics(server: { url: string }) {
  return parsePrometheus(await (await fetch(`${server.url}/metrics`)).text());
}

beforeAll(async () => {
  database = await createTestDatabase();
  first = await startTestServer(SETTINGS, { database });
  second = await startTestServer(SETTINGS, { database });
  await database.query(`
    CREATE TABLE items (id int PRIMARY KEY, owner text NOT NULL, label text NOT NULL);
    CREATE TABLE tags (id int PRIMARY KEY, name text NOT NULL);
    INSERT INTO items VALUES (1, 'alice', 'a1'), (2, 'bob', 'b1');
    INSERT INTO tags VALUES (1, 'red')`);
  for (const body of [
    { type: 'pg_track_table', args: { table: 'items' } },
    { type: 'pg_track_table', args: { table: 'tags' } },
    {
      type: 'pg_create_select_permission',
      args: {
        table: 'items',
        role: 'user',
        permission: { columns: ['id', 'owner', 'label'], filter: { owner: { _eq: 'X-Hasura-User-Id' } }, allow_aggregations: true },
      },
    },
  ]) {
    expect((await metadataRequest(first.url, body)).status).toBe(200);
  }
  // Both instances serve the tables before the tests subscribe.
  await until(async () => {
    const response = await fetch(second.graphqlUrl, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...admin },
      body: JSON.stringify({ query: '{ tags { id } }' }),
    });
    return ((await response.json()) as Message).data !== undefined;
  });
});

afterAll(async () => {
  for (const client of clients) await client.dispose();
  await first?.close();
  await second?.close();
  await database?.drop();
});

afterEach(async () => {
  for (const client of clients.splice(0)) await client.dispose();
});

it('a change reaches the subscribers whose result it changes, once each, and no other', async () => {
  const alice = new Watch(connect(first.wsUrl, userHeaders('alice')), 'subscription { items(order_by: {id: asc}) { id label } }');
  const bob = new Watch(connect(first.wsUrl, userHeaders('bob')), 'subscription { items(order_by: {id: asc}) { id label } }');
  const tags = new Watch(connect(first.wsUrl, admin), 'subscription { tags { name } }');
  expect(await alice.next()).toEqual({ data: { items: [{ id: 1, label: 'a1' }] } });
  expect(await bob.next()).toEqual({ data: { items: [{ id: 2, label: 'b1' }] } });
  expect(await tags.next()).toEqual({ data: { tags: [{ name: 'red' }] } });

  await database.query(`UPDATE items SET label = 'a2' WHERE id = 1`);
  expect(await alice.next()).toEqual({ data: { items: [{ id: 1, label: 'a2' }] } });
  // Bob's result did not change (alice's row is outside his filter), nor did the tags.
  await Promise.all([bob.quiet(), tags.quiet(), alice.quiet(0)]);

  // A change that leaves every result as it was sends nothing.
  await database.query(`UPDATE items SET label = label`);
  await Promise.all([alice.quiet(), bob.quiet()]);
});

it("a row outside a subscriber's filter never reaches it, whatever its arguments ask (X-Hasura-User-Id filter)", async () => {
  const bob = new Watch(
    connect(first.wsUrl, userHeaders('bob')),
    'subscription ($owner: String!) { items(where: {owner: {_eq: $owner}}) { id owner label } }',
    {
      owner: 'alice',
    },
  );
  const bobAggregate = new Watch(connect(first.wsUrl, userHeaders('bob')), 'subscription { items_aggregate { aggregate { count } } }');
  const byPk = new Watch(connect(first.wsUrl, userHeaders('bob')), 'subscription { items_by_pk(id: 10) { id label } }');
  expect(await bob.next()).toEqual({ data: { items: [] } });
  expect(await bobAggregate.next()).toEqual({ data: { items_aggregate: { aggregate: { count: 1 } } } });
  expect(await byPk.next()).toEqual({ data: { items_by_pk: null } });
  await database.query(`INSERT INTO items VALUES (10, 'alice', 'secret'), (11, 'alice', 'secret too')`);
  await Promise.all([bob.quiet(1000), bobAggregate.quiet(0), byPk.quiet(0)]);
  await database.query(`UPDATE items SET owner = 'bob' WHERE id = 10`);
  expect(await byPk.next()).toEqual({ data: { items_by_pk: { id: 10, label: 'secret' } } });
  expect(await bobAggregate.next()).toEqual({ data: { items_aggregate: { aggregate: { count: 2 } } } });
  await bob.quiet();
  await database.query(`DELETE FROM items WHERE id IN (10, 11)`);
  expect(await byPk.next()).toEqual({ data: { items_by_pk: null } });
});

it('cohorts of one document with other session values and variables are refetched by one statement per batch', async () => {
  // Six users (six cohorts), two subscribers each; batches of 4 cohorts: 2 statements per refetch.
  const users = ['u1', 'u2', 'u3', 'u4', 'u5', 'u6'];
  await database.query(`INSERT INTO items SELECT 100 + n, 'u' || n, 'x' FROM generate_series(1, 6) AS n`);
  const watches = users.flatMap((user) => [0, 1].map(() => new Watch(connect(first.wsUrl, userHeaders(user)), 'subscription { items { id label } }')));
  for (const [index, watch] of watches.entries()) expect(await watch.next()).toEqual({ data: { items: [{ id: 101 + Math.floor(index / 2), label: 'x' }] } });
  expect(sampleValue(await metrics(first), 'plinth_live_queries', { kind: 'cohorts' })).toBe(6);
  // The two subscribers of one session share one execution (subscription-groups.ts): one stream of the cohort.
  expect(sampleValue(await metrics(first), 'plinth_live_queries', { kind: 'subscribers' })).toBe(6);
  expect(sampleValue(await metrics(first), 'plinth_graphql_subscription_groups', { kind: 'members' })).toBe(12);

  const before = await liveStatements(first);
  await database.query(`UPDATE items SET label = 'y' WHERE id = 103`);
  expect(await watches[4].next()).toEqual({ data: { items: [{ id: 103, label: 'y' }] } });
  expect(await watches[5].next()).toEqual({ data: { items: [{ id: 103, label: 'y' }] } });
  await until(async () => (await liveStatements(first)) - before >= 2, 5_000, 'the refetch');
  await new Promise((resolve) => setTimeout(resolve, 300));
  expect((await liveStatements(first)) - before).toBe(2);
  for (const [index, watch] of watches.entries()) if (index !== 4 && index !== 5) expect(watch.received).toEqual([]);
  const histogram = sampleValue(await metrics(first), 'plinth_live_query_refetch_duration_seconds_count');
  expect(histogram).toBeGreaterThan(0);
  await database.query(`DELETE FROM items WHERE id > 100`);
});

it('a burst of commits is coalesced into few refetches, and the last result arrives', async () => {
  const watch = new Watch(connect(first.wsUrl, admin), 'subscription { tags_aggregate { aggregate { count } } }');
  expect(await watch.next()).toEqual({ data: { tags_aggregate: { aggregate: { count: 1 } } } });
  const before = await liveStatements(first);
  // 50 commits from 5 connections at once.
  const writers = await Promise.all(
    Array.from({ length: 5 }, async () => {
      const client = new pg.Client({ connectionString: database.url });
      await client.connect();
      return client;
    }),
  );
  await Promise.all(
    writers.flatMap((writer, w) => Array.from({ length: 10 }, (_, index) => writer.query(`INSERT INTO tags VALUES (${1000 + w * 10 + index}, 'burst')`))),
  );
  await Promise.all(writers.map((writer) => writer.end()));
  await until(async () => {
    const last = watch.received.at(-1) as { data: { tags_aggregate: { aggregate: { count: number } } } } | undefined;
    return last?.data.tags_aggregate.aggregate.count === 51;
  });
  expect((await liveStatements(first)) - before).toBeLessThan(25);
  await database.query(`DELETE FROM tags WHERE id >= 1000`);
});

it('past the most live queries per connection the next gets a clear QUOTA_EXCEEDED error; a completed one frees its place', async () => {
  const client = connect(first.wsUrl, userHeaders('alice'));
  const held = [0, 1, 2].map((n) => new Watch(client, `subscription { items(limit: ${n + 1}) { id } }`));
  for (const watch of held) await watch.next();
  const refused = new Watch(client, 'subscription { items_by_pk(id: 1) { id } }');
  const errors = await refused.refusal();
  expect(errors).toEqual([
    expect.objectContaining({ message: expect.stringMatching(/Too many live queries on this connection: at most 3/), extensions: { code: 'QUOTA_EXCEEDED' } }),
  ]);
  // Another connection has its own.
  const other = new Watch(connect(first.wsUrl, userHeaders('alice')), 'subscription { items_by_pk(id: 1) { id } }');
  expect(await other.next()).toEqual({ data: { items_by_pk: { id: 1 } } });
  held[0].unsubscribe();
  const afterComplete = new Watch(client, 'subscription { items_by_pk(id: 1) { id } }');
  expect(await afterComplete.next()).toEqual({ data: { items_by_pk: { id: 1 } } });
});

it('bad input is a graphql-ws error, and the server goes on serving', async () => {
  const client = connect(first.wsUrl, userHeaders('alice'));
  const unknownField = new Watch(client, 'subscription { items { id nope } }');
  expect((await unknownField.refusal())[0]).toMatchObject({
    message: expect.stringMatching(/Cannot query field "nope"/),
    extensions: { code: 'GRAPHQL_VALIDATION_FAILED' },
  });
  const badWhere = new Watch(client, 'subscription { items(where: {id: {_like: "x"}}) { id } }');
  expect((await badWhere.refusal())[0].extensions?.code).toBe('GRAPHQL_VALIDATION_FAILED');
  const wrongVariable = new Watch(client, 'subscription ($id: Int!) { items_by_pk(id: $id) { id } }', { id: 'one' });
  expect((await wrongVariable.refusal())[0].message).toMatch(/Variable "\$id" got invalid value "one"/);
  const badPattern = new Watch(client, 'subscription ($p: String!) { items(where: {label: {_regex: $p}}) { id } }', { p: '(' });
  expect((await badPattern.refusal())[0]).toMatchObject({
    message: expect.stringMatching(/invalid input: invalid regular expression/),
    extensions: { code: 'BAD_USER_INPUT' },
  });
  // A role without the table does not see it.
  const stranger = new Watch(connect(first.wsUrl, bearer(signToken({ roles: ['stranger'] }))), 'subscription { items { id } }');
  expect((await stranger.refusal())[0].extensions?.code).toBe('GRAPHQL_VALIDATION_FAILED');
  const fine = new Watch(client, 'subscription { items { id } }');
  expect(await fine.next()).toEqual({ data: { items: [{ id: 1 }] } });
});

it('two instances each deliver a change exactly once to their own subscribers', async () => {
  const onFirst = new Watch(connect(first.wsUrl, userHeaders('alice')), 'subscription { items { label } }');
  const onSecond = new Watch(connect(second.wsUrl, userHeaders('alice')), 'subscription { items { label } }');
  await onFirst.next();
  await onSecond.next();
  // Written through the first instance's generated mutation.
  const response = await fetch(first.graphqlUrl, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...admin },
    body: JSON.stringify({ query: `mutation { update_items_by_pk(pk_columns: {id: 1}, _set: {label: "both"}) { id } }` }),
  });
  expect(((await response.json()) as Message).errors).toBeUndefined();
  expect(await onFirst.next()).toEqual({ data: { items: [{ label: 'both' }] } });
  expect(await onSecond.next()).toEqual({ data: { items: [{ label: 'both' }] } });
  await Promise.all([onFirst.quiet(), onSecond.quiet(0)]);
});

it('a metadata change plans the live queries again: those still valid go on, those that no longer fit end with a clear error', async () => {
  const watch = new Watch(connect(first.wsUrl, userHeaders('alice')), 'subscription { items(where: {id: {_eq: 1}}) { id label } }');
  await database.query(`UPDATE items SET label = 'a1' WHERE id = 1`);
  await until(() => JSON.stringify(watch.received.at(-1)) === JSON.stringify({ data: { items: [{ id: 1, label: 'a1' }] } }), 5_000, 'the label a1');
  watch.received.length = 0;
  const statementsBefore = await liveStatements(first);
  expect(
    (
      await metadataRequest(second.url, {
        type: 'pg_create_object_relationship',
        args: { table: 'items', name: 'same_tag', using: { manual_configuration: { remote_table: 'tags', column_mapping: { id: 'id' } } } },
      })
    ).status,
  ).toBe(200);
  // Planned again under the new metadata (its first fetch shows it happened): the same result sends nothing.
  await until(async () => (await liveStatements(first)) > statementsBefore, 5_000, 'the new plan');
  await watch.quiet(300);
  expect(watch.completed).toBe(false);
  await database.query(`UPDATE items SET label = 'a2' WHERE id = 1`);
  expect(await watch.next()).toEqual({ data: { items: [{ id: 1, label: 'a2' }] } });
  await database.query(`UPDATE items SET label = 'a1' WHERE id = 1`);
  expect(await watch.next()).toEqual({ data: { items: [{ id: 1, label: 'a1' }] } });
  // The role loses a column the document selects: the document no longer fits, the live query ends.
  const permission = (columns: string[]) => ({
    type: 'bulk',
    args: [
      { type: 'pg_drop_select_permission', args: { table: 'items', role: 'user' } },
      {
        type: 'pg_create_select_permission',
        args: { table: 'items', role: 'user', permission: { columns, filter: { owner: { _eq: 'X-Hasura-User-Id' } }, allow_aggregations: true } },
      },
    ],
  });
  expect((await metadataRequest(second.url, permission(['id', 'owner']))).status).toBe(200);
  const ended = await watch.next();
  expect(ended.errors?.[0]).toMatchObject({
    message: 'the tracked tables metadata changed so that this live query no longer fits it: subscribe again',
    extensions: { code: 'METADATA_CHANGED' },
  });
  await until(() => watch.completed, 5_000, 'the completion');
  expect((await metadataRequest(second.url, permission(['id', 'owner', 'label']))).status).toBe(200);
  const again = new Watch(connect(first.wsUrl, admin), 'subscription { items(where: {id: {_eq: 1}}) { id same_tag { name } } }');
  expect(await again.next()).toEqual({ data: { items: [{ id: 1, same_tag: { name: 'red' } }] } });
  // A change to the table the relationship reads reaches it.
  await database.query(`UPDATE tags SET name = 'blue' WHERE id = 1`);
  expect(await again.next()).toEqual({ data: { items: [{ id: 1, same_tag: { name: 'blue' } }] } });
});

it('a tracked view (which takes no trigger) follows the fallback interval; a column dropped under a live query ends it with a clear error', async () => {
  const polling = await startTestServer({ ...SETTINGS, GQL_GRAPHQL_LIVE_QUERIES_FALLBACK_INTERVAL_MS: '300' }, { database });
  try {
    await database.query(`CREATE VIEW tag_names AS SELECT id, name FROM tags; CREATE TABLE scratch (id int PRIMARY KEY, note text)`);
    expect((await metadataRequest(polling.url, { type: 'pg_track_table', args: { table: 'tag_names' } })).status).toBe(200);
    expect((await metadataRequest(polling.url, { type: 'pg_track_table', args: { table: 'scratch' } })).status).toBe(200);
    const view = new Watch(connect(polling.wsUrl, admin), 'subscription { tag_names(where: {id: {_eq: 1}}) { name } }');
    const first = (await view.next()).data as { tag_names: { name: string }[] };
    await database.query(`UPDATE tags SET name = 'green' WHERE id = 1`);
    expect(await view.next(3_000)).toEqual({ data: { tag_names: [{ name: 'green' }] } });
    expect(first.tag_names[0].name).not.toBe('green');

    const scratch = new Watch(connect(polling.wsUrl, admin), 'subscription { scratch { id note } }');
    expect(await scratch.next()).toEqual({ data: { scratch: [] } });
    await database.query(`ALTER TABLE scratch DROP COLUMN note; INSERT INTO scratch VALUES (1)`);
    const ended = await scratch.next();
    expect(ended.data ?? null).toBeNull();
    expect(['INCONSISTENT_METADATA', 'METADATA_CHANGED']).toContain(ended.errors?.[0].extensions?.code);
    await until(() => scratch.completed, 5_000, 'the completion');
  } finally {
    await polling.close();
  }
});

/** The generated root fields (of the table `table`) a caller sees in Query and in Subscription, by introspection. */
async function generatedRoots(headers: Record<string, string>, table: string): Promise<{ query: string[]; subscription: string[] }> {
  const response = await fetch(first.graphqlUrl, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: JSON.stringify({ query: '{ __schema { queryType { fields { name } } subscriptionType { fields { name } } } }' }),
  });
  const { data } = (await response.json()) as {
    data: { __schema: { queryType: { fields: { name: string }[] }; subscriptionType: { fields: { name: string }[] } | null } };
  };
  const ofTable = (fields: { name: string }[] = []) =>
    fields
      .map((field) => field.name)
      .filter((name) => name.startsWith(table))
      .sort();
  return { query: ofTable(data.__schema.queryType.fields), subscription: ofTable(data.__schema.subscriptionType?.fields) };
}

it('subscription_root_fields, not query_root_fields, chooses the live query fields a role sees (as Hasura)', async () => {
  await database.query(`CREATE TABLE notes (id int PRIMARY KEY, body text NOT NULL); INSERT INTO notes VALUES (1, 'n1')`);
  const permission = (role: string, roots: Record<string, string[]>) => ({
    type: 'pg_create_select_permission',
    args: { table: 'notes', role, permission: { columns: ['id', 'body'], filter: {}, allow_aggregations: true, ...roots } },
  });
  for (const body of [
    { type: 'pg_track_table', args: { table: 'notes' } },
    // Subscriptions only (a common Hasura pattern), queries only, and the live queries without the stream.
    permission('watcher', { query_root_fields: [], subscription_root_fields: ['select'] }),
    permission('poller', { query_root_fields: ['select'], subscription_root_fields: [] }),
    permission('mixed', { query_root_fields: ['select_by_pk'], subscription_root_fields: ['select', 'select_aggregate'] }),
  ]) {
    expect((await metadataRequest(first.url, body)).status).toBe(200);
  }
  const [watcher, poller, mixed] = ['watcher', 'poller', 'mixed'].map((role) => bearer(signToken({ roles: [role] })));
  expect(await generatedRoots(watcher, 'notes')).toEqual({ query: [], subscription: ['notes'] });
  expect(await generatedRoots(poller, 'notes')).toEqual({ query: ['notes'], subscription: [] });
  expect(await generatedRoots(mixed, 'notes')).toEqual({ query: ['notes_by_pk'], subscription: ['notes', 'notes_aggregate'] });
  expect(await generatedRoots(admin, 'notes')).toEqual({
    query: ['notes', 'notes_aggregate', 'notes_by_pk'],
    subscription: ['notes', 'notes_aggregate', 'notes_by_pk', 'notes_stream'],
  });

  // The live query works under query_root_fields: [], and follows changes.
  const live = new Watch(connect(first.wsUrl, watcher), 'subscription { notes(order_by: {id: asc}) { id body } }');
  expect(await live.next()).toEqual({ data: { notes: [{ id: 1, body: 'n1' }] } });
  await database.query(`INSERT INTO notes VALUES (2, 'n2')`);
  expect(await live.next()).toEqual({
    data: {
      notes: [
        { id: 1, body: 'n1' },
        { id: 2, body: 'n2' },
      ],
    },
  });
  const counted = new Watch(connect(first.wsUrl, mixed), 'subscription { notes_aggregate { aggregate { count } } }');
  expect(await counted.next()).toEqual({ data: { notes_aggregate: { aggregate: { count: 2 } } } });

  // What a permission leaves out is refused: the poller's live query, the watcher's query, the mixed role's stream.
  const refused = new Watch(connect(first.wsUrl, poller), 'subscription { notes { id } }');
  expect((await refused.refusal())[0].extensions?.code).toBe('GRAPHQL_VALIDATION_FAILED');
  const stream = new Watch(connect(first.wsUrl, mixed), 'subscription { notes_stream(batch_size: 1, cursor: {initial_value: {id: 0}}) { id } }');
  expect((await stream.refusal())[0].extensions?.code).toBe('GRAPHQL_VALIDATION_FAILED');
  const query = async (headers: Record<string, string>) =>
    (await (
      await fetch(first.graphqlUrl, {
        method: 'POST',
        headers: { 'content-type': 'application/json', ...headers },
        body: JSON.stringify({ query: '{ notes(order_by: {id: asc}) { id } }' }),
      })
    ).json()) as Message;
  expect((await query(watcher)).errors?.[0].extensions?.code).toBe('GRAPHQL_VALIDATION_FAILED');
  expect(await query(poller)).toEqual({ data: { notes: [{ id: 1 }, { id: 2 }] } });
});

describe('with the writing instance in a process of its own', () => {
  let writer: SpawnedServer | undefined;

  afterAll(() => {
    writer?.child.kill('SIGKILL');
  });

  it("kill -9 of the instance that wrote a change does not stop another instance's subscribers", async () => {
    writer = await spawnServer(testEnvironment(database.url, SETTINGS));
    const watch = new Watch(connect(second.wsUrl, userHeaders('alice')), 'subscription { items { label } }');
    await watch.next();
    const write = (label: string) =>
      fetch(`${writer!.url}/v1/graphql`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', ...admin },
        body: JSON.stringify({ query: `mutation { update_items_by_pk(pk_columns: {id: 1}, _set: {label: "${label}"}) { id } }` }),
      });
    expect((await write('from the writer')).status).toBe(200);
    expect(await watch.next()).toEqual({ data: { items: [{ label: 'from the writer' }] } });
    writer.child.kill('SIGKILL');
    await writer.exited;
    await database.query(`UPDATE items SET label = 'after the kill' WHERE id = 1`);
    expect(await watch.next()).toEqual({ data: { items: [{ label: 'after the kill' }] } });
  }, 60_000);
});
