import {
  extendSchema,
  GraphQLError,
  isEnumType,
  isInputObjectType,
  isListType,
  isNonNullType,
  isObjectType,
  isScalarType,
  parse,
  type GraphQLFieldResolver,
  type GraphQLNamedType,
  type GraphQLObjectType,
  type GraphQLOutputType,
  type GraphQLSchema,
} from 'graphql';
import type { GraphQLContext } from '../../graphql/context';
import { MetadataError } from '../../platform/metadata';
import { namedType, type ActionEntry, type ActionsMetadata, type CustomObject, type CustomTypes } from './actions.metadata';

/** What the generated root fields call: the service. */
export interface ActionRunner {
  /** A synchronous action (or a query action): the handler's checked answer. */
  run(action: ActionEntry, input: Record<string, unknown>, context: GraphQLContext, requestQuery: string, returnType: GraphQLOutputType): Promise<unknown>;
  /** An asynchronous action: queues the call and answers its id. */
  enqueue(action: ActionEntry, input: Record<string, unknown>, context: GraphQLContext, requestQuery: string): Promise<string>;
  /** The state of an asynchronous call, for the session that started it (or admin); null otherwise. */
  result(action: ActionEntry, id: string, context: GraphQLContext, outputType: GraphQLOutputType): Promise<AsyncActionResult | null>;
  /** The state now, then at each change until the call is done. */
  watch(action: ActionEntry, id: string, context: GraphQLContext, outputType: GraphQLOutputType): AsyncIterable<AsyncActionResult | null>;
}

/** What `<action>(id)` answers for an asynchronous action (Hasura's shape). */
export interface AsyncActionResult {
  id: string;
  created_at: string;
  output: unknown;
  errors: unknown;
}

const BUILT_IN_SCALARS = new Set(['Int', 'Float', 'String', 'Boolean', 'ID']);

/**
 * Scalars a Hasura project's actions use without declaring them (its PostgreSQL column types):
 * they are added, as pass-through scalars, when an action or custom type refers to one.
 */
export const POSTGRES_SCALARS = new Set([
  'uuid',
  'timestamptz',
  'timestamp',
  'date',
  'time',
  'timetz',
  'interval',
  'json',
  'jsonb',
  'numeric',
  'bigint',
  'smallint',
  'float8',
  'float4',
  'bpchar',
  'citext',
  'money',
  'inet',
  'bytea',
]);

function refuse(message: string): never {
  throw new MetadataError('validation-failed', message, '$.args');
}

/** A GraphQL string literal (JSON's escapes are GraphQL's). */
const literal = (text: string) => JSON.stringify(text);
const described = (description: string | null | undefined, indent = '') => (description ? `${indent}${literal(description)}\n` : '');

function objectSdl(keyword: 'type' | 'input', object: CustomObject): string {
  const fields = object.fields.map((field) => `${described(field.description, '  ')}  ${field.name}: ${field.type}`).join('\n');
  return `${described(object.description)}${keyword} ${object.name} {\n${fields}\n}`;
}

/**
 * Plinth's schema with the actions of `metadata`: the custom types, one root field per action
 * (Mutation or Query), and for an asynchronous action the mutation answering its id plus the
 * query and subscription `<action>(id)`. Without `runner` the fields resolve nothing (to print
 * or check the schema). A declaration that does not fit is a MetadataError naming it.
 */
export function extendWithActions(base: GraphQLSchema, metadata: ActionsMetadata, runner?: ActionRunner): GraphQLSchema {
  const { customTypes, actions } = metadata;
  if (actions.length === 0 && !Object.values(customTypes).some((list) => list?.length)) return base;

  const custom = new Map<string, 'scalar' | 'enum' | 'input' | 'object'>();
  const declare = (name: string, kind: 'scalar' | 'enum' | 'input' | 'object', what: string) => {
    if (base.getType(name)) refuse(`the custom ${what} "${name}" clashes with the type ${name} of Plinth's schema: rename it`);
    custom.set(name, kind);
  };
  for (const scalar of customTypes.scalars ?? []) declare(scalar.name, 'scalar', 'scalar');
  for (const item of customTypes.enums ?? []) declare(item.name, 'enum', 'enum');
  for (const item of customTypes.input_objects ?? []) declare(item.name, 'input', 'input object');
  for (const item of customTypes.objects ?? []) declare(item.name, 'object', 'object');

  const implicit = new Set<string>();
  /** Whether `name` may be used as an input (or output) type, adding an implicit scalar when it is one. */
  const usable = (name: string, input: boolean): boolean => {
    if (BUILT_IN_SCALARS.has(name)) return true;
    const kind = custom.get(name);
    if (kind) return kind === 'scalar' || kind === 'enum' || kind === (input ? 'input' : 'object');
    const existing: GraphQLNamedType | undefined | null = base.getType(name);
    if (existing) return isScalarType(existing) || isEnumType(existing) || (input && isInputObjectType(existing));
    if (POSTGRES_SCALARS.has(name)) {
      implicit.add(name);
      return true;
    }
    return false;
  };
  const check = (reference: string, input: boolean, where: string) => {
    const name = namedType(reference);
    if (usable(name, input)) return;
    const known = custom.has(name) || base.getType(name);
    refuse(
      known
        ? `${where} has the type ${name}, which cannot be ${input ? 'an input (use a scalar, an enum or an input object)' : 'an output (use a scalar, an enum or an object)'}`
        : `${where} refers to the unknown type ${name}: declare it with set_custom_types`,
    );
  };
  for (const item of customTypes.input_objects ?? []) for (const field of item.fields) check(field.type, true, `the field ${item.name}.${field.name}`);
  for (const item of customTypes.objects ?? []) for (const field of item.fields) check(field.type, false, `the field ${item.name}.${field.name}`);

  const roots = { mutation: base.getMutationType(), query: base.getQueryType() };
  const added = { mutation: [] as string[], query: [] as string[], subscription: [] as string[] };
  const asyncTypes: string[] = [];
  const subscriptionRoot = base.getSubscriptionType();
  for (const action of actions) {
    const { definition } = action;
    const root = roots[definition.type ?? 'mutation'];
    if (root?.getFields()[action.name]) refuse(`the action "${action.name}" clashes with the built-in field ${root.name}.${action.name}: rename it`);
    for (const argument of definition.arguments ?? []) check(argument.type, true, `the argument ${argument.name} of the action "${action.name}"`);
    check(definition.output_type, false, `the output type of the action "${action.name}"`);
    const args = definition.arguments?.length
      ? `(${definition.arguments.map((argument) => `${argument.description ? `${literal(argument.description)} ` : ''}${argument.name}: ${argument.type}`).join(', ')})`
      : '';
    const description = described(action.comment, '  ');
    if (definition.kind === 'asynchronous') {
      if (custom.has(action.name) || base.getType(action.name))
        refuse(`the asynchronous action "${action.name}" needs a type of its name for its result, and a type ${action.name} exists`);
      if (base.getQueryType()?.getFields()[action.name])
        refuse(`the asynchronous action "${action.name}" clashes with the built-in field ${base.getQueryType()!.name}.${action.name}`);
      if (subscriptionRoot?.getFields()[action.name])
        refuse(`the asynchronous action "${action.name}" clashes with the built-in field ${subscriptionRoot.name}.${action.name}`);
      for (const scalar of ['uuid', 'timestamptz', 'json']) if (!custom.has(scalar) && !base.getType(scalar)) implicit.add(scalar);
      added.mutation.push(`${description}  ${action.name}${args}: uuid!`);
      added.query.push(`${description}  ${action.name}(id: uuid!): ${action.name}`);
      added.subscription.push(`${description}  ${action.name}(id: uuid!): ${action.name}`);
      asyncTypes.push(
        `${described(`The result of the asynchronous action ${action.name}`)}type ${action.name} {\n  id: uuid!\n  created_at: timestamptz!\n  output: ${definition.output_type}\n  errors: json\n}`,
      );
    } else {
      added[definition.type ?? 'mutation'].push(`${description}  ${action.name}${args}: ${definition.output_type}`);
    }
  }

  const parts: string[] = [
    ...[...implicit].map((name) => `scalar ${name}`),
    ...(customTypes.scalars ?? []).map((scalar) => `${described(scalar.description)}scalar ${scalar.name}`),
    ...(customTypes.enums ?? []).map(
      (item) =>
        `${described(item.description)}enum ${item.name} {\n${item.values
          .map((value) => `${described(value.description, '  ')}  ${value.value}${value.is_deprecated ? ' @deprecated' : ''}`)
          .join('\n')}\n}`,
    ),
    ...(customTypes.input_objects ?? []).map((item) => objectSdl('input', item)),
    ...(customTypes.objects ?? []).map((item) => objectSdl('type', item)),
    ...asyncTypes,
  ];
  const schemaRoots: string[] = [];
  const rootName = (kind: 'mutation' | 'query' | 'subscription', existing: GraphQLObjectType | null | undefined) => {
    if (existing) return { name: existing.name, keyword: 'extend type' };
    schemaRoots.push(`${kind}: ${kind[0].toUpperCase()}${kind.slice(1)}`);
    return { name: `${kind[0].toUpperCase()}${kind.slice(1)}`, keyword: 'type' };
  };
  const rootNames: Record<string, string> = {};
  for (const [kind, existing] of [
    ['query', roots.query],
    ['mutation', roots.mutation],
    ['subscription', subscriptionRoot],
  ] as const) {
    if (added[kind].length === 0) continue;
    const { name, keyword } = rootName(kind, existing);
    rootNames[kind] = name;
    parts.push(`${keyword} ${name} {\n${added[kind].join('\n')}\n}`);
  }
  if (schemaRoots.length) parts.push(`extend schema {\n  ${schemaRoots.join('\n  ')}\n}`);

  let schema: GraphQLSchema;
  try {
    schema = extendSchema(base, parse(parts.join('\n\n')));
  } catch (error) {
    if (error instanceof GraphQLError) refuse(`the actions do not fit the schema: ${error.message}`);
    throw error;
  }
  if (runner) attachResolvers(schema, actions, runner, rootNames);
  return schema;
}

function attachResolvers(schema: GraphQLSchema, actions: ActionEntry[], runner: ActionRunner, rootNames: Record<string, string>): void {
  const field = (root: string | undefined, name: string) => {
    const type = root ? schema.getType(root) : undefined;
    return isObjectType(type) ? type.getFields()[name] : undefined;
  };
  for (const action of actions) {
    const requestQuery = (info: { operation: { loc?: { source: { body: string } } } }) => info.operation.loc?.source.body ?? '';
    if (action.definition.kind === 'asynchronous') {
      const mutation = field(rootNames.mutation, action.name)!;
      mutation.resolve = ((_source, args, context: GraphQLContext, info) => runner.enqueue(action, args, context, requestQuery(info))) as GraphQLFieldResolver<
        unknown,
        GraphQLContext
      >;
      const outputType = (schema.getType(action.name) as GraphQLObjectType).getFields().output.type;
      const query = field(rootNames.query, action.name)!;
      query.resolve = ((_source, args: { id: string }, context: GraphQLContext) => runner.result(action, args.id, context, outputType)) as GraphQLFieldResolver<
        unknown,
        GraphQLContext
      >;
      const subscription = field(rootNames.subscription, action.name)!;
      subscription.subscribe = ((_source, args: { id: string }, context: GraphQLContext) =>
        runner.watch(action, args.id, context, outputType)) as GraphQLFieldResolver<unknown, GraphQLContext>;
      subscription.resolve = (payload: unknown) => payload;
    } else {
      const root = field(rootNames[action.definition.type ?? 'mutation'], action.name)!;
      root.resolve = ((_source, args, context: GraphQLContext, info) =>
        runner.run(action, args, context, requestQuery(info), info.returnType)) as GraphQLFieldResolver<unknown, GraphQLContext>;
    }
  }
}

/** The fields the relationships of each custom object type give (`<name>_aggregate` too for an array one). */
export function relationshipFields(customTypes: CustomTypes): Map<string, Set<string>> {
  return new Map(
    (customTypes.objects ?? [])
      .filter((object) => object.relationships?.length)
      .map((object) => [
        object.name,
        new Set(object.relationships!.flatMap((item) => (item.type === 'array' ? [item.name, `${item.name}_aggregate`] : [item.name]))),
      ]),
  );
}

/**
 * Why `value` (a handler's answer) does not fit `type`, naming the field, or undefined when it
 * fits: unexpected fields, a null where the type forbids it, a scalar or enum value the type
 * does not take.
 */
export function outputProblem(
  value: unknown,
  type: GraphQLOutputType,
  path: string,
  joined: ReadonlyMap<string, ReadonlySet<string>> = new Map(),
): string | undefined {
  if (isNonNullType(type)) {
    if (value === null || value === undefined) return `expecting a not-null value for the field "${path}"`;
    return outputProblem(value, type.ofType, path, joined);
  }
  if (value === null || value === undefined) return undefined;
  if (isListType(type)) {
    if (!Array.isArray(value)) return `expecting a list for the field "${path}"`;
    for (const [index, item] of value.entries()) {
      const problem = outputProblem(item, type.ofType, `${path}[${index}]`, joined);
      if (problem) return problem;
    }
    return undefined;
  }
  if (isObjectType(type)) {
    if (typeof value !== 'object' || Array.isArray(value)) return `expecting an object for the field "${path}"`;
    const fields = type.getFields();
    // Relationship fields come from the tables, never from the handler.
    const relationships = joined.get(type.name);
    for (const key of Object.keys(value)) if (!fields[key] || relationships?.has(key)) return `unexpected field "${path}.${key}" in the handler's response`;
    for (const [name, field] of Object.entries(fields)) {
      if (relationships?.has(name)) continue;
      const problem = outputProblem((value as Record<string, unknown>)[name], field.type, `${path}.${name}`, joined);
      if (problem) return problem;
    }
    return undefined;
  }
  if (isScalarType(type) || isEnumType(type)) {
    try {
      type.serialize(value);
      return undefined;
    } catch {
      return `the field "${path}" must be ${isEnumType(type) ? 'one of the values of' : 'a'} ${type.name}; got ${JSON.stringify(value)?.slice(0, 60)}`;
    }
  }
  return `the field "${path}" has a type an action cannot answer (${String(type)})`;
}
