import type { DataSource, EntityManager } from 'typeorm';
import { SESSION_VARIABLES_SETTING } from '../../db/session-variables';
import { MetadataError, tableEntry, type HasuraMetadata, type MetadataRequestContext } from '../../platform/metadata';
import {
  conditionColumns,
  conditionSql,
  exportedEventTrigger,
  literal,
  objectAt,
  parseEventTrigger,
  renamedTrigger,
  triggerColumns,
  triggerName,
  type EventTriggerConfig,
} from './definitions';
import { UUID } from '../../common/ids';
import { identities, renamesSince, tableKey } from '../../platform/sql-renames';

/** NOTIFY channel the capture functions signal on: the dispatchers wake on it. */
export const EVENTS_CHANNEL = 'plinth_events';

/** Tables of the events machinery itself: a trigger on them would feed itself. */
const OWN_TABLES = new Set(['event_log', 'event_invocation_logs', 'event_triggers', 'cron_triggers', 'scheduled_events', 'scheduled_event_invocation_logs']);

const quoteIdent = (name: string) => `"${name.replace(/"/g, '""')}"`;
/** The capture function and trigger of an event trigger (names are at most 42 characters: this stays under 63). */
const captureName = (trigger: string) => `plinth_event_${trigger}`;

/** An `event_log` row as the metadata API answers it (Hasura's columns). */
export interface EventLogRow {
  id: string;
  schema_name: string;
  table_name: string;
  trigger_name: string;
  payload: { op: string; data: { old: unknown; new: unknown }; session_variables: Record<string, string> | null };
  delivered: boolean;
  error: boolean;
  tries: number;
  created_at: string;
  locked: string | null;
  next_retry_at: string | null;
  archived: boolean;
}

/** An attempt as Hasura's metadata API answers it (its EventInvocationLog: the HTTP status is `http_status`). */
export interface InvocationLogRow {
  id: string;
  trigger_name: string;
  event_id: string;
  http_status: number | null;
  request: unknown;
  response: unknown;
  created_at: string;
}

const EVENT_COLUMNS = `id, schema_name, table_name, trigger_name, payload, delivered, error, tries, created_at, locked, next_retry_at, archived`;
const INVOCATION_COLUMNS = `id, trigger_name, event_id, status AS http_status, request, response, created_at`;

/** Which events a listing takes: Hasura's pending/processed, and `dead` (retries used up or refused for good). */
export type EventStatus = 'pending' | 'processed' | 'dead' | 'all';
const STATUS_FILTER: Record<EventStatus, string> = {
  pending: 'NOT delivered AND NOT error AND NOT archived',
  processed: '(delivered OR error)',
  dead: 'error AND NOT archived',
  all: 'true',
};

function pageArgument(value: unknown, path: string, fallback: number, max: number): number {
  if (value === undefined || value === null) return fallback;
  if (typeof value !== 'number' || !Number.isInteger(value) || value < 0 || value > max) {
    throw new MetadataError('parse-failed', `must be a whole number from 0 to ${max}`, path);
  }
  return value;
}

function eventId(value: unknown, path = '$.args.event_id'): string {
  if (typeof value !== 'string' || !UUID.test(value)) throw new MetadataError('parse-failed', 'event_id must be the UUID of an event', path);
  return value.toLowerCase();
}

/**
 * Event trigger definitions and their capture: each trigger is a row of `event_triggers` and a
 * PostgreSQL trigger function on its table that writes the `event_log` row in the transaction
 * of the change and NOTIFYs the dispatchers. Also the event logs' listings, manual events and
 * redelivery.
 */
export class EventTriggersService {
  constructor(private readonly dataSource: DataSource) {}

  async list(manager: EntityManager = this.dataSource.manager): Promise<EventTriggerConfig[]> {
    const rows: { configuration: EventTriggerConfig }[] = await manager.query('SELECT configuration FROM event_triggers ORDER BY name');
    return rows.map((row) => row.configuration);
  }

  async find(name: string, manager: EntityManager = this.dataSource.manager): Promise<EventTriggerConfig | undefined> {
    const rows: { configuration: EventTriggerConfig }[] = await manager.query('SELECT configuration FROM event_triggers WHERE name = $1', [name]);
    return rows[0]?.configuration;
  }

  /** `pg_create_event_trigger`: refuses a duplicate name unless `replace` is true. */
  async create(args: unknown, { manager }: Pick<MetadataRequestContext, 'manager'>): Promise<EventTriggerConfig> {
    const config = parseEventTrigger(args, '$.args');
    const replace = (args as { replace?: unknown }).replace;
    if (replace !== undefined && typeof replace !== 'boolean') throw new MetadataError('parse-failed', 'replace must be true or false', '$.args.replace');
    const existing = await this.find(config.name, manager);
    if (existing && !replace) {
      throw new MetadataError('already-exists', `the event trigger "${config.name}" already exists (use "replace": true to change it)`, '$.args.name');
    }
    if (existing) await this.dropCapture(existing, manager);
    await this.install(config, manager, '$.args');
    return config;
  }

  /** `pg_delete_event_trigger`: its pending events are archived (kept, never delivered). */
  async delete(args: unknown, { manager }: Pick<MetadataRequestContext, 'manager'>): Promise<void> {
    const name = triggerName(objectAt(args, '$.args', 'the args').name, '$.args.name', 'event trigger');
    const existing = await this.find(name, manager);
    if (!existing) throw new MetadataError('not-exists', `the event trigger "${name}" does not exist`, '$.args.name');
    await this.uninstall(existing, manager);
  }

  /** Checks a definition against the database, then writes it and (re)creates its capture. */
  private async install(config: EventTriggerConfig, manager: EntityManager, path: string): Promise<void> {
    const entry = `the event trigger "${config.name}"`;
    const { schema, name } = config.table;
    if (schema === 'public' && OWN_TABLES.has(name)) {
      throw new MetadataError('not-supported', `${entry}: ${schema}.${name} holds the events themselves and cannot be watched`, `${path}.table`);
    }
    const columns: { column_name: string }[] = await manager.query(
      `SELECT a.attname AS column_name FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid JOIN pg_namespace n ON n.oid = c.relnamespace
       WHERE n.nspname = $1 AND c.relname = $2 AND c.relkind IN ('r', 'p') AND a.attnum > 0 AND NOT a.attisdropped ORDER BY a.attnum`,
      [schema, name],
    );
    if (columns.length === 0) throw new MetadataError('not-exists', `${entry}: the table ${schema}.${name} does not exist`, `${path}.table`);
    const known = new Set(columns.map((row) => row.column_name));
    const check = (column: string, at: string) => {
      if (!known.has(column)) throw new MetadataError('not-exists', `${entry}: the table ${schema}.${name} has no column "${column}"`, at);
    };
    for (const operation of ['insert', 'update', 'delete'] as const) {
      const spec = config.definition[operation];
      if (!spec) continue;
      if (spec.columns !== '*') spec.columns.forEach((column, index) => check(column, `${path}.${operation}.columns[${index}]`));
      if (spec.payload && spec.payload !== '*') spec.payload.forEach((column, index) => check(column, `${path}.${operation}.payload[${index}]`));
    }
    if (config.condition) for (const found of conditionColumns(config.condition, `${path}.condition`, entry)) check(found.column, found.path);
    const keys: { column_name: string }[] = await manager.query(
      `SELECT a.attname AS column_name FROM pg_index i JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = ANY (i.indkey)
       WHERE i.indrelid = (quote_ident($1) || '.' || quote_ident($2))::regclass AND i.indisprimary ORDER BY array_position(i.indkey, a.attnum)`,
      [schema, name],
    );
    if (config.in_order && keys.length === 0) {
      throw new MetadataError(
        'not-supported',
        `${entry}: in_order needs a primary key on ${schema}.${name} to know which events are of one row`,
        `${path}.in_order`,
      );
    }
    await manager.query(
      `INSERT INTO event_triggers (name, schema_name, table_name, configuration) VALUES ($1, $2, $3, $4)
       ON CONFLICT (name) DO UPDATE SET schema_name = $2, table_name = $3, configuration = $4, updated_at = now()`,
      [config.name, schema, name, config],
    );
    await this.createCapture(
      config,
      keys.map((row) => row.column_name),
      manager,
    );
  }

  private async uninstall(config: EventTriggerConfig, manager: EntityManager): Promise<void> {
    await this.dropCapture(config, manager);
    await manager.query('UPDATE event_log SET archived = true WHERE trigger_name = $1 AND NOT delivered AND NOT error', [config.name]);
    await manager.query('DELETE FROM event_triggers WHERE name = $1', [config.name]);
  }

  private async dropCapture(config: EventTriggerConfig, manager: EntityManager): Promise<void> {
    const capture = quoteIdent(captureName(config.name));
    const table = `${quoteIdent(config.table.schema)}.${quoteIdent(config.table.name)}`;
    // The table may have been dropped meanwhile (then its trigger went with it).
    const [{ exists }] = await manager.query('SELECT to_regclass($1) IS NOT NULL AS exists', [table]);
    if (exists) await manager.query(`DROP TRIGGER IF EXISTS ${capture} ON ${table}`);
    await manager.query(`DROP FUNCTION IF EXISTS public.${capture}()`);
  }

  /**
   * The capture: an AFTER ROW trigger running a function that skips an UPDATE touching none of the
   * watched columns and a change failing the condition, then writes the event with the
   * transaction's session variables and NOTIFYs (one notification per transaction: PostgreSQL
   * folds identical ones).
   */
  private async createCapture(config: EventTriggerConfig, keyColumns: string[], manager: EntityManager): Promise<void> {
    const operations = (['insert', 'update', 'delete'] as const).filter((operation) => config.definition[operation]);
    if (operations.length === 0) return;
    const capture = quoteIdent(captureName(config.name));
    const table = `${quoteIdent(config.table.schema)}.${quoteIdent(config.table.name)}`;
    const update = config.definition.update;
    const changed =
      !update || update.columns === '*'
        ? 'old_row IS DISTINCT FROM new_row'
        : update.columns.map((column) => `(old_row -> ${literal(column)}) IS DISTINCT FROM (new_row -> ${literal(column)})`).join(' OR ');
    const payloadOf = (row: string) => {
      const cases = operations
        .map((operation) => {
          const payload = config.definition[operation]!.payload;
          if (!payload || payload === '*') return undefined;
          const keep = `(SELECT coalesce(jsonb_object_agg(key, value), '{}'::jsonb) FROM jsonb_each(${row}) WHERE key IN (${payload.map(literal).join(', ')}))`;
          return `WHEN TG_OP = ${literal(operation.toUpperCase())} THEN ${keep}`;
        })
        .filter(Boolean);
      return cases.length ? `CASE WHEN ${row} IS NULL THEN NULL ${cases.join(' ')} ELSE ${row} END` : row;
    };
    const rowKey = keyColumns.length
      ? `jsonb_build_array(${keyColumns.map((column) => `coalesce(new_row, old_row) -> ${literal(column)}`).join(', ')})::text`
      : 'NULL';
    await manager.query(`
      CREATE OR REPLACE FUNCTION public.${capture}() RETURNS trigger LANGUAGE plpgsql AS $capture$
      DECLARE
        old_row jsonb := NULL;
        new_row jsonb := NULL;
      BEGIN
        IF TG_OP <> 'INSERT' THEN old_row := to_jsonb(OLD); END IF;
        IF TG_OP <> 'DELETE' THEN new_row := to_jsonb(NEW); END IF;
        IF TG_OP = 'UPDATE' AND NOT (${changed}) THEN RETURN NULL; END IF;
        IF NOT coalesce(${config.condition ? conditionSql(config.condition) : 'true'}, false) THEN RETURN NULL; END IF;
        INSERT INTO public.event_log (schema_name, table_name, trigger_name, payload, row_key)
        VALUES (TG_TABLE_SCHEMA, TG_TABLE_NAME, ${literal(config.name)},
          jsonb_build_object(
            'op', TG_OP,
            'data', jsonb_build_object('old', ${payloadOf('old_row')}, 'new', ${payloadOf('new_row')}),
            'session_variables', nullif(current_setting(${literal(SESSION_VARIABLES_SETTING)}, true), '')::jsonb),
          ${rowKey});
        PERFORM pg_notify(${literal(EVENTS_CHANNEL)}, '');
        RETURN NULL;
      END
      $capture$`);
    await manager.query(`DROP TRIGGER IF EXISTS ${capture} ON ${table}`);
    await manager.query(
      `CREATE TRIGGER ${capture} AFTER ${operations.map((operation) => operation.toUpperCase()).join(' OR ')} ON ${table}
       FOR EACH ROW EXECUTE FUNCTION public.${capture}()`,
    );
  }

  /** `pg_invoke_event_trigger`: a MANUAL event with `data.new` the given payload; refused unless enable_manual. */
  async invoke(args: unknown, manager: EntityManager = this.dataSource.manager): Promise<{ event_id: string }> {
    const given = objectAt(args, '$.args', 'the args');
    const name = triggerName(given.name, '$.args.name', 'event trigger');
    if (!('payload' in given)) throw new MetadataError('parse-failed', 'payload is required', '$.args.payload');
    const config = await this.find(name, manager);
    if (!config) throw new MetadataError('not-exists', `the event trigger "${name}" does not exist`, '$.args.name');
    if (!config.definition.enable_manual) {
      throw new MetadataError('not-supported', `the event trigger "${name}" does not allow manual events (enable_manual is false)`, '$.args.name');
    }
    const payload = { op: 'MANUAL', data: { old: null, new: given.payload ?? null }, session_variables: null };
    const [row]: { id: string }[] = await manager.query(
      `INSERT INTO event_log (schema_name, table_name, trigger_name, payload) VALUES ($1, $2, $3, $4) RETURNING id`,
      [config.table.schema, config.table.name, name, payload],
    );
    await manager.query('SELECT pg_notify($1, $2)', [EVENTS_CHANNEL, '']);
    return { event_id: row.id };
  }

  /** `pg_redeliver_event`: the event is delivered again from its first attempt, whatever its state. */
  async redeliver(args: unknown, manager: EntityManager = this.dataSource.manager): Promise<void> {
    const id = eventId(objectAt(args, '$.args', 'the args').event_id);
    const rows: unknown[] = await manager.query(
      `WITH reset AS (UPDATE event_log SET delivered = false, error = false, archived = false, tries = 0, next_retry_at = NULL, locked = NULL,
       lease_expires_at = NULL, delivered_at = NULL WHERE id = $1 RETURNING id) SELECT id FROM reset`,
      [id],
    );
    if (rows.length === 0) throw new MetadataError('not-exists', `no event has the id ${id}`, '$.args.event_id');
    await manager.query('SELECT pg_notify($1, $2)', [EVENTS_CHANNEL, '']);
  }

  /** `pg_get_event_logs`: newest first; `status` pending, processed, dead (Plinth's addition) or all. */
  async eventLogs(args: unknown, manager: EntityManager = this.dataSource.manager): Promise<EventLogRow[]> {
    const given = objectAt(args, '$.args', 'the args');
    const name = given.name === undefined ? undefined : triggerName(given.name, '$.args.name', 'event trigger');
    const status = (given.status ?? 'all') as EventStatus;
    if (!(status in STATUS_FILTER)) throw new MetadataError('parse-failed', 'status must be pending, processed, dead or all', '$.args.status');
    const limit = pageArgument(given.limit, '$.args.limit', 100, 10_000);
    const offset = pageArgument(given.offset, '$.args.offset', 0, 10_000_000);
    if (name !== undefined && !(await this.find(name, manager)) && !(await this.hasEvents(name, manager))) {
      throw new MetadataError('not-exists', `the event trigger "${name}" does not exist`, '$.args.name');
    }
    return manager.query(
      `SELECT ${EVENT_COLUMNS} FROM event_log WHERE ($1::text IS NULL OR trigger_name = $1) AND ${STATUS_FILTER[status]}
       ORDER BY created_at DESC, seq DESC LIMIT $2 OFFSET $3`,
      [name ?? null, limit, offset],
    );
  }

  private async hasEvents(name: string, manager: EntityManager): Promise<boolean> {
    return (await manager.query('SELECT 1 FROM event_log WHERE trigger_name = $1 LIMIT 1', [name])).length > 0;
  }

  /** `pg_get_event_invocation_logs`: the attempts of a trigger's events, newest first. */
  async invocationLogs(args: unknown, manager: EntityManager = this.dataSource.manager): Promise<InvocationLogRow[]> {
    const given = objectAt(args, '$.args', 'the args');
    const name = triggerName(given.name, '$.args.name', 'event trigger');
    const limit = pageArgument(given.limit, '$.args.limit', 100, 10_000);
    const offset = pageArgument(given.offset, '$.args.offset', 0, 10_000_000);
    return manager.query(`SELECT ${INVOCATION_COLUMNS} FROM event_invocation_logs WHERE trigger_name = $1 ORDER BY created_at DESC LIMIT $2 OFFSET $3`, [
      name,
      limit,
      offset,
    ]);
  }

  /** `pg_get_event_by_id`: `{event, invocations}`. */
  async eventById(args: unknown, manager: EntityManager = this.dataSource.manager): Promise<{ event: EventLogRow; invocations: InvocationLogRow[] }> {
    const given = objectAt(args, '$.args', 'the args');
    const id = eventId(given.event_id);
    const limit = pageArgument(given.invocation_log_limit, '$.args.invocation_log_limit', 100, 10_000);
    const offset = pageArgument(given.invocation_log_offset, '$.args.invocation_log_offset', 0, 10_000_000);
    const [event]: EventLogRow[] = await manager.query(`SELECT ${EVENT_COLUMNS} FROM event_log WHERE id = $1`, [id]);
    if (!event) throw new MetadataError('not-exists', `no event has the id ${id}`, '$.args.event_id');
    const invocations: InvocationLogRow[] = await manager.query(
      `SELECT ${INVOCATION_COLUMNS} FROM event_invocation_logs WHERE event_id = $1 ORDER BY created_at DESC LIMIT $2 OFFSET $3`,
      [id, limit, offset],
    );
    return { event, invocations };
  }

  /** The triggers in the metadata: `event_triggers` of their tables. */
  async exportTo(metadata: HasuraMetadata, manager: EntityManager): Promise<void> {
    for (const config of await this.list(manager)) {
      const entry = tableEntry(metadata, config.table, true);
      entry.event_triggers = [...((entry.event_triggers as unknown[] | undefined) ?? []), exportedEventTrigger(config)];
    }
  }

  /** Replaces every trigger by those of `metadata`: all are checked first; an unchanged one keeps its capture. */
  async replaceFrom(metadata: HasuraMetadata, manager: EntityManager): Promise<void> {
    const wanted: { config: EventTriggerConfig; path: string }[] = [];
    const names = new Map<string, string>();
    metadata.sources.forEach((source, sourceIndex) =>
      source.tables.forEach((table, tableIndex) => {
        const triggers = table.event_triggers;
        if (triggers === undefined || triggers === null) return;
        const at = `$.args.sources[${sourceIndex}].tables[${tableIndex}].event_triggers`;
        if (!Array.isArray(triggers)) throw new MetadataError('parse-failed', 'event_triggers must be a list', at);
        triggers.forEach((trigger, index) => {
          const path = `${at}[${index}]`;
          const config = parseEventTrigger(trigger, path, { schema: table.table.schema, name: table.table.name });
          if (names.has(config.name)) {
            throw new MetadataError(
              'already-exists',
              `the event trigger "${config.name}" is defined twice (also at ${names.get(config.name)})`,
              `${path}.name`,
            );
          }
          names.set(config.name, path);
          wanted.push({ config, path });
        });
      }),
    );
    for (const existing of await this.list(manager)) {
      if (!names.has(existing.name)) await this.uninstall(existing, manager);
    }
    for (const { config, path } of wanted) {
      const existing = await this.find(config.name, manager);
      if (existing && JSON.stringify(existing) === JSON.stringify(config)) continue;
      if (existing) await this.dropCapture(existing, manager);
      await this.install(config, manager, path);
    }
  }

  /**
   * `run_sql`'s follow-up (MetadataSection.followSql): before the SQL, the triggers' tables by oid
   * and columns by number; after it, a renamed table or column is renamed in the triggers naming
   * it (their table, operation columns, payloads and condition) and their captures are created
   * again (the capture names columns). A trigger whose table is gone, or which names a column that
   * is gone, refuses the request with `dependency-error`, or with `cascade` is deleted. A table
   * dropped and created again under its name gets its capture again.
   */
  async followSql({ manager }: Pick<MetadataRequestContext, 'manager'>): Promise<(cascade: boolean) => Promise<void>> {
    const triggers = await this.list(manager);
    if (triggers.length === 0) return async () => {};
    const before = await identities(
      manager,
      triggers.map((config) => config.table),
    );
    return async (cascade) => {
      const renames = await renamesSince(manager, before);
      const broken: { config: EventTriggerConfig; reason: string }[] = [];
      const changed: { config: EventTriggerConfig; next: EventTriggerConfig }[] = [];
      for (const config of triggers) {
        const key = tableKey(config.table);
        const next = renamedTrigger(config, renames.tables.get(key) ?? config.table, (name) => renames.columns.get(key)?.get(name) ?? name);
        const columns: { name: string }[] = await manager.query(
          `SELECT a.attname AS name FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid JOIN pg_namespace n ON n.oid = c.relnamespace
            WHERE n.nspname = $1 AND c.relname = $2 AND c.relkind IN ('r', 'p') AND a.attnum > 0 AND NOT a.attisdropped`,
          [next.table.schema, next.table.name],
        );
        const tableText = `${next.table.schema}.${next.table.name}`;
        const missing = triggerColumns(next).find((column) => !columns.some((row) => row.name === column));
        if (columns.length === 0) broken.push({ config, reason: `its table ${tableText} was dropped` });
        else if (missing !== undefined) broken.push({ config, reason: `the column "${missing}" of ${tableText} was dropped` });
        else if (renames.gone.has(key) || JSON.stringify(next) !== JSON.stringify(config)) changed.push({ config, next });
      }
      if (broken.length && !cascade) {
        const objects = broken.map(({ config, reason }) => `event trigger ${config.name} on ${config.table.schema}.${config.table.name} (${reason})`);
        throw new MetadataError(
          'dependency-error',
          `cannot drop due to the following dependent objects: ${objects.join('; ')} (use cascade to drop them)`,
          '$.args',
        );
      }
      for (const { config } of broken) await this.uninstall({ ...config, table: renames.tables.get(tableKey(config.table)) ?? config.table }, manager);
      for (const { config, next } of changed) {
        await this.dropCapture({ ...config, table: next.table }, manager);
        await this.install(next, manager, `$.event_triggers.${config.name}`);
      }
    };
  }

  /** `reload_metadata`: recreates every capture from its definition (after a table was recreated, say). */
  async reload(manager: EntityManager): Promise<void> {
    for (const config of await this.list(manager)) {
      await this.dropCapture(config, manager);
      await this.install(config, manager, `$.event_triggers.${config.name}`);
    }
  }
}
