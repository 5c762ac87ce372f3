import { randomUUID } from 'node:crypto';
import { postGraphQL } from '../support/graphql';
import { generator, type Random } from '../support/random';
import { ADMIN_SECRET, startTestServer, type TestServer } from '../support/server';
import { bearer, signToken } from '../support/tokens';

/*
 * Random inserts (with and without on_conflict, and nested: rows with their items through an array
 * relationship), updates (every operator but the element and path deletions) and deletes, as the
 * admin and as two users, through Plinth on d_plinth and through
 * hand-written SQL on d_mirror, which starts equal: every step answers the same, and the tables end equal.
 */

let server: TestServer;
const users = [randomUUID(), randomUUID()];
const KEYS = ['k0', 'k1', 'k2', 'k3', 'k4', 'k5', 'k6', 'k7'];
const STEPS = 150;
const SEED = 20261128;
/** The users' update check: n stays under this. */
const CEILING = 20;
/** The users' insert check on items: v stays under this. */
const ITEM_CEILING = 8;

const rows = (sql: string, values: unknown[] = []) => server.database.query<Record<string, any>>(sql, values);

beforeAll(async () => {
  server = await startTestServer();
  await rows(`
    CREATE TABLE d_plinth (k text PRIMARY KEY, n int NOT NULL DEFAULT 0, owner text, doc jsonb NOT NULL DEFAULT '{}');
    CREATE TABLE d_mirror (LIKE d_plinth INCLUDING ALL);
    CREATE TABLE d_plinth_items (id text PRIMARY KEY, parent_k text NOT NULL REFERENCES d_plinth (k) ON DELETE CASCADE, v int NOT NULL);
    CREATE TABLE d_mirror_items (id text PRIMARY KEY, parent_k text NOT NULL REFERENCES d_mirror (k) ON DELETE CASCADE, v int NOT NULL);
    INSERT INTO d_plinth VALUES ('k0', 1, NULL, '{"a": 1}'), ('k1', 2, '${users[0]}', '{"b": 2}'), ('k2', 3, '${users[1]}', '{}');
    INSERT INTO d_mirror SELECT * FROM d_plinth;
  `);
  const response = await fetch(`${server.url}/v1/metadata`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-gql-admin-secret': ADMIN_SECRET },
    body: JSON.stringify({
      type: 'bulk',
      args: [
        { type: 'pg_track_table', args: { table: 'd_plinth' } },
        { type: 'pg_track_table', args: { table: 'd_plinth_items' } },
        {
          type: 'pg_create_array_relationship',
          args: { table: 'd_plinth', name: 'items', using: { foreign_key_constraint_on: { table: 'd_plinth_items', column: 'parent_k' } } },
        },
        {
          type: 'pg_create_insert_permission',
          args: { table: 'd_plinth_items', role: 'user', permission: { columns: ['id', 'v'], check: { v: { _lt: ITEM_CEILING } } } },
        },
        { type: 'pg_create_select_permission', args: { table: 'd_plinth', role: 'user', permission: { columns: '*', filter: {} } } },
        {
          type: 'pg_create_insert_permission',
          args: { table: 'd_plinth', role: 'user', permission: { columns: ['k', 'n', 'doc'], check: {}, set: { owner: 'X-Gql-User-Id' } } },
        },
        {
          type: 'pg_create_update_permission',
          args: {
            table: 'd_plinth',
            role: 'user',
            permission: { columns: ['n', 'doc'], filter: { owner: { _eq: 'X-Gql-User-Id' } }, check: { n: { _lt: CEILING } } },
          },
        },
        { type: 'pg_create_delete_permission', args: { table: 'd_plinth', role: 'user', permission: { filter: { owner: { _eq: 'X-Gql-User-Id' } } } } },
      ],
    }),
  });
  expect(response.status).toBe(200);
});
afterAll(async () => {
  await server.close();
});

/** One random step: the GraphQL mutation, and the same change in SQL on d_mirror (a count of rows, or null when PostgreSQL or the check refuses it). */
interface Step {
  query: string;
  variables: Record<string, unknown>;
  mirror(): Promise<number | null>;
}

/** A random `where`, and the same condition in SQL over d_mirror's columns with its values from `values`. */
function randomWhere(random: Random, values: unknown[]): { where: Record<string, unknown>; sql: string } {
  const param = (value: unknown) => `$${values.push(value)}`;
  switch (random.pick(['all', 'gt', 'in', 'key', 'and'] as const)) {
    case 'all':
      return { where: {}, sql: 'true' };
    case 'gt': {
      const n = Math.floor(random.pick([0, 2, 5, 10, 20]));
      return { where: { n: { _gt: n } }, sql: `n > ${param(n)}::int` };
    }
    case 'in': {
      const keys = random.some(KEYS, 3);
      return { where: { k: { _in: keys } }, sql: `k = ANY(${param(keys)}::text[])` };
    }
    case 'key': {
      const key = random.pick(['a', 'b', 'c']);
      return { where: { doc: { _has_key: key } }, sql: `doc ? ${param(key)}::text` };
    }
    case 'and': {
      const keys = random.some(KEYS, 4);
      return { where: { _and: [{ k: { _in: keys } }, { n: { _lte: 10 } }] }, sql: `(k = ANY(${param(keys)}::text[]) AND n <= 10)` };
    }
  }
}

function randomStep(random: Random, owner: string | null): Step {
  const ownerFilter = (values: unknown[]) => (owner === null ? 'true' : `owner = $${values.push(owner)}::text`);
  const count = async (sql: string, values: unknown[]) => {
    try {
      return (await rows(`WITH w AS (${sql} RETURNING 1) SELECT count(*)::int AS n FROM w`, values))[0].n as number;
    } catch {
      return null;
    }
  };
  const kind = random.pick(['insert', 'insert', 'nested', 'update', 'update', 'delete'] as const);
  if (kind === 'nested') return nestedStep(random, owner);
  if (kind === 'insert') {
    const keys = random.some(KEYS, 3);
    const objects = keys.map((k) => ({
      k,
      n: Math.floor(random.pick([0, 1, 4, 9, 15])),
      doc: random.chance(0.5) ? { [random.pick(['a', 'b', 'c'])]: 1 } : {},
    }));
    const upsert = random.chance(0.6);
    const columns = upsert ? (random.chance(0.2) ? [] : random.some(['n', 'doc'], 2)) : [];
    const onConflict = upsert ? `, on_conflict: {constraint: d_plinth_pkey, update_columns: [${columns.join(', ')}]}` : '';
    return {
      query: `mutation ($objects: [d_plinth_insert_input!]!) { r: insert_d_plinth(objects: $objects${onConflict}) { affected_rows } }`,
      variables: { objects },
      mirror: async () => {
        const values: unknown[] = [];
        const tuples = objects.map(
          (object) =>
            `(${[object.k, object.n, JSON.stringify(object.doc), owner].map((value, index) => `$${values.push(value)}::${['text', 'int', 'jsonb', 'text'][index]}`).join(', ')})`,
        );
        let sql = `INSERT INTO d_mirror AS t (k, n, doc, owner) VALUES ${tuples.join(', ')}`;
        if (upsert) {
          sql += columns.length
            ? ` ON CONFLICT (k) DO UPDATE SET ${columns.map((column) => `${column} = EXCLUDED.${column}`).join(', ')} WHERE ${ownerFilter(values).replace('owner', 't.owner')}`
            : ' ON CONFLICT (k) DO NOTHING';
        }
        return count(sql, values);
      },
    };
  }
  const values: unknown[] = [];
  const { where, sql: condition } = randomWhere(random, values);
  if (kind === 'delete') {
    return {
      query: 'mutation ($where: d_plinth_bool_exp!) { r: delete_d_plinth(where: $where) { affected_rows } }',
      variables: { where },
      mirror: () => count(`DELETE FROM d_mirror WHERE ${condition} AND ${ownerFilter(values)}`, values),
    };
  }
  const operator = random.pick(['_set', '_inc', '_append', '_prepend', '_delete_key'] as const);
  const given: Record<string, unknown> = {};
  let set: string;
  switch (operator) {
    case '_set': {
      const n = random.pick([0, 3, 7]);
      given._set = { n };
      set = `n = $${values.push(n)}::int`;
      break;
    }
    case '_inc': {
      const by = random.pick([1, 5, 25]);
      given._inc = { n: by };
      set = `n = n + $${values.push(by)}::int`;
      break;
    }
    case '_append':
    case '_prepend': {
      const doc = { [random.pick(['a', 'b', 'c'])]: random.pick([1, 2]) };
      given[operator] = { doc };
      set = operator === '_append' ? `doc = doc || $${values.push(JSON.stringify(doc))}::jsonb` : `doc = $${values.push(JSON.stringify(doc))}::jsonb || doc`;
      break;
    }
    case '_delete_key': {
      const key = random.pick(['a', 'b', 'c']);
      given._delete_key = { doc: key };
      set = `doc = doc - $${values.push(key)}::text`;
      break;
    }
  }
  return {
    query: `mutation ($where: d_plinth_bool_exp!, $ops: d_plinth${operator}_input) { r: update_d_plinth(where: $where, ${operator}: $ops) { affected_rows } }`,
    variables: { where, ops: given[operator] },
    mirror: async () => {
      const filter = ownerFilter(values);
      if (owner !== null) {
        // The users' check on the rows after the update: one failing row refuses the whole update.
        const [{ failing }] = await rows(
          `SELECT count(*)::int AS failing FROM (SELECT ${set.slice(set.indexOf('=') + 1)} AS v, ${operator === '_set' || operator === '_inc' ? set.slice(set.indexOf('=') + 1) : 'n'} AS n FROM d_mirror WHERE ${condition} AND ${filter}) AS after WHERE n >= ${CEILING}`,
          values,
        );
        if (failing > 0) return null;
      }
      return count(`UPDATE d_mirror SET ${set} WHERE ${condition} AND ${filter}`, values);
    },
  };
}

/** Rows with 0 to 2 items each (the items' keys may exist already), and the same rows and items in SQL in one statement. */
function nestedStep(random: Random, owner: string | null): Step {
  const objects = random.some(KEYS, 2).map((k) => ({
    k,
    n: Math.floor(random.pick([0, 2, 6])),
    items: { data: random.some(['x', 'y', 'z'], Math.floor(random.pick([0, 1, 2]))).map((suffix) => ({ id: `${k}-${suffix}`, v: random.pick([1, 5, 9]) })) },
  }));
  return {
    query: 'mutation ($objects: [d_plinth_insert_input!]!) { r: insert_d_plinth(objects: $objects) { affected_rows } }',
    variables: { objects },
    mirror: async () => {
      const items = objects.flatMap((object) => object.items.data.map((item) => ({ ...item, parent: object.k })));
      // A user's item over the check refuses everything.
      if (owner !== null && items.some((item) => item.v >= ITEM_CEILING)) return null;
      const values: unknown[] = [];
      const bound = (value: unknown, type: string) => `$${values.push(value)}::${type}`;
      const parents = objects.map((object) => `(${bound(object.k, 'text')}, ${bound(object.n, 'int')}, ${bound(owner, 'text')})`);
      const children = items.map((item) => `(${bound(item.id, 'text')}, ${bound(item.parent, 'text')}, ${bound(item.v, 'int')})`);
      const withChildren = children.length ? `, c AS (INSERT INTO d_mirror_items (id, parent_k, v) VALUES ${children.join(', ')} RETURNING 1)` : '';
      const sql = `WITH p AS (INSERT INTO d_mirror (k, n, owner) VALUES ${parents.join(', ')} RETURNING 1)${withChildren}
        SELECT ((SELECT count(*) FROM p)${children.length ? ' + (SELECT count(*) FROM c)' : ''})::int AS n`;
      try {
        return (await rows(sql, values))[0].n as number;
      } catch {
        return null;
      }
    },
  };
}

it(`${STEPS} random writes through Plinth and through SQL leave the tables equal`, async () => {
  const random = generator(SEED);
  const sessions: [string | null, Record<string, string>][] = [
    [null, { 'x-gql-admin-secret': ADMIN_SECRET }],
    [users[0], bearer(signToken({ roles: ['user'], userId: users[0] }))],
    [users[1], bearer(signToken({ roles: ['user'], userId: users[1] }))],
  ];
  const outcomes = { written: 0, nested: 0, 'constraint-violation': 0, 'permission-error': 0 };
  for (let step = 0; step < STEPS; step++) {
    const [owner, headers] = random.pick(sessions);
    const { query, variables, mirror } = randomStep(random, owner);
    const response = await postGraphQL<{ r: { affected_rows: number } }>(server.graphqlUrl, { query, variables }, headers);
    expect(response.status).toBe(200);
    const expected = await mirror();
    const answered = response.body.errors ? null : response.body.data!.r.affected_rows;
    if (answered !== expected)
      throw new Error(
        `step ${step} (seed ${SEED}): ${query} ${JSON.stringify(variables)} as ${owner ?? 'admin'}: Plinth ${JSON.stringify(response.body)}, SQL ${expected}`,
      );
    if (response.body.errors) {
      const code = response.body.errors[0].extensions!.code as 'constraint-violation' | 'permission-error';
      expect(['constraint-violation', 'permission-error']).toContain(code);
      outcomes[code]++;
    } else {
      outcomes.written++;
      if (
        query.includes('insert_d_plinth(objects: $objects)') &&
        (variables.objects as { items?: { data: unknown[] } }[]).some((object) => object.items?.data.length)
      )
        outcomes.nested++;
    }
    const [plinth, mirrored] = await Promise.all(
      ['d_plinth', 'd_mirror'].map(async (table) => [await rows(`SELECT * FROM ${table} ORDER BY k`), await rows(`SELECT * FROM ${table}_items ORDER BY id`)]),
    );
    if (JSON.stringify(plinth) !== JSON.stringify(mirrored))
      throw new Error(`step ${step} (seed ${SEED}): tables differ after ${query} ${JSON.stringify(variables)}`);
  }
  // The run exercised both outcomes.
  expect(outcomes.written).toBeGreaterThan(50);
  expect(outcomes.nested).toBeGreaterThan(5);
  expect(outcomes['constraint-violation']).toBeGreaterThan(0);
  expect(outcomes['permission-error']).toBeGreaterThan(0);
});
