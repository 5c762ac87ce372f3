import { Writable } from 'node:stream';
import { createTestDatabase } from '../support/database';
import { metadataRequest } from '../support/metadata';
import { AdminClient, startAdminServer, type AdminTestServer } from './support';

interface GraphQLAnswer {
  data?: Record<string, any> | null;
  errors?: { message: string; extensions?: { code?: string } }[];
}

let server: AdminTestServer;
let admin: AdminClient;

beforeAll(async () => {
  const database = await createTestDatabase();
  await database.query('CREATE TABLE browse_books (id serial PRIMARY KEY, title text NOT NULL, pages int, published boolean NOT NULL DEFAULT false)');
  await database.query("INSERT INTO browse_books (title, pages) SELECT 'book ' || n, n * 10 FROM generate_series(1, 12) AS n");
  await database.query('CREATE TABLE browse_notes (body text)');
  server = await startAdminServer({}, { database, logTo: new Writable({ write: (_chunk, _encoding, done) => done() }) });
  for (const table of ['browse_books', 'browse_notes']) {
    expect((await metadataRequest(server.url, { type: 'pg_track_table', args: { table: { schema: 'public', name: table } } })).status).toBe(200);
  }
  admin = new AdminClient(server.adminUrl);
  expect((await admin.login()).status).toBe(200);
});
afterAll(async () => {
  await server.close();
  await server.database.drop();
});

const run = (query: string, variables?: Record<string, unknown>, client = admin) =>
  client.request<GraphQLAnswer & { error_code?: string }>('POST', '/api/data/graphql', { query, variables });

describe('the data browser’s API', () => {
  it('refuses without a session (401) and without the CSRF token (403), running nothing', async () => {
    const update = 'mutation { update_browse_books_by_pk(pk_columns: {id: 1}, _set: {title: "changed"}) { id } }';
    const anonymous = await run(update, undefined, new AdminClient(server.adminUrl));
    expect({ status: anonymous.status, code: anonymous.body.error_code }).toEqual({ status: 401, code: 'UNAUTHENTICATED' });
    expect((await new AdminClient(server.adminUrl).request('GET', '/api/data/tables')).status).toBe(401);
    for (const token of ['', 'not-the-token']) {
      const refused = await admin.request('POST', '/api/data/graphql', { query: update }, { 'x-csrf-token': token });
      expect({ status: refused.status, code: refused.body.error_code }).toEqual({ status: 403, code: 'CSRF_TOKEN_INVALID' });
    }
    expect(await server.database.query('SELECT title FROM browse_books WHERE id = 1')).toEqual([{ title: 'book 1' }]);
    // On the main port the route does not exist; no admin secret is asked of the browser.
    expect((await fetch(`${server.url}/_admin/api/data/graphql`, { method: 'POST' })).status).toBe(404);
  });

  it('lists the tracked tables with their columns, primary keys and generated root fields', async () => {
    const answer = await admin.request<{ tables: any[] }>('GET', '/api/data/tables');
    expect(answer.status).toBe(200);
    const byKey = Object.fromEntries(answer.body.tables.map((table) => [table.key, table]));
    expect(byKey['public.browse_books']).toMatchObject({
      schema: 'public',
      name: 'browse_books',
      typeName: 'browse_books',
      roots: { select: 'browse_books', selectAggregate: 'browse_books_aggregate', selectByPk: 'browse_books_by_pk', updateByPk: 'update_browse_books_by_pk' },
    });
    expect(byKey['public.browse_books'].columns).toEqual([
      { name: 'id', field: 'id', scalar: 'Int', array: false, sqlType: 'integer', nullable: false, primaryKey: true },
      { name: 'title', field: 'title', scalar: 'String', array: false, sqlType: 'text', nullable: false, primaryKey: false },
      { name: 'pages', field: 'pages', scalar: 'Int', array: false, sqlType: 'integer', nullable: true, primaryKey: false },
      { name: 'published', field: 'published', scalar: 'Boolean', array: false, sqlType: 'boolean', nullable: false, primaryKey: false },
    ]);
    // Without a primary key a row cannot be edited by key.
    expect(byKey['public.browse_notes'].roots).toMatchObject({ selectByPk: null, updateByPk: null });
  });

  it('runs a query with a filter, an order and a page, as the admin', async () => {
    const answer = await run(
      `query Browse($where: browse_books_bool_exp, $order_by: [browse_books_order_by!], $limit: Int, $offset: Int) {
        rows: browse_books(where: $where, order_by: $order_by, limit: $limit, offset: $offset) { id title pages }
        total: browse_books_aggregate(where: $where) { aggregate { count } }
      }`,
      { where: { pages: { _gte: 50 } }, order_by: [{ pages: 'desc' }], limit: 3, offset: 2 },
    );
    expect(answer.status).toBe(200);
    expect(answer.body).toEqual({
      data: {
        rows: [
          { id: 10, title: 'book 10', pages: 100 },
          { id: 9, title: 'book 9', pages: 90 },
          { id: 8, title: 'book 8', pages: 80 },
        ],
        total: { aggregate: { count: 8 } },
      },
    });
  });

  it('updates a row by its primary key, and the change is in the table', async () => {
    const answer = await run(
      `mutation Save($pk_columns: browse_books_pk_columns_input!, $_set: browse_books_set_input) {
        row: update_browse_books_by_pk(pk_columns: $pk_columns, _set: $_set) { id title pages published }
      }`,
      { pk_columns: { id: 4 }, _set: { title: 'renamed', pages: null, published: true } },
    );
    expect(answer.body).toEqual({ data: { row: { id: 4, title: 'renamed', pages: null, published: true } } });
    expect(await server.database.query('SELECT title, pages, published FROM browse_books WHERE id = 4')).toEqual([
      { title: 'renamed', pages: null, published: true },
    ]);
  });

  it('answers GraphQL errors, never a 500, for documents that cannot run or fail', async () => {
    const cases: { query: string; variables?: Record<string, unknown>; code: string }[] = [
      { query: '{ browse_books { id ', code: 'GRAPHQL_PARSE_FAILED' },
      { query: '{ browse_books { no_such_column } }', code: 'GRAPHQL_VALIDATION_FAILED' },
      // A bad value for a variable's type.
      { query: 'query ($limit: Int) { browse_books(limit: $limit) { id } }', variables: { limit: 'ten' }, code: 'BAD_USER_INPUT' },
    ];
    for (const { query, variables, code } of cases) {
      const answer = await run(query, variables);
      expect(answer.status).toBeLessThan(500);
      expect({ query, code: answer.body.errors?.[0]?.extensions?.code }).toEqual({ query, code });
      expect(answer.body.errors![0].message).toEqual(expect.any(String));
    }
    // A constraint the row breaks: the field's error, with the row left as it was.
    const notNull = await run('mutation { update_browse_books_by_pk(pk_columns: {id: 5}, _set: {title: null}) { id } }');
    expect(notNull.status).toBeLessThan(500);
    expect(notNull.body.errors?.[0]?.message).toEqual(expect.any(String));
    expect(await server.database.query('SELECT title FROM browse_books WHERE id = 5')).toEqual([{ title: 'book 5' }]);
    // A body without a query is the REST route's 400.
    for (const body of [{}, { query: '' }, { query: { text: '{ __typename }' } }, { variables: {} }]) {
      const answer = await admin.request('POST', '/api/data/graphql', body);
      expect({ body, status: answer.status, code: answer.body.error_code }).toEqual({ body, status: 400, code: 'VALIDATION_ERROR' });
    }
  });
});
