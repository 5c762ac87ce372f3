import type { Logger } from 'pino';
import type { DataSource } from 'typeorm';
import type { FieldError } from '../../common/field-error.types';
import { Refusal } from '../../common/refusal';
import type { EventPublisher } from '../../platform/pubsub';
import { ADMIN_ROLE } from '../../common/roles';
import { type Session } from '../../platform/session';
import { JOBS_SCHEMA } from '../../platform/job-queue';
import type { JobSender } from '../../platform/jobs';
import type { SignedQuery, UrlSigner } from '../../platform/signed-urls';
import type { ContentAnswer, ObjectStorage } from '../../platform/storage';
import { rowFilterSql, rowScope, sessionSourceAccount, type OwnedTable, type RowScope } from '../../platform/row-filter';
import { estimateQuery, REPORT_KINDS } from './report-kinds';
import { type GenerateReportOutput, ReportFormat, type ReportJob, ReportKind, ReportStatus } from './reports.types';
import { UUID } from '../../common/ids';

export const REPORT_JOB_UPDATED = 'REPORT_JOB_UPDATED';
export const REPORT_QUEUE = 'report-generation';
/**
 * Rows a report writes per second, for estimated_duration: what `npm run bench:report` measures
 * (docs/decisions.md, "generateReport: the estimate").
 */
export const ROWS_PER_SECOND = 40_000;

export interface ReportsSettings {
  urlTtlSeconds: number;
}

/** What report_jobs.input keeps. */
export interface StoredReportInput {
  kind: ReportKind;
  format: ReportFormat;
  from: string | null;
  to: string | null;
  /** The requester's row filter on the report's table (spec 2 §2.3). */
  scope: RowScope;
}

/** Report jobs are user-owned rows: their requester's, and its source account's admins'. */
export const REPORT_JOBS_TABLE: OwnedTable = { owner: 'requested_by' };

export interface ReportRow {
  id: string;
  requested_by: string | null;
  source_account_id: string;
  input: StoredReportInput;
  status: ReportStatus;
  queue_job_id: string | null;
  estimated_rows: string;
  estimated_duration: number;
  total_rows: string | null;
  rows_written: string;
  attempts: number;
  storage_key: string | null;
  result_size: string | null;
  error: string | null;
  created_at: Date;
  started_at: Date | null;
  finished_at: Date | null;
}

const ACTIVE: readonly ReportStatus[] = [ReportStatus.QUEUED, ReportStatus.RUNNING];

export function resultPath(jobId: string): string {
  return `/reports/${jobId}/result`;
}

export function resultKey(jobId: string): string {
  return `reports/${jobId}/result`;
}

/**
 * generateReport and its job's life as clients see it: the request (validated, estimated,
 * queued), reportJob, cancelReportJob and the result's link. The worker is ReportRunner.
 */
export class ReportsService {
  constructor(
    private readonly dataSource: DataSource,
    private readonly storage: ObjectStorage,
    private readonly jobs: JobSender,
    private readonly events: EventPublisher,
    private readonly signer: UrlSigner,
    private readonly settings: ReportsSettings,
    private readonly logger: Logger,
  ) {}

  async generate(raw: unknown, session: Session): Promise<GenerateReportOutput> {
    if (!session.authenticated) return { success: false, message: 'Sign in to ask for reports', error_code: 'UNAUTHENTICATED' };
    const checked = validate(raw);
    if ('errors' in checked) return { success: false, message: 'Validation failed', errors: checked.errors, error_code: 'VALIDATION_ERROR' };
    const isAdmin = session.role === ADMIN_ROLE;
    if (REPORT_KINDS[checked.kind].adminOnly && !isAdmin) {
      return {
        success: false,
        message: `Only admins may ask for ${checked.kind} reports`,
        errors: [{ field: 'kind', message: `${checked.kind} reports are for admins only`, code: 'FORBIDDEN' }],
        error_code: 'FORBIDDEN',
      };
    }
    const owned = REPORT_KINDS[checked.kind].owned;
    const input: StoredReportInput = { ...checked, scope: owned ? rowScope(session, owned) : { kind: 'all' } };
    try {
      const estimatedRows = await this.estimateRows(input);
      const estimatedDuration = Math.max(1, Math.ceil(estimatedRows / ROWS_PER_SECOND));
      const id = await this.dataSource.transaction(async (manager) => {
        const [row] = (await manager.query(
          `INSERT INTO report_jobs (requested_by, input, estimated_rows, estimated_duration, source_account_id) VALUES ($1, $2, $3, $4, $5) RETURNING id`,
          [session.userId, JSON.stringify(input), estimatedRows, estimatedDuration, sessionSourceAccount(session)],
        )) as { id: string }[];
        const queueJobId = await this.jobs.send(REPORT_QUEUE, { reportId: row.id }, { transaction: manager });
        await manager.query('UPDATE report_jobs SET queue_job_id = $2 WHERE id = $1', [row.id, queueJobId]);
        return row.id;
      });
      return {
        success: true,
        message: 'The report is queued',
        job_id: id,
        status: ReportStatus.QUEUED,
        estimated_duration: estimatedDuration,
        errors: null,
      };
    } catch (error) {
      this.logger.error({ err: error }, 'generateReport failed unexpectedly');
      return {
        success: false,
        message: 'The report could not be queued; please try again',
        errors: [{ field: 'general', message: 'The request failed unexpectedly', code: 'INTERNAL_ERROR' }],
        error_code: 'INTERNAL_ERROR',
      };
    }
  }

  /** The job for the user who asked for it or an admin; null otherwise. */
  async reportJob(id: string, session: Session): Promise<ReportJob | null> {
    const row = await this.visibleRow(id, session);
    return row ? this.toView(await this.reconciled(row)) : null;
  }

  /** Cancels a QUEUED or RUNNING job: a running worker notices within a second and keeps nothing. */
  async cancel(id: string, session: Session): Promise<ReportJob> {
    const row = await this.visibleRow(id, session);
    if (!row) throw new Refusal('NOT_FOUND', `No report job ${id}`, 404);
    const cancelled = await this.transition(id, ACTIVE, ReportStatus.CANCELLED, { error: null });
    if (cancelled) return this.toView(cancelled);
    const current = (await this.row(id))!;
    throw new Refusal('BAD_REQUEST', `The report job is ${current.status}; only QUEUED or RUNNING jobs can be cancelled`, 400);
  }

  /** The result for the result route: with a signed link, or the session of the requester or an admin. */
  async result(id: string, query: SignedQuery, session: Session | undefined): Promise<ContentAnswer> {
    const problem = this.signer.problem(resultPath(id), query);
    if (problem === 'expired') return { found: false, status: 403, code: 'LINK_EXPIRED', message: 'This link has expired; ask for a new one' };
    if (problem === 'invalid') return { found: false, status: 403, code: 'INVALID_SIGNATURE', message: 'This link is not valid' };
    let row: ReportRow | null;
    if (problem === undefined) row = UUID.test(id) ? await this.row(id) : null;
    else if (!session || !session.authenticated) return { found: false, status: 401, code: 'UNAUTHENTICATED', message: 'A signed link or a session is needed' };
    else row = await this.visibleRow(id, session);
    const notFound = { found: false, status: 404, code: 'NOT_FOUND', message: `No result for report job ${id}` } as const;
    if (!row || row.status !== ReportStatus.COMPLETED || !row.storage_key) return notFound;
    const object = await this.storage.open(row.storage_key);
    if (!object) return notFound;
    const csv = row.input.format === ReportFormat.CSV;
    return {
      found: true,
      stream: object.stream,
      size: object.size,
      contentType: csv ? 'text/csv; charset=utf-8' : 'application/json; charset=utf-8',
      fileName: `${row.input.kind.toLowerCase()}-report-${row.id}.${csv ? 'csv' : 'json'}`,
      inline: false,
    };
  }

  async row(id: string): Promise<ReportRow | null> {
    const [row] = (await this.dataSource.query('SELECT * FROM report_jobs WHERE id = $1', [id])) as ReportRow[];
    return row ?? null;
  }

  /**
   * Moves the job from one of `from` to `to` (with the other columns given), publishes the new
   * state, and returns it; null when the job was in none of `from` (the database decides races
   * between a worker and a cancellation).
   */
  async transition(
    id: string,
    from: readonly ReportStatus[],
    to: ReportStatus,
    columns: Partial<Record<'error' | 'total_rows' | 'storage_key' | 'result_size' | 'rows_written', unknown>> = {},
    manager: Pick<DataSource, 'query'> = this.dataSource,
  ): Promise<ReportRow | null> {
    const names = Object.keys(columns);
    const assignments = names.map((name, index) => `${name} = $${index + 4}`);
    const timing =
      to === ReportStatus.RUNNING
        ? ', started_at = now(), finished_at = NULL, attempts = attempts + 1, rows_written = 0, total_rows = NULL'
        : to === ReportStatus.QUEUED
          ? ''
          : ', finished_at = now()';
    const [rows] = (await manager.query(
      `UPDATE report_jobs SET status = $2${assignments.map((assignment) => `, ${assignment}`).join('')}${timing}
       WHERE id = $1 AND status = ANY($3::report_status[]) RETURNING *`,
      [id, to, from, ...names.map((name) => columns[name as keyof typeof columns])],
    )) as [ReportRow[], number];
    const row = rows[0] ?? null;
    // Published by the caller once its transaction commits, when it passed one.
    if (row && manager === this.dataSource) this.publish(row);
    return row;
  }

  publish(row: ReportRow): void {
    this.events.publish(`${REPORT_JOB_UPDATED}:${row.id}`, this.toView(row));
  }

  toView(row: ReportRow): ReportJob {
    const total = row.total_rows === null ? null : Number(row.total_rows);
    const written = Number(row.rows_written);
    const completed = row.status === ReportStatus.COMPLETED;
    return {
      job_id: row.id,
      kind: row.input.kind,
      format: row.input.format,
      from: row.input.from,
      to: row.input.to,
      status: row.status,
      progress: completed ? 1 : total ? Math.min(1, written / total) : 0,
      rows_written: written,
      total_rows: total,
      estimated_duration: row.estimated_duration,
      result_url: completed ? this.signer.sign(resultPath(row.id), this.settings.urlTtlSeconds).url : null,
      result_size: row.result_size === null ? null : Number(row.result_size),
      error: row.error,
      requested_by: row.requested_by,
      source_account_id: row.source_account_id,
      created_at: row.created_at,
      started_at: row.started_at,
      finished_at: row.finished_at,
    };
  }

  /**
   * A job whose worker crashed on its last attempt is failed by the queue, which cannot tell
   * this table: the first read after that records it.
   */
  private async reconciled(row: ReportRow): Promise<ReportRow> {
    if (!ACTIVE.includes(row.status) || !row.queue_job_id) return row;
    const [job] = (await this.dataSource.query(`SELECT state FROM ${JOBS_SCHEMA}.job WHERE id = $1`, [row.queue_job_id])) as {
      state: string;
    }[];
    if (job?.state !== 'failed') return row;
    const failed = await this.transition(row.id, ACTIVE, ReportStatus.FAILED, {
      error: 'The report stopped with its worker too many times (a crash or a timeout); ask for it again',
    });
    return failed ?? row;
  }

  private async visibleRow(id: string, session: Session): Promise<ReportRow | null> {
    if (!UUID.test(id)) return null;
    const filter = rowFilterSql(session, REPORT_JOBS_TABLE, 'report_jobs', 2);
    const [row] = (await this.dataSource.query(`SELECT * FROM report_jobs WHERE id = $1 AND ${filter.clause}`, [id, ...filter.parameters])) as ReportRow[];
    return row ?? null;
  }

  /** The planner's row estimate for the report's filter: instant, whatever the table's size. */
  private async estimateRows(input: StoredReportInput): Promise<number> {
    const estimate = estimateQuery(input.kind, input);
    const [plan] = (await this.dataSource.query(`EXPLAIN (FORMAT JSON) ${estimate.text}`, estimate.parameters)) as {
      'QUERY PLAN': { Plan: { 'Plan Rows': number } }[];
    }[];
    return Math.round(plan['QUERY PLAN'][0].Plan['Plan Rows']);
  }
}

function validate(raw: unknown): Omit<StoredReportInput, 'scope'> | { errors: FieldError[] } {
  const source = (raw !== null && typeof raw === 'object' ? raw : {}) as Record<string, unknown>;
  const errors: FieldError[] = [];
  const kinds = Object.values(ReportKind) as string[];
  const formats = Object.values(ReportFormat) as string[];
  const kind = source.kind;
  if (kind === undefined || kind === null || kind === '') errors.push({ field: 'kind', message: 'kind is required', code: 'REQUIRED_FIELD' });
  else if (typeof kind !== 'string' || !kinds.includes(kind)) {
    errors.push({ field: 'kind', message: `kind must be one of ${kinds.join(', ')}`, code: 'INVALID_FORMAT' });
  }
  const format = source.format ?? ReportFormat.CSV;
  if (typeof format !== 'string' || !formats.includes(format)) {
    errors.push({ field: 'format', message: `format must be one of ${formats.join(', ')}`, code: 'INVALID_FORMAT' });
  }
  const instant = (field: 'from' | 'to'): string | null => {
    const value = source[field];
    if (value === undefined || value === null) return null;
    const date = value instanceof Date ? value : typeof value === 'string' && /^\d{4}-\d\d-\d\dT/.test(value) ? new Date(value) : null;
    if (!date || Number.isNaN(date.getTime()) || date.getUTCFullYear() < 1 || date.getUTCFullYear() > 9999) {
      errors.push({ field, message: `${field} must be a date-time such as 2025-01-31T00:00:00Z`, code: 'INVALID_FORMAT' });
      return null;
    }
    return date.toISOString();
  };
  const from = instant('from');
  const to = instant('to');
  if (from && to && from >= to) errors.push({ field: 'to', message: 'to must be after from', code: 'INVALID_FORMAT' });
  if (errors.length > 0) return { errors };
  return { kind: kind as ReportKind, format: format as ReportFormat, from, to };
}
