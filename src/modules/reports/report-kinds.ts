import { JOBS_SCHEMA } from '../../platform/job-queue';
import { ReportKind } from './reports.types';

/** A report's filter: the time range, and the owner whose items a non-admin may list. */
export interface ReportFilter {
  from: string | null;
  to: string | null;
  /** Null for an admin: every item. */
  ownerId: string | null;
}

export interface ReportKindDefinition {
  adminOnly: boolean;
  /** The columns, in order, as the rows name them. */
  columns: string[];
  /** FROM and WHERE of the report (parameters $1 from, $2 to, and $3 the owner unless adminOnly). */
  source: string;
  select: string;
  /** Keeps the order stable from run to run. */
  orderBy: string;
}

/**
 * Each kind over the areas as they exist (users, files, background jobs); a new area adds its
 * kind here. Time ranges apply to when the item was created: from inclusive, to exclusive.
 */
export const REPORT_KINDS: Record<ReportKind, ReportKindDefinition> = {
  [ReportKind.USERS]: {
    adminOnly: true,
    columns: ['id', 'email', 'name', 'company', 'email_verified', 'created_at'],
    select: 'id, email, name, company, email_verified, created_at',
    source: `users WHERE ($1::timestamptz IS NULL OR created_at >= $1) AND ($2::timestamptz IS NULL OR created_at < $2)`,
    orderBy: 'created_at, id',
  },
  [ReportKind.FILES]: {
    adminOnly: false,
    columns: ['id', 'owner_id', 'file_name', 'file_type', 'file_size', 'status', 'checksum_sha256', 'created_at', 'processed_at'],
    select: `id, owner_id, file_name, file_type, file_size::integer AS file_size, status, result->>'checksum_sha256' AS checksum_sha256, created_at, processed_at`,
    source: `files WHERE ($1::timestamptz IS NULL OR created_at >= $1) AND ($2::timestamptz IS NULL OR created_at < $2)
      AND ($3::text IS NULL OR owner_id = $3)`,
    orderBy: 'created_at, id',
  },
  [ReportKind.JOBS]: {
    adminOnly: true,
    columns: ['id', 'queue', 'state', 'retry_count', 'created_at', 'started_at', 'completed_at'],
    select: 'id, name AS queue, state, retry_count, created_on AS created_at, started_on AS started_at, completed_on AS completed_at',
    source: `${JOBS_SCHEMA}.job WHERE ($1::timestamptz IS NULL OR created_on >= $1) AND ($2::timestamptz IS NULL OR created_on < $2)`,
    orderBy: 'created_on, id',
  },
};

/** The statements' parameters: the owner only for the kinds that are listed per owner. */
export function reportParameters(kind: ReportKind, filter: ReportFilter): (string | null)[] {
  return REPORT_KINDS[kind].adminOnly ? [filter.from, filter.to] : [filter.from, filter.to, filter.ownerId];
}

/** The statement that streams the report's rows. */
export function rowsQuery(kind: ReportKind): string {
  const definition = REPORT_KINDS[kind];
  return `SELECT ${definition.select} FROM ${definition.source} ORDER BY ${definition.orderBy}`;
}

/** The statement that counts them (exactly, when a run starts, for its progress). */
export function countQuery(kind: ReportKind): string {
  return `SELECT count(*)::bigint AS count FROM ${REPORT_KINDS[kind].source}`;
}

/** The statement whose plan estimates the rows (EXPLAIN, never run). */
export function estimateQuery(kind: ReportKind): string {
  return `SELECT 1 FROM ${REPORT_KINDS[kind].source}`;
}
