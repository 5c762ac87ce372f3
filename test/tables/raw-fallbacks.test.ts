import { randomUUID } from 'node:crypto';
import * as rawRootFields from '../../src/graphql/raw-root-fields';
import { metadataRequest } from '../support/metadata';
import { ADMIN_SECRET, startTestServer, type TestServer } from '../support/server';
import { bearer, signToken } from '../support/tokens';

/*
 * When an accepted query is answered with PostgreSQL's JSON text (src/graphql/raw-root-fields.ts)
 * and when it falls back to the ordinary execution: each query is sent first with
 * `extensions: {}` (which the accepted-query lane leaves to Apollo: the ordinary execution), then
 * as a client sends it (the lane), and the two answers must be the same, parsed, key order
 * included; `raw` says whether the lane wrote the second without execution.
 */

let server: TestServer;
const owner = randomUUID();
const asAdmin = { 'x-gql-admin-secret': ADMIN_SECRET };
const asUser = bearer(signToken({ roles: ['user'], userId: owner }));

let rawAnswers = 0;
const rawAnswer = rawRootFields.rawAnswer;
jest.spyOn(rawRootFields, 'rawAnswer').mockImplementation((...args) =>
  rawAnswer(...args)?.then((text) => {
    if (text !== undefined) rawAnswers++;
    return text;
  }),
);

interface Compared {
  status: number;
  body: { data?: Record<string, unknown> | null; errors?: { message: string; extensions?: { code?: string } }[] };
  raw: boolean;
  text: string;
}

async function post(body: unknown, headers: Record<string, string>) {
  const response = await fetch(server.graphqlUrl, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: JSON.stringify(body) });
  return { status: response.status, contentType: response.headers.get('content-type'), text: await response.text() };
}

/** The query's answer through the ordinary execution and through the lane: they must be equal. */
async function compared(query: string, variables?: Record<string, unknown>, headers: Record<string, string> = asAdmin): Promise<Compared> {
  const reference = await post({ query, variables, extensions: {} }, headers);
  const before = rawAnswers;
  const answer = await post({ query, variables }, headers);
  expect({ status: answer.status, contentType: answer.contentType, body: JSON.stringify(JSON.parse(answer.text)) }).toEqual({
    status: reference.status,
    contentType: reference.contentType,
    body: JSON.stringify(JSON.parse(reference.text)),
  });
  return { status: answer.status, body: JSON.parse(answer.text) as Compared['body'], raw: rawAnswers > before, text: answer.text };
}

beforeAll(async () => {
  server = await startTestServer();
  await server.database.query(`CREATE TYPE "odd-pair" AS (x int, y int)`);
  await server.database.query(
    `CREATE TABLE gauges (
       id serial PRIMARY KEY, label text NOT NULL, reading real, precise double precision, amount numeric, big bigint, small smallint,
       at timestamptz, on_day date, flag boolean, doc jsonb, raw json, code char(3), tags text[], owner uuid, "Odd Pair" "odd-pair");
     CREATE TABLE gauge_notes (id serial PRIMARY KEY, gauge_id int NOT NULL REFERENCES gauges (id), note text NOT NULL);
`,
  );
  await server.database.query(
    `INSERT INTO gauges (label, reading, precise, amount, big, small, at, on_day, flag, doc, raw, code, tags, owner, "Odd Pair") VALUES
       ('a "quoted" \\ label', 1.5, 0.00001, 1.50, 9007199254740993, 3, '2026-01-02T03:04:05.123456Z', '2026-01-02', true,
        '{"b": 1, "a": [1.0, "x"]}', '{"z": 1,  "y": 2}', 'AB', ARRAY['x', 'y'], $1, ROW(1, 2)),
       (E'tab\\there\\nnewline \\u00e9', -2.25, 1e100, 123456789012345678901234567890.123, -5, NULL, '2026-06-01T12:00:00+02:00', NULL, false,
        '[]', '"text"', NULL, '{}', $1, NULL),
       ('other', 3, 2, 0, 0, 1, NULL, '1999-12-31', NULL, NULL, NULL, 'C', NULL, NULL, NULL),
       ('not a number', 'NaN', 'Infinity', 'NaN', 1, 1, NULL, NULL, NULL, NULL, NULL, NULL, NULL, $1, NULL)`,
    [owner],
  );
  await server.database.query(`INSERT INTO gauge_notes (gauge_id, note) VALUES (1, 'first'), (1, 'second'), (2, 'third'), (4, 'fourth')`);
  const tracked = await metadataRequest(server.url, {
    type: 'bulk',
    args: [
      { type: 'pg_track_table', args: { table: 'gauges', configuration: { column_config: { 'Odd Pair': { custom_name: 'pair' } } } } },
      { type: 'pg_track_table', args: { table: 'gauge_notes' } },
      {
        type: 'pg_create_array_relationship',
        args: { table: 'gauges', name: 'notes', using: { foreign_key_constraint_on: { table: 'gauge_notes', column: 'gauge_id' } } },
      },
      { type: 'pg_create_object_relationship', args: { table: 'gauge_notes', name: 'gauge', using: { foreign_key_constraint_on: 'gauge_id' } } },
      {
        type: 'pg_create_select_permission',
        args: {
          table: 'gauges',
          role: 'user',
          permission: {
            columns: ['id', 'label', 'reading', 'amount', 'big', 'at', 'doc'],
            filter: { owner: { _eq: 'X-Gql-User-Id' } },
            allow_aggregations: true,
          },
        },
      },
      { type: 'pg_create_select_permission', args: { table: 'gauge_notes', role: 'user', permission: { columns: ['id', 'note'], filter: {} } } },
    ],
  });
  expect(tracked.status).toBe(200);
});
afterAll(async () => {
  await server.close();
});

describe('the raw answer', () => {
  it('writes every kind of value, __typename at every level, fragments, relationships and aggregates as the ordinary execution does', async () => {
    const query = `query Everything($id: Int!) {
      __typename
      first: gauges(where: {id: {_lte: 3}}, order_by: {id: asc}) {
        __typename id label
        ...Values
        notes(order_by: {id: desc}) { __typename note gauge { __typename id } }
      }
      gauges_by_pk(id: $id) { id big at }
      missing: gauges_by_pk(id: 999) { id }
      gauges_aggregate(where: {id: {_lte: 3}}) {
        __typename
        aggregate { __typename count sum { __typename big small } avg { precise } max { label at } min { on_day } }
        nodes { ... on gauges { id __typename } }
      }
    }
    fragment Values on gauges { precise amount big small at on_day flag doc raw code t: __typename }`;
    const answer = await compared(query, { id: 2 });
    expect(answer.raw).toBe(true);
    expect(answer.body.errors).toBeUndefined();
    const first = answer.body.data!.first as Record<string, unknown>[];
    expect(first[0]).toMatchObject({ __typename: 'gauges', t: 'gauges', label: 'a "quoted" \\ label', doc: { b: 1, a: [1, 'x'] }, raw: { z: 1, y: 2 } });
    expect(answer.body.data!.__typename).toEqual(expect.any(String));
    expect(answer.body.data).toMatchObject({ missing: null, gauges_aggregate: { __typename: 'gauges_aggregate', aggregate: { count: 3 } } });
    // PostgreSQL's own spelling of the numbers (the ordinary answer has JavaScript's).
    expect(answer.text).toContain('9007199254740993');
    expect(answer.text).toContain('123456789012345678901234567890.123');
  });

  it("answers a role's view, its row filter and columns, the same way", async () => {
    const answer = await compared(
      `{ gauges(order_by: {id: asc}) { id label amount big at doc } gauges_aggregate { aggregate { count max { big } } } }`,
      undefined,
      asUser,
    );
    expect(answer.raw).toBe(true);
    expect((answer.body.data!.gauges as unknown[]).length).toBe(3);
  });

  it('takes a whole where given as a variable, and root fields under @skip and @include', async () => {
    const where = await compared(`query ($where: gauges_bool_exp) { gauges(where: $where, order_by: {id: asc}) { id label } }`, {
      where: { _or: [{ id: { _eq: 1 } }, { _and: [{ label: { _like: 'oth%' } }] }] },
    });
    expect(where.raw).toBe(true);
    expect(where.body.data).toEqual({
      gauges: [
        { id: 1, label: 'a "quoted" \\ label' },
        { id: 3, label: 'other' },
      ],
    });
    const directives = `query ($a: Boolean!, $b: Boolean!) { a: gauges(limit: 1) @include(if: $a) { id } b: gauges(limit: 1) @skip(if: $b) { id } }`;
    for (const variables of [
      { a: true, b: false },
      { a: false, b: false },
      { a: false, b: true },
    ]) {
      const answer = await compared(directives, variables);
      expect(answer.raw).toBe(true);
    }
    expect((await compared(directives, { a: false, b: true })).body).toEqual({ data: {} });
  });

  it('shows a double precision Infinity as PostgreSQL writes it, as the ordinary execution does (its scalar passes values as they are)', async () => {
    const answer = await compared('{ gauges(where: {id: {_eq: 4}}) { precise amount } }');
    expect(answer.raw).toBe(true);
    expect(answer.body.data).toEqual({ gauges: [{ precise: 'Infinity', amount: 'NaN' }] });
  });
});

describe('falls back to the ordinary execution', () => {
  it('for a Float that is NaN, which GraphQL refuses: the same (masked) error', async () => {
    for (const query of ['{ gauges(where: {id: {_eq: 4}}) { id reading } }', '{ gauges_aggregate { aggregate { avg { reading } max { reading } } } }']) {
      const answer = await compared(query);
      expect(answer.raw).toBe(false);
      // GraphQL's Float refuses it; the error is the server's, masked as every unexpected error is.
      expect(answer.body.errors?.[0].message).toBe('Internal server error');
    }
    // The same document over finite values is answered raw.
    expect((await compared('{ gauges(where: {id: {_eq: 3}}) { id reading } }')).raw).toBe(true);
  });

  it('for a root field that is not a generated one, introspection, and an unknown fragment condition', async () => {
    for (const query of [
      '{ gauges(limit: 1) { id } __schema { queryType { name } } }',
      '{ gauges(limit: 1) { id } cronTriggers { name } }',
      '{ __typename }',
    ]) {
      const answer = await compared(query);
      expect(answer.raw).toBe(query === '{ __typename }');
    }
  });

  it('for an error: a value PostgreSQL refuses, a variable GraphQL refuses, an aggregate the role may not read', async () => {
    const badUuid = await compared('{ gauges(where: {owner: {_eq: "not a uuid"}}) { id } }');
    expect(badUuid.raw).toBe(false);
    expect(badUuid.body.errors?.[0].extensions?.code).toBe('BAD_USER_INPUT');
    const badVariable = await compared('query ($limit: Int) { gauges(limit: $limit) { id } }', { limit: 'many' });
    expect(badVariable.raw).toBe(false);
    expect(badVariable.body.errors?.[0].message).toMatch(/Int cannot represent/);
    const negative = await compared('query ($offset: Int) { gauges(offset: $offset) { id } }', { offset: -1 });
    expect(negative.raw).toBe(false);
    expect(negative.body.errors?.[0].extensions?.code).toBe('BAD_USER_INPUT');
    expect((await compared('{ gauge_notes_aggregate { aggregate { count } } }', undefined, asUser)).raw).toBe(false);
  });

  it("where the statement's JSON is not GraphQL's: over 50 keys in one object, nodes under two keys, a composite type shown as String, an array column", async () => {
    const many = Array.from({ length: 51 }, (_, index) => `k${index}: id`).join(' ');
    const wide = await compared(`{ gauges(where: {id: {_eq: 1}}) { ${many} } }`);
    expect(wide.raw).toBe(false);
    expect(Object.keys((wide.body.data!.gauges as Record<string, unknown>[])[0])).toEqual(Array.from({ length: 51 }, (_, index) => `k${index}`));
    const nodes = await compared('{ gauges_aggregate(where: {id: {_lte: 2}}) { a: nodes { id } b: nodes { label } } }');
    expect(nodes.raw).toBe(false);
    expect(nodes.body.data).toEqual({ gauges_aggregate: { a: [{ id: 1 }, { id: 2 }], b: [{ label: 'a "quoted" \\ label' }, { label: expect.any(String) }] } });
    const pair = await compared('{ gauges(where: {id: {_eq: 1}}) { id pair } }');
    expect(pair.raw).toBe(false);
    expect(pair.body.errors?.[0].message).toBe('Internal server error');
    // A stored NULL element is an error of GraphQL's completion (UNREPRESENTABLE_VALUE), which the raw text would not raise.
    const tags = await compared('{ gauges(order_by: {id: asc}, limit: 2) { id tags } }');
    expect(tags.raw).toBe(false);
    expect(tags.body.errors).toBeUndefined();
    expect((tags.body.data!.gauges as { tags: unknown }[])[0].tags).toEqual(expect.any(Array));
  });
});
