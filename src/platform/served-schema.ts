import type { GraphQLSchema } from 'graphql';
import type { Session } from './session';

/** Builds a schema from Plinth's own: adds root fields and types (user-declared actions), or throws to refuse. */
export type SchemaExtension = (schema: GraphQLSchema) => GraphQLSchema;

/**
 * How an extension shows less to some sessions (the generated tables, as each role's permissions
 * open them): the sessions of one view share one schema.
 */
export interface SchemaNarrowing {
  /** The name of the view `session` is served, or undefined when it sees all that the extension adds. */
  viewOf(session: Session): string | undefined;
  /** What the extension adds to `schema`, as the view `view` shows it. */
  extendFor(schema: GraphQLSchema, view: string): GraphQLSchema;
}

interface Extension {
  extend: SchemaExtension;
  narrowing?: SchemaNarrowing;
}

/**
 * The one schema as it is served now: Plinth's own (the resolvers', fixed at start-up) with the
 * extensions that metadata declares. A metadata change rebuilds it; HTTP (Apollo) and WebSocket
 * operations take the current schema when they start and finish on it, so a change never
 * reaches a request in flight. A session an extension narrows is served a view of it instead
 * (viewFor), built when first asked and kept until the next rebuild.
 */
export class ServedSchema {
  private baseSchema?: GraphQLSchema;
  private currentSchema?: GraphQLSchema;
  private readonly extensions: Extension[] = [];
  private readonly listeners = new Set<(schema: GraphQLSchema) => void>();
  /** What each extension was given in the build now served: a view is built from there. */
  private inputs: GraphQLSchema[] = [];
  /** The views of the current schema, by the views' names their extensions gave. */
  private views = new Map<string, GraphQLSchema>();
  /** The name of each view (a view is never the current schema). */
  private readonly viewNames = new WeakMap<GraphQLSchema, string>();

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
  addExtension(extension: SchemaExtension, narrowing?: SchemaNarrowing): void {
    this.extensions.push({ extend: extension, narrowing });
  }

  /** Serves the schema the extensions give now; nothing changes when an extension throws. */
  rebuild(): void {
    if (!this.baseSchema) return;
    const inputs: GraphQLSchema[] = [];
    let schema = this.baseSchema;
    for (const { extend } of this.extensions) {
      inputs.push(schema);
      schema = extend(schema);
    }
    if (schema === this.currentSchema) return;
    this.currentSchema = schema;
    this.inputs = inputs;
    this.views = new Map();
    for (const listener of this.listeners) listener(schema);
  }

  /**
   * The schema `session` is served in place of `schema` (a schema this object served): `schema`
   * itself when no extension narrows the session, else the session's view of the current schema
   * (a request that began before a rebuild gets the newer view, never the whole older schema).
   */
  viewFor(schema: GraphQLSchema, session: Session): GraphQLSchema {
    let name: string | undefined;
    let first = -1;
    for (let index = 0; index < this.extensions.length; index++) {
      const view = this.extensions[index].narrowing?.viewOf(session);
      if (view === undefined) continue;
      if (first < 0) first = index;
      name = name === undefined ? `${index}:${view}` : `${name}\n${index}:${view}`;
    }
    if (name === undefined || !this.currentSchema) return schema;
    let built = this.views.get(name);
    if (!built) {
      built = this.inputs[first];
      for (let index = first; index < this.extensions.length; index++) {
        const { extend, narrowing } = this.extensions[index];
        const view = narrowing?.viewOf(session);
        built = view === undefined ? extend(built) : narrowing!.extendFor(built, view);
      }
      this.views.set(name, built);
      this.viewNames.set(built, name);
    }
    return built;
  }

  /** The name of `schema` when it is a view (viewFor), undefined for a whole schema. */
  viewName(schema: GraphQLSchema): string | undefined {
    return this.viewNames.get(schema);
  }

  /** Calls `listener` with every new schema; returns the way to stop. */
  onChange(listener: (schema: GraphQLSchema) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }
}
