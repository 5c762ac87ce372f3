import type { DataSource } from 'typeorm';
import type { EventPublisher } from '../../platform/pubsub';
import { decodeCursor, encodeCursor, type Page } from '../../common/cursors';
import { pageSize } from './errors.service';
import { Refusal } from '../../common/refusal';
import { invalid, notFound, optionalText, requiredText, serviceName } from './problems';
import { rows } from '../../db/sql';
import { UUID } from '../../common/ids';

export const INCIDENT_UPDATED = 'INCIDENT_UPDATED';

/** PagerDuty's states: each move is timestamped with who made it. */
export const INCIDENT_STATUSES = ['triggered', 'acknowledged', 'resolved'] as const;
export type IncidentStatus = (typeof INCIDENT_STATUSES)[number];
/** Statuspage's impacts, and maintenance (a component under maintenance). */
export const INCIDENT_SEVERITIES = ['critical', 'major', 'minor', 'info', 'maintenance'] as const;
export type IncidentSeverity = (typeof INCIDENT_SEVERITIES)[number];

/** What opened an incident: a person or a key (manual), an SLO's burn-rate alert, or an error spike. */
export type IncidentCause = 'manual' | 'slo' | 'error_spike';

export interface Incident {
  id: string;
  projectId: number;
  title: string;
  description: string;
  severity: IncidentSeverity;
  status: IncidentStatus;
  service: string;
  runbookUrl: string | null;
  cause: IncidentCause;
  causeId: string | null;
  assignee: { name: string; email: string | null } | null;
  alerts: { count: number; types: string[] };
  createdAt: Date;
  createdBy: string;
  updatedAt: Date;
  acknowledgedAt: Date | null;
  acknowledgedBy: string | null;
  resolvedAt: Date | null;
  resolvedBy: string | null;
}

interface IncidentRow {
  id: string;
  number: string;
  project_id: number;
  title: string;
  description: string;
  severity: IncidentSeverity;
  status: IncidentStatus;
  service: string;
  runbook_url: string | null;
  cause_kind: IncidentCause;
  cause_id: string | null;
  assignee_name: string | null;
  assignee_email: string | null;
  alert_count: number;
  alert_types: string[];
  created_at: Date;
  created_by: string;
  updated_at: Date;
  acknowledged_at: Date | null;
  acknowledged_by: string | null;
  resolved_at: Date | null;
  resolved_by: string | null;
}

export const incident = (row: IncidentRow): Incident => ({
  id: row.id,
  projectId: row.project_id,
  title: row.title,
  description: row.description,
  severity: row.severity,
  status: row.status,
  service: row.service,
  runbookUrl: row.runbook_url,
  cause: row.cause_kind,
  causeId: row.cause_id,
  assignee: row.assignee_name ? { name: row.assignee_name, email: row.assignee_email } : null,
  alerts: { count: row.alert_count, types: row.alert_types },
  createdAt: row.created_at,
  createdBy: row.created_by,
  updatedAt: row.updated_at,
  acknowledgedAt: row.acknowledged_at,
  acknowledgedBy: row.acknowledged_by,
  resolvedAt: row.resolved_at,
  resolvedBy: row.resolved_by,
});

/** An incident as it travels through the PubSub (dates become text in JSON). */
export function revivedIncident(payload: Incident): Incident {
  const date = (value: Date | string | null) => (value === null ? null : new Date(value));
  return {
    ...payload,
    createdAt: date(payload.createdAt)!,
    updatedAt: date(payload.updatedAt)!,
    acknowledgedAt: date(payload.acknowledgedAt),
    resolvedAt: date(payload.resolvedAt),
  };
}

const EMAIL = /^[^\s@]+@[^\s@]+\.[^\s@]+$/;

function severityOf(value: unknown): IncidentSeverity {
  const text = typeof value === 'string' ? value.trim().toLowerCase() : '';
  if (!(INCIDENT_SEVERITIES as readonly string[]).includes(text)) throw invalid('severity', `severity must be one of ${INCIDENT_SEVERITIES.join(', ')}`);
  return text as IncidentSeverity;
}

function runbookUrl(value: unknown): string | null {
  const text = optionalText(value, 'runbookUrl', 2048);
  if (text === null) return null;
  if (!URL.canParse(text) || !['http:', 'https:'].includes(new URL(text).protocol)) throw invalid('runbookUrl', 'runbookUrl must be an http(s) URL');
  return text;
}

export interface CreateIncidentInput {
  title?: unknown;
  severity?: unknown;
  description?: unknown;
  service?: unknown;
  runbookUrl?: unknown;
}

/** An automatic incident: what fired, for which cause, as what. */
export interface Alert {
  projectId: number;
  cause: Exclude<IncidentCause, 'manual'>;
  causeId: string;
  type: string;
  title: string;
  description: string;
  severity: IncidentSeverity;
  service: string;
}

/** An alert repeating for this long counts again in the incident's alert count. */
const ALERT_REPEAT = '1 hour';

/** Incidents: opened by people, keys, SLO burn-rate alerts and error spikes; triggered → acknowledged → resolved. */
export class IncidentsService {
  constructor(
    private readonly dataSource: DataSource,
    private readonly pubSub: EventPublisher,
    private readonly projectService: (projectId: number) => Promise<string>,
  ) {}

  private announce(changed: Incident): Incident {
    this.pubSub.publish(INCIDENT_UPDATED, changed);
    return changed;
  }

  async create(projectId: number, input: CreateIncidentInput, actor: string): Promise<Incident> {
    const title = requiredText(input.title, 'title', 300);
    const severity = severityOf(input.severity);
    const description = optionalText(input.description, 'description', 10_000) ?? '';
    const service =
      input.service === undefined || input.service === null || input.service === '' ? await this.projectService(projectId) : serviceName(input.service);
    const [row] = await rows<IncidentRow>(
      this.dataSource,
      `INSERT INTO incidents (project_id, title, severity, description, service, runbook_url, created_by)
       VALUES ($1, $2, $3, $4, $5, $6, $7) RETURNING *`,
      [projectId, title, severity, description, service, runbookUrl(input.runbookUrl), actor],
    );
    return this.announce(incident(row));
  }

  /**
   * Opens an incident for an alert, or adds the alert to the incident its cause already has open:
   * a cause never has two open incidents. Resolves with the incident and whether it is new.
   */
  async raise(alert: Alert): Promise<{ incident: Incident; opened: boolean }> {
    const [row] = await rows<IncidentRow & { opened: boolean }>(
      this.dataSource,
      `INSERT INTO incidents (project_id, title, description, severity, service, cause_kind, cause_id, alert_count, alert_types, last_alert_at, created_by)
       VALUES ($1, $2, $3, $4, $5, $6, $7, 1, ARRAY[$8::text], now(), $9)
       ON CONFLICT (cause_kind, cause_id) WHERE status <> 'resolved' AND cause_kind <> 'manual' DO UPDATE SET
         alert_count = incidents.alert_count + CASE
           WHEN NOT ($8::text = ANY(incidents.alert_types)) OR incidents.last_alert_at < now() - interval '${ALERT_REPEAT}' THEN 1 ELSE 0 END,
         alert_types = CASE WHEN $8::text = ANY(incidents.alert_types) THEN incidents.alert_types ELSE incidents.alert_types || $8::text END,
         last_alert_at = CASE WHEN NOT ($8::text = ANY(incidents.alert_types)) OR incidents.last_alert_at < now() - interval '${ALERT_REPEAT}'
           THEN now() ELSE incidents.last_alert_at END,
         updated_at = CASE WHEN NOT ($8::text = ANY(incidents.alert_types)) THEN now() ELSE incidents.updated_at END
       RETURNING *, (xmax = 0) AS opened`,
      [alert.projectId, alert.title, alert.description, alert.severity, alert.service, alert.cause, alert.causeId, alert.type, `alert ${alert.type}`],
    );
    const raised = incident(row);
    if (row.opened) this.announce(raised);
    return { incident: raised, opened: row.opened };
  }

  async get(scope: number | null, id: unknown): Promise<Incident> {
    if (typeof id !== 'string' || !UUID.test(id)) throw notFound(`incident "${String(id).slice(0, 40)}"`);
    const [row] = await rows<IncidentRow>(this.dataSource, 'SELECT * FROM incidents WHERE id = $1 AND ($2::int IS NULL OR project_id = $2)', [id, scope]);
    if (!row) throw notFound(`incident "${id}"`);
    return incident(row);
  }

  /** Newest first. */
  async list(
    scope: number | null,
    status: IncidentStatus | null | undefined,
    first: number | null | undefined,
    after: string | null | undefined,
  ): Promise<Page<Incident>> {
    const size = pageSize(first);
    const position = decodeCursor('incident', after, /^[1-9]\d{0,17}$/);
    const found = await rows<IncidentRow>(
      this.dataSource,
      `SELECT * FROM incidents WHERE ($1::int IS NULL OR project_id = $1) AND ($2::text IS NULL OR status = $2) AND ($3::bigint IS NULL OR number < $3)
       ORDER BY number DESC LIMIT $4`,
      [scope, status ?? null, position, size + 1],
    );
    const page = found.slice(0, size);
    return {
      nodes: page.map((row) => ({ node: incident(row), cursor: encodeCursor('incident', String(row.number)) })),
      hasNextPage: found.length > size,
      endCursor: page.length > 0 ? encodeCursor('incident', String(page[page.length - 1].number)) : null,
    };
  }

  /** triggered → acknowledged. */
  async acknowledge(scope: number | null, id: unknown, actor: string): Promise<Incident> {
    return this.move(scope, id, ['triggered'], 'acknowledged', `acknowledged_at = now(), acknowledged_by = $3`, actor);
  }

  /** triggered or acknowledged → resolved (final: a new alert opens a new incident). */
  async resolve(scope: number | null, id: unknown, actor: string): Promise<Incident> {
    return this.move(scope, id, ['triggered', 'acknowledged'], 'resolved', `resolved_at = now(), resolved_by = $3`, actor);
  }

  private async move(scope: number | null, id: unknown, from: IncidentStatus[], to: IncidentStatus, stamp: string, actor: string): Promise<Incident> {
    const current = await this.get(scope, id);
    const [row] = await rows<IncidentRow>(
      this.dataSource,
      `UPDATE incidents SET status = $2, ${stamp}, updated_at = now() WHERE id = $1 AND status = ANY($4::text[]) RETURNING *`,
      [current.id, to, actor, from],
    );
    if (!row) {
      const now = await this.get(scope, id);
      throw new Refusal('INVALID_TRANSITION', `incident ${now.id} is ${now.status}: it cannot become ${to}`, 409);
    }
    return this.announce(incident(row));
  }

  /** Assigns someone (or nobody, with a null assignee) to an open incident. */
  async assign(scope: number | null, id: unknown, assignee: { name?: unknown; email?: unknown } | null): Promise<Incident> {
    const current = await this.get(scope, id);
    if (current.status === 'resolved') throw new Refusal('INVALID_TRANSITION', `incident ${current.id} is resolved`, 409);
    const name = assignee ? requiredText(assignee.name, 'assignee.name', 200) : null;
    const email = assignee ? optionalText(assignee.email, 'assignee.email', 254) : null;
    if (email !== null && !EMAIL.test(email)) throw invalid('assignee.email', 'assignee.email must be an e-mail address');
    const [row] = await rows<IncidentRow>(
      this.dataSource,
      'UPDATE incidents SET assignee_name = $2, assignee_email = $3, updated_at = now() WHERE id = $1 RETURNING *',
      [current.id, name, email],
    );
    return this.announce(incident(row));
  }
}
