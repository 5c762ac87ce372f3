import { randomUUID } from 'node:crypto';
import { poolOf } from '../../src/db/sql';
import { postGraphQL } from '../support/graphql';
import { ADMIN_SECRET, startTestServer, type TestServer } from '../support/server';
import { bearer, signToken } from '../support/tokens';
import { metadataRequest } from '../support/metadata';

/* The generated API's mutations (insert, update, delete) per role, over real HTTP and PostgreSQL. */

let server: TestServer;
const alice = randomUUID();
const bob = randomUUID();
const asAdmin = { 'x-gql-admin-secret': ADMIN_SECRET };
const asUser = (userId = alice) => bearer(signToken({ roles: ['user'], userId }));

const metadata = (body: unknown) => metadataRequest(server.url, body);

async function gql(query: string, headers: Record<string, string> = asAdmin, variables?: Record<string, unknown>) {
  const response = await postGraphQL<Record<string, unknown>>(server.graphqlUrl, { query, variables }, headers);
  return response.body;
}

async function data(query: string, headers: Record<string, string> = asAdmin, variables?: Record<string, unknown>) {
  const body = await gql(query, headers, variables);
  expect(body.errors).toBeUndefined();
  return body.data as Record<string, any>;
}

const rows = (sql: string, values: unknown[] = []) => server.database.query<Record<string, any>>(sql, values);
const snapshot = async () => JSON.stringify([await rows('SELECT * FROM m_authors ORDER BY id'), await rows('SELECT * FROM m_posts ORDER BY id')]);

const PERMISSIONS = [
  { type: 'pg_track_table', args: { table: 'm_authors' } },
  { type: 'pg_track_table', args: { table: 'm_posts' } },
  { type: 'pg_create_object_relationship', args: { table: 'm_posts', name: 'author', using: { foreign_key_constraint_on: 'author_id' } } },
  {
    type: 'pg_create_array_relationship',
    args: { table: 'm_authors', name: 'posts', using: { foreign_key_constraint_on: { table: 'm_posts', column: 'author_id' } } },
  },
  {
    type: 'pg_create_select_permission',
    args: { table: 'm_authors', role: 'user', permission: { columns: ['id', 'name', 'rating', 'owner_id', 'meta'], filter: {} } },
  },
  {
    type: 'pg_create_insert_permission',
    args: {
      table: 'm_authors',
      role: 'user',
      permission: { check: { rating: { _lte: 10 } }, columns: ['name', 'rating', 'meta', 'tags'], set: { owner_id: 'X-Gql-User-Id' } },
    },
  },
  {
    type: 'pg_create_update_permission',
    args: {
      table: 'm_authors',
      role: 'user',
      permission: { columns: ['name', 'rating', 'meta'], filter: { owner_id: { _eq: 'X-Gql-User-Id' } }, check: { rating: { _lte: 10 } } },
    },
  },
  { type: 'pg_create_delete_permission', args: { table: 'm_authors', role: 'user', permission: { filter: { owner_id: { _eq: 'X-Hasura-User-Id' } } } } },
  {
    type: 'pg_create_select_permission',
    args: { table: 'm_posts', role: 'user', permission: { columns: ['id', 'title', 'author_id', 'likes'], filter: { owner_id: { _eq: 'X-Gql-User-Id' } } } },
  },
  {
    type: 'pg_create_insert_permission',
    args: {
      table: 'm_posts',
      role: 'user',
      permission: { check: { author: { owner_id: { _eq: 'X-Gql-User-Id' } } }, columns: ['title', 'author_id'], set: { owner_id: 'X-Gql-User-Id' } },
    },
  },
  { type: 'pg_create_update_permission', args: { table: 'm_posts', role: 'user', permission: { columns: ['likes'], filter: {} } } },
  // A role that may insert posts but read nothing.
  {
    type: 'pg_create_insert_permission',
    args: { table: 'm_posts', role: 'writer', permission: { check: {}, columns: ['title', 'author_id'], set: { owner_id: 'X-Gql-User-Id', likes: 7 } } },
  },
  // A backend_only insert: only the admin secret with X-Gql-Use-Backend-Only-Permissions sees it.
  { type: 'pg_create_select_permission', args: { table: 'm_authors', role: 'service', permission: { columns: ['id', 'name'], filter: {} } } },
  { type: 'pg_create_insert_permission', args: { table: 'm_authors', role: 'service', permission: { check: {}, columns: ['name'], backend_only: true } } },
];

beforeAll(async () => {
  server = await startTestServer();
  await server.database.query(`
    CREATE TABLE m_authors (
      id serial PRIMARY KEY, name text NOT NULL CONSTRAINT m_authors_name_key UNIQUE, rating int NOT NULL DEFAULT 0,
      owner_id uuid, secret text, meta jsonb NOT NULL DEFAULT '{}', tags text[]);
    CREATE TABLE m_posts (
      id serial PRIMARY KEY, title text NOT NULL CONSTRAINT m_posts_title_key UNIQUE, author_id int NOT NULL REFERENCES m_authors (id),
      owner_id uuid, likes int NOT NULL DEFAULT 0);
  `);
  const tracked = await metadata({ type: 'bulk', args: PERMISSIONS });
  expect(tracked).toEqual({ status: 200, body: PERMISSIONS.map(() => ({ message: 'success' })) });
});
afterAll(async () => {
  await server.close();
});

beforeEach(async () => {
  await server.database.query('TRUNCATE m_posts, m_authors RESTART IDENTITY CASCADE');
});

async function mutationFields(headers: Record<string, string>) {
  const body = await data('{ __schema { mutationType { fields { name } } } __type(name: "m_authors_insert_input") { inputFields { name } } }', headers);
  const fields = (body.__schema.mutationType?.fields ?? []).map((field: { name: string }) => field.name).filter((name: string) => name.includes('m_'));
  return { fields: fields.sort(), insertInput: body.__type ? body.__type.inputFields.map((field: { name: string }) => field.name).sort() : null };
}

describe('the schema per role', () => {
  it('shows each role the mutations and columns its permissions open', async () => {
    const admin = await mutationFields(asAdmin);
    expect(admin.fields).toEqual(
      [
        'delete_m_authors',
        'delete_m_authors_by_pk',
        'delete_m_posts',
        'delete_m_posts_by_pk',
        'insert_m_authors',
        'insert_m_authors_one',
        'insert_m_posts',
        'insert_m_posts_one',
        'update_m_authors',
        'update_m_authors_by_pk',
        'update_m_authors_many',
        'update_m_posts',
        'update_m_posts_by_pk',
        'update_m_posts_many',
      ].sort(),
    );
    expect(admin.insertInput).toEqual(['id', 'meta', 'name', 'owner_id', 'posts', 'rating', 'secret', 'tags']);
    const user = await mutationFields(asUser());
    expect(user.fields).toEqual(
      [
        'delete_m_authors',
        'delete_m_authors_by_pk',
        'insert_m_authors',
        'insert_m_authors_one',
        'insert_m_posts',
        'insert_m_posts_one',
        'update_m_authors',
        'update_m_authors_by_pk',
        'update_m_authors_many',
        'update_m_posts',
        'update_m_posts_by_pk',
        'update_m_posts_many',
      ].sort(),
    );
    // The preset owner_id and the unlisted secret are not in the role's input type; posts is (the role may insert posts).
    expect(user.insertInput).toEqual(['meta', 'name', 'posts', 'rating', 'tags']);
    const writer = await mutationFields(bearer(signToken({ roles: ['writer'] })));
    expect(writer.fields).toEqual(['insert_m_posts']);
    const response = await data('{ __type(name: "m_posts_mutation_response") { fields { name } } }', bearer(signToken({ roles: ['writer'] })));
    expect(response.__type.fields).toEqual([{ name: 'affected_rows' }]);
    expect((await mutationFields(bearer(signToken({ roles: ['nobody'] })))).fields).toEqual([]);
  });

  it('shows a backend_only insert only to the admin secret asking for backend permissions', async () => {
    const token = bearer(signToken({ roles: ['service'] }));
    expect((await mutationFields(token)).fields).toEqual([]);
    expect((await mutationFields({ ...asAdmin, 'x-gql-role': 'service' })).fields).toEqual([]);
    const backend = { ...asAdmin, 'x-gql-role': 'service', 'x-gql-use-backend-only-permissions': 'true' };
    expect((await mutationFields(backend)).fields).toEqual(['insert_m_authors', 'insert_m_authors_one']);
    const inserted = await data('mutation { insert_m_authors_one(object: {name: "Svc"}) { id name } }', backend);
    expect(inserted.insert_m_authors_one).toEqual({ id: 1, name: 'Svc' });
    const refused = await gql('mutation { insert_m_authors_one(object: {name: "Svc2"}) { id } }', token);
    expect(refused.errors![0].extensions!.code).toBe('GRAPHQL_VALIDATION_FAILED');
  });
});

describe('insert', () => {
  it('fills presets from the session and returns what the select permission shows', async () => {
    const inserted = await data(
      'mutation { insert_m_authors(objects: [{name: "Ada", rating: 5, tags: ["a", "b"]}, {name: "Brian"}]) { affected_rows returning { id name rating owner_id } } }',
      asUser(),
    );
    expect(inserted.insert_m_authors).toEqual({
      affected_rows: 2,
      returning: [
        { id: 1, name: 'Ada', rating: 5, owner_id: alice },
        { id: 2, name: 'Brian', rating: 0, owner_id: alice },
      ],
    });
    expect(await rows('SELECT name, owner_id, tags FROM m_authors ORDER BY id')).toEqual([
      { name: 'Ada', owner_id: alice, tags: ['a', 'b'] },
      { name: 'Brian', owner_id: alice, tags: null },
    ]);
    // The writer's constant preset and its session's user id; it reads nothing back.
    const writerId = randomUUID();
    const written = await data(
      'mutation { insert_m_posts(objects: [{title: "W", author_id: 1}]) { affected_rows } }',
      bearer(signToken({ roles: ['writer'], userId: writerId })),
    );
    expect(written.insert_m_posts).toEqual({ affected_rows: 1 });
    expect(await rows('SELECT title, owner_id, likes FROM m_posts')).toEqual([{ title: 'W', owner_id: writerId, likes: 7 }]);
  });

  it('returns only rows the select permission lets the role read, and null from _one otherwise', async () => {
    await rows(`INSERT INTO m_authors (name, owner_id) VALUES ('Ada', $1)`, [alice]);
    await rows(`INSERT INTO m_posts (title, author_id, owner_id) VALUES ('bob''s', 1, $1)`, [bob]);
    const inserted = await data('mutation { insert_m_posts_one(object: {title: "mine", author_id: 1}) { id title author { name } } }', asUser());
    expect(inserted.insert_m_posts_one).toEqual({ id: 2, title: 'mine', author: { name: 'Ada' } });
    // Every post may be updated, only one's own read back.
    const updated = await data('mutation { update_m_posts(where: {}, _inc: {likes: 2}) { affected_rows returning { title likes } } }', asUser());
    expect(updated.update_m_posts).toEqual({ affected_rows: 2, returning: [{ title: 'mine', likes: 2 }] });
  });

  it('refuses a column outside the role list before anything runs', async () => {
    const before = await snapshot();
    for (const text of [
      'mutation { insert_m_authors(objects: [{name: "X", secret: "s"}]) { affected_rows } }',
      'mutation { insert_m_authors(objects: [{name: "X", owner_id: "00000000-0000-0000-0000-000000000000"}]) { affected_rows } }',
      'mutation { update_m_authors(where: {}, _set: {secret: "s"}) { affected_rows } }',
      'mutation { insert_m_authors(objects: [{name: "X"}]) { returning { secret } } }',
    ]) {
      const body = await gql(text, asUser());
      expect(body.errors![0].extensions!.code).toBe('GRAPHQL_VALIDATION_FAILED');
    }
    const viaVariable = await gql('mutation ($o: [m_authors_insert_input!]!) { insert_m_authors(objects: $o) { affected_rows } }', asUser(), {
      o: [{ name: 'X', secret: 's' }],
    });
    expect(viaVariable.errors![0].extensions!.code).toBe('BAD_USER_INPUT');
    expect(await snapshot()).toBe(before);
  });

  it('rolls the whole mutation back when a row fails its check, earlier root fields included', async () => {
    const before = await snapshot();
    const body = await gql(
      'mutation { a: insert_m_authors_one(object: {name: "kept?", rating: 1}) { id } b: insert_m_authors(objects: [{name: "ok", rating: 2}, {name: "bad", rating: 11}]) { affected_rows } }',
      asUser(),
    );
    expect(body.errors).toHaveLength(1);
    expect(body.errors![0]).toMatchObject({
      message: 'check constraint of an insert/update permission has failed',
      path: ['b'],
      extensions: { code: 'permission-error' },
    });
    expect(body.data).toEqual({ a: null, b: null });
    expect(await snapshot()).toBe(before);
    // A check through a relationship: a post under another user's author.
    const [{ id }] = await rows(`INSERT INTO m_authors (name, owner_id) VALUES ('Bob''s', $1) RETURNING id`, [bob]);
    const other = await gql('mutation ($id: Int!) { insert_m_posts_one(object: {title: "t", author_id: $id}) { id } }', asUser(), { id });
    expect(other.errors![0].extensions!.code).toBe('permission-error');
    expect(await rows('SELECT count(*)::int AS n FROM m_posts')).toEqual([{ n: 0 }]);
  });

  it('runs the root fields in order in one transaction: a later failure undoes the earlier ones', async () => {
    const body = await gql(
      'mutation { first: insert_m_authors_one(object: {name: "A"}) { id } second: insert_m_posts_one(object: {title: "P", author_id: 99}) { id } }',
      asAdmin,
    );
    expect(body.errors![0]).toMatchObject({ path: ['second'], extensions: { code: 'constraint-violation' } });
    expect(body.errors![0].message).toMatch(/^Foreign key violation\. /);
    expect(await rows('SELECT count(*)::int AS n FROM m_authors')).toEqual([{ n: 0 }]);
    // In order: the second field sees the first's row.
    const ordered = await data(
      'mutation { a: insert_m_authors_one(object: {id: 5, name: "A"}) { id } p: insert_m_posts_one(object: {title: "P", author_id: 5}) { author { name } } }',
    );
    expect(ordered).toEqual({ a: { id: 5 }, p: { author: { name: 'A' } } });
  });

  it('upserts through on_conflict within the update permission', async () => {
    await rows(`INSERT INTO m_authors (name, rating, owner_id) VALUES ('Mine', 1, $1), ('Theirs', 1, $2)`, [alice, bob]);
    const upsert = `mutation ($objects: [m_authors_insert_input!]!, $columns: [m_authors_update_column!]!) {
      insert_m_authors(objects: $objects, on_conflict: {constraint: m_authors_name_key, update_columns: $columns}) { affected_rows returning { name rating } } }`;
    const mine = await data(upsert, asUser(), {
      objects: [
        { name: 'Mine', rating: 9 },
        { name: 'New', rating: 3 },
      ],
      columns: ['rating'],
    });
    expect(mine.insert_m_authors).toEqual({
      affected_rows: 2,
      returning: [
        { name: 'Mine', rating: 9 },
        { name: 'New', rating: 3 },
      ],
    });
    // Bob's row is outside alice's update filter: not updated, not returned.
    const theirs = await data(upsert, asUser(), { objects: [{ name: 'Theirs', rating: 9 }], columns: ['rating'] });
    expect(theirs.insert_m_authors).toEqual({ affected_rows: 0, returning: [] });
    // An empty update_columns does nothing on conflict.
    const nothing = await data(upsert, asUser(), { objects: [{ name: 'Mine', rating: 2 }], columns: [] });
    expect(nothing.insert_m_authors.affected_rows).toBe(0);
    // The update permission's check holds for updated rows.
    const failing = await gql(upsert, asUser(), { objects: [{ name: 'Mine', rating: 50 }], columns: ['rating'] });
    expect(failing.errors![0].extensions!.code).toBe('permission-error');
    // A where on the conflicting row.
    const guarded = await data(
      'mutation { insert_m_authors(objects: [{name: "Mine", rating: 4}], on_conflict: {constraint: m_authors_name_key, update_columns: [rating], where: {rating: {_gt: 100}}}) { affected_rows } }',
      asUser(),
    );
    expect(guarded.insert_m_authors.affected_rows).toBe(0);
    expect(await rows('SELECT name, rating FROM m_authors ORDER BY id')).toEqual([
      { name: 'Mine', rating: 9 },
      { name: 'Theirs', rating: 1 },
      { name: 'New', rating: 3 },
    ]);
    // A column the update permission does not list is not an update column.
    const hidden = await gql(
      'mutation { insert_m_authors(objects: [{name: "Mine"}], on_conflict: {constraint: m_authors_name_key, update_columns: [tags]}) { affected_rows } }',
      asUser(),
    );
    expect(hidden.errors![0].extensions!.code).toBe('GRAPHQL_VALIDATION_FAILED');
  });
});

describe('update', () => {
  beforeEach(async () => {
    await rows(
      `INSERT INTO m_authors (name, rating, owner_id, meta) VALUES ('Mine', 1, $1, '{"a": 1, "b": [1, 2, 3], "c": {"d": 1, "e": 2}}'), ('Theirs', 1, $2, '{}')`,
      [alice, bob],
    );
  });

  it('applies every operator', async () => {
    const updated = await data(
      `mutation {
        s: update_m_authors(where: {name: {_eq: "Mine"}}, _set: {name: "Mine2"}, _inc: {rating: 2}) { affected_rows returning { name rating } }
        a: update_m_authors(where: {name: {_eq: "Mine2"}}, _append: {meta: {x: true}}) { returning { meta } }
        p: update_m_authors_by_pk(pk_columns: {id: 1}, _prepend: {meta: {a: 0, y: 1}}) { meta }
        k: update_m_authors_by_pk(pk_columns: {id: 1}, _delete_key: {meta: "y"}) { id }
        e: update_m_authors_many(updates: [{where: {id: {_eq: 1}}, _delete_at_path: {meta: ["c", "d"]}}, {where: {id: {_eq: 1}}, _inc: {rating: 1}}]) { affected_rows }
      }`,
      asUser(),
    );
    expect(updated.s).toEqual({ affected_rows: 1, returning: [{ name: 'Mine2', rating: 3 }] });
    expect(updated.a.returning[0].meta).toEqual({ a: 1, b: [1, 2, 3], c: { d: 1, e: 2 }, x: true });
    // Prepending keeps the existing value of a key both have.
    expect(updated.p.meta).toEqual({ a: 1, b: [1, 2, 3], c: { d: 1, e: 2 }, x: true, y: 1 });
    expect(updated.e).toEqual([{ affected_rows: 1 }, { affected_rows: 1 }]);
    await data('mutation { update_m_authors(where: {id: {_eq: 1}}, _set: {meta: [1, 2, 3]}) { affected_rows } }', asUser());
    await data('mutation { update_m_authors(where: {id: {_eq: 1}}, _delete_elem: {meta: 1}) { affected_rows } }', asUser());
    const [row] = await rows('SELECT name, rating, meta FROM m_authors WHERE id = 1');
    expect(row).toEqual({ name: 'Mine2', rating: 4, meta: [1, 3] });
    const [theirs] = await rows('SELECT name, rating FROM m_authors WHERE id = 2');
    expect(theirs).toEqual({ name: 'Theirs', rating: 1 });
  });

  it('keeps to the filter, checks the row after, and refuses a column in two operators', async () => {
    const others = await data(
      'mutation { update_m_authors(where: {}, _set: {rating: 5}) { affected_rows } u: update_m_authors_by_pk(pk_columns: {id: 2}, _set: {rating: 5}) { id } }',
      asUser(),
    );
    expect(others).toEqual({ update_m_authors: { affected_rows: 1 }, u: null });
    const before = await snapshot();
    const failing = await gql('mutation { update_m_authors(where: {}, _inc: {rating: 20}) { affected_rows } }', asUser());
    expect(failing.errors![0]).toMatchObject({
      message: 'check constraint of an insert/update permission has failed',
      extensions: { code: 'permission-error' },
    });
    const twice = await gql('mutation { update_m_authors(where: {}, _set: {rating: 1}, _inc: {rating: 1}) { affected_rows } }', asUser());
    expect(twice.errors![0]).toMatchObject({
      message: 'column found in multiple operators; "rating" in _set, _inc operators',
      extensions: { code: 'BAD_USER_INPUT' },
    });
    const none = await gql('mutation { update_m_authors(where: {}) { affected_rows } }', asUser());
    expect(none.errors![0].extensions!.code).toBe('BAD_USER_INPUT');
    // update_many: the second update fails, the first is undone.
    const many = await gql(
      'mutation { update_m_authors_many(updates: [{where: {}, _set: {name: "renamed"}}, {where: {}, _inc: {rating: 100}}]) { affected_rows } }',
      asUser(),
    );
    expect(many.errors![0].extensions!.code).toBe('permission-error');
    expect(await snapshot()).toBe(before);
  });
});

describe('delete', () => {
  it('deletes within the filter, by where or by primary key', async () => {
    await rows(`INSERT INTO m_authors (name, owner_id) VALUES ('Mine', $1), ('Mine too', $1), ('Theirs', $2)`, [alice, bob]);
    const deleted = await data(
      'mutation { d: delete_m_authors(where: {name: {_like: "Mine%"}, id: {_eq: 1}}) { affected_rows returning { name } } t: delete_m_authors_by_pk(id: 3) { name } m: delete_m_authors_by_pk(id: 2) { name } }',
      asUser(),
    );
    expect(deleted).toEqual({ d: { affected_rows: 1, returning: [{ name: 'Mine' }] }, t: null, m: { name: 'Mine too' } });
    expect(await rows('SELECT name FROM m_authors')).toEqual([{ name: 'Theirs' }]);
  });
});

describe('the session of a generated mutation', () => {
  it('reaches the event trigger: event.session_variables carries the caller', async () => {
    const created = await metadata({
      type: 'pg_create_event_trigger',
      args: { name: 'm_authors_created', table: 'm_authors', webhook: 'http://127.0.0.1:9/none', insert: { columns: '*' } },
    });
    expect(created).toEqual({ status: 200, body: { message: 'success' } });
    try {
      await data('mutation { insert_m_authors_one(object: {name: "Traced"}) { id } }', asUser(bob));
      await data('mutation { insert_m_authors_one(object: {name: "By admin"}) { id } }', { ...asAdmin, 'x-gql-user-id': alice });
      const events = await rows(`SELECT payload FROM event_log WHERE trigger_name = 'm_authors_created' ORDER BY seq`);
      expect(events.map((event) => [event.payload.data.new.name, event.payload.session_variables])).toEqual([
        ['Traced', expect.objectContaining({ 'x-gql-role': 'user', 'x-gql-user-id': bob })],
        ['By admin', { 'x-gql-role': 'admin', 'x-gql-user-id': alice }],
      ]);
      // A trigger written for Hasura reads hasura.user with Hasura's names.
      await rows(`CREATE FUNCTION m_stamp() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN
        NEW.secret := current_setting('hasura.user', true)::json ->> 'x-hasura-user-id'; RETURN NEW; END $$;
        CREATE TRIGGER m_stamp BEFORE INSERT ON m_authors FOR EACH ROW EXECUTE FUNCTION m_stamp()`);
      await data('mutation { insert_m_authors_one(object: {name: "Stamped"}) { id } }', asUser(bob));
      expect(await rows(`SELECT secret FROM m_authors WHERE name = 'Stamped'`)).toEqual([{ secret: bob }]);
    } finally {
      await rows('DROP TRIGGER IF EXISTS m_stamp ON m_authors; DROP FUNCTION IF EXISTS m_stamp()');
      await metadata({ type: 'pg_delete_event_trigger', args: { name: 'm_authors_created' } });
    }
  });
});

describe('a mutation of one root field', () => {
  beforeAll(async () => {
    // Every statement on m_authors: the session it ran under, whether it set the session itself, and its connection.
    await rows(`
      CREATE TABLE m_seen (n serial PRIMARY KEY, op text, session jsonb, alone boolean, pid int);
      CREATE FUNCTION m_seen() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN
        INSERT INTO m_seen (op, session, alone, pid) VALUES (TG_OP, nullif(current_setting('plinth.session_variables', true), '')::jsonb,
          current_query() LIKE '%set_config%', pg_backend_pid());
        RETURN NULL; END $$;`);
  });

  it('runs as one statement that sets the session before any trigger fires, and the session ends with it', async () => {
    const user = randomUUID();
    await rows('CREATE TRIGGER m_seen BEFORE INSERT OR UPDATE OR DELETE ON m_authors FOR EACH STATEMENT EXECUTE FUNCTION m_seen()');
    try {
      await data('mutation { insert_m_authors_one(object: {name: "Alone"}) { id } }', asUser(user));
      // A statement's triggers fire even when it writes no row.
      await data('mutation { update_m_authors(where: {name: {_eq: "nobody"}}, _set: {rating: 1}) { affected_rows } }', asUser(user));
      await data('mutation { delete_m_authors_by_pk(id: 0) { id } }', asUser(user));
      // Two root fields: one transaction, which sets the session in a statement of its own first.
      await data('mutation { a: insert_m_authors_one(object: {name: "A"}) { id } b: insert_m_authors_one(object: {name: "B"}) { id } }', asUser(user));
      const seen = await rows(`SELECT op, session ->> 'x-gql-user-id' AS "user", alone, pid FROM m_seen ORDER BY n`);
      expect(seen.map((row) => [row.op, row.user, row.alone])).toEqual([
        ['INSERT', user, true],
        ['UPDATE', user, true],
        ['DELETE', user, true],
        ['INSERT', user, false],
        ['INSERT', user, false],
      ]);
      // A write outside any request on every pooled connection (those that ran the mutations among them) does not see the session.
      await rows('TRUNCATE m_seen');
      const pool = poolOf(server.server.dataSource);
      const clients = await Promise.all(Array.from({ length: pool.idleCount }, () => pool.connect()));
      try {
        for (const client of clients) await client.query('UPDATE m_authors SET rating = 2 WHERE false');
      } finally {
        for (const client of clients) client.release();
      }
      const after = await rows(`SELECT session ->> 'x-gql-user-id' AS "user", pid FROM m_seen`);
      expect(after.map((row) => row.pid)).toEqual(expect.arrayContaining([...new Set(seen.map((row) => row.pid))]));
      expect(after.filter((row) => row.user === user)).toEqual([]);
    } finally {
      await rows('DROP TRIGGER IF EXISTS m_seen ON m_authors');
    }
  });
});

describe('an exception a trigger raises', () => {
  beforeAll(async () => {
    await rows(`
      CREATE TABLE m_stock (id serial PRIMARY KEY, item text NOT NULL, quantity int NOT NULL);
      CREATE FUNCTION m_stock_guard() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN
        IF NEW.quantity < 0 THEN RAISE EXCEPTION 'stock cannot go negative'; END IF;
        IF NEW.quantity > 100 THEN RAISE EXCEPTION 'the shelf holds at most 100 of %', NEW.item USING ERRCODE = '23514'; END IF;
        RETURN NEW; END $$;
      CREATE TRIGGER m_stock_guard BEFORE INSERT ON m_stock FOR EACH ROW EXECUTE FUNCTION m_stock_guard();
    `);
    expect(await metadata({ type: 'pg_track_table', args: { table: 'm_stock' } })).toMatchObject({ status: 200 });
  });

  const stockAndAuthor = (quantity: number) =>
    gql(
      'mutation ($quantity: Int!) { a: insert_m_authors_one(object: {name: "A"}) { id } s: insert_m_stock_one(object: {item: "bolts", quantity: $quantity}) { id } }',
      asAdmin,
      {
        quantity,
      },
    );
  const written = async () => [await rows('SELECT count(*)::int AS n FROM m_authors'), await rows('SELECT count(*)::int AS n FROM m_stock')];

  it('reaches the client with its message (postgres-error), nothing else of the database, and undoes the whole mutation', async () => {
    const body = await stockAndAuthor(-1);
    expect(body.data).toEqual({ a: null, s: null });
    expect(body.errors).toEqual([
      { message: 'stock cannot go negative', locations: [{ line: 1, column: 82 }], path: ['s'], extensions: { code: 'postgres-error' } },
    ]);
    expect(JSON.stringify(body)).not.toMatch(/INSERT|m_stock_guard|PL\/pgSQL|P0001|stack/i);
    expect(await written()).toEqual([[{ n: 0 }], [{ n: 0 }]]);
  });

  it("raised with a class 23 SQLSTATE, is a constraint violation with the trigger's message", async () => {
    const body = await stockAndAuthor(101);
    expect(body.errors).toMatchObject([
      { message: 'Check constraint violation. the shelf holds at most 100 of bolts', path: ['s'], extensions: { code: 'constraint-violation' } },
    ]);
    expect(Object.keys(body.errors![0].extensions!)).toEqual(['code']);
    expect(await written()).toEqual([[{ n: 0 }], [{ n: 0 }]]);
    expect((await data('mutation { insert_m_stock_one(object: {item: "nuts", quantity: 100}) { quantity } }')).insert_m_stock_one).toEqual({ quantity: 100 });
  });
});
