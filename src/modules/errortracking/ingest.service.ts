import { LRUCache } from 'lru-cache';
import type { Logger } from 'pino';
import type { DataSource } from 'typeorm';
import type { PostgresPubSub } from '../../platform/pubsub';
import { GroupCommit } from '../../platform/group-commit';
import type { NormalizedEvent } from './event';
import { rows } from '../../db/sql';

export const ERROR_RECEIVED = 'ERROR_RECEIVED';

/** What errorReceived subscribers get: the error as it is after the batch that touched it. */
export interface ReceivedError {
  id: string;
  projectId: number;
  service: string;
  message: string;
  type: string | null;
  lastEventId: string | null;
  release: string | null;
  level: string;
  status: string;
  occurrenceCount: number;
  firstSeen: string;
  lastSeen: string;
}

interface Pending {
  projectId: number;
  event: NormalizedEvent;
}

interface GroupRow {
  id: string;
  project_id: number;
  service: string;
  message: string;
  type: string | null;
  last_event_id: string | null;
  last_release: string | null;
  level: string;
  status: string;
  occurrence_count: string;
  first_seen: Date;
  last_seen: Date;
}

/**
 * Writes events in batches (group commit, src/platform/group-commit.ts): a request is answered
 * once the batch holding its events is committed, so nothing acknowledged can be lost.
 *
 * A batch costs one statement when its errors and releases are known to this process (the
 * events' insert, which skips event ids seen before, and the errors' update, together), and up
 * to two more otherwise (new errors and releases are created first). Batches lock the errors
 * they update in id order, so two in flight never deadlock each other.
 */
export class IngestService {
  private readonly batches: GroupCommit<Pending, void>;
  /** `<project>:<fingerprint hex>` -> the error row its events go to (rows are never deleted). */
  private readonly groups = new LRUCache<string, string>({ max: 100_000 });
  private readonly releases = new LRUCache<string, true>({ max: 10_000 });

  constructor(
    private readonly dataSource: DataSource,
    private readonly pubSub: Pick<PostgresPubSub, 'publishMany'>,
    maxBatch: number,
    logger: Logger,
  ) {
    this.batches = new GroupCommit({
      maxBatch,
      write: async (batch) => {
        this.publish(await this.write(batch));
        return batch.map(() => undefined);
      },
      onFailure: (error, events) => logger.error({ err: error, events }, 'could not store a batch of error events'),
    });
  }

  /** Resolves once every event is committed (or was stored before under its id). */
  async submit(projectId: number, events: NormalizedEvent[]): Promise<void> {
    await Promise.all(events.map((event) => this.batches.submit({ projectId, event })));
  }

  private groupKey(projectId: number, fingerprint: Buffer): string {
    return `${projectId}:${fingerprint.toString('hex')}`;
  }

  /** Creates the errors and releases this process does not know yet. */
  private async prepare(batch: Pending[]): Promise<void> {
    const newReleases = new Map<string, [number, string]>();
    const unknownGroups = new Map<string, Pending>();
    for (const item of batch) {
      const release = item.event.release;
      if (release !== null) {
        const key = `${item.projectId}:${release}`;
        if (!this.releases.has(key)) newReleases.set(key, [item.projectId, release]);
      }
      const key = this.groupKey(item.projectId, item.event.fingerprint);
      if (!this.groups.has(key) && !unknownGroups.has(key)) unknownGroups.set(key, item);
    }
    if (newReleases.size > 0) {
      const list = [...newReleases.values()];
      await this.dataSource.query(`INSERT INTO error_releases (project_id, version) SELECT * FROM unnest($1::int[], $2::text[]) ON CONFLICT DO NOTHING`, [
        list.map(([project]) => project),
        list.map(([, version]) => version),
      ]);
      for (const key of newReleases.keys()) this.releases.set(key, true);
    }
    if (unknownGroups.size === 0) return;
    const items = [...unknownGroups.values()];
    const parameters = [
      items.map((item) => item.projectId),
      items.map((item) => item.event.fingerprint),
      items.map((item) => item.event.type),
      items.map((item) => item.event.message),
      items.map((item) => item.event.level),
      items.map((item) => item.event.occurredAt),
    ];
    // A new error starts with no events; the batch's statement counts them in.
    const found = await rows<{ id: string; project_id: number; fingerprint: Buffer }>(
      this.dataSource,
      `WITH input AS (
         SELECT * FROM unnest($1::int[], $2::bytea[], $3::text[], $4::text[], $5::text[], $6::timestamptz[])
           AS t (project_id, fingerprint, type, message, level, seen)
       ), created AS (
         INSERT INTO error_groups (project_id, fingerprint, type, message, level, first_seen, last_seen)
         SELECT project_id, fingerprint, type, message, level, seen, seen FROM input
         ON CONFLICT (project_id, fingerprint) DO NOTHING
         RETURNING id, project_id, fingerprint
       )
       SELECT id, project_id, fingerprint FROM created
       UNION ALL
       SELECT g.id, g.project_id, g.fingerprint FROM error_groups g JOIN input i USING (project_id, fingerprint)`,
      parameters,
    );
    for (const row of found) this.groups.set(this.groupKey(row.project_id, row.fingerprint), String(row.id));
    const missing = items.filter((item) => !this.groups.has(this.groupKey(item.projectId, item.event.fingerprint)));
    if (missing.length === 0) return;
    // Created by another process while the statement above ran: visible to a new statement.
    const late = await rows<{ id: string; project_id: number; fingerprint: Buffer }>(
      this.dataSource,
      `SELECT g.id, g.project_id, g.fingerprint FROM error_groups g
       JOIN unnest($1::int[], $2::bytea[]) AS i (project_id, fingerprint) USING (project_id, fingerprint)`,
      [missing.map((item) => item.projectId), missing.map((item) => item.event.fingerprint)],
    );
    for (const row of late) this.groups.set(this.groupKey(row.project_id, row.fingerprint), String(row.id));
  }

  private async write(batch: Pending[]): Promise<GroupRow[]> {
    await this.prepare(batch);
    const seen = new Set<string>();
    const unique = batch.filter((item) => {
      const key = `${item.projectId}:${item.event.eventId}`;
      if (seen.has(key)) return false;
      seen.add(key);
      return true;
    });
    // One statement: the events (an id stored before is skipped), then their errors' counts,
    // times, latest event and level; a resolved error seen again in a newer release (or, when
    // resolved without one, at all) reopens.
    return rows<GroupRow>(
      this.dataSource,
      `WITH input AS (
         SELECT * FROM jsonb_to_recordset($1::jsonb) AS t (
           project_id int, event_id uuid, group_row bigint, occurred_at timestamptz, level text, message text, environment text, release text, frames jsonb)
       ), inserted AS (
         INSERT INTO error_events (project_id, event_id, group_id, occurred_at, level, message, environment, release, frames)
         SELECT i.project_id, i.event_id, COALESCE(g.merged_into_id, g.id), i.occurred_at, i.level, i.message, i.environment, i.release, i.frames
         FROM input i JOIN error_groups g ON g.id = i.group_row
         ON CONFLICT (project_id, event_id) DO NOTHING
         RETURNING project_id, event_id, group_id, occurred_at, level, message, release
       ), locked AS (
         SELECT id FROM error_groups WHERE id IN (SELECT group_id FROM inserted) ORDER BY id FOR UPDATE
       ), counted AS (
         SELECT e.group_id, count(*) AS n, min(e.occurred_at) AS first_seen, max(e.occurred_at) AS last_seen,
           (array_agg(e.event_id ORDER BY e.occurred_at DESC))[1] AS last_event_id,
           (array_agg(e.level ORDER BY e.occurred_at DESC))[1] AS level,
           (array_agg(e.message ORDER BY e.occurred_at DESC))[1] AS message,
           (array_agg(e.release ORDER BY e.occurred_at DESC) FILTER (WHERE e.release IS NOT NULL))[1] AS release,
           max(r.first_seen) AS newest_release
         FROM inserted e LEFT JOIN error_releases r ON r.project_id = e.project_id AND r.version = e.release
         GROUP BY e.group_id
       )
       UPDATE error_groups g SET
         occurrence_count = g.occurrence_count + c.n,
         first_seen = CASE WHEN g.occurrence_count = 0 THEN c.first_seen ELSE LEAST(g.first_seen, c.first_seen) END,
         last_seen = CASE WHEN g.occurrence_count = 0 THEN c.last_seen ELSE GREATEST(g.last_seen, c.last_seen) END,
         last_event_id = CASE WHEN g.last_event_id IS NULL OR c.last_seen >= g.last_seen THEN c.last_event_id ELSE g.last_event_id END,
         level = CASE WHEN g.occurrence_count = 0 OR c.last_seen >= g.last_seen THEN c.level ELSE g.level END,
         message = CASE WHEN g.occurrence_count = 0 OR c.last_seen >= g.last_seen THEN c.message ELSE g.message END,
         last_release = COALESCE(c.release, g.last_release),
         status = CASE WHEN g.status = 'resolved' AND (g.resolved_release IS NULL OR c.newest_release > (
             SELECT first_seen FROM error_releases WHERE project_id = g.project_id AND version = g.resolved_release))
           THEN 'unresolved' ELSE g.status END
       FROM counted c JOIN locked l ON l.id = c.group_id WHERE g.id = c.group_id
       RETURNING g.id, g.project_id, g.message, g.type, g.level, g.status, g.occurrence_count, g.first_seen, g.last_seen,
         g.last_event_id, g.last_release, (SELECT service FROM error_projects WHERE id = g.project_id) AS service`,
      // One JSON document for the batch: cheaper to send than arrays whose every text pg escapes.
      [
        JSON.stringify(
          unique.map(({ projectId, event }) => ({
            project_id: projectId,
            event_id: event.eventId,
            group_row: this.groups.get(this.groupKey(projectId, event.fingerprint)),
            occurred_at: event.occurredAt,
            level: event.level,
            message: event.message,
            environment: event.environment,
            release: event.release,
            frames: event.frames,
          })),
        ),
      ],
    );
  }

  /** One errorReceived message per error a batch touched (after the commit), sent together. */
  private publish(received: GroupRow[]): void {
    this.pubSub.publishMany(
      ERROR_RECEIVED,
      received.map((row): ReceivedError => ({
        id: String(row.id),
        projectId: row.project_id,
        service: row.service,
        message: row.message,
        type: row.type,
        lastEventId: row.last_event_id,
        release: row.last_release,
        level: row.level,
        status: row.status,
        occurrenceCount: Number(row.occurrence_count),
        firstSeen: row.first_seen.toISOString(),
        lastSeen: row.last_seen.toISOString(),
      })),
    );
  }
}
