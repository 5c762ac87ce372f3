import { randomUUID } from 'node:crypto';
import { postGraphQL } from '../support/graphql';
import { ADMIN_SECRET, startTestServer, type TestServer } from '../support/server';
import { bearer, signToken } from '../support/tokens';
import { metadataRequest } from '../support/metadata';

/* Mutations given hostile or wrong input: every argument bound, never spliced; clear errors; nothing changed. Write permissions in the metadata API. */

let server: TestServer;
const alice = randomUUID();
const asAdmin = { 'x-gql-admin-secret': ADMIN_SECRET };
const asUser = () => bearer(signToken({ roles: ['user'], userId: alice }));
const HOSTILE = [
  `x'); DROP TABLE i_notes; --`,
  `'' OR 1=1 --`,
  `$1`,
  `\\'; SELECT pg_sleep(5); --`,
  `"quoted" \\" \u0000?`.replace('\u0000', ''),
  `i_notes"; DELETE FROM i_notes; --`,
];

const metadata = (body: unknown) => metadataRequest(server.url, body);

async function gql(query: string, headers: Record<string, string> = asAdmin, variables?: Record<string, unknown>) {
  const response = await postGraphQL<Record<string, any>>(server.graphqlUrl, { query, variables }, headers);
  expect(response.status).toBeLessThan(500);
  return response.body;
}

const rows = (sql: string, values: unknown[] = []) => server.database.query<Record<string, any>>(sql, values);
const snapshot = async () => JSON.stringify(await rows('SELECT * FROM i_notes ORDER BY id'));

beforeAll(async () => {
  server = await startTestServer();
  await server.database.query(`
    CREATE TABLE i_notes (id serial PRIMARY KEY, body text NOT NULL, author text, owner_id uuid, n int NOT NULL DEFAULT 0, doc jsonb NOT NULL DEFAULT '{}',
      CONSTRAINT i_notes_body_key UNIQUE (body));
  `);
  const setUp = await metadata({
    type: 'bulk',
    args: [
      { type: 'pg_track_table', args: { table: 'i_notes' } },
      { type: 'pg_create_select_permission', args: { table: 'i_notes', role: 'user', permission: { columns: '*', filter: {} } } },
      {
        type: 'pg_create_insert_permission',
        args: {
          table: 'i_notes',
          role: 'user',
          permission: { columns: ['body', 'n', 'doc'], check: {}, set: { author: 'X-Gql-Author', owner_id: 'X-Gql-User-Id' } },
        },
      },
      { type: 'pg_create_update_permission', args: { table: 'i_notes', role: 'user', permission: { columns: ['body', 'n', 'doc'], filter: {} } } },
      { type: 'pg_create_delete_permission', args: { table: 'i_notes', role: 'user', permission: { filter: { author: { _neq: 'X-Gql-User-Id' } } } } },
    ],
  });
  expect(setUp.status).toBe(200);
});
afterAll(async () => {
  await server.close();
});
beforeEach(async () => {
  await rows('TRUNCATE i_notes RESTART IDENTITY');
});

describe('hostile values', () => {
  it.each(HOSTILE)('%j is a value in every argument, never SQL', async (hostile) => {
    const inserted = await gql('mutation ($v: String!, $d: jsonb!) { insert_i_notes_one(object: {body: $v, doc: $d}) { id body doc } }', asAdmin, {
      v: hostile,
      d: { [hostile]: hostile, k: [hostile] },
    });
    expect(inserted.errors).toBeUndefined();
    expect(inserted.data!.insert_i_notes_one).toEqual({ id: 1, body: hostile, doc: { [hostile]: hostile, k: [hostile] } });
    const literal = JSON.stringify(hostile);
    for (const text of [
      `mutation { update_i_notes(where: {body: {_eq: ${literal}}}, _set: {body: ${literal}}) { affected_rows } }`,
      `mutation { update_i_notes(where: {body: {_like: ${literal}}}, _set: {n: 1}) { affected_rows } }`,
      `mutation { update_i_notes(where: {id: {_eq: 1}}, _delete_key: {doc: ${literal}}) { affected_rows } }`,
      `mutation { update_i_notes(where: {id: {_eq: 1}}, _append: {doc: {k: ${literal}}}) { affected_rows } }`,
      `mutation { update_i_notes(where: {id: {_eq: 1}}, _delete_at_path: {doc: [${literal}, ${literal}]}) { affected_rows } }`,
      `mutation { insert_i_notes(objects: [{body: ${literal}}], on_conflict: {constraint: i_notes_body_key, update_columns: [n], where: {body: {_neq: ${literal}}}}) { affected_rows } }`,
      `mutation { delete_i_notes(where: {body: {_iregex: ${JSON.stringify(hostile.replace(/[\\$()*+.?[\]^{|}]/g, '\\$&'))}}, id: {_eq: 2}}) { affected_rows } }`,
    ]) {
      const body = await gql(text);
      expect(body.errors).toBeUndefined();
    }
    // The session's values are bound too: a preset from a hostile header.
    const viaSession = await gql('mutation { insert_i_notes_one(object: {body: "from the session"}) { author } }', {
      ...asAdmin,
      'x-gql-role': 'user',
      'x-gql-user-id': alice,
      'x-gql-author': hostile,
    });
    expect(viaSession.errors).toBeUndefined();
    expect(viaSession.data!.insert_i_notes_one).toEqual({ author: hostile });
    expect(await rows('SELECT body, author FROM i_notes ORDER BY id')).toEqual([
      { body: hostile, author: null },
      { body: 'from the session', author: hostile },
    ]);
  });

  it('refuses names that are not the schema own: constraints, columns, operators', async () => {
    await rows(`INSERT INTO i_notes (body) VALUES ('a')`);
    const before = await snapshot();
    for (const text of [
      'mutation { insert_i_notes(objects: [{body: "b"}], on_conflict: {constraint: i_notes_pkey_or_1, update_columns: []}) { affected_rows } }',
      'mutation { insert_i_notes(objects: [{body: "b", nothere: 1}]) { affected_rows } }',
      'mutation { update_i_notes(where: {}, _set: {body: "b"}, _mul: {n: 2}) { affected_rows } }',
      'mutation { delete_i_notes(where: {body: {_eq: "a"}, _raw: "true"}) { affected_rows } }',
    ]) {
      const body = await gql(text);
      expect(body.errors![0].extensions!.code).toBe('GRAPHQL_VALIDATION_FAILED');
    }
    const viaVariables = await gql('mutation ($o: [i_notes_insert_input!]!) { insert_i_notes(objects: $o) { affected_rows } }', asAdmin, {
      o: [{ body: 'b', 'n) VALUES (1); DROP TABLE i_notes; --': 1 }],
    });
    expect(viaVariables.errors![0].extensions!.code).toBe('BAD_USER_INPUT');
    expect(await snapshot()).toBe(before);
  });
});

describe('bad input', () => {
  beforeEach(async () => {
    await rows(`INSERT INTO i_notes (body, doc) VALUES ('a', '{"x": 1}')`);
  });

  const cases: [string, string, Record<string, unknown> | undefined, string, RegExp][] = [
    [
      'a duplicate',
      'mutation { insert_i_notes(objects: [{body: "b"}, {body: "a"}]) { affected_rows } }',
      undefined,
      'constraint-violation',
      /^Uniqueness violation\. duplicate key value violates unique constraint "i_notes_body_key"/,
    ],
    [
      'a null where a value is required',
      'mutation ($b: String) { insert_i_notes_one(object: {body: $b}) { id } }',
      { b: null },
      'constraint-violation',
      /^Not-NULL violation\. /,
    ],
    [
      'a value of the wrong form',
      'mutation ($o: uuid) { insert_i_notes_one(object: {body: "b", owner_id: $o}) { id } }',
      { o: 'not-a-uuid' },
      'BAD_USER_INPUT',
      /invalid input syntax for type uuid/,
    ],
    [
      'an increment out of range',
      'mutation { update_i_notes(where: {}, _inc: {n: 2147483647}) { affected_rows } b: update_i_notes(where: {}, _inc: {n: 1}) { affected_rows } }',
      undefined,
      'BAD_USER_INPUT',
      /out of range/,
    ],
    [
      'an element index on an object',
      'mutation { update_i_notes(where: {}, _delete_elem: {doc: 0}) { affected_rows } }',
      undefined,
      'BAD_USER_INPUT',
      /cannot delete from object using integer index/,
    ],
    [
      'one conflicting row upserted twice',
      'mutation { insert_i_notes(objects: [{body: "z"}, {body: "z"}], on_conflict: {constraint: i_notes_body_key, update_columns: [n]}) { affected_rows } }',
      undefined,
      'BAD_USER_INPUT',
      /cannot affect row a second time/,
    ],
    ['a null operand', 'mutation { update_i_notes(where: {}, _inc: {n: null}) { affected_rows } }', undefined, 'BAD_USER_INPUT', /_inc on "n" cannot be null/],
    ['no operator', 'mutation { update_i_notes(where: {}) { affected_rows } }', undefined, 'BAD_USER_INPUT', /at least any one of _set, _inc/],
    ['a where comparing with null', 'mutation { delete_i_notes(where: {body: {_eq: null}}) { affected_rows } }', undefined, 'BAD_USER_INPUT', /use _is_null/],
  ];

  it.each(cases)('%s gets a clear error and changes nothing', async (_name, text, variables, code, message) => {
    const before = await snapshot();
    const body = await gql(`mutation { insert_i_notes_one(object: {body: "first"}) { id } }`);
    expect(body.errors).toBeUndefined();
    await rows(`DELETE FROM i_notes WHERE body = 'first'`);
    // Preceded by a write in the same mutation: it is rolled back with the failing one.
    const failing = await gql(
      text.replace(/^mutation( \([^)]*\))? \{/, (start) => `${start} w: insert_i_notes_one(object: {body: "kept?"}) { id } `),
      asAdmin,
      variables,
    );
    expect(failing.errors).toHaveLength(1);
    expect(failing.errors![0].extensions!.code).toBe(code);
    expect(failing.errors![0].message).toMatch(message);
    expect(await snapshot()).toBe(before);
  });

  it('needs the session variables a preset names', async () => {
    const before = await snapshot();
    const body = await gql('mutation { insert_i_notes_one(object: {body: "b"}) { id } }', { ...asAdmin, 'x-gql-role': 'user', 'x-gql-user-id': alice });
    expect(body.errors![0]).toMatchObject({ message: 'missing session variable: "x-gql-author"', extensions: { code: 'BAD_USER_INPUT' } });
    expect(await snapshot()).toBe(before);
  });

  it('answers an empty insert and a missing row plainly', async () => {
    const body = await gql(
      'mutation { insert_i_notes(objects: []) { affected_rows returning { id } } update_i_notes_by_pk(pk_columns: {id: 99}, _set: {n: 1}) { id } delete_i_notes_by_pk(id: 99) { id } }',
    );
    expect(body).toEqual({ data: { insert_i_notes: { affected_rows: 0, returning: [] }, update_i_notes_by_pk: null, delete_i_notes_by_pk: null } });
  });
});

describe('write permissions in the metadata', () => {
  it('are exported, replaced and dropped as Hasura writes them', async () => {
    const exported = await metadata({ type: 'export_metadata', args: {} });
    const entry = exported.body.sources[0].tables.find((table: { table: { name: string } }) => table.table.name === 'i_notes');
    expect(entry.insert_permissions).toEqual([
      { role: 'user', permission: { columns: ['body', 'n', 'doc'], check: {}, set: { author: 'X-Gql-Author', owner_id: 'X-Gql-User-Id' } } },
    ]);
    expect(entry.update_permissions).toEqual([{ role: 'user', permission: { columns: ['body', 'n', 'doc'], filter: {} } }]);
    expect(entry.delete_permissions).toEqual([{ role: 'user', permission: { filter: { author: { _neq: 'X-Gql-User-Id' } } } }]);
    const replaced = await metadata({ type: 'replace_metadata', args: exported.body });
    expect(replaced.status).toBe(200);
    expect((await metadata({ type: 'export_metadata', args: {} })).body).toEqual(exported.body);

    const refusals: [unknown, number, string][] = [
      [{ type: 'pg_create_insert_permission', args: { table: 'i_notes', role: 'user', permission: { columns: ['body'], check: {} } } }, 400, 'already-exists'],
      [
        { type: 'pg_create_insert_permission', args: { table: 'i_notes', role: 'other', permission: { columns: ['nope'], check: {} } } },
        400,
        'validation-failed',
      ],
      [
        { type: 'pg_create_update_permission', args: { table: 'i_notes', role: 'other', permission: { columns: '*', filter: { nope: { _eq: 1 } } } } },
        400,
        'validation-failed',
      ],
      [
        {
          type: 'pg_create_update_permission',
          args: { table: 'i_notes', role: 'other', permission: { columns: '*', filter: {}, check: { body: { _bad: 1 } } } },
        },
        400,
        'validation-failed',
      ],
      [{ type: 'pg_create_delete_permission', args: { table: 'i_notes', role: 'other', permission: { filter: {}, extra: true } } }, 400, 'parse-failed'],
      [
        { type: 'pg_create_insert_permission', args: { table: 'i_notes', role: 'other', permission: { columns: ['body'], check: {}, set: { nope: 1 } } } },
        400,
        'validation-failed',
      ],
      [{ type: 'pg_drop_delete_permission', args: { table: 'i_notes', role: 'other' } }, 400, 'not-exists'],
    ];
    for (const [request, status, code] of refusals) {
      const answer = await metadata(request);
      expect([answer.status, answer.body.code]).toEqual([status, code]);
    }
    expect((await metadata({ type: 'export_metadata', args: {} })).body).toEqual(exported.body);

    expect((await metadata({ type: 'pg_drop_delete_permission', args: { table: 'i_notes', role: 'user' } })).status).toBe(200);
    const gone = await gql('mutation { delete_i_notes(where: {}) { affected_rows } }', asUser());
    expect(gone.errors![0].extensions!.code).toBe('GRAPHQL_VALIDATION_FAILED');
    expect((await metadata({ type: 'replace_metadata', args: exported.body })).status).toBe(200);
    const back = await gql('mutation { delete_i_notes(where: {id: {_eq: 0}}) { affected_rows } }', asUser());
    expect(back).toEqual({ data: { delete_i_notes: { affected_rows: 0 } } });
  });
});
