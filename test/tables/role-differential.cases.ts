import pg from 'pg';
import { metadataRequest } from '../support/metadata';
import { postGraphQL } from '../support/graphql';
import { generator, type Random } from '../support/random';
import { startTestServer, type TestServer } from '../support/server';
import { bearer, signToken } from '../support/tokens';

/*
 * The differential per role: for tables with every supported column type, nulls, a
 * self-referencing relationship (a member's manager and reports) and a many-to-many one (members
 * and groups through memberships), two roles get select permissions (column subsets, row filters
 * on X-Gql-User-Id through relationship paths and _exists, a limit). Random queries, using only
 * what each role may see, run through Plinth with the role's token and through hand-written SQL
 * that applies the role's filter and limit, and the answers must be equal row for row.
 */

let server: TestServer;
/** One connection for the expected answers. */
let oracle: pg.Client;

/** The users whose rows the tables hold, and one who owns nothing. */
const USERS = ['6f1c1d1e-0000-4000-8000-000000000001', '6f1c1d1e-0000-4000-8000-000000000002', '6f1c1d1e-0000-4000-8000-000000000003'];
const OUTSIDER = '6f1c1d1e-0000-4000-8000-0000000000ff';

type Kind = 'number' | 'text' | 'bool' | 'ordered' | 'jsonb' | 'json' | 'array' | 'money' | 'opaque';
interface Column {
  name: string;
  type: string;
  kind: Kind;
  /** Values the rows take and the queries compare with (null is added for a nullable column). */
  values: readonly unknown[];
  nullable?: boolean;
  /** Patterns for the text operators. */
  patterns?: readonly string[];
}

const TEXT_PATTERNS = { like: ['%a%', 'A%', '%e', '_r%', '%'], similar: ['(A|B)%', '%(a|e)%'], regex: ['^[A-D]', 'a$', 'e.', '^$'] };
const COLUMNS: Record<string, Column[]> = {
  members: [
    { name: 'id', type: 'serial PRIMARY KEY', kind: 'number', values: [1, 5, 12, 20, 33] },
    { name: 'owner_id', type: 'uuid', kind: 'ordered', values: USERS, nullable: true },
    { name: 'manager_id', type: 'int REFERENCES members (id)', kind: 'number', values: [1, 2, 3, 4, 7], nullable: true },
    { name: 'name', type: 'text NOT NULL', kind: 'text', values: ['Ada', 'Brian', 'Cleo', 'Dana', 'Eve', 'Finn', 'ada', 'Zoë'] },
    { name: 'nickname', type: 'varchar(40)', kind: 'text', values: ['ace', 'bee', 'Cat', 'dot', 'e'], nullable: true },
    { name: 'code', type: 'char(3)', kind: 'text', values: ['AB1', 'CD2', 'EF3', 'A'], nullable: true },
    { name: 'flags', type: 'bit(3)', kind: 'ordered', values: ['101', '010', '111'], nullable: true },
    { name: 'email', type: 'citext', kind: 'text', values: ['Ada@Example.com', 'brian@example.COM', 'cleo@example.org', 'ADA@EXAMPLE.COM'], nullable: true },
    { name: 'age', type: 'smallint', kind: 'number', values: [18, 25, 33, 41, 60], nullable: true },
    { name: 'score', type: 'int', kind: 'number', values: [-5, 0, 7, 12, 100], nullable: true },
    { name: 'points', type: 'bigint', kind: 'number', values: [0, 42, 1000000000000], nullable: true },
    { name: 'ratio', type: 'real', kind: 'number', values: [0.5, 1.25, 2.5, -1.75], nullable: true },
    { name: 'weight', type: 'double precision', kind: 'number', values: [10.5, 70.25, 80, 95.125], nullable: true },
    { name: 'balance', type: 'numeric(12, 2)', kind: 'number', values: [0, 10.5, 99.99, 1234.56], nullable: true },
    { name: 'active', type: 'boolean', kind: 'bool', values: [true, false], nullable: true },
    { name: 'born', type: 'date', kind: 'ordered', values: ['1990-01-01', '1985-06-15', '2000-12-31', '1979-03-03'], nullable: true },
    { name: 'wakes', type: 'time', kind: 'ordered', values: ['06:30:00', '07:15:00', '08:00:00'], nullable: true },
    { name: 'wakes_tz', type: 'timetz', kind: 'ordered', values: ['06:30:00+00', '07:15:00+02', '05:00:00-03'], nullable: true },
    { name: 'created', type: 'timestamp', kind: 'ordered', values: ['2024-01-01 10:00:00', '2024-06-01 12:30:00', '2025-02-03 04:05:06'], nullable: true },
    {
      name: 'seen',
      type: 'timestamptz',
      kind: 'ordered',
      values: ['2024-01-01T10:00:00Z', '2024-06-01T12:30:00+02:00', '2025-02-03T04:05:06Z'],
      nullable: true,
    },
    { name: 'span', type: 'interval', kind: 'ordered', values: ['01:00:00', '2 days', '00:30:00'], nullable: true },
    { name: 'ip', type: 'inet', kind: 'ordered', values: ['10.0.0.1', '192.168.1.20', '::1'], nullable: true },
    { name: 'token', type: 'uuid', kind: 'ordered', values: ['0b6e3c1a-1111-4111-8111-111111111111', '0b6e3c1a-2222-4222-8222-222222222222'], nullable: true },
    {
      name: 'profile',
      type: 'jsonb',
      kind: 'jsonb',
      values: [{ lang: 'en', tags: ['a'] }, { lang: 'fr' }, { lang: 'en', level: 2 }, {}, ['a', 'b']],
      nullable: true,
    },
    { name: 'extra', type: 'json', kind: 'json', values: [{ a: 1 }, [1, 2], 'x'], nullable: true },
    { name: 'tags', type: 'text[]', kind: 'array', values: [['x'], ['x', 'y'], [], ['y', 'z'], ["it's", 'a "quote"']], nullable: true },
    { name: 'scores', type: 'int[]', kind: 'array', values: [[1, 2], [3], [], [2, 1, 3]], nullable: true },
    { name: 'blob', type: 'bytea', kind: 'opaque', values: ['\\x0102', '\\xff'], nullable: true },
    { name: 'price', type: 'money', kind: 'money', values: [1, 12.5, 99], nullable: true },
    { name: 'secret', type: 'text', kind: 'text', values: ['s1', 's2'], nullable: true },
  ],
  groups: [
    { name: 'id', type: 'serial PRIMARY KEY', kind: 'number', values: [1, 2, 3, 6] },
    { name: 'name', type: 'text NOT NULL', kind: 'text', values: ['alpha', 'Beta', 'gamma', 'Delta'] },
    { name: 'owner_id', type: 'uuid', kind: 'ordered', values: USERS, nullable: true },
    { name: 'budget', type: 'numeric', kind: 'number', values: [0, 150.5, 1000], nullable: true },
    { name: 'founded', type: 'date', kind: 'ordered', values: ['2001-01-01', '2010-05-05', '2020-10-10'], nullable: true },
  ],
  memberships: [
    { name: 'member_id', type: 'int NOT NULL REFERENCES members (id)', kind: 'number', values: [1, 4, 9, 16] },
    { name: 'group_id', type: 'int NOT NULL REFERENCES groups (id)', kind: 'number', values: [1, 2, 5] },
    { name: 'role', type: 'text', kind: 'text', values: ['lead', 'member', 'guest'], nullable: true },
    { name: 'joined', type: 'timestamptz', kind: 'ordered', values: ['2023-03-01T00:00:00Z', '2024-07-15T08:00:00Z'], nullable: true },
  ],
};
const PRIMARY_KEYS: Record<string, string[]> = { members: ['id'], groups: ['id'], memberships: ['member_id', 'group_id'] };
const column = (table: string, name: string) => COLUMNS[table].find((candidate) => candidate.name === name)!;

interface Relationship {
  kind: 'object' | 'array';
  target: string;
  /** (column of this table, column of the target) */
  mapping: [string, string];
}
const RELATIONSHIPS: Record<string, Record<string, Relationship>> = {
  members: {
    manager: { kind: 'object', target: 'members', mapping: ['manager_id', 'id'] },
    reports: { kind: 'array', target: 'members', mapping: ['id', 'manager_id'] },
    memberships: { kind: 'array', target: 'memberships', mapping: ['id', 'member_id'] },
  },
  groups: { memberships: { kind: 'array', target: 'memberships', mapping: ['id', 'group_id'] } },
  memberships: {
    member: { kind: 'object', target: 'members', mapping: ['member_id', 'id'] },
    group: { kind: 'object', target: 'groups', mapping: ['group_id', 'id'] },
  },
};

interface Permission {
  columns: string[];
  filter: Record<string, unknown>;
  limit?: number;
  aggregations?: boolean;
  /** The same filter as hand-written SQL over the row `t`; $1 is the session's user id. */
  sql: (t: string) => string;
}
const ROLES: Record<string, Record<string, Permission>> = {
  user: {
    members: {
      columns: COLUMNS.members.map((item) => item.name).filter((name) => name !== 'secret'),
      filter: { _or: [{ owner_id: { _eq: 'X-Gql-User-Id' } }, { manager: { owner_id: { _eq: 'X-Gql-User-Id' } } }] },
      limit: 6,
      sql: (t) => `(${t}.owner_id = $1 OR EXISTS (SELECT 1 FROM members boss WHERE boss.id = ${t}.manager_id AND boss.owner_id = $1))`,
    },
    groups: {
      columns: ['id', 'name', 'owner_id', 'budget', 'founded'],
      filter: {
        _exists: {
          _table: { schema: 'public', name: 'members' },
          _where: { _and: [{ owner_id: { _eq: 'X-Gql-User-Id' } }, { active: { _eq: true } }] },
        },
      },
      aggregations: true,
      sql: () => `EXISTS (SELECT 1 FROM members mine WHERE mine.owner_id = $1 AND mine.active = true)`,
    },
    memberships: {
      columns: ['member_id', 'group_id', 'role', 'joined'],
      filter: { member: { owner_id: { _eq: 'X-Hasura-User-Id' } } },
      aggregations: true,
      sql: (t) => `EXISTS (SELECT 1 FROM members mine WHERE mine.id = ${t}.member_id AND mine.owner_id = $1)`,
    },
  },
  viewer: {
    members: {
      columns: ['id', 'manager_id', 'name', 'nickname', 'age', 'score', 'active', 'born', 'seen', 'profile', 'tags'],
      filter: { _and: [{ active: { _eq: true } }, { memberships: { group: { owner_id: { _eq: 'X-Gql-User-Id' } } } }] },
      limit: 5,
      sql: (t) =>
        `(${t}.active = true AND EXISTS (SELECT 1 FROM memberships ms JOIN groups owned ON owned.id = ms.group_id WHERE ms.member_id = ${t}.id AND owned.owner_id = $1))`,
    },
    groups: { columns: ['id', 'name', 'owner_id'], filter: { owner_id: { _eq: 'X-Gql-User-Id' } }, sql: (t) => `${t}.owner_id = $1` },
    memberships: {
      columns: ['member_id', 'group_id', 'role'],
      filter: { group: { owner_id: { _eq: 'X-Gql-User-Id' } } },
      sql: (t) => `EXISTS (SELECT 1 FROM groups owned WHERE owned.id = ${t}.group_id AND owned.owner_id = $1)`,
    },
  },
};

/** A value as a quoted SQL literal, which PostgreSQL reads as the type of the column it meets (a list as an array for a text[] column). */
function literal(value: unknown, kind: Kind): string {
  let text = String(value);
  if (kind === 'json' || kind === 'jsonb') text = JSON.stringify(value);
  else if (Array.isArray(value)) text = `{${value.map((item) => JSON.stringify(item)).join(',')}}`;
  return `'${text.replace(/'/g, "''")}'`;
}

/** A value as a GraphQL literal (objects and lists as input literals, enums given as such by the caller). */
function graphqlValue(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(graphqlValue).join(', ')}]`;
  if (typeof value === 'object' && value !== null) {
    return `{${Object.entries(value)
      .map(([key, item]) => `${key}: ${graphqlValue(item)}`)
      .join(', ')}}`;
  }
  return JSON.stringify(value);
}

/** The seeded rows: members managed by earlier members, groups, and memberships between them. */
function seedSql(): string {
  const random = generator(7);
  const valueOf = (item: Column) => (item.nullable && random.chance(0.15) ? null : random.pick(item.values));
  const insert = (table: string, rows: Record<string, unknown>[]) => {
    const names = Object.keys(rows[0]);
    const values = rows.map((row) => `(${names.map((name) => (row[name] === null ? 'NULL' : literal(row[name], column(table, name).kind))).join(', ')})`);
    return `INSERT INTO ${table} (${names.join(', ')}) VALUES ${values.join(', ')};`;
  };
  const members = Array.from({ length: 40 }, (_, index) => {
    const row: Record<string, unknown> = { id: index + 1 };
    for (const item of COLUMNS.members) if (item.name !== 'id' && item.name !== 'manager_id') row[item.name] = valueOf(item);
    row.manager_id = index >= 3 && random.chance(0.8) ? 1 + Math.floor(random.pick([0, 0.25, 0.5, 0.75]) * index) : null;
    return row;
  });
  const groups = Array.from({ length: 6 }, (_, index) => {
    const row: Record<string, unknown> = { id: index + 1 };
    for (const item of COLUMNS.groups) if (item.name !== 'id') row[item.name] = valueOf(item);
    return row;
  });
  const memberships = members.flatMap((member) =>
    (random.chance(0.2) ? [] : random.some([1, 2, 3, 4, 5, 6], 3)).map((group) => ({
      member_id: member.id,
      group_id: group,
      role: valueOf(column('memberships', 'role')),
      joined: valueOf(column('memberships', 'joined')),
    })),
  );
  return [insert('members', members), insert('groups', groups), insert('memberships', memberships)].join('\n');
}

// --- Queries: generated as data, then written as GraphQL and as SQL -----------------------------

type Where = Record<string, unknown>;
type Direction = 'asc' | 'desc' | 'asc_nulls_first' | 'desc_nulls_last';
const DIRECTIONS: Record<Direction, string> = {
  asc: 'ASC NULLS LAST',
  desc: 'DESC NULLS FIRST',
  asc_nulls_first: 'ASC NULLS FIRST',
  desc_nulls_last: 'DESC NULLS LAST',
};
type OrderItem =
  { column: string; direction: Direction } | { through: string; column: string; direction: Direction } | { countOf: string; direction: Direction };
interface ListArguments {
  where?: Where;
  orderBy: OrderItem[];
  distinctOn?: string;
  limit?: number;
  offset?: number;
}
interface Selection {
  columns: string[];
  nested: Nested[];
}
type Nested =
  | { kind: 'object'; name: string; selection: Selection }
  | { kind: 'array'; name: string; args: ListArguments; selection: Selection }
  | { kind: 'aggregate'; name: string; where?: Where };

const ORDERABLE: readonly Kind[] = ['number', 'text', 'bool', 'ordered'];
const visible = (role: string, table: string) => COLUMNS[table].filter((item) => ROLES[role][table].columns.includes(item.name));

/** One comparison on a column the role sees, as a where object. */
function comparison(random: Random, item: Column): Where {
  const value = () => random.pick(item.values);
  const list = () => random.some(item.values, 3);
  const generic = [
    () => ({ _eq: value() }),
    () => ({ _neq: value() }),
    () => ({ _in: list() }),
    () => ({ _nin: list() }),
    () => ({ _is_null: random.chance(0.5) }),
  ];
  const ordered = [() => ({ _gt: value() }), () => ({ _gte: value() }), () => ({ _lt: value() }), () => ({ _lte: value() })];
  const operators: Record<Kind, (() => Where)[]> = {
    number: [...generic, ...ordered],
    ordered: [...generic, ...ordered],
    bool: [() => ({ _eq: value() }), () => ({ _neq: value() }), () => ({ _is_null: random.chance(0.5) })],
    text: [
      ...generic,
      ...ordered,
      ...(['_like', '_nlike', '_ilike', '_nilike'] as const).map((operator) => () => ({ [operator]: random.pick(TEXT_PATTERNS.like) })),
      ...(['_similar', '_nsimilar'] as const).map((operator) => () => ({ [operator]: random.pick(TEXT_PATTERNS.similar) })),
      ...(['_regex', '_nregex', '_iregex', '_niregex'] as const).map((operator) => () => ({ [operator]: random.pick(TEXT_PATTERNS.regex) })),
    ],
    jsonb: [
      () => ({ _eq: value() }),
      () => ({ _contains: random.pick([{ lang: 'en' }, { tags: ['a'] }, {}, ['a']]) }),
      () => ({ _contained_in: random.pick([{ lang: 'en', level: 2, tags: ['a'] }, { lang: 'fr' }]) }),
      () => ({ _has_key: random.pick(['lang', 'level', 'a']) }),
      () => ({ _has_keys_any: random.some(['lang', 'level', 'tags'], 2) }),
      () => ({ _has_keys_all: random.some(['lang', 'level', 'tags'], 2) }),
      () => ({ _is_null: random.chance(0.5) }),
    ],
    json: [() => ({ _is_null: random.chance(0.5) })],
    array: [
      ...generic,
      ...ordered,
      () => ({ _contains: random.pick(item.values) }),
      () => ({ _contained_in: random.pick(item.values) }),
      () => ({ _contains: random.pick(item.values) }),
    ],
    opaque: [() => ({ _is_null: random.chance(0.5) })],
    money: [() => ({ _gt: value() }), () => ({ _lte: value() }), () => ({ _is_null: random.chance(0.5) })],
  };
  const operator = random.pick(operators[item.kind])();
  // Two operators on one column are both applied (an implicit _and).
  return { [item.name]: random.chance(0.15) ? { ...operator, ...random.pick(operators[item.kind])() } : operator };
}

function whereFor(random: Random, role: string, table: string, depth: number): Where {
  const relationships = Object.keys(RELATIONSHIPS[table]);
  if (depth < 2 && random.chance(0.35)) {
    const kind = random.pick(['_and', '_or', '_not', 'both'] as const);
    const left = whereFor(random, role, table, depth + 1);
    const right = whereFor(random, role, table, depth + 1);
    if (kind === '_not') return { _not: left };
    if (kind === 'both') return { ...right, ...left };
    return { [kind]: random.chance(0.1) ? [] : [left, right] };
  }
  if (depth < 2 && random.chance(0.25)) {
    const name = random.pick(relationships);
    return { [name]: random.chance(0.15) ? {} : whereFor(random, role, RELATIONSHIPS[table][name].target, depth + 1) };
  }
  return comparison(random, random.pick(visible(role, table)));
}

function orderFor(random: Random, role: string, table: string): OrderItem[] {
  const orderable = visible(role, table).filter((item) => ORDERABLE.includes(item.kind));
  const direction = () => random.pick(Object.keys(DIRECTIONS) as Direction[]);
  const items: OrderItem[] = [];
  for (let index = random.pick([0, 1, 1, 2]); index > 0; index--) {
    const objects = Object.entries(RELATIONSHIPS[table]).filter(([, relationship]) => relationship.kind === 'object');
    const counted = Object.entries(RELATIONSHIPS[table]).filter(
      ([, relationship]) => relationship.kind === 'array' && ROLES[role][relationship.target].aggregations,
    );
    const choice = random.pick(['column', 'column', 'through', 'count'] as const);
    if (choice === 'through' && objects.length) {
      const [name, relationship] = random.pick(objects);
      const targetColumns = visible(role, relationship.target).filter((item) => ORDERABLE.includes(item.kind));
      items.push({ through: name, column: random.pick(targetColumns).name, direction: direction() });
    } else if (choice === 'count' && counted.length) {
      items.push({ countOf: random.pick(counted)[0], direction: direction() });
    } else {
      items.push({ column: random.pick(orderable).name, direction: direction() });
    }
  }
  return items;
}

/** List arguments; the primary key always ends the order, so that every list has one right order. */
function listArguments(random: Random, role: string, table: string, root: boolean): ListArguments {
  const args: ListArguments = { orderBy: orderFor(random, role, table) };
  if (random.chance(root ? 0.8 : 0.4)) args.where = whereFor(random, role, table, 0);
  if (random.chance(0.2)) {
    const orderable = visible(role, table).filter((item) => ORDERABLE.includes(item.kind));
    const distinct = random.pick(orderable).name;
    args.distinctOn = distinct;
    args.orderBy = [{ column: distinct, direction: random.pick(Object.keys(DIRECTIONS) as Direction[]) }, ...args.orderBy];
  }
  args.orderBy.push(...PRIMARY_KEYS[table].map((key): OrderItem => ({ column: key, direction: 'asc' })));
  if (random.chance(0.6)) args.limit = random.pick([1, 2, 3, 5, 10]);
  if (random.chance(0.35)) args.offset = random.pick([0, 1, 4]);
  return args;
}

function selectionFor(random: Random, role: string, table: string, depth: number): Selection {
  const selection: Selection = { columns: random.some(ROLES[role][table].columns, 4), nested: [] };
  if (depth >= 2) return selection;
  for (const [name, relationship] of Object.entries(RELATIONSHIPS[table])) {
    if (!random.chance(depth === 0 ? 0.45 : 0.25)) continue;
    const inner = () => selectionFor(random, role, relationship.target, depth + 1);
    if (relationship.kind === 'object') selection.nested.push({ kind: 'object', name, selection: inner() });
    else if (ROLES[role][relationship.target].aggregations && random.chance(0.3))
      selection.nested.push({ kind: 'aggregate', name, where: random.chance(0.5) ? whereFor(random, role, relationship.target, 1) : undefined });
    else selection.nested.push({ kind: 'array', name, args: listArguments(random, role, relationship.target, false), selection: inner() });
  }
  return selection;
}

// GraphQL.

function graphqlOrder(item: OrderItem): string {
  if ('through' in item) return `{${item.through}: {${item.column}: ${item.direction}}}`;
  if ('countOf' in item) return `{${item.countOf}_aggregate: {count: ${item.direction}}}`;
  return `{${item.column}: ${item.direction}}`;
}

function graphqlArguments(args: ListArguments, where: string | undefined): string {
  const parts = [`order_by: [${args.orderBy.map(graphqlOrder).join(', ')}]`];
  if (where) parts.push(`where: ${where}`);
  if (args.distinctOn) parts.push(`distinct_on: [${args.distinctOn}]`);
  if (args.limit !== undefined) parts.push(`limit: ${args.limit}`);
  if (args.offset !== undefined) parts.push(`offset: ${args.offset}`);
  return parts.join(', ');
}

function graphqlSelection(selection: Selection): string {
  const fields: string[] = [...selection.columns];
  for (const nested of selection.nested) {
    if (nested.kind === 'object') fields.push(`${nested.name} ${graphqlSelection(nested.selection)}`);
    else if (nested.kind === 'array')
      fields.push(
        `${nested.name}(${graphqlArguments(nested.args, nested.args.where && graphqlValue(nested.args.where))}) ${graphqlSelection(nested.selection)}`,
      );
    else fields.push(`${nested.name}_aggregate${nested.where ? `(where: ${graphqlValue(nested.where)})` : ''} { aggregate { count } }`);
  }
  return `{ ${fields.join(' ')} }`;
}

// SQL: each table read gets an alias of its own (t0, t1, ...), and the role's filter.

class Oracle {
  private aliases = 0;

  constructor(private readonly role: string) {}

  private alias(): string {
    return `t${this.aliases++}`;
  }

  private filter(table: string, t: string): string {
    return ROLES[this.role][table].sql(t);
  }

  /** The rows of `relationship`'s target related to `t`, under the alias `u`, passing the role's filter. */
  private related(relationship: Relationship, t: string, u: string): string {
    return `${u}.${relationship.mapping[1]} = ${t}.${relationship.mapping[0]} AND ${this.filter(relationship.target, u)}`;
  }

  where(where: Where, table: string, t: string): string {
    const parts = Object.entries(where).map(([key, value]) => {
      if (key === '_and' || key === '_or') {
        const list = (value as Where[]).map((item) => this.where(item, table, t));
        return list.length === 0 ? (key === '_and' ? 'true' : 'false') : `(${list.join(key === '_and' ? ' AND ' : ' OR ')})`;
      }
      if (key === '_not') return `NOT (${this.where(value as Where, table, t)})`;
      const relationship = RELATIONSHIPS[table][key];
      if (relationship) {
        const u = this.alias();
        return `EXISTS (SELECT 1 FROM ${relationship.target} ${u} WHERE ${this.related(relationship, t, u)} AND ${this.where(value as Where, relationship.target, u)})`;
      }
      return Object.entries(value as Where)
        .map(([operator, operand]) => this.comparison(`${t}.${key}`, column(table, key).kind, operator, operand))
        .join(' AND ');
    });
    return parts.length === 0 ? 'true' : `(${parts.join(' AND ')})`;
  }

  private comparison(expression: string, kind: Kind, operator: string, operand: unknown): string {
    const simple: Record<string, string> = {
      _eq: '=',
      _neq: '<>',
      _gt: '>',
      _gte: '>=',
      _lt: '<',
      _lte: '<=',
      _like: 'LIKE',
      _nlike: 'NOT LIKE',
      _ilike: 'ILIKE',
      _nilike: 'NOT ILIKE',
      _similar: 'SIMILAR TO',
      _nsimilar: 'NOT SIMILAR TO',
      _regex: '~',
      _nregex: '!~',
      _iregex: '~*',
      _niregex: '!~*',
      _contains: '@>',
      _contained_in: '<@',
      _has_key: '?',
    };
    const each = (operands: unknown) => (operands as unknown[]).map((item) => literal(item, kind)).join(', ');
    if (simple[operator]) return `${expression} ${simple[operator]} ${literal(operand, operator === '_has_key' ? 'text' : kind)}`;
    if (operator === '_in') return `${expression} IN (${each(operand)})`;
    if (operator === '_nin') return `${expression} NOT IN (${each(operand)})`;
    if (operator === '_is_null') return `${expression} IS ${operand ? '' : 'NOT '}NULL`;
    if (operator === '_has_keys_any' || operator === '_has_keys_all')
      return `${expression} ${operator === '_has_keys_any' ? '?|' : '?&'} ARRAY[${(operand as string[]).map((item) => literal(item, 'text')).join(', ')}]`;
    throw new Error(`no SQL for ${operator}`);
  }

  private order(item: OrderItem, table: string, t: string): string {
    if ('through' in item) {
      const relationship = RELATIONSHIPS[table][item.through];
      const u = this.alias();
      return `(SELECT ${u}.${item.column} FROM ${relationship.target} ${u} WHERE ${this.related(relationship, t, u)}) ${DIRECTIONS[item.direction]}`;
    }
    if ('countOf' in item) {
      const relationship = RELATIONSHIPS[table][item.countOf];
      const u = this.alias();
      return `(SELECT count(*) FROM ${relationship.target} ${u} WHERE ${this.related(relationship, t, u)}) ${DIRECTIONS[item.direction]}`;
    }
    return `${t}.${item.column} ${DIRECTIONS[item.direction]}`;
  }

  /** The selected fields of the row `t`, named as the answer names them. */
  private fields(selection: Selection, table: string, t: string): string {
    const fields = selection.columns.map((name) => `${t}.${name} AS "${name}"`);
    for (const nested of selection.nested) {
      const relationship = RELATIONSHIPS[table][nested.name];
      if (nested.kind === 'object') {
        const u = this.alias();
        const row = `SELECT ${this.fields(nested.selection, relationship.target, u)} FROM ${relationship.target} ${u} WHERE ${this.related(relationship, t, u)}`;
        fields.push(`(SELECT row_to_json(x) FROM (${row}) AS x) AS "${nested.name}"`);
      } else if (nested.kind === 'array') {
        fields.push(
          `(SELECT coalesce(json_agg(row_to_json(x)), '[]'::json) FROM (${this.list(relationship.target, nested.args, nested.selection, relationship, t)}) AS x) AS "${nested.name}"`,
        );
      } else {
        const u = this.alias();
        const where = nested.where ? ` AND ${this.where(nested.where, relationship.target, u)}` : '';
        fields.push(
          `json_build_object('aggregate', json_build_object('count', (SELECT count(*) FROM ${relationship.target} ${u} WHERE ${this.related(relationship, t, u)}${where}))) AS "${nested.name}_aggregate"`,
        );
      }
    }
    return fields.join(', ');
  }

  /** The list of `table` (related to `t` through `relationship` when given), ordered, with the smaller of the query's and the role's limit. */
  list(table: string, args: ListArguments, selection: Selection, relationship?: Relationship, t?: string): string {
    const u = this.alias();
    const conditions = [relationship ? this.related(relationship, t!, u) : this.filter(table, u)];
    if (args.where) conditions.push(this.where(args.where, table, u));
    const distinct = args.distinctOn ? `DISTINCT ON (${u}.${args.distinctOn}) ` : '';
    let text = `SELECT ${distinct}${this.fields(selection, table, u)} FROM ${table} ${u} WHERE ${conditions.join(' AND ')}`;
    text += ` ORDER BY ${args.orderBy.map((item) => this.order(item, table, u)).join(', ')}`;
    const limits = [args.limit, ROLES[this.role][table].limit].filter((value): value is number => value !== undefined);
    if (limits.length) text += ` LIMIT ${Math.min(...limits)}`;
    if (args.offset !== undefined) text += ` OFFSET ${args.offset}`;
    return text;
  }
}

beforeAll(async () => {
  server = await startTestServer();
  const tables = Object.entries(COLUMNS).map(([table, columns]) => {
    const keys = PRIMARY_KEYS[table].length > 1 ? `, PRIMARY KEY (${PRIMARY_KEYS[table].join(', ')})` : '';
    return `CREATE TABLE ${table} (${columns.map((item) => `${item.name} ${item.type}`).join(', ')}${keys});`;
  });
  await server.database.query(`CREATE EXTENSION IF NOT EXISTS citext; ${tables.join('\n')}`);
  await server.database.query(seedSql());
  const requests = [
    ...Object.keys(COLUMNS).map((table) => ({ type: 'pg_track_table', args: { table } })),
    ...Object.entries(RELATIONSHIPS).flatMap(([table, relationships]) =>
      Object.entries(relationships).map(([name, relationship]) => ({
        type: `pg_create_${relationship.kind}_relationship`,
        args: {
          table,
          name,
          using: {
            foreign_key_constraint_on:
              relationship.kind === 'object' ? relationship.mapping[0] : { table: relationship.target, column: relationship.mapping[1] },
          },
        },
      })),
    ),
    ...Object.entries(ROLES).flatMap(([role, tables]) =>
      Object.entries(tables).map(([table, permission]) => ({
        type: 'pg_create_select_permission',
        args: {
          table,
          role,
          permission: {
            columns: permission.columns,
            filter: permission.filter,
            ...(permission.limit ? { limit: permission.limit } : {}),
            allow_aggregations: permission.aggregations === true,
          },
        },
      })),
    ),
  ];
  expect(await metadataRequest(server.url, { type: 'bulk', args: requests })).toEqual({ status: 200, body: requests.map(() => ({ message: 'success' })) });
  oracle = new pg.Client({ connectionString: server.database.url });
  await oracle.connect();
});

afterAll(async () => {
  await oracle?.end();
  await server?.close();
});

describe('differential per role: generated queries as each role against hand-written SQL with its filter and limit', () => {
  const QUERIES_PER_ROLE = 150;

  for (const role of Object.keys(ROLES)) {
    it(`answers ${QUERIES_PER_ROLE} random queries as role ${role} as the SQL does, row for row`, async () => {
      const tokens = new Map([...USERS, OUTSIDER].map((userId) => [userId, bearer(signToken({ roles: [role], userId }))]));
      let rowsSeen = 0;
      let limited = 0;
      for (let seed = 1; seed <= QUERIES_PER_ROLE; seed++) {
        const random = generator(seed * 7919 + role.length);
        const table = random.pick(['members', 'members', 'groups', 'memberships']);
        const userId = random.pick([...USERS, ...USERS, OUTSIDER]);
        const args = listArguments(random, role, table, true);
        const selection = selectionFor(random, role, table, 0);
        // A where given as a variable is coerced from JSON rather than read from the document.
        const asVariable = args.where !== undefined && random.chance(0.3);
        const where = args.where && (asVariable ? '$where' : graphqlValue(args.where));
        const query = `${asVariable ? `query ($where: ${table}_bool_exp)` : 'query'} { ${table}(${graphqlArguments(args, where)}) ${graphqlSelection(selection)} }`;
        const response = await postGraphQL<Record<string, unknown[]>>(
          server.graphqlUrl,
          { query, variables: asVariable ? { where: args.where } : undefined },
          tokens.get(userId)!,
        );
        const statement = `SELECT coalesce(json_agg(row_to_json(x)), '[]'::json) AS j FROM (${new Oracle(role).list(table, args, selection)}) AS x`;
        const expected = (await oracle.query<{ j: unknown[] }>(statement, [userId])).rows[0].j;
        expect({ seed, query, errors: response.body.errors, rows: response.body.data?.[table] }).toEqual({ seed, query, errors: undefined, rows: expected });
        rowsSeen += expected.length;
        if (expected.length === ROLES[role][table].limit) limited++;
      }
      // The queries select rows, and the role's limit cuts some lists.
      expect(rowsSeen).toBeGreaterThan(QUERIES_PER_ROLE);
      expect(limited).toBeGreaterThan(0);
    });
  }

  it('compares char(n) and bit(n) columns with whole values (cast to character or bit without a length, they were cut to one)', async () => {
    const userId = USERS[0];
    const query = `{ members(where: {_or: [{code: {_in: ["AB1", "CD2"]}}, {flags: {_eq: "101"}}, {code: {_similar: "(E|F)%"}}]}, order_by: {id: asc}) { id code flags } }`;
    const response = await postGraphQL<{ members: unknown[] }>(server.graphqlUrl, { query }, bearer(signToken({ roles: ['user'], userId })));
    const statement = `SELECT coalesce(json_agg(row_to_json(x)), '[]'::json) AS j FROM (
      SELECT m.id, m.code, m.flags FROM members m WHERE ${ROLES.user.members.sql('m')} AND (m.code IN ('AB1', 'CD2') OR m.flags = '101' OR m.code SIMILAR TO '(E|F)%')
       ORDER BY m.id LIMIT ${ROLES.user.members.limit}) AS x`;
    const expected = (await oracle.query<{ j: unknown[] }>(statement, [userId])).rows[0].j;
    expect(expected.length).toBeGreaterThan(0);
    expect(response.body).toEqual({ data: { members: expected } });
  });

  it("hides other users' rows: the outsider sees nothing, each user only rows their filter passes", async () => {
    const count = async (role: string, userId: string, table: string) =>
      (
        (
          await postGraphQL<Record<string, unknown[]>>(
            server.graphqlUrl,
            { query: `{ ${table}(limit: 100) { ${PRIMARY_KEYS[table][0]} } }` },
            bearer(signToken({ roles: [role], userId })),
          )
        ).body.data?.[table] ?? []
      ).length;
    for (const role of Object.keys(ROLES)) for (const table of Object.keys(COLUMNS)) expect(await count(role, OUTSIDER, table)).toBe(0);
    const [all] = (await oracle.query<{ n: number }>('SELECT count(*)::int AS n FROM memberships')).rows;
    const own = await count('user', USERS[0], 'memberships');
    expect(own).toBeGreaterThan(0);
    expect(own).toBeLessThan(all.n);
  });
});
