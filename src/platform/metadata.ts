import type { DataSource, EntityManager } from 'typeorm';
import { LOCK_KEYS } from '../db/lock-keys';

/**
 * The whole metadata, in Hasura's v3 shape (what `export_metadata` answers and `replace_metadata`
 * takes). Each module reads and writes only its own keys; unknown keys are kept as they are.
 */
export interface HasuraMetadata {
  version: 3;
  sources: MetadataSource[];
  [key: string]: unknown;
}

export interface MetadataSource {
  name: string;
  kind: string;
  tables: MetadataTable[];
  configuration?: unknown;
  [key: string]: unknown;
}

/** A table entry of a source: `table` names it, modules add their keys (event_triggers, ...). */
export interface MetadataTable {
  table: { schema: string; name: string };
  [key: string]: unknown;
}

/** The one source Plinth has: its own PostgreSQL database. */
export const DEFAULT_SOURCE = 'default';

/** Empty metadata: what `clear_metadata` leaves. */
export function emptyMetadata(): HasuraMetadata {
  return {
    version: 3,
    sources: [
      {
        name: DEFAULT_SOURCE,
        kind: 'postgres',
        tables: [],
        configuration: { connection_info: { database_url: { from_env: 'DATABASE_URL' } } },
      },
    ],
  };
}

/** The table entry of `schema.name` in the default source, added when `create` and missing. */
export function tableEntry(metadata: HasuraMetadata, table: { schema: string; name: string }, create: true): MetadataTable;
export function tableEntry(metadata: HasuraMetadata, table: { schema: string; name: string }, create?: false): MetadataTable | undefined;
export function tableEntry(metadata: HasuraMetadata, table: { schema: string; name: string }, create = false): MetadataTable | undefined {
  const source = metadata.sources.find((entry) => entry.name === DEFAULT_SOURCE);
  if (!source) return undefined;
  let entry = source.tables.find((candidate) => candidate.table.schema === table.schema && candidate.table.name === table.name);
  if (!entry && create) {
    entry = { table: { schema: table.schema, name: table.name } };
    source.tables.push(entry);
  }
  return entry;
}

/**
 * A refused metadata request, answered as Hasura does: HTTP 400 with `{path, error, code}`.
 * `path` is a JSON path into the request's `args` (`$.args.name`); codes are Hasura's
 * (`already-exists`, `not-exists`, `not-found`, `parse-failed`, `validation-failed`, ...).
 */
export class MetadataError extends Error {
  constructor(
    readonly code: string,
    message: string,
    readonly path = '$.args',
    /** What went wrong below the request (PostgreSQL's error of a `run_sql`), answered as Hasura's `internal`. */
    readonly internal?: unknown,
  ) {
    super(message);
    this.name = 'MetadataError';
  }
}

/** What a request handler gets besides its `args`. */
export interface MetadataRequestContext {
  /** The transaction the request runs in (a `bulk` runs all its requests in one). */
  manager: EntityManager;
  /** Runs after the transaction commits (to wake other parts, refresh caches); never when it rolls back. */
  afterCommit(callback: () => void | Promise<void>): void;
  /**
   * For `run_sql`: called before its SQL runs, it has every section note what it needs
   * (MetadataSection.followSql); the function it gives, called after the SQL, brings their
   * entries in line with what the SQL changed.
   */
  followSql?(): Promise<(cascade: boolean) => Promise<void>>;
  /**
   * Runs `check` once at the end of the request (a whole `bulk`, every section of a replace), in its
   * transaction, before it commits: a refusal it throws refuses the request. For rules spanning
   * modules (an action's relationship to a tracked table), which only hold once every part is changed.
   * A second check under the same key is not added.
   */
  beforeCommit(key: string, check: () => Promise<void>): void;
}

/** One request type: takes its `args` (not yet validated) and answers a JSON value. */
export type MetadataRequestHandler = (args: unknown, context: MetadataRequestContext) => Promise<unknown>;

/**
 * A module's part of the whole metadata: what it adds to `export_metadata`, how it replaces its
 * entries from a whole metadata object (`replace_metadata`, `clear_metadata`, `plinth metadata
 * apply`), and how it re-reads them (`reload_metadata`).
 */
export interface MetadataSection {
  /** Adds this module's entries to `metadata`. */
  export(metadata: HasuraMetadata, manager: EntityManager): Promise<void>;
  /**
   * Replaces this module's entries by those in `metadata`: checks them all first (a
   * MetadataError naming the entry) and changes nothing when one is refused.
   */
  replace(metadata: HasuraMetadata, context: MetadataRequestContext): Promise<void>;
  /** Re-reads what this module derives from its entries (`reload_metadata`). */
  reload?(context: MetadataRequestContext): Promise<void>;
  /**
   * The entries that cannot be served as the database is now (a tracked table dropped under its
   * metadata), in Hasura's shape `{type, name, reason, definition}`: `get_inconsistent_metadata`.
   */
  inconsistencies?(context: MetadataRequestContext): Promise<unknown[]>;
  /**
   * Before a `run_sql`'s SQL runs: notes what the section's entries name (tables by oid, columns by
   * number), and gives what to do after it: follow renames, and refuse with `dependency-error` an
   * entry the SQL broke (a table or column dropped), or with `cascade` drop that entry.
   */
  followSql?(context: MetadataRequestContext): Promise<(cascade: boolean) => Promise<void>>;
}

/**
 * The files of Hasura's CLI layout under `metadata/` that hold a module's top-level keys
 * (`cron_triggers.yaml`, `actions.yaml`...). The tables under `databases/` are written by the
 * shared layer (metadata-files.ts) from `sources`, whatever keys the modules put in them.
 */
export interface MetadataFiles {
  /** The files holding this section's part of `metadata`, by path under `metadata/`. */
  write(metadata: HasuraMetadata): Record<string, string>;
  /** Reads this section's part into `metadata`; `read` gives a file's text, or undefined when it does not exist. */
  read(read: (path: string) => string | undefined, metadata: HasuraMetadata): void;
}

/** What a module contributes to the metadata API (PlinthModule.metadata). */
export interface ModuleMetadata {
  /** The request types it answers at `POST /v1/metadata`, by Hasura's names (`pg_create_event_trigger`). */
  requests?: Record<string, MetadataRequestHandler>;
  /** The request types of Hasura's schema API it answers at `POST /v2/query` (`run_sql`). */
  queries?: Record<string, MetadataRequestHandler>;
  section?: MetadataSection;
}

/** A metadata request as sent: Hasura's `{type, args}` (with an optional `version`, `source`, `resource_version`). */
export interface MetadataRequest {
  type: string;
  args?: unknown;
  version?: number;
}

/** Which of Hasura's two admin APIs a request came to: the metadata API, or the schema API (`/v2/query`). */
export type MetadataApiKind = 'metadata' | 'query';

/** Request types the metadata API itself answers, over every module's section. */
const BUILT_IN_TYPES = ['bulk', 'export_metadata', 'replace_metadata', 'clear_metadata', 'reload_metadata', 'get_inconsistent_metadata'] as const;

const SUCCESS = { message: 'success' } as const;

/**
 * The metadata API: dispatches Hasura's `{type, args}` requests to the modules that declared
 * them, and runs the whole-metadata requests over every module's section. Every request runs in
 * one transaction holding the metadata lock; a MetadataError anywhere rolls the whole request
 * (a whole `bulk`) back.
 */
export class MetadataApi {
  private readonly handlers = new Map<string, MetadataRequestHandler>();
  private readonly queryHandlers = new Map<string, MetadataRequestHandler>();
  private readonly sections: MetadataSection[] = [];

  constructor(
    private readonly dataSource: DataSource,
    modules: readonly ModuleMetadata[],
  ) {
    for (const module of modules) {
      for (const [type, handler] of Object.entries(module.requests ?? {})) {
        if (this.handlers.has(type) || (BUILT_IN_TYPES as readonly string[]).includes(type)) {
          throw new Error(`the metadata request type ${type} is declared twice`);
        }
        this.handlers.set(type, handler);
      }
      for (const [type, handler] of Object.entries(module.queries ?? {})) {
        if (this.queryHandlers.has(type) || type === 'bulk') throw new Error(`the query request type ${type} is declared twice`);
        this.queryHandlers.set(type, handler);
      }
      if (module.section) this.sections.push(module.section);
    }
  }

  /** Every request type answered, built-in ones included (sorted). */
  get types(): string[] {
    return [...BUILT_IN_TYPES, ...this.handlers.keys()].sort();
  }

  /** Runs one request (a `bulk` included) of `api`; throws MetadataError when it is refused. */
  async run(request: MetadataRequest, api: MetadataApiKind = 'metadata'): Promise<unknown> {
    const callbacks: (() => void | Promise<void>)[] = [];
    const checks = new Map<string, () => Promise<void>>();
    const result = await this.dataSource.transaction(async (manager) => {
      await manager.query('SELECT pg_advisory_xact_lock($1)', [LOCK_KEYS.metadata]);
      const context: MetadataRequestContext = {
        manager,
        afterCommit: (callback) => void callbacks.push(callback),
        followSql: async () => {
          const after: ((cascade: boolean) => Promise<void>)[] = [];
          for (const section of this.sections) if (section.followSql) after.push(await section.followSql(context));
          return async (cascade) => {
            for (const follow of after) await follow(cascade);
          };
        },
        beforeCommit: (key, check) => void (checks.has(key) || checks.set(key, check)),
      };
      const answer = await this.dispatch(request, context, '$', api);
      for (const check of checks.values()) await check();
      return answer;
    });
    for (const callback of callbacks) await callback();
    return result;
  }

  private async dispatch(request: unknown, context: MetadataRequestContext, path: string, api: MetadataApiKind): Promise<unknown> {
    if (request === null || typeof request !== 'object' || Array.isArray(request)) {
      throw new MetadataError('parse-failed', 'a metadata request must be an object with "type" and "args"', path);
    }
    const { type, args } = request as { type?: unknown; args?: unknown };
    if (typeof type !== 'string') throw new MetadataError('parse-failed', 'the key "type" must be a string', `${path}.type`);
    try {
      if (type === 'bulk') return await this.bulk(args, context, `${path}.args`, api);
      if (api === 'query') {
        const handler = this.queryHandlers.get(type);
        if (!handler)
          throw new MetadataError(
            'parse-failed',
            `unknown query request type "${type}" (POST /v2/query answers ${[...this.queryHandlers.keys(), 'bulk'].join(', ')})`,
            '$.type',
          );
        return await handler(args ?? {}, context);
      }
      return await this.dispatchType(type, args, context);
    } catch (error) {
      // A handler's path is relative to its own args ("$.args.name"): anchor it where the request sits.
      if (error instanceof MetadataError && path !== '$' && !error.path.startsWith(path)) {
        throw new MetadataError(error.code, error.message, error.path.replace(/^\$/, path), error.internal);
      }
      throw error;
    }
  }

  /** A `bulk`: its requests in order, in the one transaction. */
  private async bulk(args: unknown, context: MetadataRequestContext, argsPath: string, api: MetadataApiKind): Promise<unknown[]> {
    if (!Array.isArray(args)) throw new MetadataError('parse-failed', 'the args of bulk must be a list of requests', argsPath);
    const results: unknown[] = [];
    for (const [index, item] of args.entries()) results.push(await this.dispatch(item, context, `${argsPath}[${index}]`, api));
    return results;
  }

  private async dispatchType(type: string, args: unknown, context: MetadataRequestContext): Promise<unknown> {
    switch (type) {
      case 'export_metadata':
        return this.exportMetadata(context.manager);
      case 'replace_metadata':
        await this.replace(replacementOf(args), context);
        return SUCCESS;
      case 'clear_metadata':
        await this.replace(emptyMetadata(), context);
        return SUCCESS;
      case 'reload_metadata': {
        for (const section of this.sections) await section.reload?.(context);
        return { ...SUCCESS, is_consistent: (await this.inconsistencies(context)).length === 0 };
      }
      case 'get_inconsistent_metadata': {
        const inconsistent = await this.inconsistencies(context);
        return { is_consistent: inconsistent.length === 0, inconsistent_objects: inconsistent };
      }
      default: {
        const handler = this.handlers.get(type);
        if (!handler) throw new MetadataError('parse-failed', `unknown metadata request type "${type}"`, '$.type');
        return handler(args ?? {}, context);
      }
    }
  }

  private async inconsistencies(context: MetadataRequestContext): Promise<unknown[]> {
    const found: unknown[] = [];
    for (const section of this.sections) found.push(...((await section.inconsistencies?.(context)) ?? []));
    return found;
  }

  /** The whole metadata, as `export_metadata` answers it. */
  async exportMetadata(manager: EntityManager = this.dataSource.manager): Promise<HasuraMetadata> {
    const metadata = emptyMetadata();
    for (const section of this.sections) await section.export(metadata, manager);
    metadata.sources[0].tables.sort((a, b) => `${a.table.schema}.${a.table.name}`.localeCompare(`${b.table.schema}.${b.table.name}`));
    return metadata;
  }

  private async replace(metadata: HasuraMetadata, context: MetadataRequestContext): Promise<void> {
    for (const section of this.sections) await section.replace(metadata, context);
  }
}

/**
 * The metadata object of `replace_metadata`'s args: the object itself (version 1) or
 * `{metadata, allow_inconsistent_metadata}` (version 2), checked for Hasura's outer shape.
 */
function replacementOf(args: unknown): HasuraMetadata {
  const object = (value: unknown): value is Record<string, unknown> => value !== null && typeof value === 'object' && !Array.isArray(value);
  if (!object(args)) throw new MetadataError('parse-failed', 'the args of replace_metadata must be a metadata object');
  const wrapped = object(args.metadata);
  const metadata = wrapped ? (args.metadata as Record<string, unknown>) : args;
  const path = wrapped ? '$.args.metadata' : '$.args';
  if (metadata.version !== 3) throw new MetadataError('parse-failed', 'only metadata version 3 is supported', `${path}.version`);
  const sources = metadata.sources ?? [];
  if (!Array.isArray(sources)) throw new MetadataError('parse-failed', 'sources must be a list', `${path}.sources`);
  for (const [index, source] of sources.entries()) {
    const at = `${path}.sources[${index}]`;
    if (!object(source)) throw new MetadataError('parse-failed', 'a source must be an object', at);
    if (source.name !== DEFAULT_SOURCE) {
      throw new MetadataError('not-supported', `Plinth has one source, "${DEFAULT_SOURCE}"; "${String(source.name)}" is not it`, `${at}.name`);
    }
    const tables = source.tables ?? [];
    if (!Array.isArray(tables)) throw new MetadataError('parse-failed', 'tables must be a list', `${at}.tables`);
    for (const [position, table] of tables.entries()) {
      const name = object(table) && object(table.table) ? table.table : undefined;
      if (!name || typeof name.name !== 'string' || typeof (name.schema ?? 'public') !== 'string') {
        throw new MetadataError('parse-failed', 'a table entry needs table: {schema, name}', `${at}.tables[${position}].table`);
      }
    }
  }
  const normalised = { ...metadata, version: 3 as const, sources: sources as MetadataSource[] } as HasuraMetadata;
  if (normalised.sources.length === 0) normalised.sources = emptyMetadata().sources;
  for (const source of normalised.sources) {
    source.tables = (source.tables ?? []).map((entry) => ({ ...entry, table: { schema: entry.table.schema ?? 'public', name: entry.table.name } }));
  }
  return normalised;
}
