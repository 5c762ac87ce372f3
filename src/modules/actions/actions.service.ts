import { randomUUID } from 'node:crypto';
import { GraphQLError, type GraphQLOutputType, type GraphQLSchema } from 'graphql';
import type { Logger } from 'pino';
import type * as RepeaterModule from '@repeaterjs/repeater' with { 'resolution-mode': 'import' };
import type { DataSource, EntityManager } from 'typeorm';
import { unstorableTextPaths, UNSTORABLE_TEXT_MESSAGE } from '../../common/text';
import type { GraphQLContext } from '../../graphql/context';
import type { PostgresPubSub } from '../../platform/pubsub';
import type { ServedSchema } from '../../platform/served-schema';
import { ADMIN_ROLE } from '../../common/roles';
import { type Session } from '../../platform/session';
import { rowFilterSql, type OwnedTable } from '../../platform/row-filter';
import type { JobSender } from '../../platform/jobs';
import { MetadataError, type HasuraMetadata, type MetadataRequestContext } from '../../platform/metadata';
import { followMetadataChanges } from '../../platform/metadata-changes';
import { handlerError, HANDLER_ERROR_CODES, type ActionCalls } from './action-calls.service';
import {
  actionNameAt,
  parseActionArgs,
  parseActionsSection,
  parseCustomTypes,
  roleAt,
  type ActionEntry,
  type ActionsMetadata,
  type CustomTypes,
} from './actions.metadata';
import { extendWithActions, outputProblem, relationshipFields, type ActionRunner, type AsyncActionResult } from './actions.schema';
import type { JoinedType, JoinProblem, TableJoins } from '../tables/tables.joins';
import { UUID } from '../../common/ids';

/** The queue of asynchronous action calls. */
export const ASYNC_ACTION_QUEUE = 'action-async';
/** Published (through PostgreSQL, to every instance) when the actions metadata changed. */
const CHANGED_TOPIC = 'plinth:actions-metadata';
/** Published when an asynchronous call has its result; the call's id follows. */
const RESULT_TOPIC = 'plinth:action-result';
// The package is typed as an ES module but ships a CommonJS build, which require() loads.
const { Repeater } = require('@repeaterjs/repeater') as typeof RepeaterModule;
const SUCCESS = { message: 'success' } as const;

interface LogRow {
  id: string;
  action_name: string;
  input: Record<string, unknown>;
  session_variables: Record<string, string>;
  client_headers: Record<string, string>;
  request_query: string;
  status: 'created' | 'completed' | 'error';
  output: unknown;
  errors: unknown;
  created_at: Date;
}

/**
 * A call's result is a user-owned row (spec 2 §2.3): action_log's user_id and source_account_id
 * are derived from the caller's session variables (migration RowSourceAccounts).
 */
const ACTION_CALLS_TABLE: OwnedTable = { owner: 'user_id' };

/** Besides the row filter, the engine's rule: a result is read with the role that started the call (admin reads any). */
function sameRole(row: LogRow, session: Session): boolean {
  return session.role === ADMIN_ROLE || row.session_variables['x-gql-role'] === session.role;
}

export interface ActionsDependencies {
  dataSource: DataSource;
  schema: ServedSchema;
  calls: ActionCalls;
  jobs: JobSender;
  pubSub: PostgresPubSub;
  logger: Logger;
}

/**
 * The action engine: keeps the user-declared actions (metadata in PostgreSQL, the schema
 * extension they give), answers their metadata requests, and runs their calls: synchronous ones
 * in the request, asynchronous ones through the job queue.
 */
export class ActionsService implements ActionRunner {
  private metadata: ActionsMetadata = { customTypes: {}, actions: [] };
  private version = -1;
  /** The tracked tables the custom types' relationships reach (given by the tables module once it is created). */
  private joins?: TableJoins;
  /** The relationship fields of each custom object type (a handler does not answer them). */
  private joinedFields: ReadonlyMap<string, ReadonlySet<string>> = new Map();

  constructor(private readonly deps: ActionsDependencies) {}

  /** Reads the metadata and extends the served schema with it. */
  async load(): Promise<void> {
    await this.reload(this.deps.dataSource.manager);
    this.deps.schema.addExtension((base) => this.extension(base));
  }

  /**
   * Follows changes made by any instance (the module's work, in every process: each serves the
   * schema or runs the asynchronous calls); the returned function stops following.
   */
  followChanges(): Promise<() => Promise<void>> {
    return followMetadataChanges(this.deps.pubSub, CHANGED_TOPIC, () => this.reload(this.deps.dataSource.manager), this.deps.logger, 'actions metadata');
  }

  /**
   * Serves the custom types' relationships to tracked tables: their fields are added after the
   * tables (in each role's view, as the role's permissions show the tables), and a change to the
   * tracked tables that would break one is refused.
   */
  useTables(joins: TableJoins): void {
    this.joins = joins;
    this.deps.schema.addExtension((base) => {
      try {
        return joins.extend(base, joinedTypes(this.metadata.customTypes));
      } catch (error) {
        this.deps.logger.error({ reason: (error as Error).message }, "the custom types' relationships do not fit the schema: they are not served");
        return base;
      }
    });
    joins.beforeTablesChange((context) => this.checkRelationships(context.manager, 'dependency-error'));
    this.deps.schema.rebuild();
  }

  /**
   * Refuses the request when, as its transaction leaves the actions and the tables, a relationship
   * of a custom type cannot be served that could before (a table untracked, a column gone).
   */
  private async checkRelationships(manager: EntityManager, code: 'validation-failed' | 'dependency-error'): Promise<void> {
    if (!this.joins) return;
    const after = await this.joins.problems(joinedTypes((await storedActions(manager)).customTypes), manager);
    if (after.length === 0) return;
    const key = (problem: JoinProblem) => `${problem.type} ${problem.relationship} ${problem.reason}`;
    const before = new Set(
      (await this.joins.problems(joinedTypes((await storedActions(this.deps.dataSource.manager)).customTypes), this.deps.dataSource.manager)).map(key),
    );
    const added = after.filter((problem) => !before.has(key(problem)));
    if (added.length === 0) return;
    const named = (problem: JoinProblem) => `the relationship "${problem.relationship}" of the custom type ${problem.type}: ${problem.reason}`;
    if (code === 'validation-failed') throw new MetadataError(code, added.map(named).join('; '), '$.args');
    throw new MetadataError(
      code,
      `cannot continue due to the following dependent objects: ${added.map(named).join('; ')} (change the custom types first)`,
      '$.args',
    );
  }

  /** The served schema's extension: the actions as declared, or none when they no longer fit (logged). */
  private extension(base: GraphQLSchema): GraphQLSchema {
    try {
      return extendWithActions(base, this.metadata, this);
    } catch (error) {
      this.deps.logger.error({ reason: (error as Error).message }, 'the declared actions do not fit the schema: they are not served');
      return base;
    }
  }

  /** Re-reads the metadata; a newer version rebuilds the served schema. */
  private async reload(manager: EntityManager, force = false): Promise<void> {
    const [row] = (await manager.query('SELECT custom_types, actions, version FROM actions_metadata WHERE id = 1')) as {
      custom_types: CustomTypes;
      actions: ActionEntry[];
      version: string;
    }[];
    const version = Number(row.version);
    if (!force && version <= this.version) return;
    this.apply({ customTypes: row.custom_types, actions: row.actions }, version);
  }

  private apply(metadata: ActionsMetadata, version: number): void {
    if (version < this.version) return;
    this.metadata = metadata;
    this.version = version;
    this.joinedFields = relationshipFields(metadata.customTypes);
    this.deps.schema.rebuild();
  }

  // --- Metadata requests (POST /v1/metadata) ---------------------------------------------------

  private async current(manager: EntityManager): Promise<ActionsMetadata> {
    const [row] = (await manager.query('SELECT custom_types, actions FROM actions_metadata WHERE id = 1 FOR UPDATE')) as {
      custom_types: CustomTypes;
      actions: ActionEntry[];
    }[];
    return { customTypes: row.custom_types, actions: row.actions };
  }

  /** Checks `next` whole (handler URLs, then the schema it gives) and stores it; served once the transaction commits. */
  private async commit(next: ActionsMetadata, context: MetadataRequestContext): Promise<typeof SUCCESS> {
    const [unstorable] = unstorableTextPaths(next);
    if (unstorable !== undefined)
      throw new MetadataError('parse-failed', `${unstorable.replace(/^customTypes/, 'custom_types')} ${UNSTORABLE_TEXT_MESSAGE}`, '$.args');
    for (const action of next.actions) {
      let url: URL;
      try {
        url = this.deps.calls.handlerUrl(action.definition.handler);
      } catch (error) {
        const reason =
          (error as { code?: unknown }).code === 'ERR_INVALID_URL' ? `${JSON.stringify(action.definition.handler)} is not a URL` : (error as Error).message;
        throw new MetadataError('validation-failed', `the handler of the action "${action.name}" is not usable: ${reason}`, '$.args');
      }
      if (url.protocol !== 'http:' && url.protocol !== 'https:') {
        throw new MetadataError('validation-failed', `the handler of the action "${action.name}" must be an http or https URL`, '$.args');
      }
      try {
        this.deps.calls.headers({ action, input: {}, session: { role: ADMIN_ROLE, userId: null, variables: {} }, requestQuery: '' });
      } catch (error) {
        throw new MetadataError('validation-failed', `the headers of the action "${action.name}" are not usable: ${(error as Error).message}`, '$.args');
      }
    }
    if (this.deps.schema.built) extendWithActions(this.deps.schema.base, next);
    if (joinedTypes(next.customTypes).length) {
      if (!this.joins) throw new MetadataError('not-supported', 'relationships of custom types need the tables module', '$.args');
      context.beforeCommit('action relationships', () => this.checkRelationships(context.manager, 'validation-failed'));
    }
    const [row] = (await context.manager.query(
      'UPDATE actions_metadata SET custom_types = $1, actions = $2, version = version + 1 WHERE id = 1 RETURNING version',
      [JSON.stringify(next.customTypes), JSON.stringify(next.actions)],
    )) as { version: string }[];
    const version = Number(row.version);
    context.afterCommit(() => {
      this.apply(next, version);
      this.deps.pubSub.publish(CHANGED_TOPIC, { version });
    });
    return SUCCESS;
  }

  async setCustomTypes(args: unknown, context: MetadataRequestContext): Promise<unknown> {
    const customTypes = parseCustomTypes(args);
    return this.commit({ ...(await this.current(context.manager)), customTypes }, context);
  }

  async createAction(args: unknown, context: MetadataRequestContext): Promise<unknown> {
    const parsed = parseActionArgs(args);
    const current = await this.current(context.manager);
    if (current.actions.some((action) => action.name === parsed.name)) {
      throw new MetadataError('already-exists', `action "${parsed.name}" already exists`, '$.args.name');
    }
    return this.commit({ ...current, actions: [...current.actions, { ...parsed, permissions: [] }] }, context);
  }

  async updateAction(args: unknown, context: MetadataRequestContext): Promise<unknown> {
    const parsed = parseActionArgs(args);
    const current = await this.current(context.manager);
    const existing = actionNameAt(parsed.name, '$.args.name', current);
    const updated: ActionEntry = { ...existing, definition: parsed.definition };
    if (parsed.comment !== undefined) updated.comment = parsed.comment;
    return this.commit({ ...current, actions: current.actions.map((action) => (action === existing ? updated : action)) }, context);
  }

  async dropAction(args: unknown, context: MetadataRequestContext): Promise<unknown> {
    const given = objectArgs(args);
    const current = await this.current(context.manager);
    const existing = actionNameAt(given.name, '$.args.name', current);
    if (given.clear_data !== undefined && typeof given.clear_data !== 'boolean')
      throw new MetadataError('parse-failed', 'clear_data must be a boolean', '$.args.clear_data');
    // Hasura clears the asynchronous action's logs unless told otherwise.
    if (given.clear_data !== false) await context.manager.query('DELETE FROM action_log WHERE action_name = $1', [existing.name]);
    return this.commit({ ...current, actions: current.actions.filter((action) => action !== existing) }, context);
  }

  async createPermission(args: unknown, context: MetadataRequestContext): Promise<unknown> {
    const given = objectArgs(args);
    const current = await this.current(context.manager);
    const existing = actionNameAt(given.action, '$.args.action', current);
    const role = roleAt(given.role, '$.args.role');
    if (given.comment !== undefined && given.comment !== null && typeof given.comment !== 'string')
      throw new MetadataError('parse-failed', 'comment must be a string', '$.args.comment');
    if ((existing.permissions ?? []).some((permission) => permission.role === role)) {
      throw new MetadataError('already-exists', `permission for role "${role}" already exists for action "${existing.name}"`, '$.args.role');
    }
    const permission = given.comment ? { role, comment: given.comment as string } : { role };
    const updated = { ...existing, permissions: [...(existing.permissions ?? []), permission] };
    return this.commit({ ...current, actions: current.actions.map((action) => (action === existing ? updated : action)) }, context);
  }

  async dropPermission(args: unknown, context: MetadataRequestContext): Promise<unknown> {
    const given = objectArgs(args);
    const current = await this.current(context.manager);
    const existing = actionNameAt(given.action, '$.args.action', current);
    if (typeof given.role !== 'string' || !(existing.permissions ?? []).some((permission) => permission.role === given.role)) {
      throw new MetadataError('not-exists', `permission for role ${JSON.stringify(given.role)} does not exist for action "${existing.name}"`, '$.args.role');
    }
    const updated = { ...existing, permissions: (existing.permissions ?? []).filter((permission) => permission.role !== given.role) };
    return this.commit({ ...current, actions: current.actions.map((action) => (action === existing ? updated : action)) }, context);
  }

  /** Adds `actions` and `custom_types` to an exported metadata object (only when there are some, as Hasura does). */
  async exportTo(metadata: HasuraMetadata, manager: EntityManager): Promise<void> {
    const { customTypes, actions } = await this.read(manager);
    if (actions.length) metadata.actions = actions.map((action) => ({ ...action, permissions: action.permissions ?? [] }));
    const types = Object.fromEntries(Object.entries(customTypes).filter(([, list]) => Array.isArray(list) && list.length > 0));
    if (Object.keys(types).length) metadata.custom_types = types;
  }

  async replaceFrom(metadata: HasuraMetadata, context: MetadataRequestContext): Promise<void> {
    const parsed = parseActionsSection(metadata, '$.args.metadata');
    await this.current(context.manager);
    await this.commit(parsed, context);
  }

  async reloadMetadata(context: MetadataRequestContext): Promise<void> {
    context.afterCommit(() => this.reload(this.deps.dataSource.manager, true));
  }

  /** The custom types' relationships that cannot be served as the tracked tables are now (get_inconsistent_metadata). */
  async inconsistenciesNow(context: MetadataRequestContext): Promise<unknown[]> {
    if (!this.joins) return [];
    const types = joinedTypes((await storedActions(context.manager)).customTypes);
    return (await this.joins.problems(types, context.manager)).map((problem) => ({
      type: 'custom_types',
      name: `relationship ${problem.relationship} of ${problem.type}`,
      reason: problem.reason,
      definition: types.find((type) => type.name === problem.type)?.relationships.find((item) => item.name === problem.relationship),
    }));
  }

  private read(manager: EntityManager): Promise<ActionsMetadata> {
    return storedActions(manager);
  }

  // --- Calls ----------------------------------------------------------------------------------

  private authorize(action: ActionEntry, session: Session): void {
    if (session.role === ADMIN_ROLE || (action.permissions ?? []).some((permission) => permission.role === session.role)) return;
    throw new GraphQLError(`The role "${session.role}" may not use the action ${action.name}`, { extensions: { code: 'FORBIDDEN' } });
  }

  async run(
    action: ActionEntry,
    input: Record<string, unknown>,
    context: GraphQLContext,
    requestQuery: string,
    returnType: GraphQLOutputType,
  ): Promise<unknown> {
    this.authorize(action, context.session);
    const result = await this.deps.calls.call({
      action,
      input,
      session: context.session,
      requestQuery,
      clientHeaders: context.requestHeaders,
      clientAddress: context.clientIp,
    });
    const problem = outputProblem(result, returnType, action.name, this.joinedFields);
    if (problem) {
      context.logger.warn({ action: action.name, problem }, "an action handler's answer does not fit the output type");
      throw handlerError(problem, HANDLER_ERROR_CODES.unexpected);
    }
    return result;
  }

  async enqueue(action: ActionEntry, input: Record<string, unknown>, context: GraphQLContext, requestQuery: string): Promise<string> {
    this.authorize(action, context.session);
    const [path] = unstorableTextPaths(input);
    if (path !== undefined) throw new GraphQLError(`Argument "${path}" ${UNSTORABLE_TEXT_MESSAGE}`, { extensions: { code: 'BAD_USER_INPUT', argument: path } });
    const id = randomUUID();
    const headers = action.definition.forward_client_headers ? this.deps.calls.forwardable(context.requestHeaders) : {};
    await this.deps.dataSource.transaction(async (manager) => {
      await manager.query('INSERT INTO action_log (id, action_name, input, session_variables, client_headers, request_query) VALUES ($1, $2, $3, $4, $5, $6)', [
        id,
        action.name,
        JSON.stringify(input),
        JSON.stringify(context.session.variables),
        JSON.stringify(headers),
        requestQuery,
      ]);
      await this.deps.jobs.send(ASYNC_ACTION_QUEUE, { id }, { transaction: manager });
    });
    return id;
  }

  /**
   * The queued call of an asynchronous action (the job's work): calls the handler and keeps its
   * answer or its error. A call whose result is kept is never made again; a process killed
   * during the call leaves the job to be taken back and the call made again.
   */
  async runQueued(id: string): Promise<Record<string, unknown>> {
    const [row] = (await this.deps.dataSource.query('SELECT * FROM action_log WHERE id = $1', [id])) as LogRow[];
    if (!row || row.status !== 'created') return { skipped: row ? row.status : 'gone' };
    let action = this.metadata.actions.find((entry) => entry.name === row.action_name);
    if (!action) {
      // Declared by another instance an instant ago: read the metadata before giving up.
      await this.reload(this.deps.dataSource.manager);
      action = this.metadata.actions.find((entry) => entry.name === row.action_name);
    }
    const variables = row.session_variables;
    const session = { role: variables['x-gql-role'] ?? ADMIN_ROLE, userId: variables['x-gql-user-id'] ?? null, variables };
    let outcome: { status: 'completed'; output: unknown } | { status: 'error'; errors: unknown };
    if (!action || action.definition.kind !== 'asynchronous') {
      outcome = {
        status: 'error',
        errors: { message: `the action ${row.action_name} is no longer declared as asynchronous`, extensions: { code: 'not-exists' } },
      };
    } else {
      try {
        outcome = {
          status: 'completed',
          output: await this.deps.calls.call({ action, input: row.input, session, requestQuery: row.request_query, clientHeaders: row.client_headers }),
        };
      } catch (error) {
        if (!(error instanceof GraphQLError)) throw error;
        outcome = { status: 'error', errors: { message: error.message, extensions: error.extensions } };
      }
    }
    const updated = (await this.deps.dataSource.query(
      `UPDATE action_log SET status = $2, output = $3, errors = $4, completed_at = now() WHERE id = $1 AND status = 'created' RETURNING id`,
      [
        id,
        outcome.status,
        outcome.status === 'completed' ? JSON.stringify(outcome.output) : null,
        outcome.status === 'error' ? JSON.stringify(outcome.errors) : null,
      ],
    )) as [unknown[], number] | unknown[];
    this.deps.pubSub.publish(RESULT_TOPIC, id, { id });
    return { status: outcome.status, kept: Array.isArray(updated) && updated.length > 0 };
  }

  async result(action: ActionEntry, id: string, context: GraphQLContext, outputType: GraphQLOutputType): Promise<AsyncActionResult | null> {
    return (await this.state(action, id, context, outputType)).result;
  }

  private async state(
    action: ActionEntry,
    id: string,
    context: GraphQLContext,
    outputType: GraphQLOutputType,
  ): Promise<{ result: AsyncActionResult | null; done: boolean }> {
    if (!UUID.test(id)) throw new GraphQLError('id must be a UUID', { extensions: { code: 'BAD_USER_INPUT', argument: 'id' } });
    const rows = rowFilterSql(context.session, ACTION_CALLS_TABLE, 'action_log', 3);
    const [row] = (await this.deps.dataSource.query(`SELECT * FROM action_log WHERE id = $1 AND action_name = $2 AND ${rows.clause}`, [
      id,
      action.name,
      ...rows.parameters,
    ])) as LogRow[];
    if (!row || !sameRole(row, context.session)) return { result: null, done: true };
    const result: AsyncActionResult = { id: row.id, created_at: row.created_at.toISOString(), output: row.output, errors: row.errors };
    if (row.status === 'completed') {
      const problem = outputProblem(row.output, outputType, action.name, this.joinedFields);
      if (problem)
        return { result: { ...result, output: null, errors: { message: problem, extensions: { code: HANDLER_ERROR_CODES.unexpected } } }, done: true };
    }
    return { result, done: row.status !== 'created' };
  }

  watch(action: ActionEntry, id: string, context: GraphQLContext, outputType: GraphQLOutputType): AsyncIterable<AsyncActionResult | null> {
    if (!UUID.test(id)) throw new GraphQLError('id must be a UUID', { extensions: { code: 'BAD_USER_INPUT', argument: 'id' } });
    // A Repeater, not a generator: a client that leaves while the call runs ends it at once.
    return new Repeater<AsyncActionResult | null>(async (push, stop) => {
      // Subscribed before the first read, so a result kept in between is not missed.
      const changes = this.deps.pubSub.subscribe(RESULT_TOPIC, id)[Symbol.asyncIterator]();
      const changed = changes.next();
      try {
        const first = await this.state(action, id, context, outputType);
        await push(first.result);
        if (!first.done && !(await Promise.race([changed, stop.then(() => ({ done: true }))])).done) {
          await push(await this.result(action, id, context, outputType));
        }
        stop();
      } catch (error) {
        stop(error);
      } finally {
        await changes.return?.();
      }
    });
  }
}

/** The stored actions metadata. */
export async function storedActions(manager: EntityManager): Promise<ActionsMetadata> {
  const [row] = (await manager.query('SELECT custom_types, actions FROM actions_metadata WHERE id = 1')) as {
    custom_types: CustomTypes;
    actions: ActionEntry[];
  }[];
  return { customTypes: row.custom_types, actions: row.actions };
}

/** The custom object types with relationships to tables. */
function joinedTypes(customTypes: CustomTypes): JoinedType[] {
  return (customTypes.objects ?? [])
    .filter((object) => object.relationships?.length)
    .map((object) => ({
      name: object.name,
      fields: Object.fromEntries(object.fields.map((field) => [field.name, field.type])),
      relationships: object.relationships!,
    }));
}

/** The stored custom types' relationships to tables: the tables module adds their fields to the declared schema, after its own. */
export async function storedJoinedTypes(manager: EntityManager): Promise<JoinedType[]> {
  return joinedTypes((await storedActions(manager)).customTypes);
}

/** Plinth's schema with the stored actions, resolving nothing: what `plinth schema --with-metadata` prints. */
export async function schemaWithStoredActions(base: GraphQLSchema, manager: EntityManager): Promise<GraphQLSchema> {
  return extendWithActions(base, await storedActions(manager));
}

function objectArgs(args: unknown): Record<string, unknown> {
  if (args === null || typeof args !== 'object' || Array.isArray(args)) throw new MetadataError('parse-failed', 'the args must be an object', '$.args');
  return args as Record<string, unknown>;
}
