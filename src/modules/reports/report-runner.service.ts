import Cursor from 'pg-cursor';
import { poolOf } from '../../db/sql';
import type { Logger } from 'pino';
import type { DataSource } from 'typeorm';
import type { ObjectStorage } from '../../platform/storage';
import { countQuery, REPORT_KINDS, rowsQuery } from './report-kinds';
import { type ReportRow, type ReportsService, resultKey } from './reports.service';
import { ReportFormat, ReportStatus } from './reports.types';

/** Rows fetched from the cursor at a time. */
const FETCH_ROWS = 1000;
/** Bytes of formatted rows handed to storage at a time. */
const WRITE_BYTES = 256 * 1024;
/** How often a run records its progress (and so notices a cancellation). */
export const PROGRESS_INTERVAL_MS = 500;

/** The job was cancelled while it ran: nothing is kept, and the queue job ends normally. */
class CancelledError extends Error {}

/**
 * The worker of generateReport. Rows come from a server-side cursor (pg-cursor, a thousand
 * at a time) and go to storage in 256 KiB pieces through a transaction of their own, so memory
 * stays flat whatever the report's size. Progress is recorded every half second; a cancellation
 * is noticed there. The result and the COMPLETED state commit together, and only if the job was
 * not cancelled meanwhile. A run interrupted by a crash leaves nothing behind (its transaction
 * rolls back) and the queue runs it again from the first row.
 */
export class ReportRunner {
  constructor(
    private readonly dataSource: DataSource,
    private readonly reports: ReportsService,
    private readonly storage: ObjectStorage,
    private readonly logger: Logger,
  ) {}

  async run(reportId: string, signal: AbortSignal): Promise<{ status: ReportStatus }> {
    const started = await this.reports.transition(reportId, [ReportStatus.QUEUED, ReportStatus.RUNNING], ReportStatus.RUNNING);
    if (!started) return { status: (await this.reports.row(reportId))?.status ?? ReportStatus.CANCELLED };
    try {
      return { status: await this.write(started, signal) };
    } catch (error) {
      if (error instanceof CancelledError) return { status: ReportStatus.CANCELLED };
      // The process is stopping or the job timed out: the queue decides what happens next.
      if (signal.aborted) throw error;
      this.logger.error({ err: error, reportId }, 'report failed');
      // The details (a database error's text) are for the log, not for the client.
      await this.reports.transition(reportId, [ReportStatus.RUNNING], ReportStatus.FAILED, {
        error: 'The report could not be written because of an internal error; ask for it again',
      });
      return { status: ReportStatus.FAILED };
    }
  }

  private async write(report: ReportRow, signal: AbortSignal): Promise<ReportStatus> {
    const { kind, format } = report.input;
    const counting = countQuery(kind, report.input);
    const [{ count }] = (await this.dataSource.query(counting.text, counting.parameters)) as { count: string }[];
    const total = Number(count);
    await this.progress(report.id, 0, total);

    const pool = poolOf(this.dataSource);
    const reader = await pool.connect();
    const writer = this.dataSource.createQueryRunner();
    let failed = false;
    try {
      await writer.connect();
      await writer.startTransaction();
      const reading = rowsQuery(kind, report.input);
      const rows = cursorRows(reader.query(new Cursor<Record<string, unknown>>(reading.text, reading.parameters)));
      const key = resultKey(report.id);
      let written = 0;
      const pieces = this.formatted(rows, format, REPORT_KINDS[kind].columns, signal, async (count) => {
        written = count;
        await this.progress(report.id, count, total);
      });
      const size = await this.storage.put(key, pieces, { transaction: writer.manager });
      const completed = await this.reports.transition(
        report.id,
        [ReportStatus.RUNNING],
        ReportStatus.COMPLETED,
        { storage_key: key, result_size: size, rows_written: written, total_rows: Math.max(total, written) },
        writer.manager,
      );
      if (!completed) throw new CancelledError();
      await writer.commitTransaction();
      this.reports.publish(completed);
      return ReportStatus.COMPLETED;
    } catch (error) {
      failed = true;
      if (writer.isTransactionActive) await writer.rollbackTransaction().catch(() => undefined);
      throw error;
    } finally {
      await writer.release();
      // A connection left mid-cursor (or with a failed one) is closed rather than reused.
      reader.release(failed);
    }
  }

  /** The rows as CSV or JSON text, in pieces of about WRITE_BYTES, reporting progress as it goes. */
  private async *formatted(
    rows: AsyncIterable<Record<string, unknown>>,
    format: ReportFormat,
    columns: string[],
    signal: AbortSignal,
    onProgress: (rows: number) => Promise<void>,
  ): AsyncGenerator<Buffer> {
    const csv = format === ReportFormat.CSV;
    let piece = csv ? `${columns.map(csvCell).join(',')}\r\n` : '[';
    let count = 0;
    let lastProgress = Date.now();
    for await (const row of rows) {
      if (csv) piece += `${columns.map((column) => csvCell(row[column])).join(',')}\r\n`;
      else piece += `${count === 0 ? '\n' : ',\n'}${JSON.stringify(jsonRow(row, columns))}`;
      count++;
      if (piece.length >= WRITE_BYTES) {
        yield Buffer.from(piece, 'utf8');
        piece = '';
      }
      if (Date.now() - lastProgress >= PROGRESS_INTERVAL_MS) {
        signal.throwIfAborted();
        await onProgress(count);
        lastProgress = Date.now();
      }
    }
    if (!csv) piece += count === 0 ? ']\n' : '\n]\n';
    yield Buffer.from(piece, 'utf8');
    signal.throwIfAborted();
    await onProgress(count);
  }

  /** Records progress; throws CancelledError when the job is no longer RUNNING. */
  private async progress(id: string, written: number, total: number): Promise<void> {
    const [rows] = (await this.dataSource.query(`UPDATE report_jobs SET rows_written = $2, total_rows = $3 WHERE id = $1 AND status = 'RUNNING' RETURNING *`, [
      id,
      written,
      Math.max(total, written),
    ])) as [ReportRow[], number];
    if (!rows[0]) throw new CancelledError();
    this.reports.publish(rows[0]);
  }
}

/**
 * The cursor's rows, FETCH_ROWS at a time. pg-cursor, not pg-query-stream: a stream whose query
 * fails before its first read never ends (its close waits for a ready-for-query already past),
 * where the cursor's read rejects. A cursor left early is closed; a failed one is left to the
 * connection, which the caller discards.
 */
async function* cursorRows(cursor: Cursor<Record<string, unknown>>): AsyncGenerator<Record<string, unknown>> {
  let open = true;
  try {
    for (;;) {
      let rows: Record<string, unknown>[];
      try {
        rows = await cursor.read(FETCH_ROWS);
      } catch (error) {
        open = false;
        throw error;
      }
      if (rows.length === 0) break;
      yield* rows;
    }
    open = false;
  } finally {
    if (open) await cursor.close().catch(() => undefined);
  }
}

/** A row as JSON: instants as ISO text (the kinds select no bigint, which pg would give as text). */
function jsonRow(row: Record<string, unknown>, columns: string[]): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const column of columns) {
    const value = row[column];
    out[column] = value instanceof Date ? value.toISOString() : (value ?? null);
  }
  return out;
}

/**
 * One CSV cell (RFC 4180). Text starting with = + - @ or a tab or carriage return gets a leading
 * apostrophe, so a spreadsheet does not run it as a formula (OWASP's CSV injection advice).
 */
export function csvCell(value: unknown): string {
  if (value === null || value === undefined) return '';
  let text = value instanceof Date ? value.toISOString() : String(value);
  if (typeof value === 'string' && /^[=+\-@\t\r]/.test(text)) text = `'${text}`;
  return /[",\r\n]/.test(text) ? `"${text.replace(/"/g, '""')}"` : text;
}
