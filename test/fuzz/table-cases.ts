import fc from 'fast-check';
import {
  getNamedType,
  isEnumType,
  isInputObjectType,
  isLeafType,
  isListType,
  isNonNullType,
  isObjectType,
  type GraphQLArgument,
  type GraphQLField,
  type GraphQLInputObjectType,
  type GraphQLInputType,
  type GraphQLObjectType,
  type GraphQLSchema,
} from 'graphql';
import type { GraphQLCase } from './graphql-cases';

/*
 * Queries over the generated API (and the actions whose output types have relationships to it),
 * built from the schema a role is served: selections with relationships nested, and `where`,
 * `order_by`, `limit`, `offset`, `distinct_on` and aggregates, mostly well-formed so they reach
 * the statements, with hostile values mixed in (injections, huge numbers, wrong types, unknown
 * columns, deep nesting). Each case comes from a seed, so the fuzzer's seed replays it.
 */

/** A table case: the root field's response key, so the fuzzer can tell an answer with table data. */
export interface TableCase extends GraphQLCase {
  tables: { root: string };
}

/** An enum value: a bare name in a literal, a string in variables. */
class EnumValue {
  constructor(readonly name: string) {}
  toJSON(): string {
    return this.name;
  }
}

const NAME = /^[_A-Za-z][_0-9A-Za-z]*$/;

type Random = () => number;

/** mulberry32: a small seeded generator, so one integer of fast-check's gives the whole case. */
function seeded(seed: number): Random {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const HOSTILE_TEXT = [
  "' OR 1=1 --",
  '"; DROP TABLE fuzz_posts; --',
  '%',
  '_',
  '\\',
  '(a|b',
  '[',
  '*',
  '\u0000',
  '\ud800',
  '😀',
  'x'.repeat(5000),
  '$1',
  '::text',
  'post 1',
  'author 3',
];
const HOSTILE_NUMBERS = [2 ** 31, -(2 ** 31) - 1, 2 ** 53 + 2, 1e308, -1e308, 0.5, -1, 1e21];

class Builder {
  readonly variables: Record<string, unknown> = {};
  readonly definitions: string[] = [];

  constructor(
    private readonly random: Random,
    /** How often a value is hostile (0..1). */
    private readonly hostility: number,
  ) {}

  private chance(p: number): boolean {
    return this.random() < p;
  }

  private pick<T>(items: readonly T[]): T {
    return items[Math.floor(this.random() * items.length)];
  }

  private some<T>(items: readonly T[], max: number, min = 0): T[] {
    const shuffled = [...items].sort(() => this.random() - 0.5);
    return shuffled.slice(0, min + Math.floor(this.random() * (Math.min(max, items.length) - min + 1)));
  }

  private hostile(): boolean {
    return this.chance(this.hostility);
  }

  /** A value for a scalar: near the rows' values, or hostile. */
  scalar(name: string): unknown {
    if (this.hostile()) return this.pick<unknown>([...HOSTILE_TEXT, ...HOSTILE_NUMBERS, true, { a: [1] }, [1, 'x']]);
    switch (name) {
      case 'Int':
      case 'smallint':
        return Math.floor(this.random() * 45) - 2;
      case 'bigint':
        return this.pick<unknown>([1000000000, 50000000000, '3000000000', 0]);
      case 'Float':
      case 'float8':
      case 'numeric':
        return this.pick<unknown>([0, 1.5, 7.25, 30, '12.5', -3]);
      case 'Boolean':
        return this.chance(0.5);
      case 'date':
        return this.pick(['1980-01-01', '1990-06-15', '2001-02-03', '1985-12-31']);
      case 'timestamptz':
      case 'timestamp':
        return this.pick(['2020-01-01T00:00:00Z', '2999-01-01', '1970-01-01 00:00:00+00']);
      case 'jsonb':
      case 'json':
        return this.pick<unknown>([{ n: 3 }, { even: true }, 'n', ['n', 'even'], 1, null]);
      case 'uuid':
        return this.pick(['00000000-0000-0000-0000-000000000000', '3fa85f64-5717-4562-b3fc-2c963f66afa6']);
      default:
        return this.pick(['author 1', 'post 12', 'nick4', 'C3', 'comment 7', 'a%', '%1%', '^post [0-9]+$', 'b1']);
    }
  }

  /** A value for an input type, mostly of its shape. */
  input(type: GraphQLInputType, depth: number): unknown {
    if (isNonNullType(type)) return this.input(type.ofType, depth);
    if (isListType(type)) return Array.from({ length: Math.floor(this.random() * 3) }, () => this.input(type.ofType, depth + 1));
    if (isEnumType(type)) {
      if (this.hostile()) return this.pick(['nope', 'DROP', '']);
      return new EnumValue(this.pick(type.getValues()).name);
    }
    if (isInputObjectType(type)) return type.name.endsWith('_bool_exp') ? this.where(type, depth) : this.inputObject(type, depth);
    return this.scalar(type.name);
  }

  private inputObject(type: GraphQLInputObjectType, depth: number): Record<string, unknown> {
    const fields = Object.values(type.getFields());
    const value: Record<string, unknown> = {};
    for (const field of this.some(fields, 2, 1)) {
      if (depth > 3 && !isLeafType(getNamedType(field.type))) continue;
      value[field.name] = this.input(field.type, depth + 1);
    }
    if (this.hostile()) value[this.pick(['nope_column', '__proto__', 'id_'])] = 1;
    return value;
  }

  /** A boolean expression: column comparisons, relationships, _and/_or/_not, sometimes deep or unknown. */
  where(type: GraphQLInputObjectType, depth: number): Record<string, unknown> {
    if (this.hostile() && depth === 0 && this.chance(0.3)) {
      // Deep nesting of _not / _and.
      let exp: Record<string, unknown> = { _not: {} };
      for (let i = 0; i < 10 + Math.floor(this.random() * 60); i++) exp = this.chance(0.5) ? { _not: exp } : { _and: [exp] };
      return exp;
    }
    const fields = type.getFields();
    const columns = Object.values(fields).filter((field) => field.name.charAt(0) !== '_' && getNamedType(field.type).name.endsWith('_comparison_exp'));
    const relationships = Object.values(fields).filter((field) => field.name.charAt(0) !== '_' && getNamedType(field.type).name.endsWith('_bool_exp'));
    const exp: Record<string, unknown> = {};
    for (let i = 0, n = 1 + Math.floor(this.random() * 2); i < n; i++) {
      const roll = this.random();
      if (roll < 0.6 && columns.length) {
        const column = this.pick(columns);
        const comparison = getNamedType(column.type) as GraphQLInputObjectType;
        const operators = Object.values(comparison.getFields());
        const operator = this.pick(operators);
        const value = operator.name === '_is_null' ? this.chance(0.5) : this.input(operator.type, depth + 1);
        exp[column.name] = { ...(exp[column.name] as object), [operator.name]: value };
      } else if (roll < 0.75 && relationships.length && depth < 4) {
        const relationship = this.pick(relationships);
        exp[relationship.name] = this.where(getNamedType(relationship.type) as GraphQLInputObjectType, depth + 1);
      } else if (depth < 4) {
        const key = this.pick(['_and', '_or', '_not']);
        exp[key] = key === '_not' ? this.where(type, depth + 1) : Array.from({ length: Math.floor(this.random() * 3) }, () => this.where(type, depth + 1));
      }
    }
    if (this.hostile()) exp[this.pick(['nope_column', 'secret', '_exists'])] = { _eq: 1 };
    return exp;
  }

  /** Arguments of a field: each of those a list field has, sometimes, as literals or variables. */
  arguments(field: GraphQLField<unknown, unknown>, depth: number): string {
    const passed: string[] = [];
    const orderBy = field.args.find((arg) => arg.name === 'order_by');
    let leading: string[] = [];
    for (const arg of field.args) {
      if (!isNonNullType(arg.type) && !this.chance(arg.name === 'where' || arg.name === 'limit' ? 0.5 : 0.3)) continue;
      let value: unknown;
      if (arg.name === 'limit' || arg.name === 'offset')
        value = this.hostile() ? this.pick<unknown>([-1, 2 ** 31 - 1, 2 ** 31, 1e10, '5', 0.5]) : Math.floor(this.random() * 8);
      else if (arg.name === 'distinct_on') {
        const values = (getNamedType(arg.type) as { getValues?: () => { name: string }[] }).getValues?.() ?? [];
        const chosen = this.some(values, 2, 1).map((item) => new EnumValue(item.name));
        leading = chosen.map((item) => item.name);
        value = chosen;
      } else if (arg.name === 'order_by') continue;
      else value = this.input(arg.type, depth);
      passed.push(this.argument(arg, value));
    }
    if (orderBy && (leading.length > 0 || this.chance(0.4))) {
      const type = getNamedType(orderBy.type) as GraphQLInputObjectType;
      const items = [this.input(type, 2) as Record<string, unknown>];
      // distinct_on must lead order_by (Hasura's rule): usually it does.
      if (!this.hostile()) items.unshift(...leading.map((column) => ({ [column]: new EnumValue(this.pick(['asc', 'desc_nulls_last'])) })));
      passed.push(this.argument(orderBy, items));
    }
    if (this.hostile()) passed.push(`${this.pick(['nope', 'where_', 'limit2'])}: 1`);
    return passed.length ? `(${passed.join(', ')})` : '';
  }

  private argument(arg: GraphQLArgument, value: unknown): string {
    if (!this.chance(0.35)) return `${arg.name}: ${literal(value)}`;
    const name = `v${this.definitions.length}`;
    this.definitions.push(`$${name}: ${String(arg.type)}`);
    this.variables[name] = JSON.parse(JSON.stringify(value) ?? 'null');
    return `${arg.name}: $${name}`;
  }

  /** A selection of `type`: some leaf fields, some object fields (relationships, aggregates) nested to `depth`. */
  selection(type: GraphQLObjectType, depth: number): string {
    const fields = Object.values(type.getFields());
    const leaves = fields.filter((field) => isLeafType(getNamedType(field.type)) && field.args.every((arg) => !isNonNullType(arg.type)));
    const objects = fields.filter((field) => isObjectType(getNamedType(field.type)));
    const parts = this.some(leaves, 4, leaves.length ? 1 : 0).map((field) => (field.name === 'count' ? `count${this.arguments(field, 3)}` : field.name));
    if (depth > 0) {
      for (const field of this.some(objects, 2, leaves.length ? 0 : 1)) {
        const alias = this.chance(0.15) ? `a${Math.floor(this.random() * 3)}: ` : '';
        parts.push(`${alias}${field.name}${this.arguments(field, 1)} ${this.selection(getNamedType(field.type) as GraphQLObjectType, depth - 1)}`);
      }
    }
    if (this.hostile()) parts.push(this.pick(['nope_field', 'owner', '__typename', '...on Query { __typename }']));
    if (parts.length === 0) parts.push('__typename');
    return `{ ${parts.join(' ')} }`;
  }

  /** A long chain of relationships (object and array in turn), each selecting one column. */
  chain(type: GraphQLObjectType, length: number): string {
    const relationship = Object.values(type.getFields()).find((field) => isObjectType(getNamedType(field.type)) && !field.name.endsWith('_aggregate'));
    const leaf = Object.values(type.getFields()).find((field) => isLeafType(getNamedType(field.type)));
    if (!relationship || length === 0) return `{ ${leaf?.name ?? '__typename'} }`;
    return `{ ${leaf?.name ?? '__typename'} ${relationship.name}${this.arguments(relationship, 1)} ${this.chain(getNamedType(relationship.type) as GraphQLObjectType, length - 1)} }`;
  }
}

/** A GraphQL literal of a value (enum values bare). */
function literal(value: unknown): string {
  if (value instanceof EnumValue) return NAME.test(value.name) ? value.name : JSON.stringify(value.name);
  if (value === null || value === undefined) return 'null';
  if (typeof value === 'string') return JSON.stringify(value);
  if (typeof value === 'number') return Number.isFinite(value) ? String(value) : '0';
  if (typeof value === 'boolean') return String(value);
  if (Array.isArray(value)) return `[${value.map(literal).join(', ')}]`;
  return `{${Object.entries(value as Record<string, unknown>)
    .map(([key, item]) => `${NAME.test(key) ? key : 'bad_key'}: ${literal(item)}`)
    .join(', ')}}`;
}

/** The root fields of the generated API and of the actions with relationships, in `schema`. */
function tableRoots(schema: GraphQLSchema): GraphQLField<unknown, unknown>[] {
  return Object.values(schema.getQueryType()?.getFields() ?? {}).filter((field) => {
    const named = getNamedType(field.type);
    if (!isObjectType(named)) return false;
    const base = named.name.replace(/_aggregate$/, '');
    return (
      Boolean(schema.getType(`${base}_bool_exp`)) ||
      Object.values(named.getFields()).some((inner) => schema.getType(`${getNamedType(inner.type).name}_bool_exp`))
    );
  });
}

/**
 * Queries over the tables, each built against the schema its credentials are served (`schemas`:
 * by credentials; the others use the admin's, so roles also meet fields their view hides).
 */
export function tableCases(schemas: Record<string, GraphQLSchema>): fc.Arbitrary<TableCase> | undefined {
  if (tableRoots(schemas.admin).length === 0) return undefined;
  return fc
    .record({
      seed: fc.integer(),
      // Mostly the credentials whose schema has the tables; some that reach none.
      credentials: fc.constantFrom('admin', 'admin', 'admin', 'user', 'user', 'user', 'admin-as-user', 'user-other-role', 'anonymous', 'expired', 'wrong-role'),
      hostility: fc.constantFrom(0, 0, 0, 0.02, 0.1, 0.4),
      method: fc.constantFrom('POST', 'POST', 'POST', 'GET') as fc.Arbitrary<'POST' | 'GET'>,
    })
    .map(({ seed, credentials: who, hostility, method }) => {
      const schema = schemas[who] ?? schemas.admin;
      const random = seeded(seed);
      const builder = new Builder(random, hostility);
      const roots = tableRoots(schema);
      const root = roots.length ? roots[Math.floor(random() * roots.length)] : tableRoots(schemas.admin)[0];
      const type = getNamedType(root.type) as GraphQLObjectType;
      const args = root.args.some((arg) => isNonNullType(arg.type))
        ? `(${root.args.map((arg) => `${arg.name}: ${literal(builder.input(arg.type, 0))}`).join(', ')})`
        : builder.arguments(root, 0);
      const deep = hostility > 0 && random() < 0.1;
      const selection = deep ? builder.chain(type, 6 + Math.floor(random() * 12)) : builder.selection(type, 1 + Math.floor(random() * 3));
      const head = builder.definitions.length ? `query Tables(${builder.definitions.join(', ')})` : 'query Tables';
      const query = `${head} { ${root.name}${args} ${selection} }`;
      return {
        kind: 'graphql' as const,
        method,
        credentials: who,
        body: { query, variables: builder.variables, operationName: 'Tables' },
        tables: { root: root.name },
      };
    });
}
