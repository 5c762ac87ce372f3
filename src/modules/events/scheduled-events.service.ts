import { Cron } from 'croner';
import type { DataSource, EntityManager } from 'typeorm';
import type { EventsConfig } from '../../config';
import { MetadataError, type HasuraMetadata } from '../../platform/metadata';
import {
  DEFAULT_RETRY_CONF,
  headerConfs,
  objectAt,
  parseCronTrigger,
  triggerName,
  webhookUrl,
  type CronRetryConf,
  type CronTriggerConfig,
  type HeaderConf,
  type RetryConf,
} from './definitions';
import { EVENTS_CHANNEL } from './event-triggers.service';
import { UUID } from '../../common/ids';

/**
 * Why a cron expression is refused, or undefined when it is a valid five-field expression
 * (minute hour day-of-month month day-of-week) in the configured time zone.
 */
export function cronProblem(schedule: string, timeZone: string): string | undefined {
  const fields = schedule.trim().split(/\s+/);
  if (fields.length !== 5) return `five fields are needed (minute hour day month weekday), got ${fields.length}`;
  try {
    const cron = new Cron(schedule, { timezone: timeZone, paused: true });
    if (!cron.nextRun()) return 'it never fires';
    return undefined;
  } catch (error) {
    return (error as Error).message.replace(/^CronPattern: /, '');
  }
}

/** How late an event of `trigger` may still fire: its `tolerance_seconds`, or EVENTS_MISSED_TOLERANCE_SECONDS. */
export function missedToleranceSeconds(trigger: CronTriggerConfig | undefined, config: Pick<EventsConfig, 'missedToleranceSeconds'>): number {
  return (trigger?.retry_conf as CronRetryConf | undefined)?.tolerance_seconds ?? config.missedToleranceSeconds;
}

/** The next `count` times a schedule fires after `after`, in the configured time zone. */
export function nextCronTimes(schedule: string, timeZone: string, after: Date, count: number): Date[] {
  return new Cron(schedule, { timezone: timeZone, paused: true }).nextRuns(count, after);
}

export interface ScheduledEventRow {
  id: string;
  name: string | null;
  scheduled_time: string;
  status: string;
  tries: number;
  created_at: string;
  next_retry_at: string | null;
  webhook_conf?: string | null;
  payload: unknown;
  comment: string | null;
}

const EVENT_COLUMNS = `id, cron_trigger_name AS name, scheduled_time, status, tries, created_at, next_retry_at, webhook AS webhook_conf, payload, comment`;
const STATUSES = ['scheduled', 'locked', 'delivered', 'error', 'dead'];

function page(value: unknown, path: string, fallback: number, max: number): number {
  if (value === undefined || value === null) return fallback;
  if (typeof value !== 'number' || !Number.isInteger(value) || value < 0 || value > max) {
    throw new MetadataError('parse-failed', `must be a whole number from 0 to ${max}`, path);
  }
  return value;
}

function kindOf(value: unknown, path: string): 'cron' | 'one_off' {
  if (value !== 'cron' && value !== 'one_off') throw new MetadataError('parse-failed', 'type must be "cron" or "one_off"', path);
  return value;
}

/**
 * Cron triggers and scheduled events: definitions (metadata requests and files), the generation
 * of each cron trigger's upcoming events (EVENTS_CRON_AHEAD of them, unique per trigger and
 * time), one-off events, and their listings.
 */
export class ScheduledEventsService {
  constructor(
    private readonly dataSource: DataSource,
    private readonly config: Pick<EventsConfig, 'cronTimeZone' | 'cronAhead' | 'missedToleranceSeconds'>,
  ) {}

  private parse(value: unknown, path: string): CronTriggerConfig {
    return parseCronTrigger(value, path, (schedule) => cronProblem(schedule, this.config.cronTimeZone));
  }

  async list(manager: EntityManager = this.dataSource.manager): Promise<CronTriggerConfig[]> {
    const rows: { configuration: CronTriggerConfig }[] = await manager.query('SELECT configuration FROM cron_triggers ORDER BY name');
    return rows.map((row) => row.configuration);
  }

  async find(name: string, manager: EntityManager = this.dataSource.manager): Promise<CronTriggerConfig | undefined> {
    const rows: { configuration: CronTriggerConfig }[] = await manager.query('SELECT configuration FROM cron_triggers WHERE name = $1', [name]);
    return rows[0]?.configuration;
  }

  /** `create_cron_trigger` (with `replace`): the trigger and its upcoming events. */
  async createCronTrigger(args: unknown, manager: EntityManager): Promise<void> {
    const config = this.parse(args, '$.args');
    const replace = (args as { replace?: unknown }).replace;
    if (replace !== undefined && typeof replace !== 'boolean') throw new MetadataError('parse-failed', 'replace must be true or false', '$.args.replace');
    const existing = await this.find(config.name, manager);
    if (existing && !replace) {
      throw new MetadataError('already-exists', `the cron trigger "${config.name}" already exists (use "replace": true to change it)`, '$.args.name');
    }
    await this.save(config, manager);
  }

  private async save(config: CronTriggerConfig, manager: EntityManager): Promise<void> {
    const existing = await this.find(config.name, manager);
    await manager.query(
      `INSERT INTO cron_triggers (name, configuration) VALUES ($1, $2)
       ON CONFLICT (name) DO UPDATE SET configuration = $2, updated_at = now()`,
      [config.name, config],
    );
    // A new schedule replaces the upcoming events of the old one.
    if (existing && existing.schedule !== config.schedule) {
      await manager.query(`DELETE FROM scheduled_events WHERE cron_trigger_name = $1 AND status = 'scheduled' AND tries = 0`, [config.name]);
    }
    await this.generate(config, manager);
  }

  /** `delete_cron_trigger`: the trigger and its events go. */
  async deleteCronTrigger(args: unknown, manager: EntityManager): Promise<void> {
    const name = triggerName(objectAt(args, '$.args', 'the args').name, '$.args.name', 'cron trigger');
    const rows: unknown[] = await manager.query('WITH deleted AS (DELETE FROM cron_triggers WHERE name = $1 RETURNING name) SELECT name FROM deleted', [name]);
    if (rows.length === 0) throw new MetadataError('not-exists', `the cron trigger "${name}" does not exist`, '$.args.name');
  }

  /** `get_cron_triggers`: `{cron_triggers: [...]}` in Hasura's shape. */
  async getCronTriggers(manager: EntityManager): Promise<{ cron_triggers: unknown[] }> {
    return { cron_triggers: (await this.list(manager)).map(exportedCronTrigger) };
  }

  /**
   * Keeps EVENTS_CRON_AHEAD upcoming events of a trigger generated. Unique per (trigger, time):
   * two instances generating at once insert each event once.
   */
  async generate(config: CronTriggerConfig, manager: EntityManager = this.dataSource.manager): Promise<number> {
    const [{ upcoming, latest }]: { upcoming: number; latest: Date | null }[] = await manager.query(
      `SELECT count(*)::int AS upcoming, max(scheduled_time) AS latest FROM scheduled_events
       WHERE cron_trigger_name = $1 AND scheduled_time > now()`,
      [config.name],
    );
    if (upcoming >= Math.ceil(this.config.cronAhead / 2)) return 0;
    const from = latest && latest.getTime() > Date.now() ? latest : new Date();
    const times = nextCronTimes(config.schedule, this.config.cronTimeZone, from, this.config.cronAhead - upcoming);
    if (times.length === 0) return 0;
    const inserted: unknown[] = await manager.query(
      `INSERT INTO scheduled_events (cron_trigger_name, scheduled_time)
       SELECT $1, unnest($2::timestamptz[]) ON CONFLICT (cron_trigger_name, scheduled_time) DO NOTHING RETURNING id`,
      [config.name, times.map((time) => time.toISOString())],
    );
    return inserted.length;
  }

  /**
   * The upkeep of scheduled events (a recurring task, every EVENTS_POLL_INTERVAL_MS): each cron
   * trigger's upcoming events generated, and events never attempted and later than their
   * tolerance marked dead (the time has passed), never fired late.
   */
  async maintain(): Promise<void> {
    const triggers = await this.list();
    for (const config of triggers) await this.generate(config);
    await this.markMissed(null, this.config.missedToleranceSeconds);
    for (const config of triggers) await this.markMissed(config.name, missedToleranceSeconds(config, this.config));
  }

  private async markMissed(trigger: string | null, toleranceSeconds: number): Promise<void> {
    await this.dataSource.query(
      `UPDATE scheduled_events SET status = 'dead' WHERE cron_trigger_name IS NOT DISTINCT FROM $1 AND status = 'scheduled' AND tries = 0
       AND scheduled_time < clock_timestamp() - make_interval(secs => $2)`,
      [trigger, toleranceSeconds],
    );
  }

  /** `create_scheduled_event`: a one-off event; answers its id. */
  async createScheduledEvent(args: unknown, manager: EntityManager): Promise<{ message: 'success'; event_id: string }> {
    const given = objectAt(args, '$.args', 'the args');
    const entry = 'the scheduled event';
    const webhook = webhookUrl(given.webhook, '$.args.webhook', entry);
    const at = given.schedule_at;
    if (typeof at !== 'string' || Number.isNaN(Date.parse(at)) || !/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}/.test(at)) {
      throw new MetadataError('parse-failed', 'schedule_at must be an ISO 8601 timestamp such as 2026-01-31T09:00:00Z', '$.args.schedule_at');
    }
    const headers: HeaderConf[] = headerConfs(given.headers, '$.args.headers', entry);
    const retry = parseRetry(given.retry_conf);
    const [row]: { id: string }[] = await manager.query(
      `INSERT INTO scheduled_events (scheduled_time, webhook, payload, headers, retry_conf, comment) VALUES ($1, $2, $3, $4, $5, $6) RETURNING id`,
      [
        new Date(at).toISOString(),
        webhook,
        JSON.stringify(given.payload ?? null),
        JSON.stringify(headers),
        retry,
        typeof given.comment === 'string' ? given.comment : null,
      ],
    );
    await manager.query('SELECT pg_notify($1, $2)', [EVENTS_CHANNEL, '']);
    return { message: 'success', event_id: row.id };
  }

  /** `delete_scheduled_event`: `{type: one_off|cron, event_id}`. */
  async deleteScheduledEvent(args: unknown, manager: EntityManager): Promise<void> {
    const given = objectAt(args, '$.args', 'the args');
    const kind = kindOf(given.type, '$.args.type');
    if (typeof given.event_id !== 'string' || !UUID.test(given.event_id)) throw new MetadataError('parse-failed', 'event_id must be a UUID', '$.args.event_id');
    const rows: unknown[] = await manager.query(
      `WITH deleted AS (DELETE FROM scheduled_events WHERE id = $1 AND (cron_trigger_name IS NOT NULL) = $2 RETURNING id) SELECT id FROM deleted`,
      [given.event_id, kind === 'cron'],
    );
    if (rows.length === 0) throw new MetadataError('not-exists', `no ${kind} scheduled event has the id ${given.event_id}`, '$.args.event_id');
  }

  /** `get_scheduled_events`: `{events, count?}`, by scheduled time. */
  async getScheduledEvents(args: unknown, manager: EntityManager): Promise<{ events: ScheduledEventRow[]; count?: number }> {
    const given = objectAt(args, '$.args', 'the args');
    const kind = kindOf(given.type, '$.args.type');
    const name = kind === 'cron' ? triggerName(given.trigger_name, '$.args.trigger_name', 'cron trigger') : null;
    const statuses = given.status === undefined ? STATUSES : given.status;
    if (!Array.isArray(statuses) || !statuses.every((status) => STATUSES.includes(status as string))) {
      throw new MetadataError('parse-failed', `status must be a list of ${STATUSES.join(', ')}`, '$.args.status');
    }
    const limit = page(given.limit, '$.args.limit', 100, 10_000);
    const offset = page(given.offset, '$.args.offset', 0, 10_000_000);
    const where = `(cron_trigger_name IS NOT NULL) = $1 AND ($2::text IS NULL OR cron_trigger_name = $2) AND status = ANY ($3)`;
    const events: ScheduledEventRow[] = await manager.query(
      `SELECT ${EVENT_COLUMNS} FROM scheduled_events WHERE ${where} ORDER BY scheduled_time, id LIMIT $4 OFFSET $5`,
      [kind === 'cron', name, statuses, limit, offset],
    );
    if (given.get_rows_count !== true) return { events };
    const [{ count }] = await manager.query(`SELECT count(*)::int AS count FROM scheduled_events WHERE ${where}`, [kind === 'cron', name, statuses]);
    return { events, count };
  }

  /** `get_scheduled_event_invocations`: by `event_id`, or by `trigger_name` for cron events. */
  async getInvocations(args: unknown, manager: EntityManager): Promise<{ invocations: unknown[]; count?: number }> {
    const given = objectAt(args, '$.args', 'the args');
    const kind = kindOf(given.type, '$.args.type');
    const eventId = given.event_id;
    if (eventId !== undefined && (typeof eventId !== 'string' || !UUID.test(eventId)))
      throw new MetadataError('parse-failed', 'event_id must be a UUID', '$.args.event_id');
    const name = given.trigger_name === undefined ? null : triggerName(given.trigger_name, '$.args.trigger_name', 'cron trigger');
    const limit = page(given.limit, '$.args.limit', 100, 10_000);
    const offset = page(given.offset, '$.args.offset', 0, 10_000_000);
    const where = `(e.cron_trigger_name IS NOT NULL) = $1 AND ($2::uuid IS NULL OR l.event_id = $2) AND ($3::text IS NULL OR e.cron_trigger_name = $3)`;
    const invocations: unknown[] = await manager.query(
      `SELECT l.id, l.event_id, l.status, l.request, l.response, l.duration_ms, l.created_at FROM scheduled_event_invocation_logs l
       JOIN scheduled_events e ON e.id = l.event_id WHERE ${where} ORDER BY l.created_at DESC LIMIT $4 OFFSET $5`,
      [kind === 'cron', eventId ?? null, name, limit, offset],
    );
    if (given.get_rows_count !== true) return { invocations };
    const [{ count }] = await manager.query(
      `SELECT count(*)::int AS count FROM scheduled_event_invocation_logs l JOIN scheduled_events e ON e.id = l.event_id WHERE ${where}`,
      [kind === 'cron', eventId ?? null, name],
    );
    return { invocations, count };
  }

  async exportTo(metadata: HasuraMetadata, manager: EntityManager): Promise<void> {
    const triggers = (await this.list(manager)).filter((config) => config.include_in_metadata).map(exportedCronTrigger);
    if (triggers.length) metadata.cron_triggers = triggers;
  }

  /** Replaces the cron triggers kept in the metadata (include_in_metadata) by those of `metadata`. */
  async replaceFrom(metadata: HasuraMetadata, manager: EntityManager): Promise<void> {
    const given = metadata.cron_triggers ?? [];
    if (!Array.isArray(given)) throw new MetadataError('parse-failed', 'cron_triggers must be a list', '$.args.cron_triggers');
    const names = new Set<string>();
    const wanted = given.map((entry, index) => {
      const config = this.parse(entry, `$.args.cron_triggers[${index}]`);
      if (names.has(config.name))
        throw new MetadataError('already-exists', `the cron trigger "${config.name}" is defined twice`, `$.args.cron_triggers[${index}].name`);
      names.add(config.name);
      return config;
    });
    for (const existing of await this.list(manager)) {
      if (existing.include_in_metadata && !names.has(existing.name)) await manager.query('DELETE FROM cron_triggers WHERE name = $1', [existing.name]);
    }
    for (const config of wanted) {
      const existing = await this.find(config.name, manager);
      if (!existing || JSON.stringify(existing) !== JSON.stringify(config)) await this.save(config, manager);
    }
  }
}

function parseRetry(value: unknown): RetryConf {
  if (value === undefined || value === null) return { ...DEFAULT_RETRY_CONF };
  const given = objectAt(value, '$.args.retry_conf', 'retry_conf');
  const read = (key: keyof RetryConf, min: number, max: number) => {
    const item = given[key] ?? DEFAULT_RETRY_CONF[key];
    if (typeof item !== 'number' || !Number.isInteger(item) || item < min || item > max) {
      throw new MetadataError('parse-failed', `${key} must be a whole number from ${min} to ${max}`, `$.args.retry_conf.${key}`);
    }
    return item;
  };
  return { num_retries: read('num_retries', 0, 1000), interval_sec: read('interval_sec', 0, 86_400), timeout_sec: read('timeout_sec', 1, 3600) };
}

/** A cron trigger as the metadata (and get_cron_triggers) shows it. */
export function exportedCronTrigger(config: CronTriggerConfig): Record<string, unknown> {
  return {
    name: config.name,
    webhook: config.webhook,
    schedule: config.schedule,
    include_in_metadata: config.include_in_metadata,
    payload: config.payload ?? {},
    retry_conf: config.retry_conf,
    ...(config.headers.length ? { headers: config.headers } : {}),
    ...(config.comment !== undefined ? { comment: config.comment } : {}),
  };
}
