import { GraphQLError, type GraphQLResolveInfo, type GraphQLSchema } from 'graphql';
import type { Logger } from 'pino';
import type { DataSource, EntityManager } from 'typeorm';
import { one, poolOf, type Queryable } from '../../db/sql';
import type { GraphQLContext } from '../../graphql/context';
import type { RawFieldRequest } from '../../graphql/raw-root-fields';
import type { PostgresPubSub } from '../../platform/pubsub';
import type { ServedSchema } from '../../platform/served-schema';
import type { Session } from '../../platform/session';
import { DEFAULT_SOURCE, MetadataError, tableEntry, type HasuraMetadata, type MetadataRequestContext } from '../../platform/metadata';
import { followMetadataChanges } from '../../platform/metadata-changes';
import { readCatalog, tableKey } from './tables.catalog';
import {
  argsAt,
  configurationAt,
  existingRelationship,
  fail,
  graphqlNameAt,
  qualifiedTableAt,
  PERMISSION_PARSERS,
  relationshipAt,
  relationshipNames,
  roleAt,
  sameTable,
  TABLE_KEYS,
  tableText,
  trackedEntryAt,
  type BoolExp,
  type PermissionEntry,
  type PermissionKind,
  type QualifiedTable,
  type TrackedTableEntry,
  withoutEmpty,
} from './tables.metadata';
import { resolveTables, type Inconsistency, type MutationKind, type RootKind, type TableModel } from './tables.model';
import { MutationRunner } from './tables.mutation-runner';
import { conditionProblem, problemKey, problemsOf } from './tables.problems';
import { identities } from '../../platform/sql-renames';
import { isAdmin, RootFieldStatements } from './tables.root-fields';
import { LiveQueries, type LiveEvent, type LiveQuerySettings } from './tables.live-queries';
import { liveRequest, type LivePlanningSource } from './tables.live-requests';
import { asInputError, changedUnderMetadata } from './tables.sql';
import { INTERNAL_ERROR_MESSAGE } from '../../common/error-messages';
import type { Metrics } from '../../platform/metrics';
import { StatementCompiler } from './tables.compiler';
import { entriesAfterSql, runSqlArgsAt, runStatements, type RunSqlResult } from './tables.run-sql';
import { TableJoinsService } from './tables.joins';
import { TableStreams } from './tables.stream';
import { extendWithTables, fittingTables, generatedNames, nameClash, withTableViews, type TableRunner } from './tables.schema';
import { roleViews, seesEverything, wholeView } from './tables.views';

/** Published (through PostgreSQL, to every instance) when the tables metadata changed. */
const CHANGED_TOPIC = 'plinth:tables-metadata';
const SUCCESS = { message: 'success' } as const;
/** The view of a role no permission names: none of the tables (a role is never empty). */
const WITHOUT_TABLES = '';
/** Ends the view of a role for backend sessions (its backend_only insert permissions shown): a header's value holds no NUL. */
const BACKEND = '\u0000backend';
const USE_BACKEND_ONLY = 'x-gql-use-backend-only-permissions';

export interface TablesDependencies {
  dataSource: DataSource;
  schema: ServedSchema;
  pubSub: PostgresPubSub;
  logger: Logger;
  /** How long a streaming subscription waits between polls that found nothing more to send. */
  streamIntervalMs: number;
  liveQueries: LiveQuerySettings;
  shutdown: AbortSignal;
  metrics?: Metrics;
}

/** The tracked tables as served: their entries, resolved against the catalog. */
interface Served {
  entries: TrackedTableEntry[];
  tables: TableModel[];
  byKey: Map<string, TableModel>;
  inconsistencies: Inconsistency[];
  version: number;
}

/**
 * The generated API over tracked tables: keeps their metadata (one row, versioned), answers its
 * metadata requests, extends the served schema with the generated types and root fields, and
 * runs each root field as one statement.
 */
export class TablesService implements TableRunner {
  private served: Served = { entries: [], tables: [], byKey: new Map(), inconsistencies: [], version: -1 };
  private readonly statements: RootFieldStatements;
  /** What the last schema build could not serve (a clash with an action's type). */
  private servingProblems: Inconsistency[] = [];
  /** The tracked tables the served schema has. */
  private inSchema: TableModel[] = [];
  /** By role named in their permissions: the view it is served (undefined: the whole schema). */
  private roleViews = new Map<string, string | undefined>();
  /** Roles with a backend_only insert permission: a backend session of one is served another view. */
  private backendRoles = new Set<string>();
  private readonly mutations: MutationRunner;
  private readonly streams: TableStreams;
  private readonly liveQueries: LiveQueries;
  /** What a live query's plan reads of the metadata served now (tables.live-requests.ts). */
  private readonly livePlanning: LivePlanningSource;

  /** Relationships to the tracked tables from other modules' object types (the actions'). */
  readonly joins: TableJoinsService;

  constructor(private readonly deps: TablesDependencies) {
    const pool = poolOf(deps.dataSource);
    this.statements = new RootFieldStatements(
      pool,
      () => this.served.byKey,
      (table, error) => this.staleCatalog(error, table),
    );
    this.mutations = new MutationRunner(pool, (table, error) => this.staleCatalog(error, table));
    this.livePlanning = { schema: deps.schema, statements: this.statements, byKey: () => this.served.byKey, inSchema: () => this.inSchema };
    this.streams = new TableStreams({
      pool,
      tables: () => this.served.byKey,
      staleCatalog: (table, error) => this.staleCatalog(error, table),
      intervalMs: deps.streamIntervalMs,
      // Woken by the live queries' change notifications (the same trigger and channel).
      watch: (table, changed) => this.liveQueries.watch(table, changed),
      metrics: deps.metrics,
    });
    this.liveQueries = new LiveQueries({
      pool,
      url: (deps.dataSource.options as unknown as { url: string }).url,
      logger: deps.logger.child({ component: 'live-queries' }),
      shutdown: deps.shutdown,
      metrics: deps.metrics,
      settings: deps.liveQueries,
      failure: (error) => this.liveQueryFailure(error),
    });
    this.joins = new TableJoinsService({
      served: () => new Map(this.inSchema.map((table) => [tableKey(table.table), table])),
      compile: (info, context, build) => build(new StatementCompiler({ role: context.session.role, admin: isAdmin(context.session) }, this.served.byKey, info)),
      run: (statement, table, info, context) => this.statements.run(statement, table, info, context),
    });
  }

  /** Reads the metadata and extends the served schema with it. */
  async load(): Promise<void> {
    await this.reload(this.deps.dataSource.manager);
    this.deps.schema.addExtension((base) => this.extension(base), {
      viewOf: (session) => this.viewOf(session),
      extendFor: (base, view) => this.extensionFor(base, view),
    });
  }

  /** The tracked tables the served schema has now, with their generated names (the admin dashboard's data browser). */
  servedTables(): readonly TableModel[] {
    return this.inSchema;
  }

  /** Follows changes made by any instance, to the metadata and to the tables live queries read (the module's work). */
  async followChanges(): Promise<() => Promise<void>> {
    const stopFollowing = await followMetadataChanges(
      this.deps.pubSub,
      CHANGED_TOPIC,
      () => this.reload(this.deps.dataSource.manager),
      this.deps.logger,
      'tables metadata',
    );
    await this.liveQueries.start();
    return async () => {
      await this.liveQueries.close();
      await stopFollowing();
    };
  }

  /**
   * The served schema's extension. `base` holds what the extensions before this one added (the
   * actions' types): a table clashing with them is left out, reported until it no longer clashes.
   */
  private extension(base: GraphQLSchema): GraphQLSchema {
    const inconsistencies: Inconsistency[] = [];
    try {
      const tables = fittingTables(base, this.served.tables, inconsistencies);
      const schema = withTableViews(base, tables.map(wholeView), this);
      for (const inconsistency of inconsistencies) this.deps.logger.warn(inconsistency, 'a tracked table is not served');
      this.servingProblems = inconsistencies;
      this.serving(tables);
      return schema;
    } catch (error) {
      const reason = `the tracked tables do not fit the schema: ${(error as Error).message}`;
      this.deps.logger.error({ reason }, 'the tracked tables are not served');
      this.servingProblems = [{ type: 'table', name: 'all tracked tables', reason, definition: null }];
      this.serving([]);
      return base;
    }
  }

  /** Keeps `tables` as those the served schema has, and the view each role their permissions name is served. */
  private serving(tables: TableModel[]): void {
    this.inSchema = tables;
    const roles = new Set(
      tables.flatMap((table) => [
        ...table.permissions.keys(),
        ...table.insertPermissions.keys(),
        ...table.updatePermissions.keys(),
        ...table.deletePermissions.keys(),
      ]),
    );
    this.roleViews = new Map([...roles].map((role) => [role, seesEverything(tables, role) ? undefined : role]));
    this.backendRoles = new Set(
      tables.flatMap((table) => [...table.insertPermissions].filter(([, permission]) => permission.backendOnly).map(([role]) => role)),
    );
  }

  /**
   * The view of the generated API `session` is served (ServedSchema.viewFor): none (the whole
   * schema) for the admin and for a role every table opens entirely to; its role's for a role
   * some permission names; and for any other role the view without tables.
   */
  private viewOf(session: Session): string | undefined {
    if (this.inSchema.length === 0 || isAdmin(session)) return undefined;
    if (!this.roleViews.has(session.role)) return WITHOUT_TABLES;
    return isBackend(session) && this.backendRoles.has(session.role) ? `${session.role}${BACKEND}` : this.roleViews.get(session.role);
  }

  /** The served schema's extension for a role's view: what the role's permissions open of the tables served. */
  private extensionFor(base: GraphQLSchema, view: string): GraphQLSchema {
    if (view === WITHOUT_TABLES) return base;
    const backend = view.endsWith(BACKEND);
    return withTableViews(base, roleViews(this.inSchema, backend ? view.slice(0, -BACKEND.length) : view, backend), this);
  }

  private async reload(manager: EntityManager, force = false): Promise<void> {
    const row = (await one<{ tables: TrackedTableEntry[]; version: string }>(manager, 'SELECT tables, version FROM tables_metadata WHERE id = 1'))!;
    const version = Number(row.version);
    if (!force && version <= this.served.version) return;
    await this.apply(row.tables, version, manager);
  }

  private async apply(entries: TrackedTableEntry[], version: number, db: Queryable): Promise<void> {
    const { tables, inconsistencies } = resolveTables(
      entries,
      await readCatalog(
        db,
        entries.map((entry) => entry.table),
      ),
    );
    if (version < this.served.version) return;
    for (const inconsistency of inconsistencies) this.deps.logger.warn(inconsistency, 'inconsistent tables metadata');
    this.served = { entries, tables, byKey: new Map(tables.map((table) => [tableKey(table.table), table])), inconsistencies, version };
    this.deps.schema.rebuild();
    // Planned under the metadata before (a permission may have narrowed): planned again, or ended when they no longer fit.
    this.liveQueries.replanAll(
      new GraphQLError('the tracked tables metadata changed so that this live query no longer fits it: subscribe again', {
        extensions: { code: 'METADATA_CHANGED' },
      }),
    );
  }

  // --- Metadata requests (POST /v1/metadata) ---------------------------------------------------

  private async current(manager: EntityManager): Promise<TrackedTableEntry[]> {
    return (await one<{ tables: TrackedTableEntry[] }>(manager, 'SELECT tables FROM tables_metadata WHERE id = 1 FOR UPDATE'))!.tables;
  }

  /**
   * Checks `next` against the catalog (as the transaction sees it) and the schema, refusing what
   * would make a new inconsistency, and stores it; served once the transaction commits.
   */
  private async commit(previous: TrackedTableEntry[], next: TrackedTableEntry[], context: MetadataRequestContext): Promise<typeof SUCCESS> {
    const catalog = await readCatalog(
      context.manager,
      [...previous, ...next].map((entry) => entry.table),
    );
    const before = resolveTables(previous, catalog).inconsistencies;
    const after = resolveTables(next, catalog);
    if (this.deps.schema.built) {
      try {
        extendWithTables(this.deps.schema.base, after.tables, undefined, after.inconsistencies);
      } catch (error) {
        throw new MetadataError('validation-failed', `the tracked tables do not fit the schema: ${(error as Error).message}`);
      }
      // The schema as served also has what the other extensions add (the actions' types).
      const ours = generatedNames(this.served.tables);
      for (const table of after.tables) {
        const clash = nameClash(this.deps.schema.current, table, [], ours);
        if (clash) after.inconsistencies.push({ type: 'table', name: tableText(table.table), reason: clash, definition: table.table });
      }
    }
    const known = new Set(before.map((item) => `${item.type} ${item.name} ${item.reason}`));
    const added = after.inconsistencies.find((item) => !known.has(`${item.type} ${item.name} ${item.reason}`));
    if (added) throw new MetadataError(added.type === 'table' ? 'invalid-configuration' : 'validation-failed', `${added.name}: ${added.reason}`);
    this.joins.tablesChanging(context);
    const row = (await one<{ version: string }>(
      context.manager,
      'UPDATE tables_metadata SET tables = $1, version = version + 1 WHERE id = 1 RETURNING version',
      [JSON.stringify(next)],
    ))!;
    const version = Number(row.version);
    context.afterCommit(async () => {
      await this.apply(next, version, this.deps.dataSource.manager);
      this.deps.pubSub.publish(CHANGED_TOPIC, { version });
    });
    return SUCCESS;
  }

  private static entryAt(entries: TrackedTableEntry[], table: QualifiedTable, path: string): TrackedTableEntry {
    const entry = entries.find((candidate) => sameTable(candidate.table, table));
    if (!entry) fail('not-exists', `table "${tableText(table)}" does not exist or is not tracked`, path);
    return entry;
  }

  async trackTable(args: unknown, context: MetadataRequestContext): Promise<unknown> {
    const given = argsAt(args);
    const table = qualifiedTableAt(given.table ?? given.name, given.table === undefined ? '$.args.name' : '$.args.table');
    const configuration = configurationAt(given.configuration, '$.args.configuration');
    const current = await this.current(context.manager);
    if (current.some((entry) => sameTable(entry.table, table))) fail('already-tracked', `view/table already tracked: "${tableText(table)}"`, '$.args');
    const catalog = await readCatalog(context.manager, [table]);
    if (!catalog.has(tableKey(table))) fail('not-exists', `no such table/view exists in source: "${tableText(table)}"`, '$.args.table');
    const entry: TrackedTableEntry = Object.keys(configuration).length ? { table, configuration } : { table };
    return this.commit(current, [...current, entry], context);
  }

  async untrackTable(args: unknown, context: MetadataRequestContext): Promise<unknown> {
    const given = argsAt(args);
    const table = qualifiedTableAt(given.table, '$.args.table');
    const current = await this.current(context.manager);
    const entry = TablesService.entryAt(current, table, '$.args.table');
    const remaining = current.filter((other) => other !== entry);
    // The relationships of other tables that reach this one (found as resolving would refuse them).
    const catalog = await readCatalog(
      context.manager,
      current.map((other) => other.table),
    );
    const unreachable = `the remote table ${tableText(table)} is not tracked`;
    const dependents = resolveTables(remaining, catalog).inconsistencies.filter((item) => item.reason === unreachable);
    if (dependents.length && given.cascade !== true) {
      fail(
        'dependency-error',
        `cannot drop due to the following dependent objects: ${dependents.map((item) => `relationship ${item.name}`).join(', ')}`,
        '$.args',
      );
    }
    const dropped = new Set(dependents.map((item) => item.definition));
    const next = remaining.map((other) =>
      withoutEmpty({
        ...other,
        object_relationships: other.object_relationships?.filter((item) => !dropped.has(item)),
        array_relationships: other.array_relationships?.filter((item) => !dropped.has(item)),
      }),
    );
    return this.commit(current, next, context);
  }

  /**
   * A request that changes the entry of `args.table`: `edit` gets a copy of it (and the args)
   * and returns it changed, or refuses.
   */
  private async changeEntry(
    args: unknown,
    context: MetadataRequestContext,
    edit: (entry: TrackedTableEntry, given: Record<string, unknown>) => TrackedTableEntry,
  ): Promise<{ current: TrackedTableEntry[]; next: TrackedTableEntry[]; table: QualifiedTable }> {
    const given = argsAt(args);
    const table = qualifiedTableAt(given.table, '$.args.table');
    const current = await this.current(context.manager);
    const entry = TablesService.entryAt(current, table, '$.args.table');
    const next = current.map((candidate) => (candidate === entry ? withoutEmpty(edit(structuredClone(entry), given)) : candidate));
    return { current, next, table };
  }

  async setTableCustomization(args: unknown, context: MetadataRequestContext): Promise<unknown> {
    const { current, next } = await this.changeEntry(args, context, (entry, given) => ({
      ...entry,
      configuration: configurationAt(given.configuration, '$.args.configuration'),
    }));
    return this.commit(current, next, context);
  }

  async createRelationship(kind: 'object' | 'array', args: unknown, context: MetadataRequestContext): Promise<unknown> {
    const key = kind === 'object' ? 'object_relationships' : 'array_relationships';
    const { current, next } = await this.changeEntry(args, context, (entry, given) => {
      const relationship = relationshipAt({ name: given.name, using: given.using, comment: given.comment }, '$.args');
      if (relationshipNames(entry).includes(relationship.name))
        fail('already-exists', `relationship "${relationship.name}" of table "${tableText(entry.table)}" already exists`, '$.args.name');
      return { ...entry, [key]: [...(entry[key] ?? []), relationship] };
    });
    return this.commit(current, next, context);
  }

  async renameRelationship(args: unknown, context: MetadataRequestContext): Promise<unknown> {
    const { current, next } = await this.changeEntry(args, context, (entry, given) => {
      const name = existingRelationship(entry, given.name, '$.args.name');
      const newName = graphqlNameAt(given.new_name, '$.args.new_name');
      if (relationshipNames(entry).includes(newName))
        fail('already-exists', `relationship "${newName}" of table "${tableText(entry.table)}" already exists`, '$.args.new_name');
      const rename = <T extends { name: string }>(list?: T[]) => list?.map((item) => (item.name === name ? { ...item, name: newName } : item));
      return { ...entry, object_relationships: rename(entry.object_relationships), array_relationships: rename(entry.array_relationships) };
    });
    return this.commit(current, next, context);
  }

  async dropRelationship(args: unknown, context: MetadataRequestContext): Promise<unknown> {
    const { current, next } = await this.changeEntry(args, context, (entry, given) => {
      const name = existingRelationship(entry, given.relationship, '$.args.relationship');
      const kept = <T extends { name: string }>(list?: T[]) => list?.filter((item) => item.name !== name);
      return { ...entry, object_relationships: kept(entry.object_relationships), array_relationships: kept(entry.array_relationships) };
    });
    return this.commit(current, next, context);
  }

  /** `pg_create_<kind>_permission`: the role's permission of that kind on the table, its filter and check compiled once. */
  async createPermission(kind: PermissionKind, args: unknown, context: MetadataRequestContext): Promise<unknown> {
    const key = `${kind}_permissions` as const;
    let role = '';
    let conditions: [BoolExp, string][] = [];
    const { current, next, table } = await this.changeEntry(args, context, (entry, given) => {
      role = roleAt(given.role, '$.args.role');
      const permission = PERMISSION_PARSERS[kind](given.permission, '$.args.permission');
      const list = (entry[key] ?? []) as PermissionEntry<unknown>[];
      if (list.some((item) => item.role === role))
        fail('already-exists', `${kind} permission already defined on table "${tableText(entry.table)}" with role "${role}"`, '$.args.role');
      conditions = (['filter', 'check'] as const).flatMap((name) => {
        const value = (permission as { filter?: BoolExp; check?: BoolExp })[name];
        return value ? [[value, `$.args.permission.${name}`] as [BoolExp, string]] : [];
      });
      const item = typeof given.comment === 'string' ? { role, permission, comment: given.comment } : { role, permission };
      return { ...entry, [key]: [...list, item] };
    });
    await this.checkConditions(next, table, role, conditions, context);
    return this.commit(current, next, context);
  }

  /** `pg_drop_<kind>_permission`. */
  async dropPermission(kind: PermissionKind, args: unknown, context: MetadataRequestContext): Promise<unknown> {
    const key = `${kind}_permissions` as const;
    const { current, next } = await this.changeEntry(args, context, (entry, given) => {
      const role = roleAt(given.role, '$.args.role');
      const list = (entry[key] ?? []) as PermissionEntry<unknown>[];
      if (!list.some((item) => item.role === role))
        fail('not-exists', `${kind} permission on "${tableText(entry.table)}" for role "${role}" does not exist`, '$.args.role');
      return { ...entry, [key]: list.filter((item) => item.role !== role) };
    });
    return this.commit(current, next, context);
  }

  /** Compiles a new permission's filter and check once (unknown columns, relationships, operators are refused now). */
  private async checkConditions(
    entries: TrackedTableEntry[],
    table: QualifiedTable,
    role: string,
    conditions: [BoolExp, string][],
    context: MetadataRequestContext,
  ): Promise<void> {
    const { tables } = resolveTables(
      entries,
      await readCatalog(
        context.manager,
        entries.map((entry) => entry.table),
      ),
    );
    const model = tables.find((candidate) => sameTable(candidate.table, table));
    for (const [condition, path] of conditions) {
      const problem = model && conditionProblem(tables, model, role, condition);
      if (problem) fail('validation-failed', problem, path);
    }
  }

  /**
   * `run_sql` (POST /v2/query): runs the SQL, then brings the tracked tables' metadata in line
   * with what it changed, as Hasura does: a renamed table or column is renamed in the metadata;
   * a dropped one that metadata depends on refuses the whole request, or with `cascade` drops
   * the dependent metadata; any change to a tracked table's definition is served at once.
   */
  async runSql(args: unknown, context: MetadataRequestContext): Promise<RunSqlResult> {
    const given = runSqlArgsAt(args);
    if (!given.checkMetadata) return runStatements(context.manager, given.sql, given.readOnly);
    // The other modules' entries on tables (event triggers) follow the SQL too, after this module's.
    const followOthers = await context.followSql?.();
    const current = await this.current(context.manager);
    const tracked = current.map((entry) => entry.table);
    const before = await identities(context.manager, tracked);
    const catalogBefore = await readCatalog(context.manager, tracked);
    const result = await runStatements(context.manager, given.sql, false);
    const next = await entriesAfterSql(context.manager, current, before, catalogBefore, given.cascade);
    if (next) await this.commit(current, next, context);
    await followOthers?.(given.cascade);
    return result;
  }

  /** Adds the tracked tables to an exported metadata object (keys beside other modules' on the same entries). */
  async exportTo(metadata: HasuraMetadata, manager: EntityManager): Promise<void> {
    const entries = (await one<{ tables: TrackedTableEntry[] }>(manager, 'SELECT tables FROM tables_metadata WHERE id = 1'))!.tables;
    for (const entry of entries) {
      const target = tableEntry(metadata, entry.table, true);
      // A tracked table always carries `configuration`: it tells a tracked table from an entry only another module's keys made.
      target.configuration = entry.configuration ?? {};
      for (const key of TABLE_KEYS) if (key !== 'configuration' && entry[key]?.length) target[key] = entry[key];
    }
  }

  /**
   * Tracks the table entries of `metadata` that are tracked tables: those with one of this
   * module's keys, or with no key but `table` (Hasura's bare tracked table). An entry holding only
   * another module's keys (event_triggers) is that module's.
   */
  async replaceFrom(metadata: HasuraMetadata, context: MetadataRequestContext): Promise<void> {
    const source = metadata.sources.find((item) => item.name === DEFAULT_SOURCE);
    const next: TrackedTableEntry[] = [];
    for (const [index, entry] of (source?.tables ?? []).entries()) {
      const keys = Object.keys(entry).filter((name) => name !== 'table');
      const tracked = keys.length === 0 || keys.some((name) => (TABLE_KEYS as readonly string[]).includes(name));
      if (tracked) next.push(withoutEmpty(trackedEntryAt(entry as Record<string, unknown>, `$.args.metadata.sources[0].tables[${index}]`)));
    }
    await this.commit(await this.current(context.manager), next, context);
  }

  async reloadMetadata(context: MetadataRequestContext): Promise<void> {
    context.afterCommit(() => this.reload(this.deps.dataSource.manager, true));
  }

  /** The tracked tables, relationships and permissions that cannot be served as the database is now. */
  async inconsistenciesNow(context: MetadataRequestContext): Promise<Inconsistency[]> {
    const entries = (await one<{ tables: TrackedTableEntry[] }>(context.manager, 'SELECT tables FROM tables_metadata WHERE id = 1'))!.tables;
    const catalog = await readCatalog(
      context.manager,
      entries.map((entry) => entry.table),
    );
    const found = problemsOf(entries, catalog);
    if (this.deps.schema.built) extendWithTables(this.deps.schema.base, resolveTables(entries, catalog).tables, undefined, found);
    const listed = new Set(found.map(problemKey));
    return [...found, ...this.servingProblems.filter((item) => !listed.has(problemKey(item)))];
  }

  // --- Root fields ----------------------------------------------------------------------------

  /** A generated mutation root field's value: the operation's mutation fields run together in one transaction. */
  mutate(_table: TableModel, _kind: MutationKind, info: GraphQLResolveInfo, context: GraphQLContext): Promise<unknown> {
    const { session } = context;
    return this.mutations.mutate(info, context, { role: session.role, admin: isAdmin(session), backend: isBackend(session) }, this.served.byKey);
  }

  /** A statement met a table or column gone since the catalog was read: read it again, and tell the caller. */
  private staleCatalog(error: Error, table?: TableModel): GraphQLError {
    // Resolved again against the catalog: the table (or the columns) gone are no longer served.
    void this.apply(this.served.entries, this.served.version, this.deps.dataSource.manager).catch((reloadError: unknown) =>
      this.deps.logger.error({ err: reloadError }, 'could not re-read the tracked tables'),
    );
    const what = table ? `the table ${tableText(table.table)}` : 'a tracked table';
    return new GraphQLError(`${what} changed under its metadata: ${error.message} (see get_inconsistent_metadata)`, {
      extensions: { code: 'INCONSISTENT_METADATA' },
    });
  }

  select(table: TableModel, kind: RootKind, info: GraphQLResolveInfo, context: GraphQLContext): Promise<unknown> {
    return this.statements.select(table, kind, info, context);
  }

  selectJson(table: TableModel, kind: RootKind, request: RawFieldRequest): Promise<string | undefined> {
    return this.statements.selectJson(table, kind, request);
  }

  /** `<table>_stream`: its batches of rows after the cursor. */
  stream(table: TableModel, info: GraphQLResolveInfo, context: GraphQLContext): Promise<AsyncIterable<unknown>> {
    return Promise.resolve(this.streams.open(table, info, context));
  }

  /** A live query: the root field's statement for the caller's role, its bound values, and the tracked tables its text reads. */
  async live(table: TableModel, kind: RootKind, info: GraphQLResolveInfo, context: GraphQLContext): Promise<AsyncIterable<LiveEvent>> {
    try {
      return await this.liveQueries.subscribe(liveRequest(this.livePlanning, table, kind, info, context));
    } catch (error) {
      throw error instanceof GraphQLError ? error : this.liveQueryFailure(error);
    }
  }

  /** What a live query's subscribers are told of its statement's failure: their input's fault, a table changed under its metadata, or (logged) an internal error. */
  private liveQueryFailure(error: unknown): GraphQLError {
    if (changedUnderMetadata(error)) return this.staleCatalog(error as Error);
    const given = asInputError(error);
    if (given instanceof GraphQLError) return given;
    this.deps.logger.error({ err: error }, 'a live query failed');
    return new GraphQLError(INTERNAL_ERROR_MESSAGE, { extensions: { code: 'INTERNAL_SERVER_ERROR' } });
  }
}

/** A session that may use backend_only permissions: the admin secret with X-Gql-Use-Backend-Only-Permissions: true (Hasura's header). */
function isBackend(session: Session): boolean {
  return session.viaAdminSecret && session.variables[USE_BACKEND_ONLY] === 'true';
}
