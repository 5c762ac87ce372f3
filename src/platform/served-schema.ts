import type { GraphQLSchema } from 'graphql';

/** Builds a schema from Plinth's own: adds root fields and types (user-declared actions), or throws to refuse. */
export type SchemaExtension = (schema: GraphQLSchema) => GraphQLSchema;

/**
 * The one schema as it is served now: Plinth's own (the resolvers', fixed at start-up) with the
 * extensions that metadata declares. A metadata change rebuilds it; HTTP (Apollo) and WebSocket
 * operations take the current schema when they start and finish on it, so a change never
 * reaches a request in flight.
 */
export class ServedSchema {
  private baseSchema?: GraphQLSchema;
  private currentSchema?: GraphQLSchema;
  private readonly extensions: SchemaExtension[] = [];
  private readonly listeners = new Set<(schema: GraphQLSchema) => void>();

  /** Plinth's own schema; set once the resolvers are built (processes without the api role have none). */
  get base(): GraphQLSchema {
    if (!this.baseSchema) throw new Error('the schema is not built in this process (PLINTH_PROCESS_ROLES has no api role)');
    return this.baseSchema;
  }

  get built(): boolean {
    return this.baseSchema !== undefined;
  }

  /** The schema to serve now. */
  get current(): GraphQLSchema {
    return this.currentSchema ?? this.base;
  }

  setBase(schema: GraphQLSchema): void {
    this.baseSchema = schema;
    this.rebuild();
  }

  /** Extensions apply in the order they are added, each to the result of the one before. */
  addExtension(extension: SchemaExtension): void {
    this.extensions.push(extension);
  }

  /** The schema the extensions would give now, without serving it (to check a change before it commits). */
  build(): GraphQLSchema {
    let schema = this.base;
    for (const extension of this.extensions) schema = extension(schema);
    return schema;
  }

  /** Serves the schema the extensions give now; nothing changes when an extension throws. */
  rebuild(): void {
    if (!this.baseSchema) return;
    const schema = this.build();
    if (schema === this.currentSchema) return;
    this.currentSchema = schema;
    for (const listener of this.listeners) listener(schema);
  }

  /** Calls `listener` with every new schema; returns the way to stop. */
  onChange(listener: (schema: GraphQLSchema) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }
}
