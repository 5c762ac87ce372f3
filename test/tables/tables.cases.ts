import { randomUUID } from 'node:crypto';
import { buildSchema, execute, parse, type GraphQLResolveInfo } from 'graphql';
import { readCatalog, tableKey } from '../../src/modules/tables/tables.catalog';
import { StatementCompiler } from '../../src/modules/tables/tables.compiler';
import { boundValues, type CompiledStatement } from '../../src/modules/tables/tables.sql';
import { resolveTables, type RootKind } from '../../src/modules/tables/tables.model';
import { extendWithTables } from '../../src/modules/tables/tables.schema';
import type { TrackedTableEntry } from '../../src/modules/tables/tables.metadata';
import { metadataFromFiles, metadataToFiles } from '../../src/platform/metadata-files';
import { postGraphQL } from '../support/graphql';
import { generator } from '../support/random';
import { ADMIN_SECRET, startTestServer, type TestServer } from '../support/server';
import { SPEC_PERMISSIONS, TEST_RELATIONSHIPS } from '../support/tables';
import { signToken } from '../support/tokens';
import { metadataRequest } from '../support/metadata';

let server: TestServer;
const alice = randomUUID();
const bob = randomUUID();

const metadata = (body: unknown) => metadataRequest(server.url, body);

const asAdmin = { 'x-gql-admin-secret': ADMIN_SECRET };
const bearer = (token: string) => ({ authorization: `Bearer ${token}` });

async function query<T = Record<string, unknown>>(text: string, headers: Record<string, string> = asAdmin, variables?: Record<string, unknown>) {
  const response = await postGraphQL<T>(server.graphqlUrl, { query: text, variables }, headers);
  return response;
}

async function data<T = Record<string, unknown>>(text: string, headers: Record<string, string> = asAdmin, variables?: Record<string, unknown>): Promise<T> {
  const response = await query<T>(text, headers, variables);
  expect(response.body.errors).toBeUndefined();
  return response.body.data as T;
}

const TRACKING = [
  { type: 'pg_track_table', args: { table: { schema: 'public', name: 'authors' } } },
  { type: 'pg_track_table', args: { table: 'articles', configuration: { column_config: { created_at: { custom_name: 'createdAt' } } } } },
  { type: 'pg_track_table', args: { table: { name: 'users' } } },
  ...TEST_RELATIONSHIPS,
  ...SPEC_PERMISSIONS,
];

beforeAll(async () => {
  server = await startTestServer();
  await server.database.query(`
    CREATE TABLE authors (id serial PRIMARY KEY, name text NOT NULL, rating int, bio jsonb, links json, tags text[]);
    CREATE TABLE articles (
      id serial PRIMARY KEY, title text NOT NULL, body text, author_id int NOT NULL REFERENCES authors (id),
      user_id uuid, published boolean NOT NULL DEFAULT false, created_at timestamptz NOT NULL DEFAULT '2026-01-01T00:00:00Z', secret text);
    CREATE TABLE jobs (id serial PRIMARY KEY);
    INSERT INTO authors (name, rating, bio) VALUES ('Ada', 5, '{"lang": "en", "tags": ["math"]}'), ('Brian', 3, NULL), ('Cleo', NULL, '{"lang": "fr"}');
  `);
  await server.database.query(
    `INSERT INTO articles (title, body, author_id, user_id, published, created_at, secret) VALUES
      ('Notes on engines', 'a', 1, $1, true, '2026-01-02T00:00:00Z', 's1'),
      ('Of numbers', 'b', 1, $1, false, '2026-01-03T00:00:00Z', 's2'),
      ('C, briefly', NULL, 2, $2, true, '2026-01-04T00:00:00Z', 's3'),
      ('100% sure', 'd', 3, $2, true, '2026-01-05T00:00:00Z', 's4'),
      ('Unowned', 'e', 3, NULL, false, '2026-01-06T00:00:00Z', 's5')`,
    [alice, bob],
  );
  await server.database.query(
    `INSERT INTO users (id, email, name, source_account_id) VALUES ($1, 'alice@example.com', 'Alice', 'primary'), ($2, 'bob@example.com', 'Bob', 'other')`,
    [alice, bob],
  );
  const tracked = await metadata({ type: 'bulk', args: TRACKING });
  expect(tracked).toEqual({ status: 200, body: TRACKING.map(() => ({ message: 'success' })) });
});
afterAll(async () => {
  await server.close();
});

describe('tracking tables through POST /v1/metadata', () => {
  it('exports the tracked tables in Hasura shape', async () => {
    const exported = (await metadata({ type: 'export_metadata', args: {} })).body as { sources: { tables: Record<string, unknown>[] }[] };
    const articles = exported.sources[0].tables.find((entry) => (entry.table as { name: string }).name === 'articles')!;
    expect(articles).toEqual({
      table: { schema: 'public', name: 'articles' },
      configuration: { column_config: { created_at: { custom_name: 'createdAt' } } },
      object_relationships: [
        { name: 'author', using: { foreign_key_constraint_on: 'author_id' } },
        { name: 'owner', using: { manual_configuration: { remote_table: { schema: 'public', name: 'users' }, column_mapping: { user_id: 'id' } } } },
      ],
      select_permissions: [
        { role: 'user', permission: { columns: ['id', 'title', 'author_id', 'user_id'], filter: { user_id: { _eq: 'X-Gql-User-Id' } }, limit: 10 } },
      ],
    });
  });

  it('refuses bad requests with Hasura-shaped errors, never a 500', async () => {
    expect(await metadata({ type: 'pg_track_table', args: { table: 'nowhere' } })).toEqual({
      status: 400,
      body: { code: 'not-exists', error: 'no such table/view exists in source: "nowhere"', path: '$.args.table' },
    });
    expect(await metadata({ type: 'pg_track_table', args: { table: 'authors' } })).toEqual({
      status: 400,
      body: { code: 'already-tracked', error: 'view/table already tracked: "authors"', path: '$.args' },
    });
    const clash = await metadata({ type: 'pg_track_table', args: { table: 'jobs' } });
    expect(clash.status).toBe(400);
    expect(clash.body.error).toContain('clashes with the field Query.jobs');
    expect((await metadata({ type: 'pg_track_table', args: { table: 'jobs', configuration: { custom_name: 'job_rows' } } })).status).toBe(200);
    expect((await metadata({ type: 'pg_untrack_table', args: { table: 'jobs' } })).status).toBe(200);
    // The types the actions declare are the schema's too.
    expect((await metadata({ type: 'set_custom_types', args: { objects: [{ name: 'job_rows', fields: [{ name: 'id', type: 'Int' }] }] } })).status).toBe(200);
    const actionClash = await metadata({ type: 'pg_track_table', args: { table: 'jobs', configuration: { custom_name: 'job_rows' } } });
    expect(actionClash).toMatchObject({
      status: 400,
      body: { code: 'invalid-configuration', error: expect.stringContaining('clashes with the type job_rows of the schema') },
    });
    expect((await metadata({ type: 'set_custom_types', args: {} })).status).toBe(200);
    const badKey = await metadata({
      type: 'pg_create_object_relationship',
      args: { table: 'articles', name: 'writer', using: { foreign_key_constraint_on: 'title' } },
    });
    expect(badKey).toEqual({
      status: 400,
      body: { code: 'validation-failed', error: 'writer of articles: no foreign key constraint on articles (title)', path: '$.args' },
    });
    const badColumn = await metadata({
      type: 'pg_create_select_permission',
      args: { table: 'authors', role: 'me', permission: { columns: ['nope'], filter: {} } },
    });
    expect(badColumn).toEqual({ status: 400, body: { code: 'validation-failed', error: 'me of authors: no column "nope" in authors', path: '$.args' } });
    const badFilter = await metadata({
      type: 'pg_create_select_permission',
      args: { table: 'authors', role: 'me', permission: { columns: '*', filter: { rating: { _like: 1 } } } },
    });
    expect(badFilter.status).toBe(400);
    expect(badFilter.body).toEqual({ code: 'validation-failed', error: expect.stringContaining('_like'), path: '$.args.permission.filter' });
    const dependent = await metadata({ type: 'pg_untrack_table', args: { table: 'users' } });
    expect(dependent.status).toBe(400);
    expect(dependent.body).toMatchObject({ code: 'dependency-error' });
    expect(await metadata({ type: 'pg_drop_relationship', args: { table: 'articles', relationship: 'nope' } })).toMatchObject({
      status: 400,
      body: { code: 'not-exists' },
    });
    expect(await metadata({ type: 'pg_track_table', args: { table: 42 } })).toMatchObject({ status: 400, body: { code: 'parse-failed' } });
    expect(await metadata({ type: 'pg_track_table', args: { source: 'other', table: 'jobs' } })).toMatchObject({
      status: 400,
      body: { code: 'not-exists', path: '$.args.source' },
    });
  });
});

describe('names', () => {
  it('serves views, tables of other schemas (<schema>_<table>), custom names and custom root fields', async () => {
    await server.database.query(`
      CREATE SCHEMA shop;
      CREATE TABLE shop.items (sku text PRIMARY KEY, price numeric NOT NULL);
      INSERT INTO shop.items VALUES ('a-1', 9.5), ('b-2', 20);
      CREATE VIEW published_titles AS SELECT id, title FROM articles WHERE published;
    `);
    const tracked = await metadata({
      type: 'bulk',
      args: [
        { type: 'pg_track_table', args: { table: { schema: 'shop', name: 'items' } } },
        {
          type: 'pg_track_table',
          args: { table: 'published_titles', configuration: { custom_name: 'headlines', custom_root_fields: { select: 'allHeadlines' } } },
        },
      ],
    });
    expect(tracked.status).toBe(200);
    expect(
      await data(`{
        shop_items(order_by: {price: desc}) { sku price }
        shop_items_by_pk(sku: "a-1") { price }
        shop_items_aggregate { aggregate { sum { price } } }
        allHeadlines(order_by: {id: asc}, limit: 2) { id title }
        headlines_aggregate { aggregate { count } }
      }`),
    ).toEqual({
      shop_items: [
        { sku: 'b-2', price: 20 },
        { sku: 'a-1', price: 9.5 },
      ],
      shop_items_by_pk: { price: 9.5 },
      shop_items_aggregate: { aggregate: { sum: { price: 29.5 } } },
      allHeadlines: [
        { id: 1, title: 'Notes on engines' },
        { id: 3, title: 'C, briefly' },
      ],
      headlines_aggregate: { aggregate: { count: 3 } },
    });
    // A view has no primary key, so no _by_pk.
    expect((await query('{ headlines_by_pk(id: 1) { id } }')).body.errors?.[0].extensions?.code).toBe('GRAPHQL_VALIDATION_FAILED');
    await metadata({
      type: 'bulk',
      args: [
        { type: 'pg_untrack_table', args: { table: { schema: 'shop', name: 'items' } } },
        { type: 'pg_untrack_table', args: { table: 'published_titles' } },
      ],
    });
  });
});

describe("the metadata files (Hasura's CLI layout)", () => {
  it('carry the tracked tables in databases/default/tables/public_<table>.yaml, and apply back unchanged', async () => {
    const exported = (await metadata({ type: 'export_metadata', args: {} })).body;
    const files = metadataToFiles(exported as never, []);
    expect(files['databases/default/tables/tables.yaml']).toContain('!include public_articles.yaml');
    expect(files['databases/default/tables/public_articles.yaml']).toContain('foreign_key_constraint_on: author_id');
    const read = metadataFromFiles((file) => files[file], []);
    expect(await metadata({ type: 'replace_metadata', args: read })).toEqual({ status: 200, body: { message: 'success' } });
    expect((await metadata({ type: 'export_metadata', args: {} })).body).toEqual(exported);
    expect(await data('{ articles_aggregate { aggregate { count } } }')).toEqual({ articles_aggregate: { aggregate: { count: 5 } } });
  });
});

describe('generated root fields (admin)', () => {
  it('answers an aggregate that selects nothing aggregated (only __typename), over no rows too', async () => {
    const result = await data<{ authors: { articles_aggregate: unknown }[]; authors_aggregate: unknown }>(`{
      authors { articles_aggregate(limit: 0) { __typename aggregate { __typename } } }
      authors_aggregate(where: {id: {_eq: -1}}) { __typename }
    }`);
    expect(result.authors.length).toBeGreaterThan(0);
    for (const author of result.authors)
      expect(author.articles_aggregate).toEqual({ __typename: 'articles_aggregate', aggregate: { __typename: 'articles_aggregate_fields' } });
    expect(result.authors_aggregate).toEqual({ __typename: 'authors_aggregate' });
  });

  it('filters, orders, pages and follows relationships, as hand-written SQL does', async () => {
    const result = await data<{ articles: { title: string; author: { name: string } }[] }>(`{
      articles(where: {_and: [{published: {_eq: true}}, {author: {rating: {_gte: 3}}}]}, order_by: [{createdAt: desc}], limit: 2, offset: 0) {
        title
        author { name }
      }
    }`);
    const expected = await server.database.query<{ title: string; name: string }>(
      `SELECT a.title, w.name FROM articles a JOIN authors w ON w.id = a.author_id WHERE a.published AND w.rating >= 3 ORDER BY a.created_at DESC LIMIT 2`,
    );
    expect(result.articles).toEqual(expected.map((row) => ({ title: row.title, author: { name: row.name } })));
  });

  it('answers aliases, fragments, array relationships with arguments, by_pk and aggregates', async () => {
    const result = await data(`
      fragment names on authors { name }
      {
        first: authors(order_by: {id: asc}, limit: 1) {
          ...names
          recent: articles(order_by: {id: desc}, limit: 1) { id title }
          articles_aggregate { aggregate { count } }
        }
        nobody: authors_by_pk(id: 999) { id }
        brian: authors_by_pk(id: 2) { name rating }
        authors_aggregate(where: {rating: {_is_null: false}}) {
          aggregate { count sum { rating } max { name } avg { rating } }
          nodes { id }
        }
        ordered: authors(order_by: [{rating: desc_nulls_last}]) { name }
        merged: authors_by_pk(id: 1) { name articles(limit: 1, order_by: {id: asc}) { id } articles(limit: 1, order_by: {id: asc}) { title } ... on authors { name rating } }
      }`);
    expect(result).toEqual({
      first: [{ name: 'Ada', recent: [{ id: 2, title: 'Of numbers' }], articles_aggregate: { aggregate: { count: 2 } } }],
      nobody: null,
      brian: { name: 'Brian', rating: 3 },
      authors_aggregate: { aggregate: { count: 2, sum: { rating: 8 }, max: { name: 'Brian' }, avg: { rating: 4 } }, nodes: [{ id: 1 }, { id: 2 }] },
      ordered: [{ name: 'Ada' }, { name: 'Brian' }, { name: 'Cleo' }],
      merged: { name: 'Ada', articles: [{ id: 1, title: 'Notes on engines' }], rating: 5 },
    });
  });

  it('applies the text, list and jsonb operators, distinct_on and orders through an object relationship', async () => {
    const result = await data(`{
      like: articles(where: {title: {_ilike: "%NUMBERS%"}}) { id }
      notIn: articles(where: {id: {_nin: [1, 2, 3]}}, order_by: {id: asc}) { id }
      json: authors(where: {bio: {_contains: {lang: "en"}}}) { name bio }
      hasKey: authors(where: {bio: {_has_key: "lang"}}, order_by: {id: asc}) { id }
      distinct: articles(distinct_on: [author_id], order_by: [{author_id: asc}, {id: desc}]) { id author_id }
      distinctAlone: articles(distinct_on: author_id) { author_id }
      byAuthor: articles(order_by: [{author: {name: desc}}, {id: asc}], limit: 3) { id }
      byCount: authors(order_by: [{articles_aggregate: {count: desc}}, {articles_aggregate: {max: {id: asc}}}]) { name }
      percent: articles(where: {title: {_like: "100\\\\%%"}}) { id }
    }`);
    expect(result).toEqual({
      like: [{ id: 2 }],
      notIn: [{ id: 4 }, { id: 5 }],
      json: [{ name: 'Ada', bio: { lang: 'en', tags: ['math'] } }],
      hasKey: [{ id: 1 }, { id: 3 }],
      distinct: [
        { id: 2, author_id: 1 },
        { id: 3, author_id: 2 },
        { id: 5, author_id: 3 },
      ],
      distinctAlone: [{ author_id: 1 }, { author_id: 2 }, { author_id: 3 }],
      byAuthor: [{ id: 4 }, { id: 5 }, { id: 3 }],
      byCount: [{ name: 'Ada' }, { name: 'Cleo' }, { name: 'Brian' }],
      percent: [{ id: 4 }],
    });
  });

  it('refuses an unknown column or operator as a validation error, and a bad value as bad input, never a 500', async () => {
    const unknownColumn = await query('{ articles(where: {nope: {_eq: 1}}) { id } }');
    expect(unknownColumn.body.errors?.[0].extensions?.code).toBe('GRAPHQL_VALIDATION_FAILED');
    const badOperator = await query('{ articles(where: {id: {_like: "1"}}) { id } }');
    expect(badOperator.body.errors?.[0].extensions?.code).toBe('GRAPHQL_VALIDATION_FAILED');
    const untracked = await query('{ jobs_rows { id } }');
    expect(untracked.body.errors?.[0].extensions?.code).toBe('GRAPHQL_VALIDATION_FAILED');
    const badUuid = await query('{ articles(where: {user_id: {_eq: "not-a-uuid"}}) { id } }');
    expect(badUuid.status).toBe(200);
    expect(badUuid.body.errors?.[0]).toMatchObject({
      message: expect.stringContaining('invalid input syntax for type uuid'),
      extensions: { code: 'BAD_USER_INPUT' },
    });
    const badRegex = await query('{ articles(where: {title: {_regex: "("}}) { id } }');
    expect(badRegex.body.errors?.[0].extensions?.code).toBe('BAD_USER_INPUT');
    const jsonOrder = await query('{ authors(order_by: {links: asc}) { id links tags } }');
    expect(jsonOrder.body.errors?.[0]).toMatchObject({
      message: expect.stringContaining('could not identify an ordering operator for type json'),
      extensions: { code: 'BAD_USER_INPUT' },
    });
    const jsonEquals = await query('{ authors(where: {links: {_eq: {}}}) { id } }');
    expect(jsonEquals.body.errors?.[0].extensions?.code).toBe('GRAPHQL_VALIDATION_FAILED');
    const distinct = await query('{ articles(distinct_on: [author_id], order_by: {id: asc}) { id } }');
    expect(distinct.body.errors?.[0]).toMatchObject({
      message: '"distinct_on" columns must match initial "order_by" columns',
      extensions: { code: 'BAD_USER_INPUT' },
    });
  });

  it('keeps SQL injection in values and in session variables a value', async () => {
    const attack = "x'); DROP TABLE articles; --";
    expect(await data(`query ($t: String!) { articles(where: {title: {_eq: $t}}) { id } }`, asAdmin, { t: attack })).toEqual({ articles: [] });
    const token = signToken({ roles: ['user'], userId: alice, claims: { 'x-gql-user-id': `${alice}' OR '1'='1` } });
    const injected = await query('{ articles { id } }', bearer(token));
    expect(injected.body.errors?.[0].extensions?.code).toBe('BAD_USER_INPUT');
    expect((await server.database.query('SELECT count(*)::int AS n FROM articles'))[0]).toEqual({ n: 5 });
  });
});

describe('differential: generated queries against hand-written SQL', () => {
  /** One condition as GraphQL (a where object's text) and as SQL over `a` (articles) and `w` (its author). */
  type Condition = { graphql: string; sql: string; parameters: unknown[] };
  function condition(random: ReturnType<typeof generator>, depth: number): Condition {
    const id = random.pick([0, 1, 2, 3, 4, 5, 6]);
    const leaves: (() => Condition)[] = [
      () => ({ graphql: `{id: {_gt: ${id}}}`, sql: 'a.id > $', parameters: [id] }),
      () => ({ graphql: `{id: {_lte: ${id}}}`, sql: 'a.id <= $', parameters: [id] }),
      () => ({ graphql: `{id: {_in: [${id}, ${id + 2}]}}`, sql: 'a.id = ANY($)', parameters: [[id, id + 2]] }),
      () => ({ graphql: `{id: {_nin: [${id}]}}`, sql: 'a.id <> ALL($)', parameters: [[id]] }),
      () => ({ graphql: `{published: {_eq: ${id % 2 === 0}}}`, sql: 'a.published = $', parameters: [id % 2 === 0] }),
      () => ({ graphql: `{body: {_is_null: ${id % 2 === 0}}}`, sql: `(a.body IS NULL) = $`, parameters: [id % 2 === 0] }),
      () => {
        const pattern = random.pick(['%o%', 'N%', '%s', '%E%']);
        return { graphql: `{title: {_ilike: "${pattern}"}}`, sql: 'a.title ILIKE $', parameters: [pattern] };
      },
      () => ({
        graphql: `{author: {rating: {_gte: ${id % 6}}}}`,
        sql: 'EXISTS (SELECT 1 FROM authors w WHERE w.id = a.author_id AND w.rating >= $)',
        parameters: [id % 6],
      }),
      () => ({
        graphql: `{author: {name: {_neq: "Ada"}}}`,
        sql: `EXISTS (SELECT 1 FROM authors w WHERE w.id = a.author_id AND w.name <> $)`,
        parameters: ['Ada'],
      }),
    ];
    if (depth > 1 || random.chance(0.5)) return random.pick(leaves)();
    const parts = [condition(random, depth + 1), condition(random, depth + 1)];
    const kind = random.pick(['_and', '_or', '_not'] as const);
    if (kind === '_not') return { graphql: `{_not: ${parts[0].graphql}}`, sql: `NOT (${parts[0].sql})`, parameters: parts[0].parameters };
    return {
      graphql: `{${kind}: [${parts.map((part) => part.graphql).join(', ')}]}`,
      sql: `(${parts.map((part) => `(${part.sql})`).join(kind === '_and' ? ' AND ' : ' OR ')})`,
      parameters: parts.flatMap((part) => part.parameters),
    };
  }

  it('answers 200 random where/order_by/limit/offset queries with relationships as the SQL does', async () => {
    const orders = [
      { graphql: '{title: asc}', sql: 'a.title ASC' },
      { graphql: '{createdAt: desc}', sql: 'a.created_at DESC' },
      { graphql: '{body: asc_nulls_first}', sql: 'a.body ASC NULLS FIRST' },
      { graphql: '{body: desc_nulls_last}', sql: 'a.body DESC NULLS LAST' },
      { graphql: '{author: {name: desc}}', sql: '(SELECT w.name FROM authors w WHERE w.id = a.author_id) DESC NULLS FIRST' },
      { graphql: '{author_id: asc}', sql: 'a.author_id ASC' },
    ];
    for (let seed = 1; seed <= 200; seed++) {
      const random = generator(seed);
      const where = condition(random, 0);
      const order = random.pick(orders);
      const limit = random.chance(0.6) ? random.pick([1, 2, 3, 10]) : undefined;
      const offset = random.chance(0.4) ? random.pick([0, 1, 3]) : undefined;
      const args = [
        `where: ${where.graphql}`,
        `order_by: [${order.graphql}, {id: asc}]`,
        limit === undefined ? '' : `limit: ${limit}`,
        offset === undefined ? '' : `offset: ${offset}`,
      ].filter(Boolean);
      const result = await data<{ articles: { id: number; author: { name: string } }[] }>(`{ articles(${args.join(', ')}) { id author { name } } }`);
      let index = 0;
      const sqlWhere = where.sql.replace(/\$/g, () => `$${++index}`);
      const parameters = [...where.parameters];
      let text = `SELECT a.id, (SELECT w.name FROM authors w WHERE w.id = a.author_id) AS name FROM articles a WHERE ${sqlWhere} ORDER BY ${order.sql}, a.id ASC`;
      if (limit !== undefined) text += ` LIMIT ${limit}`;
      if (offset !== undefined) text += ` OFFSET ${offset}`;
      const expected = await server.database.query<{ id: number; name: string }>(text, parameters);
      expect({ seed, rows: result.articles }).toEqual({ seed, rows: expected.map((row) => ({ id: row.id, author: { name: row.name } })) });
    }
  });
});

describe('select permissions and the spec row filters', () => {
  it('role user sees its own rows (user_id = X-Gql-User-Id), only the permitted columns', async () => {
    const token = signToken({ roles: ['user'], userId: alice });
    expect(await data('{ articles(order_by: {id: asc}) { id title author { name } } }', bearer(token))).toEqual({
      articles: [
        { id: 1, title: 'Notes on engines', author: { name: 'Ada' } },
        { id: 2, title: 'Of numbers', author: { name: 'Ada' } },
      ],
    });
    // Rows of others stay hidden through relationships too.
    expect(await data('{ authors(where: {id: {_eq: 2}}) { name articles { id } } }', bearer(token))).toEqual({ authors: [{ name: 'Brian', articles: [] }] });
    const hidden = await query('{ articles { secret } }', bearer(token));
    expect(hidden.body.errors?.[0]).toMatchObject({
      message: 'Cannot query field "secret" on type "articles".',
      extensions: { code: 'GRAPHQL_VALIDATION_FAILED' },
    });
    const hiddenFilter = await query('{ articles(where: {secret: {_eq: "s3"}}) { id } }', bearer(token));
    expect(hiddenFilter.body.errors?.[0].extensions?.code).toBe('GRAPHQL_VALIDATION_FAILED');
    const noAggregate = await query('{ articles_aggregate { aggregate { count } } }', bearer(token));
    expect(noAggregate.body.errors?.[0].extensions?.code).toBe('GRAPHQL_VALIDATION_FAILED');
    const noTable = await query('{ users { id } }', bearer(token));
    expect(noTable.body.errors?.[0]).toMatchObject({ message: expect.stringContaining('Cannot query field "users" on type "Query".') });
  });

  it('serves one compiled statement to every session of a role, with each session its own values', async () => {
    const document = '{ articles(order_by: {id: asc}) { id } }';
    for (let round = 0; round < 2; round++) {
      expect(await data(document, bearer(signToken({ roles: ['user'], userId: alice })))).toEqual({ articles: [{ id: 1 }, { id: 2 }] });
      expect(await data(document, bearer(signToken({ roles: ['user'], userId: bob })))).toEqual({ articles: [{ id: 3 }, { id: 4 }] });
      expect(await data<{ articles: unknown[] }>(document)).toEqual({ articles: [1, 2, 3, 4, 5].map((id) => ({ id })) });
    }
    const withVariable = 'query ($n: Int) { articles(order_by: {id: asc}, limit: $n) { id } }';
    expect(await data(withVariable, asAdmin, { n: 1 })).toEqual({ articles: [{ id: 1 }] });
    expect(await data(withVariable, asAdmin, { n: 2 })).toEqual({ articles: [{ id: 1 }, { id: 2 }] });
  });

  it('compiles a query with variables once, binding the values its text does not depend on when it runs', async () => {
    const document = 'query ($title: String!, $n: Int, $dir: order_by!) { articles(where: {title: {_neq: $title}}, order_by: {id: $dir}, limit: $n) { id } }';
    const ids = (...list: number[]) => ({ articles: list.map((id) => ({ id })) });
    const compile = jest.spyOn(StatementCompiler.prototype, 'compile');
    try {
      expect(await data(document, asAdmin, { title: 'Of numbers', n: 2, dir: 'asc' })).toEqual(ids(1, 3));
      expect(await data(document, asAdmin, { title: 'Notes on engines', n: 3, dir: 'asc' })).toEqual(ids(2, 3, 4));
      expect(compile).toHaveBeenCalledTimes(1);
      // The ordering is in the text: another direction is a statement of its own, kept beside the first.
      expect(await data(document, asAdmin, { title: 'Unowned', n: 2, dir: 'desc' })).toEqual(ids(4, 3));
      expect(await data(document, asAdmin, { title: 'x', n: 1, dir: 'desc' })).toEqual(ids(5));
      expect(await data(document, asAdmin, { title: 'x', n: 1, dir: 'asc' })).toEqual(ids(1));
      expect(compile).toHaveBeenCalledTimes(2);
      // A null limit is no LIMIT at all: compiled again.
      expect(await data(document, asAdmin, { title: 'Unowned', n: null, dir: 'asc' })).toEqual(ids(1, 2, 3, 4));
      expect(compile).toHaveBeenCalledTimes(3);
      // Another role gets its own statement (its filter and limit inside), shared by its sessions.
      const user = (userId: string) => bearer(signToken({ roles: ['user'], userId }));
      expect(await data(document, user(alice), { title: 'x', n: 5, dir: 'desc' })).toEqual(ids(2, 1));
      expect(await data(document, user(bob), { title: 'x', n: 5, dir: 'desc' })).toEqual(ids(4, 3));
      expect(compile).toHaveBeenCalledTimes(4);
    } finally {
      compile.mockRestore();
    }
  });

  it('binds variables of every kind of operand, and reads those the text depends on', async () => {
    const document = `query ($ids: [Int!], $bio: jsonb, $key: String!, $missing: Boolean!, $full: Boolean!, $columns: [articles_select_column!], $offset: Int) {
      authors(where: {id: {_in: $ids}, bio: {_contains: $bio, _has_key: $key}, rating: {_is_null: $missing}}, order_by: {id: asc}, offset: $offset) {
        name
        rating @include(if: $full)
        articles_aggregate { aggregate { count(columns: $columns, distinct: true) } }
      }
    }`;
    const variables = { ids: [1, 2, 3], bio: { lang: 'en' }, key: 'tags', missing: false, full: true, columns: ['author_id'], offset: 0 };
    const compile = jest.spyOn(StatementCompiler.prototype, 'compile');
    try {
      expect(await data(document, asAdmin, variables)).toEqual({ authors: [{ name: 'Ada', rating: 5, articles_aggregate: { aggregate: { count: 1 } } }] });
      // _is_null and @include are read: other values, another statement.
      expect(await data(document, asAdmin, { ...variables, bio: { lang: 'fr' }, key: 'lang', missing: true, full: false })).toEqual({
        authors: [{ name: 'Cleo', articles_aggregate: { aggregate: { count: 1 } } }],
      });
      expect(compile).toHaveBeenCalledTimes(2);
      // The list, the jsonb value, the key and the offset are bound: the first statement serves them.
      expect(await data(document, asAdmin, { ...variables, ids: [1, 3], bio: {}, key: 'lang', offset: 1 })).toEqual({ authors: [] });
      expect(await data(document, asAdmin, { ...variables, ids: [1, 3], bio: {}, key: 'lang', offset: 0 })).toEqual({
        authors: [{ name: 'Ada', rating: 5, articles_aggregate: { aggregate: { count: 1 } } }],
      });
      // A variable inside a jsonb literal is read into it.
      const inLiteral = 'query ($lang: String) { authors(where: {bio: {_contains: {lang: $lang}}}) { name } }';
      expect(await data(inLiteral, asAdmin, { lang: 'fr' })).toEqual({ authors: [{ name: 'Cleo' }] });
      expect(await data(inLiteral, asAdmin, { lang: 'en' })).toEqual({ authors: [{ name: 'Ada' }] });
      const negative = await query(document, asAdmin, { ...variables, offset: -1 });
      expect(negative.body.errors?.[0]).toMatchObject({ extensions: { code: 'BAD_USER_INPUT' } });
      expect(negative.body.errors?.[0].message).toContain('OFFSET must not be negative');
      expect(compile).toHaveBeenCalledTimes(4);
    } finally {
      compile.mockRestore();
    }
  });

  it('role me sees its own user row (id = X-Gql-User-Id)', async () => {
    const token = signToken({ roles: ['me'], userId: bob });
    expect(await data('{ users { id email } }', bearer(token))).toEqual({ users: [{ id: bob, email: 'bob@example.com' }] });
    expect(await data(`{ users_by_pk(id: "${alice}") { id } }`, bearer(token))).toEqual({ users_by_pk: null });
  });

  it('role admin sees the rows of its source account (source_account_id = X-Gql-Source-Account-Id)', async () => {
    const token = signToken({ roles: ['admin'], userId: alice, claims: { 'x-gql-source-account-id': 'other' } });
    expect(await data('{ users { email source_account_id } }', bearer(token))).toEqual({ users: [{ email: 'bob@example.com', source_account_id: 'other' }] });
    // The admin secret (Hasura's admin) sees every row.
    expect(await data('{ users_aggregate { aggregate { count } } }')).toEqual({ users_aggregate: { aggregate: { count: 2 } } });
  });

  it('takes _exists over any tracked table and relationship paths in a filter', async () => {
    const created = await metadata({
      type: 'bulk',
      args: [
        // Authors of whom the caller owns a published article.
        {
          type: 'pg_create_select_permission',
          args: {
            table: 'authors',
            role: 'reviewer',
            permission: {
              columns: ['name'],
              filter: {
                _exists: {
                  _table: { schema: 'public', name: 'articles' },
                  _where: { _and: [{ published: { _eq: true } }, { user_id: { _eq: 'X-Hasura-User-Id' } }] },
                },
              },
            },
          },
        },
        // Articles whose author is rated 4 or more.
        {
          type: 'pg_create_select_permission',
          args: { table: 'articles', role: 'reviewer', permission: { columns: ['id'], filter: { author: { rating: { _gte: 4 } } } } },
        },
      ],
    });
    expect(created.status).toBe(200);
    const token = signToken({ roles: ['reviewer'], userId: bob });
    expect(await data('{ authors(order_by: {name: asc}) { name } articles(order_by: {id: asc}) { id } }', bearer(token))).toEqual({
      authors: [{ name: 'Ada' }, { name: 'Brian' }, { name: 'Cleo' }],
      articles: [{ id: 1 }, { id: 2 }],
    });
    expect(await data('{ authors { name } }', bearer(signToken({ roles: ['reviewer'], userId: randomUUID() })))).toEqual({ authors: [] });
  });

  it("caps a list at the permission's limit", async () => {
    await server.database.query(`INSERT INTO articles (title, author_id, user_id) SELECT 'bulk ' || n, 1, $1 FROM generate_series(1, 12) AS n`, [alice]);
    const token = signToken({ roles: ['user'], userId: alice });
    const capped = await data<{ articles: unknown[] }>('{ articles(limit: 50) { id } }', bearer(token));
    expect(capped.articles).toHaveLength(10);
    await server.database.query(`DELETE FROM articles WHERE title LIKE 'bulk %'`);
  });
});

describe('a table changed under its metadata', () => {
  it('is reported by get_inconsistent_metadata, answers a clear error and leaves the other tables served', async () => {
    await server.database.query('CREATE TABLE scratch (id int PRIMARY KEY, note text)');
    expect((await metadata({ type: 'pg_track_table', args: { table: 'scratch' } })).status).toBe(200);
    expect(await data('{ scratch { id } }')).toEqual({ scratch: [] });
    expect((await metadata({ type: 'get_inconsistent_metadata', args: {} })).body).toEqual({ is_consistent: true, inconsistent_objects: [] });
    await server.database.query('DROP TABLE scratch');
    const gone = await query('{ scratch { id } }');
    expect(gone.status).toBe(200);
    expect(gone.body.errors?.[0]).toMatchObject({
      message: expect.stringContaining('changed under its metadata'),
      extensions: { code: 'INCONSISTENT_METADATA' },
    });
    expect((await metadata({ type: 'get_inconsistent_metadata', args: {} })).body).toEqual({
      is_consistent: false,
      inconsistent_objects: [{ type: 'table', name: 'scratch', reason: 'no table or view scratch exists', definition: { schema: 'public', name: 'scratch' } }],
    });
    expect((await metadata({ type: 'reload_metadata', args: {} })).body).toEqual({ message: 'success', is_consistent: false });
    const refused = await query('{ scratch { id } }');
    expect(refused.body.errors?.[0].extensions?.code).toBe('GRAPHQL_VALIDATION_FAILED');
    expect(await data('{ authors_by_pk(id: 1) { name } }')).toEqual({ authors_by_pk: { name: 'Ada' } });
    expect((await metadata({ type: 'pg_untrack_table', args: { table: 'scratch' } })).status).toBe(200);
    expect((await metadata({ type: 'get_inconsistent_metadata', args: {} })).body).toEqual({ is_consistent: true, inconsistent_objects: [] });
  });
});

describe('query_root_fields', () => {
  it('opens only the root fields a permission names', async () => {
    await metadata({
      type: 'pg_create_select_permission',
      args: { table: 'authors', role: 'reader', permission: { columns: ['name'], filter: {}, query_root_fields: ['select'] } },
    });
    const token = signToken({ roles: ['reader'] });
    expect(await data('{ authors(order_by: {name: asc}, limit: 1) { name } }', bearer(token))).toEqual({ authors: [{ name: 'Ada' }] });
    const byPk = await query('{ authors_by_pk(id: 1) { name } }', bearer(token));
    expect(byPk.body.errors?.[0]).toMatchObject({ message: expect.stringContaining('Cannot query field "authors_by_pk" on type "Query".') });
    const unknown = await metadata({
      type: 'pg_create_select_permission',
      args: { table: 'authors', role: 'other', permission: { columns: '*', filter: {}, query_root_fields: ['everything'] } },
    });
    expect(unknown).toMatchObject({ status: 400, body: { code: 'parse-failed', path: '$.args.permission.query_root_fields' } });
  });
});

describe('the emitted statement', () => {
  /** Compiles `document`'s root field as the server would, returning the statement instead of running it. */
  async function compiled(document: string, reader: { role: string; admin: boolean }, variables?: Record<string, unknown>): Promise<CompiledStatement> {
    const entries = TRACKING.filter((request) => request.type === 'pg_track_table').map((request) => {
      const table = (request.args as { table: unknown }).table;
      return {
        table: typeof table === 'string' ? { schema: 'public', name: table } : { schema: 'public', ...(table as { name: string }) },
      } as TrackedTableEntry;
    });
    const exported = (await metadata({ type: 'export_metadata', args: {} })).body as { sources: { tables: TrackedTableEntry[] }[] };
    const tracked = exported.sources[0].tables.filter((entry) => entries.some((candidate) => candidate.table.name === entry.table.name));
    const { tables } = resolveTables(
      tracked,
      await readCatalog(
        server.server.dataSource.manager,
        tracked.map((entry) => entry.table),
      ),
    );
    const byKey = new Map(tables.map((table) => [tableKey(table.table), table]));
    let statement: CompiledStatement | undefined;
    const schema = extendWithTables(buildSchema('type Query { ping: Int }'), tables, {
      select: async (table, kind: RootKind, info: GraphQLResolveInfo) => {
        statement = new StatementCompiler(reader, byKey, info).compile(table, kind);
        return kind === 'selectByPk' ? null : kind === 'select' ? [] : { nodes: [] };
      },
    });
    const result = await execute({ schema, document: parse(document), variableValues: variables });
    expect(result.errors).toBeUndefined();
    return statement!;
  }

  it('carries every value as a bind parameter and quotes every identifier', async () => {
    const attack = `'); DROP TABLE articles; --`;
    const statement = await compiled(
      `query ($t: String!) { articles(where: {_or: [{title: {_eq: $t}}, {title: {_ilike: "%'--"}}], author: {name: {_in: ["a'b"]}}}, limit: 3, offset: 1) { id author { name } } }`,
      { role: 'user', admin: false },
      { t: attack },
    );
    const session = { 'x-gql-role': 'user', 'x-gql-user-id': `${alice}'; --` };
    expect(statement.text).not.toContain(attack);
    expect(statement.text).not.toContain("'--");
    expect(statement.text).not.toContain("a'b");
    expect(statement.text).not.toContain(alice);
    expect(boundValues(statement, session, { t: attack })).toEqual(expect.arrayContaining([attack, "%'--", ["a'b"], `${alice}'; --`, 3, 1]));
    expect(statement.text).toContain('"public"."articles"');
    expect(statement.text).toMatch(/"_\d+"\."title" = \$\d+::text/);
    // Apart from the JSON keys, which are GraphQL names, the only quoted literals are the JSON defaults.
    expect(statement.text.match(/'[^']*'/g)?.every((literal) => /^'[_A-Za-z][_0-9A-Za-z]*'$/.test(literal) || literal === "'[]'")).toBe(true);
  });
});
