import { lexicographicSortSchema, printSchema, type GraphQLSchema } from 'graphql';
import { buildSchema, type ContainerType, type NonEmptyArray, type PubSub } from 'type-graphql';
import { authChecker } from './auth-checker';
import { guardRootArgumentText } from './input-text';
import { markSharedEventFields } from './subscription-groups';

/** The resolver classes of the one schema: the caller gives them (the modules' declarations, platform/module.ts: resolverClasses). */
export type SchemaResolvers = NonEmptyArray<Function>;

export async function buildPlinthSchema(options: { resolvers: SchemaResolvers; container: ContainerType; pubSub: PubSub }): Promise<GraphQLSchema> {
  const schema = await buildSchema({
    resolvers: options.resolvers,
    container: options.container,
    pubSub: options.pubSub,
    authChecker,
    authMode: 'error',
    // Inputs are validated by the services, which answer with success=false and per-field
    // errors (spec 1 §2.3) on both the GraphQL and the handler route; see docs/decisions.md.
    validate: false,
    emitSchemaFile: false,
  });
  guardRootArgumentText(schema);
  markSharedEventFields(schema);
  return schema;
}

/** The schema the resolvers declare, built without any service: to print or document it (no resolver runs, nothing is published). */
export function buildDeclaredSchema(resolvers: SchemaResolvers): Promise<GraphQLSchema> {
  const inert = { publish: () => undefined, subscribe: () => (async function* () {})() };
  return buildPlinthSchema({ resolvers, container: new ResolverContainer(), pubSub: inert });
}

/** The committed form of the schema: sorted, so that it changes only when the types do. */
export function printPlinthSchema(schema: GraphQLSchema): string {
  return `${printSchema(lexicographicSortSchema(schema))}\n`;
}

/**
 * Resolves resolver classes to the instances built at start-up, each constructed with its
 * module's services (there is no DI framework to learn).
 */
export class ResolverContainer implements ContainerType {
  private readonly instances = new Map<Function, object>();

  add(...resolvers: object[]): this {
    for (const resolver of resolvers) this.instances.set(resolver.constructor, resolver);
    return this;
  }

  get(resolverClass: Function): object {
    const instance = this.instances.get(resolverClass);
    if (!instance) throw new Error(`No instance of ${resolverClass.name} was registered`);
    return instance;
  }
}
