import { randomUUID } from 'node:crypto';
import { poolOf } from '../../src/db/sql';
import { actionsFiles } from '../../src/modules/actions/actions.files';
import { metadataFromFiles, metadataToFiles } from '../../src/platform/metadata-files';
import { startActionHandler, type ActionHandlerServer } from '../support/action-handler';
import { postGraphQL, type GraphQLErrorBody } from '../support/graphql';
import { ADMIN_SECRET, startTestServer, type TestServer } from '../support/server';
import { bearer, signToken } from '../support/tokens';
import { until } from '../support/until';
import { metadataRequest } from '../support/metadata';

/*
 * Action relationships (Hasura's custom type relationships): an action's output type gets a field
 * per relationship to a tracked table, resolved by the tables' compiler under the caller's role.
 */

let server: TestServer;
let handler: ActionHandlerServer;
const alice = randomUUID();
const bob = randomUUID();
const asAdmin = { 'x-gql-admin-secret': ADMIN_SECRET };
const asUser = bearer(signToken({ roles: ['user'], userId: alice }));
/** A role allowed to call the actions, with no select permission on any table. */
const asViewer = bearer(signToken({ roles: ['viewer'], userId: alice }));
/** The statements that joined an action's answer to a table. */
const joins: string[] = [];

const metadata = (body: unknown) => metadataRequest(server.url, body);

async function runSql(sql: string) {
  const response = await fetch(`${server.url}/v2/query`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...asAdmin },
    body: JSON.stringify({ type: 'run_sql', args: { sql } }),
  });
  return { status: response.status, body: (await response.json()) as Record<string, unknown> };
}

async function query<T = Record<string, unknown>>(text: string, headers: Record<string, string>, variables?: Record<string, unknown>) {
  return (await postGraphQL<T>(server.graphqlUrl, { query: text, variables }, headers)).body;
}

async function data<T = Record<string, unknown>>(text: string, headers: Record<string, string>, variables?: Record<string, unknown>): Promise<T> {
  const body = await query<T>(text, headers, variables);
  expect(body.errors).toBeUndefined();
  return body.data as T;
}

const firstError = (body: { errors?: GraphQLErrorBody[] }) => body.errors?.[0];

const AUTHOR_REF = {
  name: 'AuthorRef',
  fields: [
    { name: 'author_id', type: 'Int!' },
    { name: 'note', type: 'String' },
  ],
  relationships: [
    { name: 'author', type: 'object', remote_table: { schema: 'public', name: 'rel_authors' }, field_mapping: { author_id: 'id' } },
    { name: 'posts', type: 'array', remote_table: 'rel_posts', field_mapping: { author_id: 'author_id' } },
    { name: 'hidden', type: 'object', remote_table: 'rel_hidden', field_mapping: { author_id: 'id' } },
  ],
};

const customTypes = (relationships: unknown[] = AUTHOR_REF.relationships) => ({
  type: 'set_custom_types',
  args: { input_objects: [], objects: [{ ...AUTHOR_REF, relationships }] },
});

beforeAll(async () => {
  handler = await startActionHandler();
  handler.route('/author', (call) => ({ status: 200, body: { author_id: call.body.input.id, note: 'one' } }));
  handler.route('/authors', (call) => ({ status: 200, body: (call.body.input.ids as number[]).map((id) => ({ author_id: id, note: `n${id}` })) }));
  handler.route('/answers-a-relationship', () => ({ status: 200, body: { author_id: 1, author: { id: 2 } } }));
  server = await startTestServer({ JOBS_POLL_INTERVAL_SECONDS: '1' });
  await server.database.query(`
    CREATE TABLE rel_authors (id int PRIMARY KEY, name text NOT NULL, owner uuid, secret text);
    CREATE TABLE rel_posts (id serial PRIMARY KEY, author_id int, title text NOT NULL, published boolean NOT NULL);
    CREATE TABLE rel_hidden (id int PRIMARY KEY, x text);
    CREATE TABLE rel_untracked (id int PRIMARY KEY);
    INSERT INTO rel_hidden VALUES (1, 'h1');
    INSERT INTO rel_posts (author_id, title, published) VALUES
      (1, 'p1', true), (1, 'p2', false), (1, 'p3', true), (1, 'p4', true), (2, 'q1', true), (2, 'q2', true);
  `);
  await server.database.query(`INSERT INTO rel_authors VALUES (1, 'Ada', $1, 's1'), (2, 'Brian', $2, 's2')`, [alice, bob]);
  const tracked = await metadata({
    type: 'bulk',
    args: [
      ...['rel_authors', 'rel_posts', 'rel_hidden'].map((table) => ({ type: 'pg_track_table', args: { table } })),
      {
        type: 'pg_create_select_permission',
        args: { table: 'rel_authors', role: 'user', permission: { columns: ['id', 'name'], filter: { owner: { _eq: 'X-Gql-User-Id' } } } },
      },
      {
        type: 'pg_create_select_permission',
        args: { table: 'rel_posts', role: 'user', permission: { columns: ['id', 'title'], filter: { published: { _eq: true } }, limit: 2 } },
      },
      customTypes(),
      ...[
        { name: 'findAuthor', type: 'query', arguments: [{ name: 'id', type: 'Int!' }], output_type: 'AuthorRef', handler: `${handler.url}/author` },
        { name: 'findAuthors', type: 'query', arguments: [{ name: 'ids', type: '[Int!]!' }], output_type: '[AuthorRef!]!', handler: `${handler.url}/authors` },
        { name: 'queueAuthor', kind: 'asynchronous', arguments: [{ name: 'id', type: 'Int!' }], output_type: 'AuthorRef', handler: `${handler.url}/author` },
        { name: 'badAnswer', type: 'query', output_type: 'AuthorRef', handler: `${handler.url}/answers-a-relationship` },
      ].map(({ name, ...definition }) => ({ type: 'create_action', args: { name, definition } })),
      ...['findAuthor', 'findAuthors', 'queueAuthor'].flatMap((action) =>
        ['user', 'viewer'].map((role) => ({ type: 'create_action_permission', args: { action, role } })),
      ),
    ],
  });
  expect(tracked).toMatchObject({ status: 200 });
  const pool = poolOf(server.server.dataSource);
  const original = pool.query.bind(pool) as (...args: unknown[]) => unknown;
  jest.spyOn(pool, 'query').mockImplementation(((...args: unknown[]) => {
    if (typeof args[0] === 'string' && args[0].includes('jsonb_array_elements')) joins.push(args[0]);
    return original(...args);
  }) as never);
}, 60_000);

afterAll(async () => {
  await server?.close();
  await handler?.close();
});

describe('the admin', () => {
  it('reads every relationship of an action answer, with the array relationship arguments and aggregate', async () => {
    const result = await data<{ findAuthor: Record<string, unknown> }>(
      `{ findAuthor(id: 1) { author_id note author { id name secret } posts(order_by: {id: desc}, where: {published: {_eq: true}}, limit: 2, offset: 1) { title }
         posts_aggregate { aggregate { count } } hidden { x } } }`,
      asAdmin,
    );
    expect(result.findAuthor).toEqual({
      author_id: 1,
      note: 'one',
      author: { id: 1, name: 'Ada', secret: 's1' },
      posts: [{ title: 'p3' }, { title: 'p1' }],
      posts_aggregate: { aggregate: { count: 4 } },
      hidden: { x: 'h1' },
    });
  });

  it('answers a list action with one statement per relationship field for all its objects', async () => {
    joins.length = 0;
    const result = await data<{ findAuthors: unknown[] }>(
      `{ findAuthors(ids: [2, 1, 99]) { author_id author { name } posts(order_by: {id: asc}) { title } } }`,
      asAdmin,
    );
    expect(result.findAuthors).toEqual([
      { author_id: 2, author: { name: 'Brian' }, posts: [{ title: 'q1' }, { title: 'q2' }] },
      { author_id: 1, author: { name: 'Ada' }, posts: [{ title: 'p1' }, { title: 'p2' }, { title: 'p3' }, { title: 'p4' }] },
      { author_id: 99, author: null, posts: [] },
    ]);
    expect(joins).toHaveLength(2);
  });

  it('keeps aliases of one relationship with different arguments apart, and binds variables', async () => {
    const result = await data<{ findAuthor: Record<string, unknown> }>(
      `query ($title: String!, $limit: Int) { findAuthor(id: 1) { a: posts(where: {title: {_eq: $title}}) { title } b: posts(limit: $limit, order_by: {id: asc}) { id } } }`,
      asAdmin,
      { title: "p2' OR 1=1 --", limit: 1 },
    );
    expect(result.findAuthor).toEqual({ a: [], b: [{ id: 1 }] });
  });

  it('refuses a handler answer that carries a relationship field', async () => {
    const body = await query(`{ badAnswer { author_id } }`, asAdmin);
    expect(firstError(body)?.message).toMatch(/unexpected field "badAnswer.author"/);
  });

  it('answers bad arguments of a relationship field as the caller’s mistake', async () => {
    const huge = await query(`{ findAuthor(id: 1) { posts(where: {id: {_eq: 99999999999}}) { id } } }`, asAdmin);
    expect(firstError(huge)?.extensions?.code).toMatch(/BAD_USER_INPUT|GRAPHQL_VALIDATION_FAILED/);
    const unknown = await query(`{ findAuthor(id: 1) { posts(where: {nope: {_eq: 1}}) { id } } }`, asAdmin);
    expect(firstError(unknown)?.extensions?.code).toBe('GRAPHQL_VALIDATION_FAILED');
    // Past graphql-js's 50 variable errors, its last (uncoded) one is the variables' fault too.
    const many = await query(`query ($w: [rel_posts_bool_exp!]) { findAuthor(id: 1) { posts(where: {_or: $w}) { id } } }`, asAdmin, {
      w: Array.from({ length: 60 }, () => 'x'),
    });
    expect(many.errors?.length).toBe(51);
    expect(many.errors?.every((error) => error.extensions?.code === 'BAD_USER_INPUT')).toBe(true);
    const negative = await query(`query ($o: Int) { findAuthor(id: 1) { posts(offset: $o) { id } } }`, asAdmin, { o: -1 });
    expect(firstError(negative)?.extensions?.code).toBe('BAD_USER_INPUT');
  });
});

describe('a role', () => {
  it('reads through its select permissions: their filter, columns and limit', async () => {
    const result = await data<{ findAuthors: unknown[] }>(
      `{ findAuthors(ids: [1, 2]) { author_id author { id name } posts(order_by: {id: asc}) { title } } }`,
      asUser,
    );
    // Alice owns author 1 only; only published posts, at most 2 of them.
    expect(result.findAuthors).toEqual([
      { author_id: 1, author: { id: 1, name: 'Ada' }, posts: [{ title: 'p1' }, { title: 'p3' }] },
      { author_id: 2, author: null, posts: [{ title: 'q1' }, { title: 'q2' }] },
    ]);
  });

  it('does not see columns, aggregates or relationships its permissions do not open', async () => {
    for (const selection of [
      'author { secret }',
      'posts_aggregate { aggregate { count } }',
      'hidden { x }',
      'posts(where: {published: {_eq: false}}) { id }',
    ]) {
      const body = await query(`{ findAuthor(id: 1) { ${selection} } }`, asUser);
      expect(firstError(body)?.extensions?.code).toBe('GRAPHQL_VALIDATION_FAILED');
    }
  });

  it('without a select permission on the tables, has no relationship field', async () => {
    expect(await data(`{ findAuthor(id: 1) { author_id note } }`, asViewer)).toEqual({ findAuthor: { author_id: 1, note: 'one' } });
    const body = await query(`{ findAuthor(id: 1) { author { id } } }`, asViewer);
    expect(firstError(body)?.message).toMatch(/Cannot query field "author" on type "AuthorRef"/);
    const types = await data<{ __type: { fields: { name: string }[] } }>(`{ __type(name: "AuthorRef") { fields { name } } }`, asViewer);
    expect(types.__type.fields.map((field) => field.name).sort()).toEqual(['author_id', 'note']);
  });

  it('reads the relationships of an asynchronous action’s result', async () => {
    const placed = await data<{ queueAuthor: string }>(`mutation { queueAuthor(id: 1) }`, asUser);
    type Result = { queueAuthor: { output: { author: { name: string } | null; posts: { title: string }[] } | null } | null };
    let result: Result | undefined;
    await until(async () => {
      result = await data<Result>(`{ queueAuthor(id: "${placed.queueAuthor}") { output { author { name } posts { title } } } }`, asUser);
      return Boolean(result.queueAuthor?.output);
    }, 20_000);
    expect(result!.queueAuthor!.output).toEqual({ author: { name: 'Ada' }, posts: [{ title: 'p1' }, { title: 'p3' }] });
  });
});

describe('the metadata', () => {
  const refused = async (relationship: Record<string, unknown>, pattern: RegExp) => {
    const before = await metadata({ type: 'export_metadata', args: {} });
    const answer = await metadata(customTypes([relationship]));
    expect(answer.status).toBe(400);
    expect(answer.body.error).toMatch(pattern);
    expect(await metadata({ type: 'export_metadata', args: {} })).toEqual(before);
  };

  it('refuses a relationship to an unknown or untracked table, an unknown column or field, or mismatched types, changing nothing', async () => {
    await refused(
      { name: 'x', type: 'object', remote_table: 'rel_nope', field_mapping: { author_id: 'id' } },
      /relationship "x" of the custom type AuthorRef: no table or view rel_nope exists/,
    );
    await refused(
      { name: 'x', type: 'object', remote_table: 'rel_untracked', field_mapping: { author_id: 'id' } },
      /"x" of the custom type AuthorRef: the table rel_untracked is not tracked/,
    );
    await refused({ name: 'x', type: 'object', remote_table: 'rel_authors', field_mapping: { author_id: 'nope' } }, /"x" .*no column "nope" in rel_authors/);
    await refused(
      { name: 'x', type: 'object', remote_table: 'rel_authors', field_mapping: { note: 'id' } },
      /the field AuthorRef.note \(String\) does not match the column id of rel_authors \(Int\)/,
    );
    await refused(
      { name: 'x', type: 'object', remote_table: 'rel_authors', field_mapping: { nope: 'id' } },
      /maps the field "nope", which AuthorRef does not have/,
    );
    await refused({ name: 'note', type: 'object', remote_table: 'rel_authors', field_mapping: { author_id: 'id' } }, /has the name of a field/);
    await refused({ name: 'x', type: 'many', remote_table: 'rel_authors', field_mapping: { author_id: 'id' } }, /must be "object" or "array"/);
    await refused({ name: 'x', type: 'object', remote_table: 'rel_authors', field_mapping: {} }, /at least one field/);
  });

  it('refuses untracking a table or dropping a column a relationship uses (dependency-error), and keeps serving it', async () => {
    const untrack = await metadata({ type: 'pg_untrack_table', args: { table: 'rel_posts', cascade: true } });
    expect(untrack).toMatchObject({ status: 400, body: { code: 'dependency-error' } });
    expect(untrack.body.error).toMatch(/relationship "posts" of the custom type AuthorRef: the table rel_posts is not tracked/);
    const dropped = await runSql('ALTER TABLE rel_posts DROP COLUMN author_id');
    expect(dropped).toMatchObject({ status: 400, body: { code: 'dependency-error' } });
    expect(dropped.body.error).toMatch(/no column "author_id" in rel_posts/);
    expect(await data(`{ findAuthor(id: 2) { posts { title } } }`, asAdmin)).toEqual({ findAuthor: { posts: [{ title: 'q1' }, { title: 'q2' }] } });
  });

  it('exports the relationships and takes them back with replace_metadata', async () => {
    const exported = await metadata({ type: 'export_metadata', args: {} });
    const objects = (exported.body.custom_types as { objects: { name: string; relationships: unknown[] }[] }).objects;
    expect(objects.find((object) => object.name === 'AuthorRef')?.relationships).toEqual([
      { name: 'author', type: 'object', remote_table: { schema: 'public', name: 'rel_authors' }, field_mapping: { author_id: 'id' } },
      { name: 'posts', type: 'array', remote_table: { schema: 'public', name: 'rel_posts' }, field_mapping: { author_id: 'author_id' } },
      { name: 'hidden', type: 'object', remote_table: { schema: 'public', name: 'rel_hidden' }, field_mapping: { author_id: 'id' } },
    ]);
    expect(await metadata({ type: 'clear_metadata', args: {} })).toMatchObject({ status: 200 });
    expect(firstError(await query(`{ findAuthor(id: 1) { author_id } }`, asAdmin))?.extensions?.code).toBe('GRAPHQL_VALIDATION_FAILED');
    // Through the files of `plinth metadata export|apply` (the relationships in actions.yaml).
    const files = metadataToFiles(exported.body as never, [actionsFiles]);
    expect(files['actions.yaml']).toContain('field_mapping:');
    expect(await metadata({ type: 'replace_metadata', args: metadataFromFiles((file) => files[file], [actionsFiles]) })).toMatchObject({ status: 200 });
    expect(await metadata({ type: 'export_metadata', args: {} })).toEqual(exported);
    expect(await data(`{ findAuthor(id: 1) { author { name } } }`, asUser)).toEqual({ findAuthor: { author: { name: 'Ada' } } });
    // A replacement whose relationship names a table it does not track is refused whole.
    const sources = exported.body.sources as { tables: { table: { name: string } }[] }[];
    const withoutPosts = { ...exported.body, sources: [{ ...sources[0], tables: sources[0].tables.filter((entry) => entry.table.name !== 'rel_posts') }] };
    const refusal = await metadata({ type: 'replace_metadata', args: withoutPosts });
    expect(refusal).toMatchObject({ status: 400, body: { code: 'validation-failed' } });
    expect(await metadata({ type: 'export_metadata', args: {} })).toEqual(exported);
  });

  it('reports a relationship the database broke as inconsistent and stops serving it', async () => {
    await server.database.query('ALTER TABLE rel_hidden DROP COLUMN x, ADD COLUMN y text');
    await server.database.query('ALTER TABLE rel_hidden RENAME COLUMN id TO key');
    expect(await metadata({ type: 'reload_metadata', args: {} })).toMatchObject({ status: 200 });
    const inconsistent = await metadata({ type: 'get_inconsistent_metadata', args: {} });
    expect(inconsistent.body.inconsistent_objects).toEqual(
      expect.arrayContaining([
        expect.objectContaining({ type: 'custom_types', name: 'relationship hidden of AuthorRef', reason: 'no column "id" in rel_hidden' }),
      ]),
    );
    expect(firstError(await query(`{ findAuthor(id: 1) { hidden { y } } }`, asAdmin))?.extensions?.code).toBe('GRAPHQL_VALIDATION_FAILED');
    expect(await data(`{ findAuthor(id: 1) { author { name } } }`, asAdmin)).toEqual({ findAuthor: { author: { name: 'Ada' } } });
  });
});
