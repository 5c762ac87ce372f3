import { extendSchema, GraphQLError, isObjectType, parse, type GraphQLFieldResolver, type GraphQLResolveInfo, type GraphQLSchema } from 'graphql';
import type { GraphQLContext } from '../../graphql/context';
import { offerRawAnswer, type RawFieldRequest } from '../../graphql/raw-root-fields';
import { LIVE_QUERY_EXTENSION } from '../../graphql/subscription-groups';
import { tableText } from './tables.metadata';
import {
  GRAPHQL_BUILT_IN_SCALARS,
  NUMERIC_SCALARS,
  TEXT_SCALARS,
  UNORDERED_SCALARS,
  comparisonTypeName,
  fieldType,
  type ColumnModel,
  type Inconsistency,
  type MutationKind,
  type RootKind,
  type TableModel,
} from './tables.model';
import { wholeView, type TableView } from './tables.views';
import {
  mutationFieldNames,
  mutationRootsSdl,
  mutationScalars,
  mutationTypeNames,
  mutationTypesSdl,
  relationshipInsertTypesSdl,
} from './tables.mutation-schema';
import { CURSOR_ORDERING_ENUM, showsStream, streamRootSdl, streamTypeNames, streamTypesSdl } from './tables.stream-schema';
import { liveEventValue, type LiveEvent } from './tables.live-queries';

/** What the generated root fields call: the service, which compiles and runs one statement. */
export interface TableRunner {
  select(table: TableModel, kind: RootKind, info: GraphQLResolveInfo, context: GraphQLContext): Promise<unknown>;
  /** The same answer as the statement's JSON text, where it is what GraphQL would write; undefined where not. */
  selectJson?(table: TableModel, kind: RootKind, request: RawFieldRequest): Promise<string | undefined>;
  mutate?(table: TableModel, kind: MutationKind, info: GraphQLResolveInfo, context: GraphQLContext): Promise<unknown>;
  /** `<table>_stream`'s events: its batches of rows (or the error that ended it). */
  stream?(table: TableModel, info: GraphQLResolveInfo, context: GraphQLContext): Promise<AsyncIterable<unknown>>;
  /** A live query's events (the subscription field of a query root field). */
  live?(table: TableModel, kind: RootKind, info: GraphQLResolveInfo, context: GraphQLContext): Promise<AsyncIterable<LiveEvent>>;
}

/** Marks a generated mutation root field (in its extensions): the table and kind it writes. */
export const MUTATION_FIELD = 'plinthTableMutation';
export interface MutationField {
  table: TableModel;
  kind: MutationKind;
}

const ORDER_BY_ENUM = `"""column ordering options"""
enum order_by {
  """in ascending order, nulls last"""
  asc
  """in ascending order, nulls first"""
  asc_nulls_first
  """in ascending order, nulls last"""
  asc_nulls_last
  """in descending order, nulls first"""
  desc
  """in descending order, nulls first"""
  desc_nulls_first
  """in descending order, nulls last"""
  desc_nulls_last
}`;

/** Names the generated types of `table` take (all begin with its type name). */
export function generatedTypeNames(table: TableModel): string[] {
  const base = table.typeName;
  const perAggregate = AGGREGATE_FUNCTIONS.flatMap((aggregate) => [`${base}_${aggregate}_fields`, `${base}_${aggregate}_order_by`]);
  return [
    base,
    `${base}_aggregate`,
    `${base}_aggregate_fields`,
    `${base}_aggregate_order_by`,
    `${base}_bool_exp`,
    `${base}_order_by`,
    `${base}_select_column`,
    ...perAggregate,
    ...mutationTypeNames(table),
    ...streamTypeNames(table),
  ];
}

function comparisonType(scalar: string, array: boolean): string {
  const name = comparisonTypeName({ scalar, array });
  const description = `"""Boolean expression to compare columns of type "${scalar}". All fields are combined with logical 'AND'."""`;
  if (array) {
    const list = `[${scalar}!]`;
    // PostgreSQL's json has no equality (json[] neither): only _is_null applies.
    const operators =
      scalar === 'json'
        ? ['_is_null: Boolean']
        : [
            `"""is the array contained in the given array value"""\n  _contained_in: ${list}`,
            `"""does the array contain the given value"""\n  _contains: ${list}`,
            ...['_eq', '_gt', '_gte'].map((operator) => `${operator}: ${list}`),
            `_in: [${list}!]`,
            '_is_null: Boolean',
            ...['_lt', '_lte', '_neq'].map((operator) => `${operator}: ${list}`),
            `_nin: [${list}!]`,
          ];
    return `${description}\ninput ${name} {\n  ${operators.join('\n  ')}\n}`;
  }
  // PostgreSQL's json has no equality or order (jsonb has both): only _is_null applies.
  const operators =
    scalar === 'json'
      ? ['_is_null: Boolean']
      : [
          `_eq: ${scalar}`,
          `_neq: ${scalar}`,
          `_gt: ${scalar}`,
          `_gte: ${scalar}`,
          `_lt: ${scalar}`,
          `_lte: ${scalar}`,
          `_in: [${scalar}!]`,
          `_nin: [${scalar}!]`,
          '_is_null: Boolean',
        ];
  if (TEXT_SCALARS.has(scalar)) {
    for (const operator of ['_like', '_nlike', '_ilike', '_nilike', '_similar', '_nsimilar', '_regex', '_nregex', '_iregex', '_niregex'])
      operators.push(`${operator}: ${scalar}`);
  }
  if (scalar === 'jsonb')
    operators.push('_contains: jsonb', '_contained_in: jsonb', '_has_key: String', '_has_keys_any: [String!]', '_has_keys_all: [String!]');
  return `${description}\ninput ${name} {\n  ${operators.join('\n  ')}\n}`;
}

/** The aggregates besides count, each with its `<table>_<aggregate>_fields` and `_order_by` types. */
const AGGREGATE_FUNCTIONS = ['sum', 'avg', 'max', 'min'] as const;

export const listArguments = (typeName: string) =>
  `distinct_on: [${typeName}_select_column!], limit: Int, offset: Int, order_by: [${typeName}_order_by!], where: ${typeName}_bool_exp`;

function tableSdl(view: TableView): string[] {
  const { table, columns } = view;
  const name = table.typeName;
  const described = `table ${tableText(table.table)}`;
  const fields = columns.map((column) => `  ${column.field}: ${fieldType(column)}${column.nullable ? '' : '!'}`);
  const boolFields = [
    `  _and: [${name}_bool_exp!]`,
    `  _or: [${name}_bool_exp!]`,
    `  _not: ${name}_bool_exp`,
    ...columns.map((column) => `  ${column.field}: ${comparisonTypeName(column)}`),
  ];
  const orderFields = columns.map((column) => `  ${column.field}: order_by`);
  for (const { relationship, aggregate } of view.relationships) {
    const target = relationship.target.typeName;
    if (relationship.kind === 'object') {
      fields.push(`  ${relationship.name}: ${target}`);
      orderFields.push(`  ${relationship.name}: ${target}_order_by`);
    } else {
      fields.push(`  ${relationship.name}(${listArguments(target)}): [${target}!]!`);
      if (aggregate) {
        fields.push(`  ${relationship.name}_aggregate(${listArguments(target)}): ${target}_aggregate!`);
        orderFields.push(`  ${relationship.name}_aggregate: ${target}_aggregate_order_by`);
      }
    }
    boolFields.push(`  ${relationship.name}: ${target}_bool_exp`);
  }
  const parts = [
    `"""columns and relationships of ${JSON.stringify(tableText(table.table)).slice(1, -1)}"""\ntype ${name} {\n${fields.join('\n')}\n}`,
    `"""Boolean expression to filter rows from the ${described}. All fields are combined with a logical 'AND'."""\ninput ${name}_bool_exp {\n${boolFields.join('\n')}\n}`,
    `"""Ordering options when selecting data from ${described}."""\ninput ${name}_order_by {\n${orderFields.join('\n')}\n}`,
    `"""select columns of ${described}"""\nenum ${name}_select_column {\n${columns.map((column) => `  ${column.field}`).join('\n')}\n}`,
  ];
  if (view.aggregates) parts.push(...aggregateSdl(table, columns));
  return parts;
}

/** The `<table>_aggregate` type and what it is made of, over `columns`. */
function aggregateSdl(table: TableModel, columns: readonly ColumnModel[]): string[] {
  const name = table.typeName;
  const described = `table ${tableText(table.table)}`;
  const parts = [`"""aggregated selection of ${described}"""\ntype ${name}_aggregate {\n  aggregate: ${name}_aggregate_fields\n  nodes: [${name}!]!\n}`];
  const aggregateFields = [`  count(columns: [${name}_select_column!], distinct: Boolean): Int!`];
  const aggregateOrder = ['  count: order_by'];
  const subtype = (suffix: (typeof AGGREGATE_FUNCTIONS)[number], of: readonly ColumnModel[], scalar: (column: ColumnModel) => string) => {
    if (of.length === 0) return;
    aggregateFields.push(`  ${suffix}: ${name}_${suffix}_fields`);
    aggregateOrder.push(`  ${suffix}: ${name}_${suffix}_order_by`);
    parts.push(`type ${name}_${suffix}_fields {\n${of.map((column) => `  ${column.field}: ${scalar(column)}`).join('\n')}\n}`);
    parts.push(`input ${name}_${suffix}_order_by {\n${of.map((column) => `  ${column.field}: order_by`).join('\n')}\n}`);
  };
  // Arrays are neither summed nor given a max or min.
  const numeric = columns.filter((column) => !column.array && NUMERIC_SCALARS.has(column.scalar));
  const ordered = columns.filter((column) => !column.array && !UNORDERED_SCALARS.has(column.scalar));
  subtype('sum', numeric, sumScalar);
  subtype('avg', numeric, () => 'Float');
  subtype('max', ordered, (column) => column.scalar);
  subtype('min', ordered, (column) => column.scalar);
  parts.push(`"""aggregate fields of ${described}"""\ntype ${name}_aggregate_fields {\n${aggregateFields.join('\n')}\n}`);
  parts.push(`"""order by aggregate values of ${described}"""\ninput ${name}_aggregate_order_by {\n${aggregateOrder.join('\n')}\n}`);
  return parts;
}

/** The scalar of a column's sum: integers widen to bigint, as in PostgreSQL. */
function sumScalar(column: ColumnModel): string {
  return column.scalar === 'Int' || column.scalar === 'smallint' ? 'bigint' : column.scalar;
}

/** The root fields of `kinds` of a view (its query ones, or its live query subscription ones). */
function rootFieldsSdl(view: TableView, kinds: Set<RootKind>): string[] {
  const { table } = view;
  const name = table.typeName;
  const described = `from the table ${tableText(table.table)}`;
  const roots: string[] = [];
  if (kinds.has('select')) roots.push(`  """fetch data ${described}"""\n  ${table.roots.select}(${listArguments(name)}): [${name}!]!`);
  if (kinds.has('selectAggregate')) {
    roots.push(`  """fetch aggregated fields ${described}"""\n  ${table.roots.selectAggregate}(${listArguments(name)}): ${name}_aggregate!`);
  }
  if (kinds.has('selectByPk')) {
    const keys = table.primaryKey.map((column) => `${column.field}: ${fieldType(column)}!`).join(', ');
    roots.push(`  """fetch data ${described} using primary key columns"""\n  ${table.roots.selectByPk}(${keys}): ${name}`);
  }
  return roots;
}

/** Every name the tables generate in a schema: their types, `Query.<root field>` and `Mutation.<root field>`. */
export function generatedNames(tables: readonly TableModel[]): Set<string> {
  return new Set(
    tables.flatMap((table) => [
      ...generatedTypeNames(table),
      ...rootFieldNames(table).flatMap((field) => [`Query.${field}`, `Subscription.${field}`]),
      ...mutationFieldNames(table).map((field) => `Mutation.${field}`),
      `Subscription.${table.streamRoot}`,
    ]),
  );
}

/** The root field names of a table (by_pk only with a primary key). */
export function rootFieldNames(table: TableModel): string[] {
  return [table.roots.select, table.roots.selectAggregate, ...(table.primaryKey.length ? [table.roots.selectByPk] : [])];
}

/**
 * Why `table`'s generated names cannot join `base` (a type or root field of that name exists,
 * or another tracked table takes it), or undefined. Names in `ours` (what the tracked tables
 * generate in `base` already) are not clashes.
 */
export function nameClash(base: GraphQLSchema, table: TableModel, others: readonly TableModel[], ours = new Set<string>()): string | undefined {
  for (const typeName of generatedTypeNames(table)) {
    if (base.getType(typeName) && !ours.has(typeName))
      return `the type ${typeName} generated for the table ${tableText(table.table)} clashes with the type ${typeName} of the schema: give the table a custom_name`;
    const other = others.find((candidate) => generatedTypeNames(candidate).includes(typeName));
    if (other)
      return `the type ${typeName} generated for the table ${tableText(table.table)} clashes with the one generated for ${tableText(other.table)}: give one a custom_name`;
  }
  const query = base.getQueryType()?.getFields() ?? {};
  for (const field of rootFieldNames(table)) {
    if (query[field] && !ours.has(`Query.${field}`))
      return `the root field ${field} generated for the table ${tableText(table.table)} clashes with the field Query.${field}: set custom_root_fields or a custom_name`;
    const other = others.find((candidate) => rootFieldNames(candidate).includes(field));
    if (other) return `the root field ${field} generated for the table ${tableText(table.table)} clashes with the one generated for ${tableText(other.table)}`;
  }
  const subscription = base.getSubscriptionType()?.getFields() ?? {};
  for (const field of rootFieldNames(table)) {
    if (subscription[field] && !ours.has(`Subscription.${field}`))
      return `the root field ${field} generated for the table ${tableText(table.table)} clashes with the field Subscription.${field}: set custom_root_fields or a custom_name`;
  }
  const mutation = base.getMutationType()?.getFields() ?? {};
  for (const field of mutationFieldNames(table)) {
    if (mutation[field] && !ours.has(`Mutation.${field}`))
      return `the root field ${field} generated for the table ${tableText(table.table)} clashes with the field Mutation.${field}: set custom_root_fields or a custom_name`;
    const other = others.find((candidate) => mutationFieldNames(candidate).includes(field));
    if (other) return `the root field ${field} generated for the table ${tableText(table.table)} clashes with the one generated for ${tableText(other.table)}`;
  }
  const stream = table.streamRoot;
  if (base.getSubscriptionType()?.getFields()[stream] && !ours.has(`Subscription.${stream}`))
    return `the root field ${stream} generated for the table ${tableText(table.table)} clashes with the field Subscription.${stream}: set custom_root_fields or a custom_name`;
  const other = others.find((candidate) => candidate.streamRoot === stream);
  if (other) return `the root field ${stream} generated for the table ${tableText(table.table)} clashes with the one generated for ${tableText(other.table)}`;
  return undefined;
}

/**
 * `base` with the generated API of `tables`: for each table its object, aggregate, bool_exp,
 * order_by and select_column types and its root fields on Query, with the shared scalars,
 * comparison types and `order_by` enum declared once (or taken from `base` when it has them).
 * Tables whose names clash are left out and reported in `inconsistencies`. Without `runner`
 * the fields resolve nothing (to print or check the schema).
 */
export function extendWithTables(
  base: GraphQLSchema,
  tables: readonly TableModel[],
  runner?: TableRunner,
  inconsistencies: Inconsistency[] = [],
): GraphQLSchema {
  return withTableViews(base, fittingTables(base, tables, inconsistencies).map(wholeView), runner);
}

/**
 * The tables that can join `base`: those whose names clash are left out and reported in
 * `inconsistencies`, and so are the relationships to them.
 */
export function fittingTables(base: GraphQLSchema, tables: readonly TableModel[], inconsistencies: Inconsistency[]): TableModel[] {
  const served: TableModel[] = [];
  for (const table of tables) {
    const clash = nameClash(base, table, served);
    if (clash) inconsistencies.push({ type: 'table', name: tableText(table.table), reason: clash, definition: table.table });
    else served.push(table);
  }
  // A relationship to a table left out cannot be served either.
  const servedSet = new Set(served);
  for (const table of served) {
    for (const [name, relationship] of table.relationships) {
      if (!servedSet.has(relationship.target)) {
        table.relationships.delete(name);
        inconsistencies.push({
          type: `${relationship.kind}_relation`,
          name: `${name} of ${tableText(table.table)}`,
          reason: `the remote table ${tableText(relationship.target.table)} is not served`,
          definition: name,
        });
      }
    }
  }
  return served;
}

/** `base` with the generated API of `views` (tables that fit it: fittingTables), each table showing what its view shows. */
export function withTableViews(base: GraphQLSchema, views: readonly TableView[], runner?: TableRunner): GraphQLSchema {
  if (views.length === 0) return base;
  const columns = views.flatMap((view) => view.columns);
  const scalars = new Set([...columns.map((column) => column.scalar), ...views.flatMap(mutationScalars)]);
  for (const view of views) if (view.aggregates) for (const column of view.columns) if (!column.array) scalars.add(sumScalar(column));
  const parts: string[] = [];
  for (const scalar of scalars) {
    if (!GRAPHQL_BUILT_IN_SCALARS.has(scalar) && !base.getType(scalar)) parts.push(`scalar ${scalar}`);
  }
  const comparisons = new Map(columns.map((column) => [comparisonTypeName(column), column]));
  for (const [name, column] of comparisons) if (!base.getType(name)) parts.push(comparisonType(column.scalar, column.array));
  if (!base.getType('order_by')) parts.push(ORDER_BY_ENUM);
  for (const view of views) if (view.select) parts.push(...tableSdl(view));
  for (const view of views) parts.push(...mutationTypesSdl(view, views));
  parts.push(...relationshipInsertTypesSdl(views));
  if (views.some(showsStream) && !base.getType('cursor_ordering')) parts.push(CURSOR_ORDERING_ENUM);
  for (const view of views) parts.push(...streamTypesSdl(view));
  const roots = views.flatMap((view) => rootFieldsSdl(view, view.roots)).join('\n');
  if (roots) {
    const queryRoot = base.getQueryType();
    parts.push(queryRoot ? `extend type ${queryRoot.name} {\n${roots}\n}` : `type Query {\n${roots}\n}\n\nextend schema {\n  query: Query\n}`);
  }
  const mutationRoots = views.flatMap((view) => mutationRootsSdl(view).map((field) => field.sdl)).join('\n');
  if (mutationRoots) {
    const mutationRoot = base.getMutationType();
    parts.push(
      mutationRoot
        ? `extend type ${mutationRoot.name} {\n${mutationRoots}\n}`
        : `type Mutation {\n${mutationRoots}\n}\n\nextend schema {\n  mutation: Mutation\n}`,
    );
  }
  // The live queries (Hasura's subscription_root: the query root fields subscription_root_fields opens), beside the streams.
  const subscriptionRoots = [
    ...views.flatMap((view) => rootFieldsSdl(view, view.subscriptionRoots)),
    ...views.flatMap((view) => streamRootSdl(view) ?? []),
  ].join('\n');
  if (subscriptionRoots) {
    const subscriptionRoot = base.getSubscriptionType();
    parts.push(
      subscriptionRoot
        ? `extend type ${subscriptionRoot.name} {\n${subscriptionRoots}\n}`
        : `type Subscription {\n${subscriptionRoots}\n}\n\nextend schema {\n  subscription: Subscription\n}`,
    );
  }
  const schema = extendSchema(base, parse(parts.join('\n\n')));
  if (runner) attachResolvers(schema, views, runner);
  return schema;
}

/**
 * Root fields call the runner (and offer the statement's JSON text as their raw answer); every
 * field of the generated object types reads its answer by response key, since the statement
 * builds its JSON under the document's aliases.
 */
function attachResolvers(schema: GraphQLSchema, views: readonly TableView[], runner: TableRunner): void {
  const query = schema.getQueryType()!.getFields();
  const subscription = schema.getSubscriptionType()?.getFields() ?? {};
  const byResponseKey: GraphQLFieldResolver<Record<string, unknown>, unknown> = (source, _args, _context, info) => source[info.path.key as string];
  for (const view of views) {
    const { table } = view;
    for (const [kind, field] of [
      ['select', table.roots.select],
      ['selectAggregate', table.roots.selectAggregate],
      ['selectByPk', table.roots.selectByPk],
    ] as const) {
      if (query[field]) {
        // The compiler reads the arguments from the field node and the marked variables, not from graphql's coerced args.
        query[field].resolve = ((_source, _args, context: GraphQLContext, info) => runner.select(table, kind, info, context)) as GraphQLFieldResolver<
          unknown,
          GraphQLContext
        >;
        const { selectJson } = runner;
        if (selectJson) offerRawAnswer(query[field], (request) => selectJson.call(runner, table, kind, request));
      }
      const liveField = subscription[field];
      if (!liveField || !runner.live) continue;
      liveField.extensions = { ...liveField.extensions, [LIVE_QUERY_EXTENSION]: true };
      liveField.subscribe = ((_source, _args, context: GraphQLContext, info) => runner.live!(table, kind, info, context)) as GraphQLFieldResolver<
        unknown,
        GraphQLContext
      >;
      liveField.resolve = liveEventValue as GraphQLFieldResolver<unknown, unknown>;
    }
    const mutationRoot = schema.getMutationType()?.getFields() ?? {};
    for (const { kind } of runner.mutate ? mutationRootsSdl(view) : []) {
      const field = mutationRoot[table.mutationRoots[kind]];
      const marker: MutationField = { table, kind };
      field.extensions = { ...field.extensions, [MUTATION_FIELD]: marker };
      field.resolve = ((_source, _args, context: GraphQLContext, info) => runner.mutate!(table, kind, info, context)) as GraphQLFieldResolver<
        unknown,
        GraphQLContext
      >;
    }
    const streamField = schema.getSubscriptionType()?.getFields()[table.streamRoot];
    const { stream } = runner;
    if (streamField && stream && showsStream(view)) {
      // Each event is a batch of rows (its JSON built under the document's keys), or the error that ends the stream.
      streamField.subscribe = ((_source, _args, context: GraphQLContext, info) => stream.call(runner, table, info, context)) as GraphQLFieldResolver<
        unknown,
        GraphQLContext
      >;
      streamField.resolve = (event: unknown) => {
        if (event instanceof Error) throw event;
        return event;
      };
    }
    for (const typeName of generatedTypeNames(table)) {
      const type = schema.getType(typeName);
      if (!isObjectType(type)) continue;
      for (const field of Object.values(type.getFields())) {
        const column = typeName === table.typeName ? table.columnsByField.get(field.name) : undefined;
        field.resolve = (column?.array ? arrayByResponseKey(column) : byResponseKey) as GraphQLFieldResolver<unknown, unknown>;
      }
    }
  }
}

/**
 * An array column's value by response key. A stored NULL element or a multi-dimensional value
 * cannot be its `[scalar!]`: that field is a clear error rather than an unexpected one.
 */
function arrayByResponseKey(column: ColumnModel): GraphQLFieldResolver<Record<string, unknown>, unknown> {
  return (source, _args, _context, info) => {
    const value = source[info.path.key as string];
    if (!Array.isArray(value)) return value;
    // A json element may itself be a list; a null is never one of [scalar!].
    const json = column.scalar === 'json' || column.scalar === 'jsonb';
    const odd = value.find((item) => item === null || (!json && Array.isArray(item)));
    if (odd === undefined) return value;
    const what = odd === null ? 'a NULL element' : 'more than one dimension';
    throw new GraphQLError(`the stored value of ${info.parentType.name}.${info.fieldName} has ${what}, which its type [${column.scalar}!] cannot represent`, {
      extensions: { code: 'UNREPRESENTABLE_VALUE' },
    });
  };
}
