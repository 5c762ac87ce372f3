import pg from 'pg';
import { metadataRequest } from '../support/metadata';
import { postGraphQL } from '../support/graphql';
import { ADMIN_SECRET, startTestServer, type TestServer } from '../support/server';
import { bearer, signToken } from '../support/tokens';

/*
 * Typed PostgreSQL arrays in the generated API, as Hasura v2 (2.29 on) shows them: a `text[]`
 * column is `[String!]`, compared by `String_array_comparison_exp`, every operand bound as an
 * array literal. Answers are checked against the same conditions written in SQL.
 */

let server: TestServer;
let oracle: pg.Client;
const asAdmin = { 'x-gql-admin-secret': ADMIN_SECRET };

/** Elements that would break a statement if they were ever spliced into its text, or an array literal if not escaped. */
const HOSTILE = [`'); DROP TABLE gadgets; --`, '"}', '\\', '{a,b}', 'NULL', ' spaced ', 'x"y', "o'k"];

async function graphql(query: string, variables?: Record<string, unknown>, headers: Record<string, string> = asAdmin) {
  return (await postGraphQL<Record<string, unknown>>(server.graphqlUrl, { query, variables }, headers)).body;
}

/** The ids of gadgets passing `condition` (SQL over the row `g`), ordered. */
async function idsWhere(condition: string, values: unknown[] = []): Promise<number[]> {
  return (await oracle.query<{ id: number }>(`SELECT id FROM gadgets g WHERE ${condition} ORDER BY id`, values)).rows.map((row) => row.id);
}

async function idsOf(where: string, variables?: Record<string, unknown>, declared = ''): Promise<number[]> {
  const body = await graphql(`query ${declared} { gadgets(where: ${where}, order_by: {id: asc}) { id } }`, variables);
  expect(body.errors).toBeUndefined();
  return (body.data!.gadgets as { id: number }[]).map((row) => row.id);
}

beforeAll(async () => {
  server = await startTestServer();
  await server.database.query(`
    CREATE TABLE gadgets (
      id serial PRIMARY KEY, labels text[], sizes int4[] NOT NULL DEFAULT '{}', refs uuid[], notes jsonb[], raw json[], codes char(3)[],
      owner text);
    INSERT INTO gadgets (labels, sizes, refs, notes, raw, codes, owner) VALUES
      ('{a,b}', '{1,2,3}', '{0b6e3c1a-1111-4111-8111-111111111111}', ARRAY['{"k": 1}'::jsonb, '"s"'], ARRAY['{"x": 1}'::json], '{AB1,CD2}', 'alice'),
      ('{b}', '{2}', NULL, NULL, NULL, '{AB1}', 'bob'),
      ('{}', '{}', '{}', '{}', '{}', '{}', 'alice'),
      (NULL, '{5,1}', '{0b6e3c1a-2222-4222-8222-222222222222,0b6e3c1a-1111-4111-8111-111111111111}', NULL, NULL, NULL, 'bob'),
      ('{a,c}', '{1,2}', NULL, NULL, NULL, '{EF3}', 'carol');
  `);
  oracle = new pg.Client({ connectionString: server.database.url });
  await oracle.connect();
  await oracle.query('INSERT INTO gadgets (labels, owner) VALUES ($1, $2)', [HOSTILE, 'mallory']);
  const requests = [
    { type: 'pg_track_table', args: { table: 'gadgets' } },
    {
      type: 'pg_create_select_permission',
      args: { table: 'gadgets', role: 'user', permission: { columns: ['id', 'labels', 'sizes'], filter: { labels: { _contains: 'X-Gql-Allowed-Labels' } } } },
    },
    {
      type: 'pg_create_select_permission',
      args: { table: 'gadgets', role: 'small', permission: { columns: ['id', 'sizes'], filter: { sizes: { _contained_in: [1, 2, 3] } } } },
    },
  ];
  expect(await metadataRequest(server.url, { type: 'bulk', args: requests })).toEqual({ status: 200, body: requests.map(() => ({ message: 'success' })) });
});

afterAll(async () => {
  await oracle?.end();
  await server?.close();
});

describe('array columns', () => {
  it("are typed as lists of their element's scalar, with Hasura's array comparison types", async () => {
    const body = await graphql(`
      {
        object: __type(name: "gadgets") {
          fields {
            name
            type {
              kind
              name
              ofType {
                kind
                name
                ofType {
                  kind
                  name
                  ofType {
                    name
                  }
                }
              }
            }
          }
        }
        comparison: __type(name: "String_array_comparison_exp") {
          inputFields {
            name
            type {
              kind
              name
              ofType {
                kind
                name
                ofType {
                  kind
                  name
                  ofType {
                    kind
                    name
                    ofType {
                      kind
                      name
                    }
                  }
                }
              }
            }
          }
        }
        raw: __type(name: "json_array_comparison_exp") {
          inputFields {
            name
          }
        }
        bool: __type(name: "gadgets_bool_exp") {
          inputFields {
            name
            type {
              name
            }
          }
        }
        max: __type(name: "gadgets_max_fields") {
          fields {
            name
          }
        }
      }
    `);
    expect(body.errors).toBeUndefined();
    const data = body.data as Record<string, { fields?: { name: string; type: unknown }[]; inputFields?: { name: string; type: unknown }[] }>;
    const print = (type: unknown): string => {
      const given = type as { kind: string; name: string | null; ofType: unknown };
      if (given.kind === 'NON_NULL') return `${print(given.ofType)}!`;
      if (given.kind === 'LIST') return `[${print(given.ofType)}]`;
      return given.name!;
    };
    const fields = Object.fromEntries(data.object.fields!.map((field) => [field.name, print(field.type)]));
    expect(fields).toEqual({
      id: 'Int!',
      labels: '[String!]',
      sizes: '[Int!]!',
      refs: '[uuid!]',
      notes: '[jsonb!]',
      raw: '[json!]',
      codes: '[bpchar!]',
      owner: 'String',
    });
    expect(Object.fromEntries(data.comparison.inputFields!.map((field) => [field.name, print(field.type)]))).toEqual({
      _contained_in: '[String!]',
      _contains: '[String!]',
      _eq: '[String!]',
      _gt: '[String!]',
      _gte: '[String!]',
      _in: '[[String!]!]',
      _is_null: 'Boolean',
      _lt: '[String!]',
      _lte: '[String!]',
      _neq: '[String!]',
      _nin: '[[String!]!]',
    });
    expect(data.raw.inputFields!.map((field) => field.name)).toEqual(['_is_null']);
    const bool = Object.fromEntries(data.bool.inputFields!.map((field) => [field.name, (field.type as { name: string }).name]));
    expect(bool).toMatchObject({
      labels: 'String_array_comparison_exp',
      sizes: 'Int_array_comparison_exp',
      refs: 'uuid_array_comparison_exp',
      owner: 'String_comparison_exp',
    });
    // Arrays take no max or min.
    expect(data.max.fields!.map((field) => field.name)).toEqual(['id', 'owner']);
  });

  it('answer their values as JSON lists', async () => {
    const body = await graphql('{ gadgets(order_by: {id: asc}, limit: 2) { labels sizes refs notes raw codes } }');
    expect(body).toEqual({
      data: {
        gadgets: [
          {
            labels: ['a', 'b'],
            sizes: [1, 2, 3],
            refs: ['0b6e3c1a-1111-4111-8111-111111111111'],
            notes: [{ k: 1 }, 's'],
            raw: [{ x: 1 }],
            codes: ['AB1', 'CD2'],
          },
          { labels: ['b'], sizes: [2], refs: null, notes: null, raw: null, codes: ['AB1'] },
        ],
      },
    });
  });

  it('compare with every operator of the array comparison type as PostgreSQL does', async () => {
    const cases: [string, string][] = [
      ['{labels: {_contains: ["b"]}}', `labels @> '{b}'`],
      ['{labels: {_contains: "a"}}', `labels @> '{a}'`],
      ['{labels: {_contained_in: ["a", "b", "c"]}}', `labels <@ '{a,b,c}'`],
      ['{labels: {_eq: ["a", "b"]}}', `labels = '{a,b}'`],
      ['{labels: {_neq: ["a", "b"]}}', `labels <> '{a,b}'`],
      ['{labels: {_gt: ["a"]}}', `labels > '{a}'`],
      ['{labels: {_gte: ["a", "b"]}}', `labels >= '{a,b}'`],
      ['{labels: {_lt: ["b"]}}', `labels < '{b}'`],
      ['{labels: {_lte: ["a", "c"]}}', `labels <= '{a,c}'`],
      ['{labels: {_in: [["b"], ["a", "c"]]}}', `labels IN ('{b}', '{a,c}')`],
      ['{labels: {_nin: [["b"], []]}}', `labels NOT IN ('{b}', '{}')`],
      ['{labels: {_in: []}}', 'false'],
      ['{labels: {_nin: []}}', 'true'],
      ['{labels: {_is_null: true}}', 'labels IS NULL'],
      ['{sizes: {_contains: [1, 2]}, labels: {_is_null: false}}', `sizes @> '{1,2}' AND labels IS NOT NULL`],
      ['{sizes: {_contained_in: [1, 2, 3]}}', `sizes <@ '{1,2,3}'`],
      ['{refs: {_contains: ["0b6e3c1a-1111-4111-8111-111111111111"]}}', `refs @> '{0b6e3c1a-1111-4111-8111-111111111111}'`],
      ['{notes: {_contains: [{k: 1}]}}', `notes @> ARRAY['{"k": 1}'::jsonb]`],
      ['{notes: {_eq: [{k: 1}, "s"]}}', `notes = ARRAY['{"k": 1}'::jsonb, '"s"']`],
      ['{raw: {_is_null: false}}', 'raw IS NOT NULL'],
      // char(3)[] compares whole codes (a cast to character[] would cut them to one letter).
      ['{codes: {_contains: ["AB1"]}}', `codes @> '{AB1}'`],
      ['{_not: {labels: {_contains: ["a"]}}}', `NOT (labels @> '{a}')`],
    ];
    for (const [where, sql] of cases) {
      const expected = await idsWhere(sql);
      expect({ where, ids: await idsOf(where) }).toEqual({ where, ids: expected });
    }
    // Every operator selected something somewhere: the comparisons are not vacuous.
    expect(await idsOf('{labels: {_contains: ["b"]}}')).toEqual([1, 2]);
    expect(await idsOf('{codes: {_contains: ["AB1"]}}')).toEqual([1, 2]);
  });

  it("bind variables as arrays, each request's own values", async () => {
    const declared = '($labels: [String!], $lists: [[String!]!], $sizes: [Int!]!)';
    const where = '{labels: {_contains: $labels}, _or: [{labels: {_in: $lists}}, {sizes: {_contains: $sizes}}]}';
    for (const variables of [
      { labels: ['a'], lists: [['a', 'b']], sizes: [9] },
      { labels: ['b'], lists: [], sizes: [2] },
      { labels: [], lists: [['a', 'c'], ['b']], sizes: [] },
    ]) {
      const expected = await idsWhere('labels @> $1 AND (EXISTS (SELECT 1 FROM unnest($2::text[]) AS x WHERE labels = x::text[]) OR sizes @> $3)', [
        variables.labels,
        variables.lists.map((list) => `{${list.join(',')}}`),
        variables.sizes,
      ]);
      expect({ variables, ids: await idsOf(where, variables, declared) }).toEqual({ variables, ids: expected });
    }
    // An item of a literal list may be a variable.
    expect(await idsOf('{labels: {_contains: ["a", $one]}}', { one: 'c' }, '($one: String!)')).toEqual([5]);
  });

  it('keep hostile elements as data: quotes, braces, backslashes and NULL are characters of an element', async () => {
    const [mallory] = await idsWhere(`owner = 'mallory'`);
    expect(await idsOf('{labels: {_contains: $labels}}', { labels: HOSTILE }, '($labels: [String!])')).toEqual([mallory]);
    expect(await idsOf('{labels: {_eq: $labels}}', { labels: HOSTILE }, '($labels: [String!])')).toEqual([mallory]);
    for (const element of HOSTILE) {
      expect(await idsOf(`{labels: {_contains: [${JSON.stringify(element)}]}}`)).toEqual([mallory]);
    }
    // "{a,b}" as an element is one string, not the array {a,b}; "NULL" is the string NULL, not a null.
    expect(await idsOf('{labels: {_contained_in: ["{a,b}"]}}')).toEqual([3]);
    expect(await idsOf('{labels: {_eq: ["NULL"]}}')).toEqual([]);
    const body = await graphql('{ gadgets(where: {owner: {_eq: "mallory"}}) { labels } }');
    expect(body).toEqual({ data: { gadgets: [{ labels: HOSTILE }] } });
    expect((await oracle.query('SELECT count(*)::int AS n FROM gadgets')).rows[0].n).toBe(6);
  });

  it('refuse what is not an array of the element type, with a clear error', async () => {
    const refused = async (query: string, variables: Record<string, unknown> | undefined, message: RegExp, code?: string) => {
      const body = await graphql(query, variables);
      expect({ query, data: body.data ?? null }).toEqual({ query, data: null });
      expect(body.errors?.[0].message).toMatch(message);
      if (code) expect(body.errors?.[0].extensions?.code).toBe(code);
    };
    // GraphQL's own validation: the element type, a null element, a nested list of a built-in scalar, an operator arrays do not have.
    await refused('{ gadgets(where: {sizes: {_contains: ["x"]}}) { id } }', undefined, /Int cannot represent non-integer value/);
    await refused('{ gadgets(where: {labels: {_contains: ["a", null]}}) { id } }', undefined, /Expected value of non-null type "String!"|String!/);
    await refused('{ gadgets(where: {sizes: {_eq: [[1]]}}) { id } }', undefined, /Int cannot represent non-integer value/);
    await refused('{ gadgets(where: {labels: {_like: "a%"}}) { id } }', undefined, /"_like" is not defined by type "String_array_comparison_exp"/);
    await refused('{ gadgets(where: {raw: {_eq: []}}) { id } }', undefined, /"_eq" is not defined by type "json_array_comparison_exp"/);
    await refused(
      'query ($s: [Int!]) { gadgets(where: {sizes: {_contains: $s}}) { id } }',
      { s: [1, null] },
      /Expected non-nullable type "Int!" not to be null/,
    );
    // A pass-through scalar takes any JSON, so the compiler refuses what is not one element.
    await refused(
      'query ($r: [uuid!]) { gadgets(where: {refs: {_contains: $r}}) { id } }',
      { r: [['0b6e3c1a-1111-4111-8111-111111111111']] },
      /element 0 of _contains on "refs" \(\[uuid!\]\) is a list: nested arrays are not supported/,
      'BAD_USER_INPUT',
    );
    await refused(
      '{ gadgets(where: {refs: {_contains: [["0b6e3c1a-1111-4111-8111-111111111111"]]}}) { id } }',
      undefined,
      /nested arrays are not supported/,
      'BAD_USER_INPUT',
    );
    await refused('{ gadgets(where: {refs: {_contains: [{a: 1}]}}) { id } }', undefined, /is an object, not a uuid/, 'BAD_USER_INPUT');
    await refused(
      '{ gadgets(where: {refs: {_contains: ["not-a-uuid"]}}) { id } }',
      undefined,
      /invalid input: invalid input syntax for type uuid/,
      'BAD_USER_INPUT',
    );
    await refused('{ gadgets(where: {labels: {_in: [["a"], ["b", 1]]}}) { id } }', undefined, /String cannot represent a non string value/);
    await refused('{ gadgets(where: {labels: {_eq: null}}) { id } }', undefined, /cannot be null \(use _is_null\)/, 'BAD_USER_INPUT');
  });

  it("filter a role's rows by an array in its permission: a session variable holding an array literal, or a list", async () => {
    const ids = async (role: string, claims: Record<string, unknown> = {}) => {
      const body = await graphql('{ gadgets(order_by: {id: asc}) { id } }', undefined, bearer(signToken({ roles: [role], claims })));
      return body;
    };
    const asIds = (body: Record<string, unknown>) => ((body.data as { gadgets: { id: number }[] }).gadgets ?? []).map((row) => row.id);
    expect(asIds(await ids('user', { 'x-gql-allowed-labels': '{a}' }))).toEqual(await idsWhere(`labels @> '{a}'`));
    expect(asIds(await ids('user', { 'x-gql-allowed-labels': '{"{a,b}"}' }))).toEqual(await idsWhere(`labels @> '{"{a,b}"}'`));
    expect(asIds(await ids('small'))).toEqual(await idsWhere(`sizes <@ '{1,2,3}'`));
    // A session variable that is not an array literal is the caller's error, as PostgreSQL says it.
    const bad = await ids('user', { 'x-gql-allowed-labels': 'a' });
    expect(bad.errors?.[0]).toMatchObject({ message: expect.stringContaining('malformed array literal'), extensions: { code: 'BAD_USER_INPUT' } });
  });

  it('refuse a permission whose array operand is not an array of the element type', async () => {
    for (const [filter, message] of [
      [{ sizes: { _contains: ['x'] } }, 'element 0 of _contains on "sizes" ([Int!]) must be an integer'],
      [{ sizes: { _contains: [1, null] } }, 'element 1 of _contains on "sizes" ([Int!]) is null: array elements cannot be null'],
      [{ labels: { _eq: [['a']] } }, 'nested arrays are not supported'],
      [{ labels: { _in: 'X-Gql-Lists' } }, '_in on the array column "labels" takes a list of arrays, not a session variable'],
      [{ labels: { _has_key: 'a' } }, 'the operator "_has_key" does not apply to the array column "labels"'],
      [{ raw: { _contains: [{}] } }, 'only _is_null does'],
    ] as const) {
      const response = await metadataRequest(server.url, {
        type: 'pg_create_select_permission',
        args: { table: 'gadgets', role: 'other', permission: { columns: ['id'], filter } },
      });
      expect({ filter, status: response.status, error: response.body.error }).toEqual({ filter, status: 400, error: expect.stringContaining(message) });
    }
  });

  it('answer a stored null element or a two-dimensional value as a clear error of that field (nulls propagated by GraphQL)', async () => {
    await oracle.query(`INSERT INTO gadgets (id, labels, sizes, notes, owner) VALUES (100, '{a,NULL}', '{{1,2},{3,4}}', ARRAY[NULL, '[1]'::jsonb], 'odd')`);
    try {
      const labels = await graphql('{ gadgets(where: {id: {_eq: 100}}) { id labels notes } }');
      expect(labels).toEqual({
        data: { gadgets: [{ id: 100, labels: null, notes: null }] },
        errors: [
          expect.objectContaining({
            message: 'the stored value of gadgets.labels has a NULL element, which its type [String!] cannot represent',
            extensions: { code: 'UNREPRESENTABLE_VALUE' },
          }),
          expect.objectContaining({
            message: 'the stored value of gadgets.notes has a NULL element, which its type [jsonb!] cannot represent',
            extensions: { code: 'UNREPRESENTABLE_VALUE' },
          }),
        ],
      });
      // sizes is NOT NULL ([Int!]!): its error nulls the row, which nulls the root list, which nulls data.
      const sizes = await graphql('{ gadgets(where: {id: {_eq: 100}}) { id sizes } }');
      expect(sizes).toMatchObject({
        data: null,
        errors: [{ message: 'the stored value of gadgets.sizes has more than one dimension, which its type [Int!] cannot represent' }],
      });
    } finally {
      await oracle.query('DELETE FROM gadgets WHERE id = 100');
    }
  });
});
