import type { DataSource } from 'typeorm';
import { decodeCursor, encodeCursor, type Page } from '../../common/cursors';
import { pageSize } from './errors.service';
import { Refusal } from '../../common/refusal';
import { invalid, notFound, requiredText, serviceName } from './problems';
import { rows } from '../../db/sql';
import { UUID } from '../../common/ids';

export type SloStatus = 'ON_TRACK' | 'AT_RISK' | 'BREACHED';

/** Google SRE workbook, multiwindow multi-burn-rate alerts: (long window, short window, burn rate). */
export const BURN_RATE_ALERTS = [
  { name: 'fast-burn', longMinutes: 60, shortMinutes: 5, burnRate: 14.4 },
  { name: 'slow-burn', longMinutes: 360, shortMinutes: 30, burnRate: 6 },
] as const;
export type BurnRateAlert = (typeof BURN_RATE_ALERTS)[number]['name'];

export interface Slo {
  id: string;
  projectId: number;
  name: string;
  service: string;
  targetPercentage: number;
  windowDays: number;
  errorBudgetAlertThreshold: number;
  updatedAt: Date;
}

/** Good and bad events of an SLO's service, over the windows its figures need. */
export interface SloCounts {
  total: number;
  bad: number;
  /** By window length in minutes: 5, 30, 60, 360. */
  recent: Record<number, { total: number; bad: number }>;
}

export interface SloFigures {
  totalEvents: number;
  badEvents: number;
  currentBurnRate: number;
  errorBudgetRemaining: number;
  alerts: BurnRateAlert[];
  status: SloStatus;
}

/** How fast the error budget is spent: the bad ratio over what the target allows (1 = exactly on budget). */
export function burnRate(bad: number, total: number, targetPercentage: number): number {
  if (total === 0) return 0;
  return bad / total / (1 - targetPercentage / 100);
}

/**
 * The spec's figures: `errorBudgetRemaining = 1 − (bad/total)/(1 − target)` over the window,
 * `currentBurnRate` the same ratio over the last hour, the burn-rate alerts firing when both of
 * their windows burn at their rate, and the status: BREACHED once the budget is spent, AT_RISK
 * while an alert fires or less than the threshold of the budget remains, ON_TRACK otherwise.
 */
export function sloFigures(slo: Pick<Slo, 'targetPercentage' | 'errorBudgetAlertThreshold'>, counts: SloCounts): SloFigures {
  const target = slo.targetPercentage;
  const remaining = 1 - burnRate(counts.bad, counts.total, target);
  const over = (minutes: number) => burnRate(counts.recent[minutes].bad, counts.recent[minutes].total, target);
  const alerts = BURN_RATE_ALERTS.filter((alert) => over(alert.longMinutes) >= alert.burnRate && over(alert.shortMinutes) >= alert.burnRate).map(
    (alert) => alert.name,
  );
  const status: SloStatus = remaining <= 0 ? 'BREACHED' : alerts.length > 0 || remaining < slo.errorBudgetAlertThreshold ? 'AT_RISK' : 'ON_TRACK';
  return { totalEvents: counts.total, badEvents: counts.bad, currentBurnRate: over(60), errorBudgetRemaining: remaining, alerts, status };
}

interface SloRow {
  id: string;
  number: string;
  project_id: number;
  name: string;
  service: string;
  target_percentage: number;
  window_days: number;
  error_budget_alert_threshold: number;
  updated_at: Date;
}

const slo = (row: SloRow): Slo => ({
  id: row.id,
  projectId: row.project_id,
  name: row.name,
  service: row.service,
  targetPercentage: row.target_percentage,
  windowDays: row.window_days,
  errorBudgetAlertThreshold: row.error_budget_alert_threshold,
  updatedAt: row.updated_at,
});

export function targetPercentage(value: unknown): number {
  if (typeof value !== 'number' || !Number.isFinite(value) || value <= 0 || value >= 100) {
    throw invalid('targetPercentage', 'targetPercentage must be a number above 0 and below 100, such as 99.9');
  }
  return value;
}

export function alertThreshold(value: unknown): number {
  if (typeof value !== 'number' || !Number.isFinite(value) || value < 0 || value > 1) {
    throw invalid('errorBudgetAlertThreshold', 'errorBudgetAlertThreshold must be a fraction of the budget from 0 to 1, such as 0.25');
  }
  return value;
}

export interface CreateSloInput {
  project?: unknown;
  name?: unknown;
  service?: unknown;
  targetPercentage?: unknown;
  windowDays?: unknown;
  errorBudgetAlertThreshold?: unknown;
}

/** SLOs over the good and bad events of a service (request_outcomes: what Plinth serves, and what services report). */
export class SlosService {
  constructor(
    private readonly dataSource: DataSource,
    private readonly projectService: (projectId: number) => Promise<string>,
  ) {}

  async create(projectId: number, input: CreateSloInput): Promise<Slo> {
    const name = requiredText(input.name, 'name', 200);
    const service = input.service === undefined || input.service === null ? await this.projectService(projectId) : serviceName(input.service);
    const target = targetPercentage(input.targetPercentage);
    const windowDays = input.windowDays ?? 30;
    if (typeof windowDays !== 'number' || !Number.isInteger(windowDays) || windowDays < 1 || windowDays > 90) {
      throw invalid('windowDays', 'windowDays must be a whole number of days from 1 to 90');
    }
    const threshold = alertThreshold(input.errorBudgetAlertThreshold ?? 0.25);
    const [row] = await rows<SloRow>(
      this.dataSource,
      `INSERT INTO slos (project_id, name, service, target_percentage, window_days, error_budget_alert_threshold)
       VALUES ($1, $2, $3, $4, $5, $6) RETURNING *`,
      [projectId, name, service, target, windowDays, threshold],
    );
    return slo(row);
  }

  async get(scope: number | null, id: unknown): Promise<Slo> {
    if (typeof id !== 'string' || !UUID.test(id)) throw notFound(`SLO "${String(id).slice(0, 40)}"`);
    const [row] = await rows<SloRow>(this.dataSource, 'SELECT * FROM slos WHERE id = $1 AND ($2::int IS NULL OR project_id = $2)', [id, scope]);
    if (!row) throw notFound(`SLO "${id}"`);
    return slo(row);
  }

  /** Changes the target or the alert threshold (PATCH /api/slos/{id}); at least one, each in its range. */
  async update(scope: number | null, id: unknown, changes: { targetPercentage?: unknown; errorBudgetAlertThreshold?: unknown; name?: unknown }): Promise<Slo> {
    const current = await this.get(scope, id);
    const given = (key: keyof typeof changes) => changes[key] !== undefined && changes[key] !== null;
    if (!given('targetPercentage') && !given('errorBudgetAlertThreshold') && !given('name')) {
      throw new Refusal('VALIDATION_ERROR', 'nothing to change: give targetPercentage, errorBudgetAlertThreshold or name', 400);
    }
    const [row] = await rows<SloRow>(
      this.dataSource,
      `UPDATE slos SET target_percentage = $2, error_budget_alert_threshold = $3, name = $4, updated_at = now() WHERE id = $1 RETURNING *`,
      [
        current.id,
        given('targetPercentage') ? targetPercentage(changes.targetPercentage) : current.targetPercentage,
        given('errorBudgetAlertThreshold') ? alertThreshold(changes.errorBudgetAlertThreshold) : current.errorBudgetAlertThreshold,
        given('name') ? requiredText(changes.name, 'name', 200) : current.name,
      ],
    );
    return slo(row);
  }

  async delete(scope: number | null, id: unknown): Promise<Slo> {
    const current = await this.get(scope, id);
    await this.dataSource.query('DELETE FROM slos WHERE id = $1', [current.id]);
    return current;
  }

  /** SLOs in creation order. */
  async list(scope: number | null, first: number | null | undefined, after: string | null | undefined, service?: string | null): Promise<Page<Slo>> {
    const size = pageSize(first);
    const position = decodeCursor('slo', after, /^[1-9]\d{0,17}$/);
    const found = await rows<SloRow>(
      this.dataSource,
      `SELECT * FROM slos WHERE ($1::int IS NULL OR project_id = $1) AND ($2::text IS NULL OR service = $2) AND ($3::bigint IS NULL OR number > $3)
       ORDER BY number LIMIT $4`,
      [scope, service ?? null, position, size + 1],
    );
    const page = found.slice(0, size);
    return {
      nodes: page.map((row) => ({ node: slo(row), cursor: encodeCursor('slo', String(row.number)) })),
      hasNextPage: found.length > size,
      endCursor: page.length > 0 ? encodeCursor('slo', String(page[page.length - 1].number)) : null,
    };
  }

  /** Every SLO (the alert check). */
  async all(): Promise<Slo[]> {
    return (await rows<SloRow>(this.dataSource, 'SELECT * FROM slos ORDER BY number')).map(slo);
  }

  /** The counts behind the figures of several SLOs, in one query. */
  async countsOf(ids: readonly string[]): Promise<Map<string, SloCounts>> {
    const found = await rows<Record<string, string>>(
      this.dataSource,
      `SELECT s.id,
         COALESCE(sum(o.good + o.bad), 0) AS total, COALESCE(sum(o.bad), 0) AS bad,
         COALESCE(sum(o.good + o.bad) FILTER (WHERE o.minute > now() - interval '5 minutes'), 0) AS total_5,
         COALESCE(sum(o.bad) FILTER (WHERE o.minute > now() - interval '5 minutes'), 0) AS bad_5,
         COALESCE(sum(o.good + o.bad) FILTER (WHERE o.minute > now() - interval '30 minutes'), 0) AS total_30,
         COALESCE(sum(o.bad) FILTER (WHERE o.minute > now() - interval '30 minutes'), 0) AS bad_30,
         COALESCE(sum(o.good + o.bad) FILTER (WHERE o.minute > now() - interval '60 minutes'), 0) AS total_60,
         COALESCE(sum(o.bad) FILTER (WHERE o.minute > now() - interval '60 minutes'), 0) AS bad_60,
         COALESCE(sum(o.good + o.bad) FILTER (WHERE o.minute > now() - interval '360 minutes'), 0) AS total_360,
         COALESCE(sum(o.bad) FILTER (WHERE o.minute > now() - interval '360 minutes'), 0) AS bad_360
       FROM slos s
       LEFT JOIN request_outcomes o ON o.service = s.service AND o.minute > now() - make_interval(days => s.window_days)
       WHERE s.id = ANY($1::uuid[])
       GROUP BY s.id`,
      [ids],
    );
    return new Map(
      found.map((row) => [
        row.id,
        {
          total: Number(row.total),
          bad: Number(row.bad),
          recent: Object.fromEntries(
            [5, 30, 60, 360].map((minutes) => [minutes, { total: Number(row[`total_${minutes}`]), bad: Number(row[`bad_${minutes}`]) }]),
          ),
        },
      ]),
    );
  }

  async figuresOf(slos: Slo[]): Promise<Map<string, SloFigures>> {
    const counts = await this.countsOf(slos.map((s) => s.id));
    return new Map(slos.map((s) => [s.id, sloFigures(s, counts.get(s.id)!)]));
  }

  /**
   * Good and bad events a service reports itself (`POST /api/slos/outcomes`), added to the
   * current minute and committed before the call is answered.
   */
  async report(service: string, good: number, bad: number): Promise<void> {
    await this.dataSource.query(
      `INSERT INTO request_outcomes (service, minute, good, bad) VALUES ($1, date_trunc('minute', now()), $2, $3)
       ON CONFLICT (service, minute) DO UPDATE SET good = request_outcomes.good + EXCLUDED.good, bad = request_outcomes.bad + EXCLUDED.bad`,
      [service, good, bad],
    );
  }

  /** The services a project's key may report for: its own and those of its SLOs. */
  async servicesOf(projectId: number): Promise<Set<string>> {
    const found = await rows<{ service: string }>(
      this.dataSource,
      'SELECT service FROM error_projects WHERE id = $1 UNION SELECT service FROM slos WHERE project_id = $1',
      [projectId],
    );
    return new Set(found.map((row) => row.service));
  }
}
