import type { DataSource } from 'typeorm';
import { LEVELS, type Level, type StoredFrame } from './event';
import { Refusal } from '../../common/refusal';
import { invalid, notFound, optionalText } from './problems';
import { rows } from '../../db/sql';
import { decodeCursor, encodeCursor, type Page } from '../../common/cursors';

/**
 * `timeRange` values: Sentry's stats periods (1h, 24h, 7d, 14d, 30d, 90d) and 6h. An error is
 * in the range when one of its events, by the events' own timestamps, is.
 */
export const TIME_RANGES: Record<string, number> = {
  '1h': 3_600_000,
  '6h': 6 * 3_600_000,
  '24h': 24 * 3_600_000,
  '7d': 7 * 86_400_000,
  '14d': 14 * 86_400_000,
  '30d': 30 * 86_400_000,
  '90d': 90 * 86_400_000,
};

export const ERROR_STATUSES = ['unresolved', 'resolved', 'ignored'] as const;
export type ErrorStatus = (typeof ERROR_STATUSES)[number];

export const DEFAULT_PAGE = 20;
export const MAX_PAGE = 100;

export interface ErrorRecord {
  id: string;
  projectId: number;
  message: string;
  type: string | null;
  level: Level;
  status: ErrorStatus;
  occurrenceCount: number;
  firstSeen: Date;
  lastSeen: Date;
  lastEventId: string | null;
  lastRelease: string | null;
  resolvedRelease: string | null;
}

/** One stored event of an error, as the admin dashboard shows it. */
export interface ErrorEvent {
  eventId: string;
  occurredAt: Date;
  level: Level;
  environment: string | null;
  release: string | null;
  message: string;
  frames: StoredFrame[];
}

export interface ErrorFilterInput {
  severity?: Level | null;
  service?: string | null;
  timeRange?: string | null;
  status?: ErrorStatus | null;
  project?: number | null;
}

interface GroupRow {
  id: string;
  project_id: number;
  message: string;
  type: string | null;
  level: Level;
  status: ErrorStatus;
  occurrence_count: string;
  first_seen: Date;
  last_seen: Date;
  last_event_id: string | null;
  last_release: string | null;
  resolved_release: string | null;
}

const record = (row: GroupRow): ErrorRecord => ({
  id: String(row.id),
  projectId: row.project_id,
  message: row.message,
  type: row.type,
  level: row.level,
  status: row.status,
  occurrenceCount: Number(row.occurrence_count),
  firstSeen: row.first_seen,
  lastSeen: row.last_seen,
  lastEventId: row.last_event_id,
  lastRelease: row.last_release,
  resolvedRelease: row.resolved_release,
});

export function pageSize(first: number | null | undefined): number {
  const size = first ?? DEFAULT_PAGE;
  if (!Number.isInteger(size) || size < 1 || size > MAX_PAGE) throw invalid('first', `first must be between 1 and ${MAX_PAGE}`);
  return size;
}

const ERROR_ID = /^[1-9]\d{0,17}$/;

function errorId(id: unknown): string {
  if (typeof id !== 'string' || !ERROR_ID.test(id)) throw notFound(`error "${String(id).slice(0, 40)}"`);
  return id;
}

/**
 * Grouped errors: the listing (newest error first, by id, so that errors created while a client
 * pages appear before its first page rather than shifting later ones) and the status changes.
 */
export class ErrorsService {
  constructor(private readonly dataSource: DataSource) {}

  /** Checks a filter; unknown values are refused with the allowed ones. */
  checkFilter(filter: ErrorFilterInput): { since: Date | null } {
    if (filter.severity && !(LEVELS as readonly string[]).includes(filter.severity)) throw invalid('severity', 'unknown severity');
    if (filter.timeRange === undefined || filter.timeRange === null) return { since: null };
    const span = TIME_RANGES[filter.timeRange];
    if (span === undefined) throw invalid('timeRange', `timeRange must be one of ${Object.keys(TIME_RANGES).join(', ')}`);
    return { since: new Date(Date.now() - span) };
  }

  async list(scope: number | null, first: number | null | undefined, after: string | null | undefined, filter: ErrorFilterInput): Promise<Page<ErrorRecord>> {
    const size = pageSize(first);
    const position = decodeCursor('error', after, ERROR_ID);
    const { since } = this.checkFilter(filter);
    const service = optionalText(filter.service, 'service', 100);
    const found = await rows<GroupRow>(
      this.dataSource,
      `SELECT g.* FROM error_groups g
       WHERE g.status <> 'merged' AND g.occurrence_count > 0
         AND ($1::int IS NULL OR g.project_id = $1)
         AND ($2::int IS NULL OR g.project_id = $2)
         AND ($3::text IS NULL OR g.level = $3)
         AND ($4::text IS NULL OR g.project_id IN (SELECT id FROM error_projects WHERE service = $4))
         AND ($5::timestamptz IS NULL OR g.last_seen >= $5)
         AND ($6::text IS NULL OR g.status = $6)
         AND ($7::bigint IS NULL OR g.id < $7)
       ORDER BY g.id DESC LIMIT $8`,
      [scope, filter.project ?? null, filter.severity ?? null, service, since, filter.status ?? null, position, size + 1],
    );
    const page = found.slice(0, size).map(record);
    return {
      nodes: page.map((node) => ({ node, cursor: encodeCursor('error', node.id) })),
      hasNextPage: found.length > size,
      endCursor: page.length > 0 ? encodeCursor('error', page[page.length - 1].id) : null,
    };
  }

  async get(scope: number | null, id: unknown): Promise<ErrorRecord> {
    const [row] = await rows<GroupRow>(
      this.dataSource,
      `SELECT * FROM error_groups WHERE id = $1 AND status <> 'merged' AND ($2::int IS NULL OR project_id = $2)`,
      [errorId(id), scope],
    );
    if (!row) throw notFound(`error "${String(id)}"`);
    return record(row);
  }

  /** An error's latest events, newest first: when, level, environment, release, message and stack frames (the admin dashboard). */
  async latestEvents(scope: number | null, id: unknown, limit: number): Promise<ErrorEvent[]> {
    const error = await this.get(scope, id);
    const found = await rows<{
      event_id: string;
      occurred_at: Date;
      level: Level;
      environment: string | null;
      release: string | null;
      message: string;
      frames: StoredFrame[] | null;
    }>(
      this.dataSource,
      `SELECT event_id, occurred_at, level, environment, release, message, frames FROM error_events
       WHERE group_id = $1 ORDER BY occurred_at DESC LIMIT $2`,
      [error.id, limit],
    );
    return found.map((row) => ({
      eventId: row.event_id,
      occurredAt: row.occurred_at,
      level: row.level,
      environment: row.environment,
      release: row.release,
      message: row.message,
      frames: row.frames ?? [],
    }));
  }

  /** The stored frames of events, by `<project>:<event id>` (the latest event of each error). */
  async framesOf(keys: readonly string[]): Promise<Map<string, StoredFrame[]>> {
    const pairs = keys.map((key) => key.split(':'));
    const found = await rows<{ project_id: number; event_id: string; frames: StoredFrame[] | null }>(
      this.dataSource,
      `SELECT e.project_id, e.event_id, e.frames FROM error_events e
       JOIN unnest($1::int[], $2::uuid[]) AS k (project_id, event_id) USING (project_id, event_id)`,
      [pairs.map(([project]) => Number(project)), pairs.map(([, event]) => event)],
    );
    return new Map(found.map((row) => [`${row.project_id}:${row.event_id}`, row.frames ?? []]));
  }

  /**
   * Resolves an error. In a release (given, else the latest one its events named) only events of
   * a newer release reopen it; without any release, any new event does.
   */
  async resolve(scope: number | null, id: unknown, inRelease?: string | null): Promise<ErrorRecord> {
    const current = await this.get(scope, id);
    const release = optionalText(inRelease, 'inRelease', 256) ?? current.lastRelease;
    if (release !== null) {
      await this.dataSource.query('INSERT INTO error_releases (project_id, version) VALUES ($1, $2) ON CONFLICT DO NOTHING', [current.projectId, release]);
    }
    return this.setStatus(current.id, 'resolved', release);
  }

  async ignore(scope: number | null, id: unknown): Promise<ErrorRecord> {
    return this.setStatus((await this.get(scope, id)).id, 'ignored', null);
  }

  async reopen(scope: number | null, id: unknown): Promise<ErrorRecord> {
    const current = await this.get(scope, id);
    if (current.status === 'unresolved') throw new Refusal('INVALID_TRANSITION', `error ${current.id} is already unresolved`, 409);
    return this.setStatus(current.id, 'unresolved', null);
  }

  private async setStatus(id: string, status: ErrorStatus, release: string | null): Promise<ErrorRecord> {
    const [row] = await rows<GroupRow>(
      this.dataSource,
      `UPDATE error_groups SET status = $2, resolved_release = $3, resolved_at = CASE WHEN $2 = 'resolved' THEN now() END
       WHERE id = $1 AND status <> 'merged' RETURNING *`,
      [id, status, release],
    );
    if (!row) throw notFound(`error "${id}"`);
    return record(row);
  }

  /**
   * Merges `sources` into `target` (all of one project): their events move to it, their counts
   * add to it, and their fingerprints lead new events to it from now on. The merged errors leave
   * the listings.
   */
  async merge(scope: number | null, target: unknown, sources: unknown[]): Promise<ErrorRecord> {
    const targetId = errorId(target);
    if (!Array.isArray(sources) || sources.length === 0) throw invalid('sources', 'sources must name at least one error');
    const sourceIds = [...new Set(sources.map(errorId))];
    if (sourceIds.includes(targetId)) throw invalid('sources', 'an error cannot be merged into itself');
    return this.dataSource.transaction(async (manager) => {
      const locked = await rows<GroupRow>(
        manager,
        `SELECT * FROM error_groups WHERE id = ANY($1::bigint[]) AND status <> 'merged' AND ($2::int IS NULL OR project_id = $2)
         ORDER BY id FOR UPDATE`,
        [[targetId, ...sourceIds], scope],
      );
      const byId = new Map(locked.map((row) => [String(row.id), row]));
      for (const id of [targetId, ...sourceIds]) if (!byId.has(id)) throw notFound(`error "${id}"`);
      const projectId = byId.get(targetId)!.project_id;
      if (sourceIds.some((id) => byId.get(id)!.project_id !== projectId)) {
        throw invalid('sources', 'only errors of one project can be merged');
      }
      await manager.query(`UPDATE error_groups SET merged_into_id = $1 WHERE merged_into_id = ANY($2::bigint[])`, [targetId, sourceIds]);
      await manager.query(`UPDATE error_groups SET merged_into_id = $1, status = 'merged' WHERE id = ANY($2::bigint[])`, [targetId, sourceIds]);
      await manager.query('UPDATE error_events SET group_id = $1 WHERE group_id = ANY($2::bigint[])', [targetId, sourceIds]);
      const [merged] = await rows<GroupRow>(
        manager,
        `WITH latest AS (
           SELECT event_id, occurred_at, level, message, release FROM error_events WHERE group_id = $1 ORDER BY occurred_at DESC LIMIT 1
         )
         UPDATE error_groups g SET
           occurrence_count = g.occurrence_count + (SELECT COALESCE(sum(occurrence_count), 0) FROM error_groups WHERE id = ANY($2::bigint[])),
           first_seen = LEAST(g.first_seen, (SELECT min(first_seen) FROM error_groups WHERE id = ANY($2::bigint[]))),
           last_seen = GREATEST(g.last_seen, (SELECT max(last_seen) FROM error_groups WHERE id = ANY($2::bigint[]))),
           last_event_id = COALESCE((SELECT event_id FROM latest), g.last_event_id),
           level = COALESCE((SELECT level FROM latest), g.level),
           message = COALESCE((SELECT message FROM latest), g.message)
         WHERE g.id = $1 RETURNING g.*`,
        [targetId, sourceIds],
      );
      return record(merged);
    });
  }
}
