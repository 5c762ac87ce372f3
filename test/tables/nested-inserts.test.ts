import { randomUUID } from 'node:crypto';
import { postGraphQL } from '../support/graphql';
import { ADMIN_SECRET, startTestServer, type TestServer } from '../support/server';
import { bearer, signToken } from '../support/tokens';
import { metadataRequest } from '../support/metadata';

/* Nested inserts through object and array relationships (Hasura's shape), per role, over real HTTP and PostgreSQL. */

let server: TestServer;
const alice = randomUUID();
const asAdmin = { 'x-gql-admin-secret': ADMIN_SECRET };
const asUser = (userId = alice) => bearer(signToken({ roles: ['user'], userId }));

async function gql(query: string, headers: Record<string, string> = asAdmin, variables?: Record<string, unknown>) {
  const response = await postGraphQL<Record<string, any>>(server.graphqlUrl, { query, variables }, headers);
  expect(response.status).toBeLessThan(500);
  return response.body;
}

async function data(query: string, headers: Record<string, string> = asAdmin, variables?: Record<string, unknown>) {
  const body = await gql(query, headers, variables);
  expect(body.errors).toBeUndefined();
  return body.data as Record<string, any>;
}

/** The one error of a refused mutation, after checking nothing was answered. */
async function refusal(query: string, headers: Record<string, string> = asAdmin, variables?: Record<string, unknown>) {
  const body = await gql(query, headers, variables);
  expect(body.errors).toHaveLength(1);
  return { message: body.errors![0].message, code: body.errors![0].extensions?.code };
}

const rows = (sql: string, values: unknown[] = []) => server.database.query<Record<string, any>>(sql, values);
const TABLES = ['n_authors', 'n_articles', 'n_comments', 'n_notes', 'n_profiles'];
const snapshot = async () => JSON.stringify(await Promise.all(TABLES.map((table) => rows(`SELECT * FROM ${table} ORDER BY id`))));
const counts = async () =>
  Object.fromEntries(await Promise.all(TABLES.map(async (table) => [table, (await rows(`SELECT count(*)::int AS n FROM ${table}`))[0].n])));

const relationship = (kind: 'object' | 'array', table: string, name: string, using: unknown) => ({
  type: `pg_create_${kind}_relationship`,
  args: { table, name, using },
});
const permission = (kind: 'select' | 'insert' | 'update', table: string, role: string, body: unknown) => ({
  type: `pg_create_${kind}_permission`,
  args: { table, role, permission: body },
});
const userId = { _eq: 'X-Gql-User-Id' };

const METADATA = [
  ...TABLES.map((table) => ({ type: 'pg_track_table', args: { table } })),
  relationship('object', 'n_articles', 'author', { foreign_key_constraint_on: 'author_id' }),
  relationship('array', 'n_authors', 'articles', { foreign_key_constraint_on: { table: 'n_articles', column: 'author_id' } }),
  relationship('array', 'n_articles', 'comments', { foreign_key_constraint_on: { table: 'n_comments', column: 'article_id' } }),
  relationship('object', 'n_comments', 'article', { foreign_key_constraint_on: 'article_id' }),
  // An object relationship on the remote table's foreign key: its row is inserted after the author's.
  relationship('object', 'n_authors', 'profile', { foreign_key_constraint_on: { table: 'n_profiles', column: 'author_id' } }),
  // Manual relationships, no foreign key.
  relationship('array', 'n_articles', 'notes', { manual_configuration: { remote_table: 'n_notes', column_mapping: { id: 'article_ref' } } }),
  relationship('object', 'n_notes', 'article', { manual_configuration: { remote_table: 'n_articles', column_mapping: { article_ref: 'id' } } }),
  permission('select', 'n_authors', 'user', { columns: '*', filter: {} }),
  permission('insert', 'n_authors', 'user', { columns: ['name', 'rating'], set: { owner_id: 'X-Gql-User-Id' }, check: { rating: { _lte: 10 } } }),
  permission('update', 'n_authors', 'user', { columns: ['rating'], filter: { owner_id: userId } }),
  permission('select', 'n_articles', 'user', { columns: ['id', 'title', 'author_id', 'likes'], filter: { owner_id: userId } }),
  // The check goes through a relationship: it must see an author inserted in the same mutation.
  permission('insert', 'n_articles', 'user', {
    columns: ['title', 'author_id', 'likes'],
    set: { owner_id: 'X-Gql-User-Id' },
    check: { _and: [{ likes: { _lte: 100 } }, { author: { owner_id: userId } }] },
  }),
  permission('update', 'n_articles', 'user', { columns: ['likes'], filter: { owner_id: userId }, check: { likes: { _lte: 50 } } }),
  permission('select', 'n_comments', 'user', { columns: '*', filter: {} }),
  permission('insert', 'n_comments', 'user', { columns: ['body', 'article_id'], check: { body: { _nlike: '%spam%' } } }),
  permission('select', 'n_profiles', 'user', { columns: '*', filter: {} }),
  // The check tells 2^53 + 1 from 2^53: the written rows must reach it whole.
  permission('insert', 'n_profiles', 'user', { columns: ['bio', 'big'], check: { _or: [{ big: { _is_null: true } }, { big: { _gt: '9007199254740992' } }] } }),
  // A role whose preset is a column a relationship determines.
  permission('insert', 'n_authors', 'editor', { columns: ['name'], check: {} }),
  permission('insert', 'n_articles', 'editor', { columns: ['title'], set: { author_id: '1' }, check: {} }),
];

beforeAll(async () => {
  server = await startTestServer();
  await server.database.query(`
    CREATE TABLE n_authors (id serial PRIMARY KEY, name text NOT NULL CONSTRAINT n_authors_name_key UNIQUE, rating int NOT NULL DEFAULT 0, owner_id uuid);
    CREATE TABLE n_articles (
      id serial PRIMARY KEY, title text NOT NULL CONSTRAINT n_articles_title_key UNIQUE, author_id int NOT NULL REFERENCES n_authors (id),
      owner_id uuid, likes int NOT NULL DEFAULT 0);
    CREATE TABLE n_comments (id serial PRIMARY KEY, article_id int NOT NULL REFERENCES n_articles (id), body text NOT NULL);
    CREATE TABLE n_notes (id serial PRIMARY KEY, article_ref int, text text NOT NULL);
    CREATE TABLE n_profiles (id serial PRIMARY KEY, author_id int NOT NULL UNIQUE REFERENCES n_authors (id), bio text, big bigint);
  `);
  const tracked = await metadataRequest(server.url, { type: 'bulk', args: METADATA });
  expect(tracked).toEqual({ status: 200, body: METADATA.map(() => ({ message: 'success' })) });
});
afterAll(async () => {
  await server.close();
});

beforeEach(async () => {
  await rows(`TRUNCATE ${TABLES.join(', ')} RESTART IDENTITY CASCADE`);
});

const inputFields = async (type: string, headers: Record<string, string>) => {
  const body = await data(
    `{ __type(name: "${type}") { inputFields { name type { name kind ofType { name kind ofType { name kind ofType { name } } } } } } }`,
    headers,
  );
  return body.__type?.inputFields as { name: string; type: any }[] | undefined;
};

describe('the schema', () => {
  it("shows Hasura's relationship insert inputs where the role may insert into the target", async () => {
    const admin = (await inputFields('n_authors_insert_input', asAdmin))!;
    expect(admin.map((field) => field.name)).toEqual(['id', 'name', 'rating', 'owner_id', 'profile', 'articles']);
    expect(admin.find((field) => field.name === 'articles')!.type.name).toBe('n_articles_arr_rel_insert_input');
    expect(admin.find((field) => field.name === 'profile')!.type.name).toBe('n_profiles_obj_rel_insert_input');
    const array = (await inputFields('n_articles_arr_rel_insert_input', asAdmin))!;
    expect(array.map((field) => [field.name, field.type.kind, field.type.ofType?.kind, field.type.ofType?.ofType?.ofType?.name])).toEqual([
      ['data', 'NON_NULL', 'LIST', 'n_articles_insert_input'],
      ['on_conflict', 'INPUT_OBJECT', undefined, undefined],
    ]);
    const object = (await inputFields('n_authors_obj_rel_insert_input', asAdmin))!;
    expect(object.map((field) => [field.name, field.type.kind, field.type.ofType?.name ?? field.type.name])).toEqual([
      ['data', 'NON_NULL', 'n_authors_insert_input'],
      ['on_conflict', 'INPUT_OBJECT', 'n_authors_on_conflict'],
    ]);
    // The user may not insert notes: no `notes` in its input; profiles has no update permission: no on_conflict.
    const user = (await inputFields('n_articles_insert_input', asUser()))!;
    expect(user.map((field) => field.name)).toEqual(['title', 'author_id', 'likes', 'author', 'comments']);
    expect((await inputFields('n_profiles_obj_rel_insert_input', asUser()))!.map((field) => field.name)).toEqual(['data']);
    expect(await inputFields('n_notes_arr_rel_insert_input', asUser())).toBeUndefined();
  });
});

describe('nested inserts as the admin', () => {
  it('inserts an object relationship before the row and fills its foreign key', async () => {
    const inserted = await data(
      'mutation { insert_n_articles_one(object: {title: "T1", author: {data: {name: "Ada"}}}) { id title author_id author { id name } } }',
    );
    expect(inserted.insert_n_articles_one).toEqual({ id: 1, title: 'T1', author_id: 1, author: { id: 1, name: 'Ada' } });
    expect(await rows('SELECT id, title, author_id FROM n_articles')).toEqual([{ id: 1, title: 'T1', author_id: 1 }]);
  });

  it('inserts array relationships after each row, counts every row and returns the relationships', async () => {
    const inserted = await data(
      `mutation($objects: [n_authors_insert_input!]!) {
        insert_n_authors(objects: $objects) { affected_rows returning { id name articles(order_by: {title: asc}) { title author_id } } }
      }`,
      asAdmin,
      {
        objects: [
          { name: 'Ada', articles: { data: [{ title: 'a2' }, { title: 'a1' }] } },
          { name: 'Brian', articles: { data: [{ title: 'b1' }] } },
          { name: 'Cleo' },
        ],
      },
    );
    expect(inserted.insert_n_authors).toEqual({
      affected_rows: 6,
      returning: [
        {
          id: 1,
          name: 'Ada',
          articles: [
            { title: 'a1', author_id: 1 },
            { title: 'a2', author_id: 1 },
          ],
        },
        { id: 2, name: 'Brian', articles: [{ title: 'b1', author_id: 2 }] },
        { id: 3, name: 'Cleo', articles: [] },
      ],
    });
    expect(await rows('SELECT title, author_id FROM n_articles ORDER BY title')).toEqual([
      { title: 'a1', author_id: 1 },
      { title: 'a2', author_id: 1 },
      { title: 'b1', author_id: 2 },
    ]);
  });

  it('nests two levels deep in both directions', async () => {
    const down = await data(
      `mutation { insert_n_authors_one(object: {name: "Ada", articles: {data: [
        {title: "a1", comments: {data: [{body: "c1"}, {body: "c2"}]}},
        {title: "a2", comments: {data: [{body: "c3"}]}}]}}) {
        name articles(order_by: {title: asc}) { title comments(order_by: {body: asc}) { body } } } }`,
    );
    expect(down.insert_n_authors_one).toEqual({
      name: 'Ada',
      articles: [
        { title: 'a1', comments: [{ body: 'c1' }, { body: 'c2' }] },
        { title: 'a2', comments: [{ body: 'c3' }] },
      ],
    });
    const up = await data(
      `mutation { insert_n_comments(objects: [{body: "up", article: {data: {title: "b1", author: {data: {name: "Brian"}}}}}]) {
        affected_rows returning { body article { title author { name } } } } }`,
    );
    expect(up.insert_n_comments).toEqual({ affected_rows: 3, returning: [{ body: 'up', article: { title: 'b1', author: { name: 'Brian' } } }] });
    expect(
      await rows(
        `SELECT c.body, a.title, w.name FROM n_comments c JOIN n_articles a ON a.id = c.article_id JOIN n_authors w ON w.id = a.author_id ORDER BY c.body`,
      ),
    ).toEqual([
      { body: 'c1', title: 'a1', name: 'Ada' },
      { body: 'c2', title: 'a1', name: 'Ada' },
      { body: 'c3', title: 'a2', name: 'Ada' },
      { body: 'up', title: 'b1', name: 'Brian' },
    ]);
  });

  it('inserts an object relationship on the remote foreign key after the row', async () => {
    const inserted = await data('mutation { insert_n_authors_one(object: {name: "Ada", profile: {data: {bio: "hi"}}}) { id profile { bio author_id } } }');
    expect(inserted.insert_n_authors_one).toEqual({ id: 1, profile: { bio: 'hi', author_id: 1 } });
  });

  it('goes through manual relationships as through foreign keys', async () => {
    const inserted = await data(
      `mutation { insert_n_articles_one(object: {title: "m", author: {data: {name: "Ada"}}, notes: {data: [{text: "n1"}, {text: "n2"}]}}) {
        id notes(order_by: {text: asc}) { text article_ref } } }`,
    );
    expect(inserted.insert_n_articles_one).toEqual({
      id: 1,
      notes: [
        { text: 'n1', article_ref: 1 },
        { text: 'n2', article_ref: 1 },
      ],
    });
    const upward = await data(
      'mutation { insert_n_notes_one(object: {text: "n3", article: {data: {title: "m2", author_id: 1}}}) { text article { id title } } }',
    );
    expect(upward.insert_n_notes_one).toEqual({ text: 'n3', article: { id: 2, title: 'm2' } });
    expect(await rows('SELECT text, article_ref FROM n_notes ORDER BY text')).toEqual([
      { text: 'n1', article_ref: 1 },
      { text: 'n2', article_ref: 1 },
      { text: 'n3', article_ref: 2 },
    ]);
  });

  it('applies on_conflict in nested data', async () => {
    await rows(`INSERT INTO n_authors (name, rating) VALUES ('Ada', 1)`);
    // The existing author is updated and linked.
    const linked = await data(
      `mutation { insert_n_articles(objects: [{title: "t", author: {data: {name: "Ada", rating: 4}, on_conflict: {constraint: n_authors_name_key, update_columns: [rating]}}}]) {
        affected_rows returning { author { id rating } } } }`,
    );
    expect(linked.insert_n_articles).toEqual({ affected_rows: 2, returning: [{ author: { id: 1, rating: 4 } }] });
    // Children upserted: one updated, one inserted.
    const children = await data(
      `mutation { insert_n_authors_one(object: {name: "Brian", articles: {data: [{title: "t", likes: 3}, {title: "u"}], on_conflict: {constraint: n_articles_title_key, update_columns: [likes, author_id]}}}) {
        id articles(order_by: {title: asc}) { title likes } } }`,
    );
    expect(children.insert_n_authors_one).toEqual({
      id: 3,
      articles: [
        { title: 't', likes: 3 },
        { title: 'u', likes: 0 },
      ],
    });
    // A parent that on_conflict leaves unwritten cannot be linked to (Hasura's refusal); nothing is kept.
    const before = await snapshot();
    const unwritten = await refusal(
      'mutation { insert_n_articles_one(object: {title: "v", author: {data: {name: "Ada"}, on_conflict: {constraint: n_authors_name_key}}}) { id } }',
    );
    expect(unwritten).toEqual({
      code: 'not-supported',
      message: 'cannot proceed to insert object relation "author" since insert to table "n_authors" affects zero rows',
    });
    // So can a row its array relationship's rows need.
    const childless = await refusal(
      'mutation { insert_n_authors_one(object: {name: "Ada", articles: {data: [{title: "w"}]}}, on_conflict: {constraint: n_authors_name_key}) { id } }',
    );
    expect(childless).toEqual({
      code: 'not-supported',
      message: 'cannot proceed to insert array relations since insert to table "n_authors" affects zero rows',
    });
    expect(await snapshot()).toBe(before);
  });

  it('refuses a relationship column given by the client too', async () => {
    await rows(`INSERT INTO n_authors (name) VALUES ('Ada')`);
    const before = await snapshot();
    expect(await refusal('mutation { insert_n_articles_one(object: {title: "t", author_id: 1, author: {data: {name: "Brian"}}}) { id } }')).toEqual({
      code: 'BAD_USER_INPUT',
      message: 'cannot insert object relationship "author" as "author_id" column values are already determined',
    });
    expect(await refusal('mutation { insert_n_authors_one(object: {name: "Cleo", articles: {data: [{title: "t", author_id: 1}]}}) { id } }')).toEqual({
      code: 'BAD_USER_INPUT',
      message: 'cannot insert "author_id" columns as their values are already being determined by parent insert',
    });
    expect(await snapshot()).toBe(before);
  });
});

describe('nested inserts per role', () => {
  it('applies presets and checks to every nested row, a check through a relationship seeing the rows beside it', async () => {
    const inserted = await data(
      `mutation { insert_n_authors_one(object: {name: "Ada", rating: 3, articles: {data: [{title: "a1", likes: 5, comments: {data: [{body: "fine"}]}}]}}) {
        name owner_id articles { title likes comments { body } } } }`,
      asUser(),
    );
    expect(inserted.insert_n_authors_one).toEqual({
      name: 'Ada',
      owner_id: alice,
      articles: [{ title: 'a1', likes: 5, comments: [{ body: 'fine' }] }],
    });
    expect(await rows('SELECT owner_id FROM n_authors UNION ALL SELECT owner_id FROM n_articles')).toEqual([{ owner_id: alice }, { owner_id: alice }]);
    // An article under another user's author fails the article's check, through its relationship.
    await rows(`INSERT INTO n_authors (name, owner_id) VALUES ('Bob', $1)`, [randomUUID()]);
    const others = await refusal('mutation { insert_n_articles_one(object: {title: "x", author_id: 2}) { id } }', asUser());
    expect(others.code).toBe('permission-error');
  });

  it('rolls the whole mutation back when any nested row fails its check', async () => {
    const cases = [
      // The parent (an object relationship) fails: rating above 10.
      '{title: "x", author: {data: {name: "Ada", rating: 11}}}',
      // A child two levels down fails: spam.
      '{title: "x", author: {data: {name: "Ada"}}, comments: {data: [{body: "ok"}, {body: "spam!"}]}}',
      // The row itself fails: too many likes.
      '{title: "x", likes: 101, author: {data: {name: "Ada"}}}',
    ];
    for (const object of cases) {
      const body = await gql(
        `mutation { first: insert_n_authors_one(object: {name: "Kept?"}) { id } second: insert_n_articles_one(object: ${object}) { id } }`,
        asUser(),
      );
      expect(body.errors).toHaveLength(1);
      expect(body.errors![0]).toMatchObject({
        message: 'check constraint of an insert/update permission has failed',
        extensions: { code: 'permission-error' },
      });
      expect(await counts()).toEqual({ n_authors: 0, n_articles: 0, n_comments: 0, n_notes: 0, n_profiles: 0 });
    }
  });

  it("checks a nested upsert's updated row with the update permission", async () => {
    const author = (await data('mutation { insert_n_authors_one(object: {name: "Ada"}) { id } }', asUser())).insert_n_authors_one.id;
    await data(`mutation { insert_n_articles_one(object: {title: "t", author_id: ${author}}) { id } }`, asUser());
    const upsert = (likes: number) =>
      `mutation { insert_n_authors_one(object: {name: "Brian", articles: {data: [{title: "t", likes: ${likes}}], on_conflict: {constraint: n_articles_title_key, update_columns: [likes]}}}) { id } }`;
    expect((await refusal(upsert(60), asUser())).code).toBe('permission-error');
    expect(await rows('SELECT likes FROM n_articles')).toEqual([{ likes: 0 }]);
    await data(upsert(40), asUser());
    expect(await rows('SELECT likes FROM n_articles')).toEqual([{ likes: 40 }]);
  });

  it("fires the nested tables' event triggers with the caller's session", async () => {
    const created = await metadataRequest(server.url, {
      type: 'pg_create_event_trigger',
      args: { name: 'n_comments_created', table: 'n_comments', webhook: 'http://127.0.0.1:9/none', insert: { columns: '*' } },
    });
    expect(created).toEqual({ status: 200, body: { message: 'success' } });
    try {
      await data(
        'mutation { insert_n_authors_one(object: {name: "Ada", articles: {data: [{title: "a", comments: {data: [{body: "c1"}, {body: "c2"}]}}]}}) { id } }',
        asUser(),
      );
      const events = await rows(`SELECT payload FROM event_log WHERE trigger_name = 'n_comments_created' ORDER BY seq`);
      expect(events.map((event) => [event.payload.data.new.body, event.payload.data.new.article_id, event.payload.session_variables['x-gql-user-id']])).toEqual(
        [
          ['c1', 1, alice],
          ['c2', 1, alice],
        ],
      );
    } finally {
      await metadataRequest(server.url, { type: 'pg_delete_event_trigger', args: { name: 'n_comments_created' } });
    }
  });

  it('checks nested rows with their values whole (a bigint beyond a double)', async () => {
    const write = (big: string) =>
      gql('mutation($big: bigint) { insert_n_authors_one(object: {name: "Ada", profile: {data: {bio: "b", big: $big}}}) { id } }', asUser(), { big });
    expect((await write('9007199254740992')).errors![0].extensions!.code).toBe('permission-error');
    expect((await write('9007199254740993')).errors).toBeUndefined();
    expect(await rows('SELECT big::text FROM n_profiles')).toEqual([{ big: '9007199254740993' }]);
  });

  it('refuses a relationship determining a column the role presets', async () => {
    const editor = bearer(signToken({ roles: ['editor'] }));
    expect(await refusal('mutation { insert_n_authors(objects: [{name: "E", articles: {data: [{title: "e"}]}}]) { affected_rows } }', editor)).toEqual({
      code: 'BAD_USER_INPUT',
      message: `the column "author_id" of n_articles is set by the role's insert permission, so no relationship may determine it`,
    });
    expect(await counts()).toEqual({ n_authors: 0, n_articles: 0, n_comments: 0, n_notes: 0, n_profiles: 0 });
  });

  it('does not let a role insert through a relationship into a table it may not insert into', async () => {
    const body = await gql('mutation { insert_n_articles_one(object: {title: "x", author_id: 1, notes: {data: [{text: "n"}]}}) { id } }', asUser());
    expect(body.errors![0].extensions!.code).toBe('GRAPHQL_VALIDATION_FAILED');
    expect(await counts()).toEqual({ n_authors: 0, n_articles: 0, n_comments: 0, n_notes: 0, n_profiles: 0 });
  });
});

describe('hostile and wrong input', () => {
  const HOSTILE = [`x'); DROP TABLE n_authors; --`, `'' OR 1=1 --`, '$1', `"quoted" \\"`, `n_articles"; DELETE FROM n_articles; --`];

  it('binds every nested value, never splices it', async () => {
    for (const [index, hostile] of HOSTILE.entries()) {
      const title = `${hostile} ${index}`;
      const inserted = await data(
        `mutation($name: String!, $title: String!, $body: String!) {
          insert_n_comments_one(object: {body: $body, article: {data: {title: $title, author: {data: {name: $name}}}}}) { body article { title author { name } } } }`,
        asUser(),
        { name: `${hostile} ${index}`, title, body: hostile },
      );
      expect(inserted.insert_n_comments_one).toEqual({ body: hostile, article: { title, author: { name: `${hostile} ${index}` } } });
      // Literals too.
      const literal = JSON.stringify(`${hostile} literal ${index}`);
      await data(`mutation { insert_n_authors_one(object: {name: ${literal}, articles: {data: [{title: ${literal}}]}}) { id } }`, asUser());
    }
    expect(await counts()).toEqual({ n_authors: HOSTILE.length * 2, n_articles: HOSTILE.length * 2, n_comments: HOSTILE.length, n_notes: 0, n_profiles: 0 });
    expect((await rows('SELECT name FROM n_authors ORDER BY id')).map((row) => row.name)).toContain(`${HOSTILE[0]} 0`);
  });

  it('answers bad shapes with validation errors, never a 500, and writes nothing', async () => {
    const invalid = [
      'mutation { insert_n_articles_one(object: {title: "x", author: {}}) { id } }',
      'mutation { insert_n_articles_one(object: {title: "x", author: {data: [{name: "a"}]}}) { id } }',
      'mutation { insert_n_articles_one(object: {title: "x", author: "Ada"}) { id } }',
      'mutation { insert_n_articles_one(object: {title: "x", author: {data: {name: "a", nope: 1}}}) { id } }',
      'mutation { insert_n_authors_one(object: {name: "x", articles: {data: [{title: 5}]}}) { id } }',
      'mutation { insert_n_authors_one(object: {name: "x", articles: {data: [{title: "t"}], on_conflict: {constraint: nope}}}) { id } }',
    ];
    for (const query of invalid) {
      const body = await gql(query);
      expect(body.errors![0].extensions!.code).toBe('GRAPHQL_VALIDATION_FAILED');
    }
    const variables = [
      { title: 'x', author: {} },
      { title: 'x', author: { data: 5 } },
      { title: 'x', comments: { data: 'many' } },
    ];
    for (const object of variables) {
      const body = await gql('mutation($object: n_articles_insert_input!) { insert_n_articles_one(object: $object) { id } }', asAdmin, { object });
      expect(body.errors![0].extensions!.code).toBe('BAD_USER_INPUT');
    }
    // A missing foreign key value is PostgreSQL's refusal, as Hasura answers it.
    const missing = await refusal('mutation { insert_n_articles_one(object: {title: "x", comments: {data: [{body: "b"}]}}) { id } }');
    expect(missing.code).toBe('constraint-violation');
    expect(await counts()).toEqual({ n_authors: 0, n_articles: 0, n_comments: 0, n_notes: 0, n_profiles: 0 });
  });
});
