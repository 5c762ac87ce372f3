import { randomUUID } from 'node:crypto';
import { poolOf } from '../../src/db/sql';
import { postGraphQL, type GraphQLErrorBody } from '../support/graphql';
import { parsePrometheus, sampleValue } from '../support/prometheus';
import { ADMIN_SECRET, startTestServer, type TestServer } from '../support/server';
import { SPEC_PERMISSIONS, TEST_RELATIONSHIPS } from '../support/tables';
import { bearer, signToken } from '../support/tokens';
import { subscriptionClient } from '../support/ws';
import { metadataRequest } from '../support/metadata';

let server: TestServer;
const alice = randomUUID();
const bob = randomUUID();
const asAdmin = { 'x-gql-admin-secret': ADMIN_SECRET };
const asUser = (userId = alice) => bearer(signToken({ roles: ['user'], userId }));
/** The statements the generated API ran (they all read a schema-qualified table). */
const statements: string[] = [];

const metadata = (body: unknown) => metadataRequest(server.url, body);

async function data<T = Record<string, unknown>>(query: string, headers: Record<string, string>): Promise<T> {
  const response = await postGraphQL<T>(server.graphqlUrl, { query }, headers);
  expect(response.body.errors).toBeUndefined();
  return response.body.data as T;
}

const PERMISSIONS = [
  ...SPEC_PERMISSIONS,
  // Only the list of authors, not by primary key nor aggregated, though aggregations are allowed.
  {
    type: 'pg_create_select_permission',
    args: { table: 'authors', role: 'lister', permission: { columns: ['name'], filter: {}, allow_aggregations: true, query_root_fields: ['select'] } },
  },
  // Every table, all of it, to read and to write: the whole schema.
  ...['authors', 'articles', 'users'].flatMap((table) => [
    { type: 'pg_create_select_permission', args: { table, role: 'auditor', permission: { columns: '*', filter: {}, allow_aggregations: true } } },
    { type: 'pg_create_insert_permission', args: { table, role: 'auditor', permission: { columns: '*', check: {} } } },
    { type: 'pg_create_update_permission', args: { table, role: 'auditor', permission: { columns: '*', filter: {} } } },
    { type: 'pg_create_delete_permission', args: { table, role: 'auditor', permission: { filter: {} } } },
  ]),
  // Every table to read, all of it, but no write: its own view (no mutation).
  ...['authors', 'articles', 'users'].map((table) => ({
    type: 'pg_create_select_permission',
    args: { table, role: 'reader', permission: { columns: '*', filter: {}, allow_aggregations: true } },
  })),
];

beforeAll(async () => {
  server = await startTestServer();
  await server.database.query(`
    CREATE TABLE authors (id serial PRIMARY KEY, name text NOT NULL, rating int);
    CREATE TABLE articles (
      id serial PRIMARY KEY, title text NOT NULL, body text, author_id int NOT NULL REFERENCES authors (id), user_id uuid, secret text);
    INSERT INTO authors (name, rating) VALUES ('Ada', 5), ('Brian', 3);
  `);
  await server.database.query(
    `INSERT INTO users (id, email, name, source_account_id) VALUES ($1, 'alice@example.com', 'Alice', 'primary'), ($2, 'bob@example.com', 'Bob', 'other')`,
    [alice, bob],
  );
  await server.database.query(
    `INSERT INTO articles (title, body, author_id, user_id, secret) VALUES ('A1', 'a', 1, $1, 's1'), ('A2', 'b', 2, $1, 's2'), ('B1', 'c', 1, $2, 's3')`,
    [alice, bob],
  );
  const tracked = await metadata({
    type: 'bulk',
    args: [
      { type: 'pg_track_table', args: { table: 'authors' } },
      { type: 'pg_track_table', args: { table: 'articles' } },
      { type: 'pg_track_table', args: { table: 'users' } },
      ...TEST_RELATIONSHIPS,
      ...PERMISSIONS,
    ],
  });
  expect(tracked.status).toBe(200);
  const pool = poolOf(server.server.dataSource);
  const query = pool.query.bind(pool) as (...args: unknown[]) => unknown;
  const recorded = (...args: unknown[]) => {
    if (typeof args[0] === 'string' && args[0].includes('"public".')) statements.push(args[0]);
    return query(...args);
  };
  jest.spyOn(pool, 'query').mockImplementation(recorded as never);
});
afterAll(async () => {
  jest.restoreAllMocks();
  await server.close();
});

const INTROSPECTION = `{
  __schema { queryType { fields { name } } types { name } }
  articles: __type(name: "articles") { fields { name } }
  authors: __type(name: "authors") { fields { name } }
  users: __type(name: "users") { fields { name } }
  articlesBoolExp: __type(name: "articles_bool_exp") { inputFields { name } }
  articlesOrderBy: __type(name: "articles_order_by") { inputFields { name } }
  authorsOrderBy: __type(name: "authors_order_by") { inputFields { name } }
  articlesColumns: __type(name: "articles_select_column") { enumValues { name } }
}`;

interface Introspected {
  __schema: { queryType: { fields: { name: string }[] }; types: { name: string }[] };
  articles: { fields: { name: string }[] } | null;
  authors: { fields: { name: string }[] } | null;
  users: { fields: { name: string }[] } | null;
  articlesBoolExp: { inputFields: { name: string }[] } | null;
  articlesOrderBy: { inputFields: { name: string }[] } | null;
  authorsOrderBy: { inputFields: { name: string }[] } | null;
  articlesColumns: { enumValues: { name: string }[] } | null;
}

const GENERATED = /^(articles|authors|users)/;
const names = (list: { name: string }[] | undefined) => (list ?? []).map((item) => item.name).sort();
/** What introspection as `headers` shows of the generated API. */
async function generatedSchema(headers: Record<string, string>) {
  const answer = await data<Introspected>(INTROSPECTION, headers);
  return {
    roots: names(answer.__schema.queryType.fields).filter((name) => GENERATED.test(name)),
    types: names(answer.__schema.types).filter((name) => GENERATED.test(name)),
    allRoots: names(answer.__schema.queryType.fields),
    articles: answer.articles && names(answer.articles.fields),
    authors: answer.authors && names(answer.authors.fields),
    users: answer.users && names(answer.users.fields),
    articlesBoolExp: answer.articlesBoolExp && names(answer.articlesBoolExp.inputFields),
    articlesOrderBy: answer.articlesOrderBy && names(answer.articlesOrderBy.inputFields),
    authorsOrderBy: answer.authorsOrderBy && names(answer.authorsOrderBy.inputFields),
    articlesColumns: answer.articlesColumns && names(answer.articlesColumns.enumValues),
  };
}

describe('introspection as a role', () => {
  it('shows role user only its tables, columns, relationships, root fields and inputs', async () => {
    const seen = await generatedSchema(asUser());
    expect(seen.roots).toEqual(['articles', 'articles_by_pk', 'authors', 'authors_aggregate', 'authors_by_pk']);
    expect(seen.articles).toEqual(['author', 'author_id', 'id', 'title', 'user_id']);
    // No aggregate over articles (no allow_aggregations), so no articles_aggregate relationship field.
    expect(seen.authors).toEqual(['articles', 'id', 'name', 'rating']);
    expect(seen.users).toBeNull();
    expect(seen.articlesBoolExp).toEqual(['_and', '_not', '_or', 'author', 'author_id', 'id', 'title', 'user_id']);
    expect(seen.articlesOrderBy).toEqual(['author', 'author_id', 'id', 'title', 'user_id']);
    expect(seen.authorsOrderBy).toEqual(['id', 'name', 'rating']);
    expect(seen.articlesColumns).toEqual(['author_id', 'id', 'title', 'user_id']);
    expect(seen.types).toContain('authors_aggregate');
    expect(seen.types).not.toContain('articles_aggregate');
    expect(seen.types.filter((name) => name.startsWith('users'))).toEqual([]);
    // Plinth's own fields stay, under their own rules.
    expect(seen.allRoots).toContain('session');
  });

  it("shows roles me and admin (a token's) their users columns, and a role only the root fields its query_root_fields names", async () => {
    const me = await generatedSchema(bearer(signToken({ roles: ['me'], userId: bob })));
    expect(me.roots).toEqual(['users', 'users_by_pk']);
    expect(me.users).toEqual(['email', 'id', 'name']);
    expect([me.articles, me.authors]).toEqual([null, null]);
    const admin = await generatedSchema(bearer(signToken({ roles: ['admin'], userId: alice })));
    expect(admin.roots).toEqual(['users', 'users_by_pk']);
    expect(admin.users).toEqual(['email', 'id', 'source_account_id']);
    const lister = await generatedSchema(bearer(signToken({ roles: ['lister'] })));
    expect(lister.roots).toEqual(['authors']);
    expect(lister.authors).toEqual(['name']);
  });

  it('shows a role no permission names none of the generated API, and the rest of the schema', async () => {
    for (const headers of [{}, bearer(signToken({ roles: ['visitor'] })), { ...asAdmin, 'x-gql-role': 'visitor' }]) {
      const seen = await generatedSchema(headers);
      expect(seen.roots).toEqual([]);
      expect(seen.types).toEqual([]);
      expect(seen.allRoots).toContain('session');
    }
  });

  it('shows the admin secret everything, and X-Gql-Role beside it the role it names', async () => {
    const admin = await generatedSchema(asAdmin);
    expect(admin.roots).toEqual([
      'articles',
      'articles_aggregate',
      'articles_by_pk',
      'authors',
      'authors_aggregate',
      'authors_by_pk',
      'users',
      'users_aggregate',
      'users_by_pk',
    ]);
    expect(admin.articles).toEqual(['author', 'author_id', 'body', 'id', 'owner', 'secret', 'title', 'user_id']);
    expect(admin.authors).toContain('articles_aggregate');
    expect(await generatedSchema({ ...asAdmin, 'x-gql-role': 'admin' })).toEqual(admin);
    expect(await generatedSchema({ ...asAdmin, 'x-gql-role': 'user', 'x-gql-user-id': alice })).toEqual(await generatedSchema(asUser()));
    // A role every table opens entirely to sees the whole schema.
    expect(await generatedSchema(bearer(signToken({ roles: ['auditor'] })))).toEqual(admin);
    const reader = await generatedSchema(bearer(signToken({ roles: ['reader'] })));
    expect(reader.roots).toEqual(admin.roots);
    expect(reader.types).toEqual(
      // A reader streams too: the stream's inputs stay.
      admin.types.filter(
        (name) =>
          name.includes('_stream_cursor_') ||
          !/_(mutation_response|insert_input|on_conflict|constraint|update_column|pk_columns_input|updates|[a-z_]+_input)$/.test(name),
      ),
    );
  });
});

describe('a document naming what the role does not see', () => {
  const hidden: [string, string][] = [
    ['{ articles { id secret } }', 'Cannot query field "secret" on type "articles".'],
    ['{ users { id } }', 'Cannot query field "users" on type "Query".'],
    ['{ articles_aggregate { aggregate { count } } }', 'Cannot query field "articles_aggregate" on type "Query".'],
    ['{ authors { articles_aggregate { aggregate { count } } } }', 'Cannot query field "articles_aggregate" on type "authors".'],
    ['{ articles { owner { id } } }', 'Cannot query field "owner" on type "articles".'],
    ['{ articles(where: {secret: {_eq: "s3"}}) { id } }', 'Field "secret" is not defined by type "articles_bool_exp".'],
    ['{ articles(order_by: {body: asc}) { id } }', 'Field "body" is not defined by type "articles_order_by".'],
    ['{ articles(distinct_on: [secret]) { id } }', 'Value "secret" does not exist in "articles_select_column" enum.'],
    ['{ authors(order_by: {articles_aggregate: {count: asc}}) { id } }', 'Field "articles_aggregate" is not defined by type "authors_order_by".'],
  ];

  it.each(hidden)('%s is a validation error before any statement runs', async (query, message) => {
    const before = statements.length;
    for (let sight = 0; sight < 2; sight++) {
      const response = await postGraphQL(server.graphqlUrl, { query }, asUser());
      expect(response.status).toBe(200);
      expect(response.body.data).toBeUndefined();
      expect(response.body.errors).toEqual([
        expect.objectContaining({ message: expect.stringContaining(message), extensions: { code: 'GRAPHQL_VALIDATION_FAILED' } }),
      ]);
    }
    expect(statements.length).toBe(before);
  });

  it('answers every such field, with the status of any validation error (400 for application/graphql-response+json)', async () => {
    const response = await postGraphQL(
      server.graphqlUrl,
      { query: '{ articles { id secret body } users { id } }' },
      { ...asUser(), accept: 'application/graphql-response+json' },
    );
    expect(response.status).toBe(400);
    expect(response.body.errors?.map((error: GraphQLErrorBody) => [error.message, error.extensions?.code])).toEqual([
      ['Cannot query field "secret" on type "articles".', 'GRAPHQL_VALIDATION_FAILED'],
      ['Cannot query field "body" on type "articles".', 'GRAPHQL_VALIDATION_FAILED'],
      [expect.stringContaining('Cannot query field "users" on type "Query".'), 'GRAPHQL_VALIDATION_FAILED'],
    ]);
  });

  it('refuses a hidden column in a variable as bad input, before any statement runs', async () => {
    const before = statements.length;
    const response = await postGraphQL(
      server.graphqlUrl,
      { query: 'query ($where: articles_bool_exp) { articles(where: $where) { id } }', variables: { where: { secret: { _eq: 's3' } } } },
      asUser(),
    );
    expect(response.body.errors?.[0]).toMatchObject({
      message: expect.stringContaining('Field "secret" is not defined by type "articles_bool_exp"'),
      extensions: { code: 'BAD_USER_INPUT' },
    });
    expect(statements.length).toBe(before);
  });

  it('is not answered by the accepted-query lane because another role ran it, and the lane keeps each role its own', async () => {
    const laneAnswers = async () =>
      sampleValue(parsePrometheus(await (await fetch(`${server.url}/metrics`)).text()), 'plinth_graphql_accepted_query_lane_total') ?? 0;
    const adminOnly = '{ articles(order_by: {id: asc}) { id secret } }';
    for (let sight = 0; sight < 3; sight++) expect((await data<{ articles: unknown[] }>(adminOnly, asAdmin)).articles).toHaveLength(3);
    const refused = await postGraphQL(server.graphqlUrl, { query: adminOnly }, asUser());
    expect(refused.body.errors?.[0].extensions?.code).toBe('GRAPHQL_VALIDATION_FAILED');

    // One text, two views: each keeps its compiled operation, so the lane answers both alternately.
    const shared = '{ articles(order_by: {id: asc}) { id title } }';
    const before = await laneAnswers();
    for (let round = 0; round < 3; round++) {
      expect(await data(shared, asAdmin)).toEqual({ articles: [1, 2, 3].map((id) => ({ id, title: ['A1', 'A2', 'B1'][id - 1] })) });
      expect(await data(shared, asUser(bob))).toEqual({ articles: [{ id: 3, title: 'B1' }] });
    }
    expect((await laneAnswers()) - before).toBeGreaterThanOrEqual(4);
  });
});

describe('the spec row filters on the role schemas', () => {
  it('serve user, me and admin their rows over HTTP', async () => {
    expect(await data('{ articles(order_by: {id: asc}) { id title author { name } } }', asUser())).toEqual({
      articles: [
        { id: 1, title: 'A1', author: { name: 'Ada' } },
        { id: 2, title: 'A2', author: { name: 'Brian' } },
      ],
    });
    expect(await data('{ users { id email } }', bearer(signToken({ roles: ['me'], userId: bob })))).toEqual({ users: [{ id: bob, email: 'bob@example.com' }] });
    const admin = bearer(signToken({ roles: ['admin'], userId: alice, claims: { 'x-gql-source-account-id': 'other' } }));
    expect(await data('{ users { email source_account_id } }', admin)).toEqual({ users: [{ email: 'bob@example.com', source_account_id: 'other' }] });
  });

  it('serve them over graphql-ws too, where a hidden field is the same validation error and introspection the same view', async () => {
    /** The results of one operation over graphql-ws; rejected with the errors of a refused one. */
    const run = (token: string, query: string) =>
      new Promise<unknown[]>((resolve, reject) => {
        const client = subscriptionClient(server.wsUrl, { headers: { Authorization: `Bearer ${token}` } });
        const results: unknown[] = [];
        client.subscribe(
          { query },
          {
            next: (result) => results.push(result),
            error: (error) => void Promise.resolve(client.dispose()).then(() => reject(error)),
            complete: () => void Promise.resolve(client.dispose()).then(() => resolve(results)),
          },
        );
      });
    const user = signToken({ roles: ['user'], userId: alice });
    expect(await run(user, '{ articles(order_by: {id: asc}) { id } }')).toEqual([{ data: { articles: [{ id: 1 }, { id: 2 }] } }]);
    expect(await run(signToken({ roles: ['me'], userId: alice }), '{ users { email } }')).toEqual([{ data: { users: [{ email: 'alice@example.com' }] } }]);
    const admin = signToken({ roles: ['admin'], userId: alice, claims: { 'x-gql-source-account-id': 'primary' } });
    expect(await run(admin, '{ users { email } }')).toEqual([{ data: { users: [{ email: 'alice@example.com' }] } }]);
    expect(await run(user, '{ __type(name: "articles") { fields { name } } }')).toEqual([
      { data: { __type: { fields: ['id', 'title', 'author_id', 'user_id', 'author'].map((name) => ({ name })) } } },
    ]);
    const before = statements.length;
    await expect(run(user, '{ articles { secret } }')).rejects.toEqual([
      expect.objectContaining({ message: 'Cannot query field "secret" on type "articles".', extensions: { code: 'GRAPHQL_VALIDATION_FAILED' } }),
    ]);
    expect(statements.length).toBe(before);
  });
});

describe('a metadata change', () => {
  it('changes the role schemas: a permission dropped hides its table, a column added to a permission shows it', async () => {
    const token = signToken({ roles: ['user'], userId: alice });
    expect(await data('{ authors(order_by: {id: asc}) { name } }', bearer(token))).toEqual({ authors: [{ name: 'Ada' }, { name: 'Brian' }] });
    expect((await metadata({ type: 'pg_drop_select_permission', args: { table: 'authors', role: 'user' } })).status).toBe(200);
    const seen = await generatedSchema(bearer(token));
    expect(seen.roots).toEqual(['articles', 'articles_by_pk']);
    expect(seen.articles).toEqual(['author_id', 'id', 'title', 'user_id']);
    const gone = await postGraphQL(server.graphqlUrl, { query: '{ authors { name } }' }, bearer(token));
    expect(gone.body.errors?.[0]).toMatchObject({
      message: 'Cannot query field "authors" on type "Query".',
      extensions: { code: 'GRAPHQL_VALIDATION_FAILED' },
    });

    const widened = await metadata({
      type: 'bulk',
      args: [
        { type: 'pg_drop_select_permission', args: { table: 'articles', role: 'user' } },
        {
          ...SPEC_PERMISSIONS[0],
          args: {
            ...SPEC_PERMISSIONS[0].args,
            permission: { ...SPEC_PERMISSIONS[0].args.permission, columns: ['id', 'title', 'body', 'author_id', 'user_id'] },
          },
        },
        SPEC_PERMISSIONS[1],
      ],
    });
    expect(widened.status).toBe(200);
    expect((await generatedSchema(bearer(token))).articles).toEqual(['author', 'author_id', 'body', 'id', 'title', 'user_id']);
    expect(await data('{ articles(order_by: {id: asc}) { body } }', bearer(token))).toEqual({ articles: [{ body: 'a' }, { body: 'b' }] });
  });
});
