import { randomUUID } from 'node:crypto';
import { createTestDatabase, type TestDatabase } from '../support/database';
import { postGraphQL } from '../support/graphql';
import { ADMIN_SECRET, startTestServer, type TestServer } from '../support/server';
import { signToken } from '../support/tokens';

let database: TestDatabase;
let server: TestServer;
let other: TestServer;
const admin = { 'x-gql-admin-secret': ADMIN_SECRET };
const alice = randomUUID();

async function post(path: string, body: unknown, headers: Record<string, string> = admin, url = server.url) {
  const response = await fetch(`${url}${path}`, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: JSON.stringify(body) });
  return { status: response.status, body: (await response.json()) as Record<string, unknown> };
}

const runSql = (args: Record<string, unknown>, headers?: Record<string, string>) => post('/v2/query', { type: 'run_sql', args }, headers);
const metadata = (body: unknown) => post('/v1/metadata', body);

async function graphql(query: string, headers: Record<string, string> = admin, url = server.graphqlUrl) {
  return (await postGraphQL(url, { query }, headers)).body;
}

/** The tracked table entries of export_metadata, by table name. */
async function trackedEntries(): Promise<Record<string, Record<string, unknown>>> {
  const exported = (await metadata({ type: 'export_metadata', args: {} })).body as { sources: { tables: { table: { name: string } }[] }[] };
  return Object.fromEntries(exported.sources[0].tables.map((entry) => [entry.table.name, entry]));
}

async function rowCount(table: string): Promise<number> {
  return Number((await database.query<{ count: string }>(`SELECT count(*) AS count FROM ${table}`))[0].count);
}

beforeAll(async () => {
  database = await createTestDatabase();
  server = await startTestServer({}, { database });
  other = await startTestServer({}, { database });
});

afterAll(async () => {
  await other.close();
  await server.close();
  await database.drop();
});

describe('POST /v2/query run_sql: answers as Hasura does', () => {
  it('answers the last statement as rows of text, nulls as "NULL", header first', async () => {
    expect(
      await runSql({
        sql: "CREATE TABLE shelf (id int PRIMARY KEY, title text, price numeric, tags text[]); INSERT INTO shelf VALUES (1, 'a', 2.50, '{x,y}'), (2, NULL, NULL, NULL)",
      }),
    ).toEqual({
      status: 200,
      body: { result_type: 'CommandOk', result: null },
    });
    expect(await runSql({ sql: 'SELECT id, title, price, tags, id AS id FROM shelf ORDER BY id' })).toEqual({
      status: 200,
      body: {
        result_type: 'TuplesOk',
        result: [
          ['id', 'title', 'price', 'tags', 'id'],
          ['1', 'a', '2.50', '{x,y}', '1'],
          ['2', 'NULL', 'NULL', 'NULL', '2'],
        ],
      },
    });
    expect(await runSql({ sql: 'SELECT 1 AS one; SELECT id FROM shelf WHERE false' })).toEqual({
      status: 200,
      body: { result_type: 'TuplesOk', result: [['id']] },
    });
    expect(await runSql({ sql: "INSERT INTO shelf VALUES (3, 'c') RETURNING id, title" })).toEqual({
      status: 200,
      body: {
        result_type: 'TuplesOk',
        result: [
          ['id', 'title'],
          ['3', 'c'],
        ],
      },
    });
    // pg_run_sql is the same request, and bulk runs several in one transaction.
    expect(await post('/v2/query', { type: 'bulk', args: [{ type: 'pg_run_sql', args: { sql: 'SELECT count(*) AS n FROM shelf' } }] })).toEqual({
      status: 200,
      body: [{ result_type: 'TuplesOk', result: [['n'], ['3']] }],
    });
  });

  it("rolls every statement back when one fails, answering postgres-error with PostgreSQL's error", async () => {
    const before = await rowCount('shelf');
    const failed = await runSql({ sql: "INSERT INTO shelf VALUES (10, 'ten'); INSERT INTO shelf VALUES (1, 'duplicate')" });
    expect(failed.status).toBe(400);
    expect(failed.body).toMatchObject({
      code: 'postgres-error',
      error: 'query execution failed',
      path: '$',
      internal: { error: { status_code: '23505', exec_status: 'FatalError', message: expect.stringContaining('duplicate key') }, prepared: false },
    });
    expect(await rowCount('shelf')).toBe(before);

    const bulk = await post('/v2/query', {
      type: 'bulk',
      args: [
        { type: 'run_sql', args: { sql: "INSERT INTO shelf VALUES (11, 'eleven')" } },
        { type: 'run_sql', args: { sql: 'SELECT * FROM nowhere' } },
      ],
    });
    expect(bulk.status).toBe(400);
    expect(bulk.body).toMatchObject({ code: 'postgres-error', internal: { error: { status_code: '42P01' } } });
    expect(await rowCount('shelf')).toBe(before);
  });

  it('read_only runs in a read-only transaction', async () => {
    expect(await runSql({ sql: 'SELECT count(*) AS n FROM shelf', read_only: true })).toEqual({
      status: 200,
      body: { result_type: 'TuplesOk', result: [['n'], ['3']] },
    });
    const refused = await runSql({ sql: "INSERT INTO shelf VALUES (20, 'x')", read_only: true });
    expect(refused.status).toBe(400);
    expect(refused.body).toMatchObject({ code: 'postgres-error', internal: { error: { status_code: '25006' } } });
    expect(await rowCount('shelf')).toBe(3);
  });

  it('refuses SQL that ends its transaction, and keeps serving', async () => {
    const refused = await runSql({ sql: 'ROLLBACK' });
    expect(refused).toEqual({
      status: 400,
      body: { code: 'postgres-error', error: 'the SQL ended the transaction it runs in: run_sql takes no COMMIT, ROLLBACK or BEGIN', path: '$.args.sql' },
    });
    expect((await runSql({ sql: 'SELECT 1 AS one' })).status).toBe(200);
  });

  it('refuses bad requests with a clear error, running nothing', async () => {
    const cases: [unknown, number, Record<string, unknown>][] = [
      [{ type: 'run_sql', args: {} }, 400, { code: 'parse-failed', path: '$.args.sql' }],
      [{ type: 'run_sql', args: { sql: '' } }, 400, { code: 'parse-failed', path: '$.args.sql' }],
      [{ type: 'run_sql', args: { sql: 42 } }, 400, { code: 'parse-failed', path: '$.args.sql' }],
      [{ type: 'run_sql', args: { sql: "INSERT INTO shelf VALUES (30, 'x')", cascade: 'yes' } }, 400, { code: 'parse-failed', path: '$.args.cascade' }],
      [{ type: 'run_sql', args: { sql: "INSERT INTO shelf VALUES (30, 'x')", read_only: 1 } }, 400, { code: 'parse-failed', path: '$.args.read_only' }],
      [{ type: 'run_sql', args: { sql: "INSERT INTO shelf VALUES (30, 'x')", source: 'elsewhere' } }, 400, { code: 'not-exists', path: '$.args.source' }],
      [{ type: 'run_sql', args: { sql: "INSERT INTO shelf VALUES (30, 'x')", sqll: 'typo' } }, 400, { code: 'parse-failed', path: '$.args.sqll' }],
      [{ type: 'run_sql', args: "INSERT INTO shelf VALUES (30, 'x')" }, 400, { code: 'parse-failed', path: '$.args' }],
      [{ type: 'pg_track_table', args: { table: 'shelf' } }, 400, { code: 'parse-failed', path: '$.type' }],
      [
        {
          type: 'bulk',
          args: [
            { type: 'run_sql', args: { sql: "INSERT INTO shelf VALUES (30, 'x')" } },
            { type: 'export_metadata', args: {} },
          ],
        },
        400,
        { code: 'parse-failed', path: '$.args[1].type' },
      ],
      [{ args: { sql: 'SELECT 1' } }, 400, {}],
    ];
    for (const [body, status, error] of cases) {
      const answer = await post('/v2/query', body);
      expect({ body, status: answer.status }).toEqual({ body, status });
      expect(answer.body).toMatchObject(error);
    }
    // Nor is run_sql a metadata request.
    expect((await metadata({ type: 'run_sql', args: { sql: "INSERT INTO shelf VALUES (30, 'x')" } })).body).toMatchObject({ code: 'parse-failed' });
    expect(await rowCount('shelf')).toBe(3);
  });

  it('is for the admin secret only: a wrong secret, a user token or an admin-role token run nothing', async () => {
    const insert = { sql: "INSERT INTO shelf VALUES (40, 'x')" };
    const token = signToken({ userId: alice, roles: ['user', 'admin'], defaultRole: 'admin' });
    const callers: Record<string, string>[] = [{}, { 'x-gql-admin-secret': 'wrong' }, { authorization: `Bearer ${token}`, 'x-gql-role': 'admin' }];
    for (const headers of callers) {
      expect(await runSql(insert, headers)).toEqual({
        status: 401,
        body: { code: 'access-denied', error: 'the query API needs the admin secret (x-gql-admin-secret)', path: '$' },
      });
    }
    expect(await rowCount('shelf')).toBe(3);
  });
});

describe("run_sql keeps the tracked tables' metadata in line with the database", () => {
  beforeAll(async () => {
    await database.query(`
      CREATE TABLE writers (id int PRIMARY KEY, name text NOT NULL, owner uuid);
      CREATE TABLE posts (id int PRIMARY KEY, title text NOT NULL, writer_id int REFERENCES writers (id), draft boolean NOT NULL DEFAULT false);
      INSERT INTO writers VALUES (1, 'Ada', '${alice}'), (2, 'Brian', NULL);
      INSERT INTO posts VALUES (1, 'First', 1, false), (2, 'Second', 2, true);
    `);
    const tracking = await metadata({
      type: 'bulk',
      args: [
        { type: 'pg_track_table', args: { table: 'writers' } },
        { type: 'pg_track_table', args: { table: 'posts', configuration: { column_config: { draft: { custom_name: 'isDraft' } } } } },
        { type: 'pg_create_object_relationship', args: { table: 'posts', name: 'writer', using: { foreign_key_constraint_on: 'writer_id' } } },
        {
          type: 'pg_create_array_relationship',
          args: { table: 'writers', name: 'posts', using: { foreign_key_constraint_on: { table: 'posts', column: 'writer_id' } } },
        },
        {
          type: 'pg_create_select_permission',
          args: { table: 'posts', role: 'user', permission: { columns: ['id', 'title', 'draft'], filter: { writer: { owner: { _eq: 'X-Gql-User-Id' } } } } },
        },
        {
          type: 'pg_create_select_permission',
          args: { table: 'writers', role: 'user', permission: { columns: ['id', 'name'], filter: { owner: { _eq: 'X-Gql-User-Id' } } } },
        },
      ],
    });
    expect(tracking.status).toBe(200);
  });

  it('a new column is served at once, here and on another instance', async () => {
    expect(await runSql({ sql: 'ALTER TABLE writers ADD COLUMN born int; UPDATE writers SET born = 1815 WHERE id = 1' })).toEqual({
      status: 200,
      body: { result_type: 'CommandOk', result: null },
    });
    expect(await graphql('{ writers(order_by: {id: asc}) { name born } }')).toEqual({
      data: {
        writers: [
          { name: 'Ada', born: 1815 },
          { name: 'Brian', born: null },
        ],
      },
    });
    const started = Date.now();
    let seen: unknown;
    while (Date.now() - started < 5_000) {
      seen = await graphql('{ writers(where: {born: {_eq: 1815}}) { name } }', admin, other.graphqlUrl);
      if (JSON.stringify(seen) === JSON.stringify({ data: { writers: [{ name: 'Ada' }] } })) break;
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    expect(seen).toEqual({ data: { writers: [{ name: 'Ada' }] } });
    expect(Date.now() - started).toBeLessThan(1_000);
  });

  it('refuses to drop a column a permission uses, unless cascade drops the permission', async () => {
    const refused = await runSql({ sql: 'ALTER TABLE writers DROP COLUMN owner' });
    expect(refused.status).toBe(400);
    expect(refused.body).toMatchObject({ code: 'dependency-error', path: '$.args' });
    expect(refused.body.error).toMatch(/cannot drop due to the following dependent objects: .*select permission user of writers/);
    // Nothing changed: the column is there and the permission still filters by it.
    expect((await database.query(`SELECT owner FROM writers WHERE id = 1`))[0]).toEqual({ owner: alice });
    const asAlice = { authorization: `Bearer ${signToken({ userId: alice, roles: ['user'] })}` };
    expect(await graphql('{ writers { name } }', asAlice)).toEqual({ data: { writers: [{ name: 'Ada' }] } });

    // The posts permission reaches owner through the writer relationship: cascade drops both permissions.
    expect(await runSql({ sql: 'ALTER TABLE writers DROP COLUMN owner', cascade: true })).toEqual({
      status: 200,
      body: { result_type: 'CommandOk', result: null },
    });
    const entries = await trackedEntries();
    expect(entries.writers.select_permissions).toBeUndefined();
    expect(entries.posts.select_permissions).toBeUndefined();
    expect(entries.posts.object_relationships).toEqual([{ name: 'writer', using: { foreign_key_constraint_on: 'writer_id' } }]);
    expect((await graphql('{ writers { name } }', asAlice)).errors).toBeDefined();
    expect(await metadata({ type: 'get_inconsistent_metadata', args: {} })).toEqual({ status: 200, body: { is_consistent: true, inconsistent_objects: [] } });
  });

  it('follows a renamed table and renamed columns through configuration, relationships and permissions', async () => {
    const created = await metadata({
      type: 'pg_create_select_permission',
      args: {
        table: 'posts',
        role: 'user',
        permission: { columns: ['id', 'title', 'draft', 'writer_id'], filter: { _and: [{ draft: { _eq: false } }, { writer: { name: { _eq: 'Ada' } } }] } },
      },
    });
    expect(created).toEqual({ status: 200, body: { message: 'success' } });
    expect(
      await runSql({
        sql: 'ALTER TABLE posts RENAME TO entries; ALTER TABLE entries RENAME COLUMN draft TO is_draft; ALTER TABLE entries RENAME COLUMN writer_id TO author_id; ALTER TABLE writers RENAME COLUMN name TO full_name',
      }),
    ).toEqual({ status: 200, body: { result_type: 'CommandOk', result: null } });
    const entries = await trackedEntries();
    expect(entries.posts).toBeUndefined();
    expect(entries.entries).toEqual({
      table: { schema: 'public', name: 'entries' },
      configuration: { column_config: { is_draft: { custom_name: 'isDraft' } } },
      object_relationships: [{ name: 'writer', using: { foreign_key_constraint_on: 'author_id' } }],
      select_permissions: [
        {
          role: 'user',
          permission: {
            columns: ['id', 'title', 'is_draft', 'author_id'],
            filter: { _and: [{ is_draft: { _eq: false } }, { writer: { full_name: { _eq: 'Ada' } } }] },
          },
        },
      ],
    });
    expect(entries.writers.array_relationships).toEqual([
      { name: 'posts', using: { foreign_key_constraint_on: { table: { schema: 'public', name: 'entries' }, columns: ['author_id'] } } },
    ]);
    expect(await graphql('{ entries(order_by: {id: asc}) { title isDraft writer { full_name } } }')).toEqual({
      data: {
        entries: [
          { title: 'First', isDraft: false, writer: { full_name: 'Ada' } },
          { title: 'Second', isDraft: true, writer: { full_name: 'Brian' } },
        ],
      },
    });
    const asUser = { authorization: `Bearer ${signToken({ userId: alice, roles: ['user'] })}` };
    expect(await graphql('{ entries { title } }', asUser)).toEqual({ data: { entries: [{ title: 'First' }] } });
  });

  it('refuses to drop a tracked table others reach, and with cascade untracks it and drops what reached it', async () => {
    const refused = await runSql({ sql: 'DROP TABLE entries' });
    expect(refused.status).toBe(400);
    expect(refused.body.error).toMatch(/table entries/);
    expect(await rowCount('entries')).toBe(2);

    expect(await runSql({ sql: 'DROP TABLE entries', cascade: true })).toEqual({ status: 200, body: { result_type: 'CommandOk', result: null } });
    const entries = await trackedEntries();
    expect(entries.entries).toBeUndefined();
    expect(entries.writers).toEqual({ table: { schema: 'public', name: 'writers' }, configuration: {} });
    expect(await graphql('{ writers(order_by: {id: asc}) { full_name } }')).toEqual({ data: { writers: [{ full_name: 'Ada' }, { full_name: 'Brian' }] } });
    expect(await metadata({ type: 'get_inconsistent_metadata', args: {} })).toEqual({ status: 200, body: { is_consistent: true, inconsistent_objects: [] } });
  });

  it('check_metadata_consistency: false leaves the metadata alone, and the drop shows as an inconsistency', async () => {
    await runSql({ sql: 'CREATE TABLE scratch (id int PRIMARY KEY)' });
    expect((await metadata({ type: 'pg_track_table', args: { table: 'scratch' } })).status).toBe(200);
    expect(await runSql({ sql: 'DROP TABLE scratch', check_metadata_consistency: false })).toEqual({
      status: 200,
      body: { result_type: 'CommandOk', result: null },
    });
    expect((await metadata({ type: 'get_inconsistent_metadata', args: {} })).body).toMatchObject({
      is_consistent: false,
      inconsistent_objects: [{ type: 'table', name: 'scratch' }],
    });
    expect(await metadata({ type: 'pg_untrack_table', args: { table: 'scratch' } })).toEqual({ status: 200, body: { message: 'success' } });
  });
});

describe('run_sql keeps event triggers in line with the database', () => {
  /** The event triggers of export_metadata, by name, each with the table whose entry holds it. */
  async function triggers(): Promise<Record<string, Record<string, unknown>>> {
    const exported = (await metadata({ type: 'export_metadata', args: {} })).body as {
      sources: { tables: { table: { schema: string; name: string }; event_triggers?: { name: string }[] }[] }[];
    };
    return Object.fromEntries(
      exported.sources[0].tables.flatMap((entry) => (entry.event_triggers ?? []).map((trigger) => [trigger.name, { ...trigger, on: entry.table.name }])),
    );
  }
  const events = async (trigger: string) =>
    (
      await database.query<{ table_name: string; op: string; data: unknown }>(
        `SELECT table_name, payload->>'op' AS op, payload->'data' AS data FROM event_log WHERE trigger_name = $1 ORDER BY seq`,
        [trigger],
      )
    ).map((row) => [row.table_name, row.op, row.data]);
  const captures = async () =>
    (
      await database.query<{ tgname: string; relname: string }>(
        "SELECT t.tgname, c.relname FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid WHERE t.tgname LIKE 'plinth_event_%' ORDER BY t.tgname",
      )
    ).map((row) => `${row.tgname} on ${row.relname}`);

  beforeAll(async () => {
    await database.query(`CREATE TABLE parcels (id int PRIMARY KEY, status text, weight int, note text)`);
    const created = await metadata({
      type: 'pg_create_event_trigger',
      args: {
        name: 'parcel_moves',
        table: 'parcels',
        // Nothing listens there: only the captured events matter here.
        webhook: 'http://127.0.0.1:9/parcels',
        insert: { columns: '*', payload: ['id', 'status'] },
        update: { columns: ['status'] },
        condition: { new: { weight: { _gt: 0 } } },
      },
    });
    expect(created).toEqual({ status: 200, body: { message: 'success' } });
  });

  it('follows a renamed table and renamed columns into the trigger, its columns, payload and condition, and its capture', async () => {
    expect(
      await runSql({
        sql: 'ALTER TABLE parcels RENAME TO packages; ALTER TABLE packages RENAME COLUMN status TO state; ALTER TABLE packages RENAME weight TO grams',
      }),
    ).toEqual({ status: 200, body: { result_type: 'CommandOk', result: null } });
    expect((await triggers()).parcel_moves).toMatchObject({
      on: 'packages',
      definition: { insert: { columns: '*', payload: ['id', 'state'] }, update: { columns: ['state'] } },
      condition: { new: { grams: { _gt: 0 } } },
    });
    expect(await captures()).toEqual(['plinth_event_parcel_moves on packages']);
    await database.query(`INSERT INTO packages VALUES (1, 'new', 5, 'x'), (2, 'new', 0, 'light')`);
    await database.query(`UPDATE packages SET note = 'unwatched' WHERE id = 1`);
    await database.query(`UPDATE packages SET state = 'sent' WHERE id = 1`);
    // The renamed columns are the watched ones (the payload keeps id and state), the condition reads grams.
    expect(await events('parcel_moves')).toEqual([
      ['packages', 'INSERT', { old: null, new: { id: 1, state: 'new' } }],
      ['packages', 'UPDATE', { old: expect.objectContaining({ state: 'new' }), new: expect.objectContaining({ state: 'sent', grams: 5 }) }],
    ]);
    expect(await metadata({ type: 'get_inconsistent_metadata', args: {} })).toEqual({ status: 200, body: { is_consistent: true, inconsistent_objects: [] } });
  });

  it('refuses to drop a column a trigger names, changing nothing, unless cascade deletes the trigger', async () => {
    const refused = await runSql({ sql: 'ALTER TABLE packages DROP COLUMN state' });
    expect(refused).toEqual({
      status: 400,
      body: {
        path: '$.args',
        code: 'dependency-error',
        error:
          'cannot drop due to the following dependent objects: event trigger parcel_moves on public.packages (the column "state" of public.packages was dropped) (use cascade to drop them)',
      },
    });
    expect(
      (await database.query<{ n: number }>("SELECT count(*)::int AS n FROM pg_attribute WHERE attrelid = 'packages'::regclass AND attname = 'state'"))[0].n,
    ).toBe(1);
    expect(Object.keys(await triggers())).toEqual(['parcel_moves']);
    // A column the trigger does not name goes freely, and the capture still works.
    expect((await runSql({ sql: 'ALTER TABLE packages DROP COLUMN note' })).status).toBe(200);
    await database.query(`UPDATE packages SET state = 'lost' WHERE id = 1`);
    expect((await events('parcel_moves')).length).toBe(3);
    expect((await runSql({ sql: 'ALTER TABLE packages DROP COLUMN state', cascade: true })).status).toBe(200);
    expect(await triggers()).toEqual({});
    expect(await captures()).toEqual([]);
  });

  it('refuses to drop a table with a trigger unless cascade, and gives a table created again under its name its capture again', async () => {
    await database.query('CREATE TABLE crates (id int PRIMARY KEY, label text)');
    const trigger = { name: 'crate_log', table: 'crates', webhook: 'http://127.0.0.1:9/crates', insert: { columns: '*' } };
    expect((await metadata({ type: 'pg_create_event_trigger', args: trigger })).status).toBe(200);
    const refused = await runSql({ sql: 'DROP TABLE crates' });
    expect(refused).toMatchObject({
      status: 400,
      body: { code: 'dependency-error', error: expect.stringContaining('event trigger crate_log on public.crates (its table public.crates was dropped)') },
    });
    expect(await rowCount('crates')).toBe(0);
    // Dropped and created again in one run: the same definition holds, and its capture is back.
    expect((await runSql({ sql: 'DROP TABLE crates; CREATE TABLE crates (id int PRIMARY KEY, label text)' })).status).toBe(200);
    expect(await captures()).toEqual(['plinth_event_crate_log on crates']);
    await database.query(`INSERT INTO crates VALUES (1, 'a')`);
    expect(await events('crate_log')).toEqual([['crates', 'INSERT', { old: null, new: { id: 1, label: 'a' } }]]);
    expect((await runSql({ sql: 'DROP TABLE crates', cascade: true })).status).toBe(200);
    expect(await triggers()).toEqual({});
    expect(await captures()).toEqual([]);
    expect((await database.query<{ n: number }>("SELECT count(*)::int AS n FROM pg_proc WHERE proname LIKE 'plinth_event_%'"))[0].n).toBe(0);
  });
});
