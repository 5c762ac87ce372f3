import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { ADMIN_SECRET } from '../support/server';

/*
 * What the fuzzer sets up before it looks at the schema, so that the generated API is among the
 * surfaces it reaches: three tracked tables with rows, relationships both ways and select
 * permissions for the roles its tokens carry, and two actions whose output type has relationships
 * to them (their handler a loopback server of the fuzzer's).
 */

const SQL = `
CREATE TABLE fuzz_authors (
  id serial PRIMARY KEY, name text NOT NULL, rating int, born date, tags jsonb, owner uuid, score numeric, active boolean NOT NULL DEFAULT true,
  nickname varchar(12), code char(3), created_at timestamptz NOT NULL DEFAULT now());
CREATE TABLE fuzz_posts (
  id serial PRIMARY KEY, author_id int REFERENCES fuzz_authors (id), title text NOT NULL, body text, views bigint, published boolean NOT NULL,
  meta json, ratio float8, labels text[]);
CREATE TABLE fuzz_comments (id serial PRIMARY KEY, post_id int NOT NULL REFERENCES fuzz_posts (id), author_id int REFERENCES fuzz_authors (id), text text);
INSERT INTO fuzz_authors (name, rating, born, tags, owner, score, active, nickname, code)
  SELECT 'author ' || i, i % 7, date '1980-01-01' + i * 97, jsonb_build_object('n', i, 'even', i % 2 = 0), NULL, i * 1.5, i % 5 <> 0,
         CASE WHEN i % 3 = 0 THEN NULL ELSE 'nick' || i END, 'C' || (i % 10)
  FROM generate_series(1, 40) AS i;
INSERT INTO fuzz_posts (author_id, title, body, views, published, meta, ratio, labels)
  SELECT 1 + i % 40, 'post ' || i, repeat('body ', i % 5), i * 1000000000::bigint, i % 3 <> 0, json_build_object('i', i), i / 7.0, ARRAY['a', 'b' || i]
  FROM generate_series(1, 200) AS i;
INSERT INTO fuzz_comments (post_id, author_id, text) SELECT 1 + i % 200, 1 + i % 40, 'comment ' || i FROM generate_series(1, 400) AS i;
ANALYZE fuzz_authors, fuzz_posts, fuzz_comments;
`;

const permission = (table: string, role: string, permission: Record<string, unknown>) => ({
  type: 'pg_create_select_permission',
  args: { table, role, permission },
});

function metadataRequests(handlerUrl: string): unknown[] {
  return [
    ...['fuzz_authors', 'fuzz_posts', 'fuzz_comments'].map((table) => ({ type: 'pg_track_table', args: { table } })),
    { type: 'pg_create_object_relationship', args: { table: 'fuzz_posts', name: 'author', using: { foreign_key_constraint_on: 'author_id' } } },
    {
      type: 'pg_create_array_relationship',
      args: { table: 'fuzz_authors', name: 'posts', using: { foreign_key_constraint_on: { table: 'fuzz_posts', column: 'author_id' } } },
    },
    {
      type: 'pg_create_array_relationship',
      args: { table: 'fuzz_posts', name: 'comments', using: { foreign_key_constraint_on: { table: 'fuzz_comments', column: 'post_id' } } },
    },
    { type: 'pg_create_object_relationship', args: { table: 'fuzz_comments', name: 'post', using: { foreign_key_constraint_on: 'post_id' } } },
    { type: 'pg_create_object_relationship', args: { table: 'fuzz_comments', name: 'author', using: { foreign_key_constraint_on: 'author_id' } } },
    // The tokens' role: a row filter, a limit, some columns, aggregates on authors only.
    permission('fuzz_authors', 'user', {
      columns: ['id', 'name', 'rating', 'born', 'tags', 'score', 'active', 'nickname', 'code'],
      filter: { _or: [{ active: { _eq: true } }, { owner: { _eq: 'X-Gql-User-Id' } }] },
      limit: 25,
      allow_aggregations: true,
    }),
    permission('fuzz_posts', 'user', {
      columns: ['id', 'author_id', 'title', 'views', 'published', 'meta', 'ratio', 'labels'],
      filter: { _and: [{ published: { _eq: true } }, { author: { active: { _eq: true } } }] },
    }),
    permission('fuzz_comments', 'user', { columns: ['id', 'post_id', 'text'], filter: { post: { published: { _eq: true } } }, limit: 10 }),
    // Another role of a token (`X-Gql-Role: editor`): one table, its list only.
    permission('fuzz_authors', 'editor', { columns: '*', filter: {}, query_root_fields: ['select'] }),
    {
      type: 'set_custom_types',
      args: {
        objects: [
          {
            name: 'FuzzAuthorRef',
            fields: [
              { name: 'author_id', type: 'Int' },
              { name: 'note', type: 'String' },
            ],
            relationships: [
              { name: 'author', type: 'object', remote_table: 'fuzz_authors', field_mapping: { author_id: 'id' } },
              { name: 'posts', type: 'array', remote_table: 'fuzz_posts', field_mapping: { author_id: 'author_id' } },
            ],
          },
        ],
      },
    },
    {
      type: 'create_action',
      args: {
        name: 'fuzzAuthor',
        definition: { type: 'query', arguments: [{ name: 'id', type: 'Int!' }], output_type: 'FuzzAuthorRef', handler: `${handlerUrl}/one` },
      },
    },
    {
      type: 'create_action',
      args: {
        name: 'fuzzAuthors',
        definition: { type: 'query', arguments: [{ name: 'ids', type: '[Int!]!' }], output_type: '[FuzzAuthorRef!]!', handler: `${handlerUrl}/many` },
      },
    },
    ...['fuzzAuthor', 'fuzzAuthors'].flatMap((action) => ['user', 'editor'].map((role) => ({ type: 'create_action_permission', args: { action, role } }))),
  ];
}

/** The actions' handler: echoes the ids asked for as FuzzAuthorRef objects (at most 50). */
function startHandler(): Promise<http.Server> {
  const server = http.createServer((request, response) => {
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', () => {
      let input: { id?: unknown; ids?: unknown } = {};
      try {
        input = (JSON.parse(Buffer.concat(chunks).toString()) as { input?: typeof input }).input ?? {};
      } catch {
        // Answered below as an empty call.
      }
      const ref = (id: unknown) => ({ author_id: typeof id === 'number' ? id : null, note: `ref ${String(id)}` });
      const body = request.url === '/many' ? (Array.isArray(input.ids) ? input.ids.slice(0, 50) : []).map(ref) : ref(input.id);
      response.writeHead(200, { 'content-type': 'application/json' });
      response.end(JSON.stringify(body));
    });
  });
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve(server)));
}

async function post(url: string, body: unknown): Promise<void> {
  const response = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-gql-admin-secret': ADMIN_SECRET },
    body: JSON.stringify(body),
  });
  if (response.status !== 200) throw new Error(`setting up the fuzzed tables: ${url} answered ${response.status} ${await response.text()}`);
}

/** Creates, fills and tracks the tables and declares the actions; the returned function stops the actions' handler. */
export async function setUpTables(base: string): Promise<() => Promise<void>> {
  const handler = await startHandler();
  const handlerUrl = `http://127.0.0.1:${(handler.address() as AddressInfo).port}`;
  const close = () => new Promise<void>((resolve) => handler.close(() => resolve()));
  try {
    await post(`${base}/v2/query`, { type: 'run_sql', args: { sql: SQL } });
    await post(`${base}/v1/metadata`, { type: 'bulk', args: metadataRequests(handlerUrl) });
  } catch (error) {
    await close();
    throw error;
  }
  return async () => {
    handler.closeAllConnections();
    await close();
  };
}
