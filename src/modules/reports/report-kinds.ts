import { JOBS_SCHEMA } from '../../platform/job-queue';
import { scopeSql, USERS_TABLE, type OwnedTable, type RowScope } from '../../platform/row-filter';
import { ReportKind } from './reports.types';

/** A report's filter: the time range, and the rows of user-owned tables its requester may see. */
export interface ReportFilter {
  from: string | null;
  to: string | null;
  /** The row filter of the requester's session (spec 2 §2.3), taken when the report was asked for. */
  scope: RowScope;
}

export interface ReportKindDefinition {
  adminOnly: boolean;
  /** The columns, in order, as the rows name them. */
  columns: string[];
  /** FROM and WHERE of the report (parameters $1 from, $2 to). */
  source: string;
  /** For a table of user-owned rows: the rows are those the requester's row filter lets through ($3). */
  owned?: OwnedTable;
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
    owned: USERS_TABLE,
    orderBy: 'created_at, id',
  },
  [ReportKind.FILES]: {
    adminOnly: false,
    columns: ['id', 'owner_id', 'file_name', 'file_type', 'file_size', 'status', 'checksum_sha256', 'created_at', 'processed_at'],
    select: `id, owner_id, file_name, file_type, file_size::integer AS file_size, status, result->>'checksum_sha256' AS checksum_sha256, created_at, processed_at`,
    source: `files WHERE ($1::timestamptz IS NULL OR created_at >= $1) AND ($2::timestamptz IS NULL OR created_at < $2)`,
    // The files module's table, user-owned by owner_id.
    owned: { owner: 'owner_id' },
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

/** FROM and WHERE of a report's statements, with their parameters. */
export function reportSource(kind: ReportKind, filter: ReportFilter): { source: string; parameters: (string | null)[] } {
  const definition = REPORT_KINDS[kind];
  if (!definition.owned) return { source: definition.source, parameters: [filter.from, filter.to] };
  const table = definition.source.split(' ', 1)[0];
  const rows = scopeSql(filter.scope, table, 3);
  return { source: `${definition.source} AND ${rows.clause}`, parameters: [filter.from, filter.to, ...rows.parameters] };
}

/** The statement that streams the report's rows. */
export function rowsQuery(kind: ReportKind, filter: ReportFilter): { text: string; parameters: (string | null)[] } {
  const { source, parameters } = reportSource(kind, filter);
  return { text: `SELECT ${REPORT_KINDS[kind].select} FROM ${source} ORDER BY ${REPORT_KINDS[kind].orderBy}`, parameters };
}

/** The statement that counts them (exactly, when a run starts, for its progress). */
export function countQuery(kind: ReportKind, filter: ReportFilter): { text: string; parameters: (string | null)[] } {
  const { source, parameters } = reportSource(kind, filter);
  return { text: `SELECT count(*)::bigint AS count FROM ${source}`, parameters };
}

/** The statement whose plan estimates the rows (EXPLAIN, never run). */
export function estimateQuery(kind: ReportKind, filter: ReportFilter): { text: string; parameters: (string | null)[] } {
  const { source, parameters } = reportSource(kind, filter);
  return { text: `SELECT 1 FROM ${source}`, parameters };
}
