import { randomUUID } from 'node:crypto';
import type { Logger } from 'pino';
import type { DataSource } from 'typeorm';
import type { FieldError } from '../../common/field-error.types';
import { isUnstorableText, UNSTORABLE_TEXT_MESSAGE } from '../../common/text';
import type { EventPublisher } from '../../platform/pubsub';
import type { Session } from '../../platform/session';
import { rowFilterSql, sessionSourceAccount, type OwnedTable } from '../../platform/row-filter';
import type { JobSender } from '../../platform/jobs';
import type { SignatureProblem, SignedQuery, UrlSigner } from '../../platform/signed-urls';
import type { ContentAnswer, ObjectStorage } from '../../platform/storage';
import { type DataParseResult, type FileInfo, FileProcessingStatus, type FileUploadOutput, MAX_ERRORS, THUMBNAIL_SIZE } from './files.types';
import { UUID } from '../../common/ids';

/** Published with the file's FileInfo (without links) on the file's topic at each status change. */
export const FILE_PROCESSING_UPDATED = 'FILE_PROCESSING_UPDATED';
export const FILE_PROCESSING_QUEUE = 'file-processing';

export interface FilesSettings {
  maxBytes: number;
  allowedTypes: string[];
  urlTtlSeconds: number;
}

/** ProcessingOptions with every default applied, as kept with the file. */
export interface ResolvedProcessingOptions {
  generate_thumbnail: boolean;
  thumbnail_size: number;
  parse_data: boolean;
  csv_delimiter: string;
  csv_header: boolean;
  max_errors: number;
}

/** What processing found, as kept in files.result. */
export interface ProcessingResult {
  checksum_sha256: string;
  image?: { width: number; height: number; format: string; thumbnail?: { width: number; height: number } };
  data?: DataParseResult;
}

export interface FileRow {
  id: string;
  owner_id: string | null;
  source_account_id: string;
  file_name: string;
  file_type: string;
  file_size: string;
  storage_key: string;
  options: ResolvedProcessingOptions;
  status: FileProcessingStatus;
  processing_job_id: string | null;
  result: ProcessingResult | null;
  error: string | null;
  created_at: Date;
  processed_at: Date | null;
}

export type FileVariant = 'content' | 'thumbnail';

/** A character outside base64's standard alphabet (padding aside): one class, no repetition, so no backtracking. */
const OUTSIDE_BASE64_ALPHABET = /[^A-Za-z0-9+/]/;
/** Raster images are shown in place; everything else downloads (nosniff and a sandbox CSP besides). */
const INLINE_TYPES = new Set(['image/png', 'image/jpeg', 'image/gif', 'image/webp']);
const MAX_FILE_NAME = 255;

/** Files are user-owned rows (spec 2 §2.3): their owner's, and its source account's admins'. */
export const FILES_TABLE: OwnedTable = { owner: 'owner_id' };

export function storageKeyOf(fileId: string, variant: FileVariant): string {
  return `files/${fileId}/${variant}`;
}

export function contentPath(fileId: string, variant: FileVariant): string {
  return `/files/${fileId}/${variant}`;
}

/**
 * uploadAndProcessFile and what follows: validation (per field, storing nothing on failure),
 * storage, the processing job, the file's view for its owner and admins, and its links.
 */
export class FilesService {
  constructor(
    private readonly dataSource: DataSource,
    private readonly storage: ObjectStorage,
    private readonly jobs: JobSender,
    private readonly events: EventPublisher,
    private readonly signer: UrlSigner,
    private readonly settings: FilesSettings,
    private readonly logger: Logger,
  ) {}

  async upload(raw: unknown, session: Session): Promise<FileUploadOutput> {
    if (!session.authenticated) {
      return { success: false, message: 'Sign in to upload files', error_code: 'UNAUTHENTICATED', errors: null };
    }
    const checked = this.validate(raw);
    if ('errors' in checked) {
      return { success: false, message: 'Validation failed', errors: checked.errors, error_code: 'VALIDATION_ERROR' };
    }
    const { input, content, options } = checked;
    const queryRunner = this.dataSource.createQueryRunner();
    let stored: string | undefined;
    try {
      await queryRunner.connect();
      await queryRunner.startTransaction();
      const manager = queryRunner.manager;
      const id = randomUUID();
      const key = storageKeyOf(id, 'content');
      await this.storage.put(key, content, { transaction: manager });
      stored = key;
      // Sent in the same transaction: the job exists exactly when the file does.
      const jobId = await this.jobs.send(FILE_PROCESSING_QUEUE, { fileId: id }, { transaction: manager });
      await manager.query(
        `INSERT INTO files (id, owner_id, file_name, file_type, file_size, storage_key, options, processing_job_id, source_account_id)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)`,
        [id, session.userId, input.file_name, input.file_type, content.length, key, JSON.stringify(options), jobId, sessionSourceAccount(session)],
      );
      await queryRunner.commitTransaction();
      return {
        success: true,
        message: 'File uploaded; processing is queued',
        file_id: id,
        file_url: this.signer.sign(contentPath(id, 'content'), this.settings.urlTtlSeconds).url,
        processing_job_id: jobId,
        errors: null,
      };
    } catch (error) {
      if (queryRunner.isTransactionActive) await queryRunner.rollbackTransaction().catch(() => undefined);
      // The local driver wrote outside the transaction.
      if (stored && this.storage.driver === 'local') await this.storage.delete([stored]).catch(() => undefined);
      this.logger.error({ err: error }, 'uploadAndProcessFile failed unexpectedly');
      return {
        success: false,
        message: 'The file could not be stored; please try again',
        errors: [{ field: 'general', message: 'The upload failed unexpectedly', code: 'INTERNAL_ERROR' }],
        error_code: 'INTERNAL_ERROR',
      };
    } finally {
      await queryRunner.release();
    }
  }

  /** The file for its owner or an admin; null when there is none or the caller may not see it. */
  async file(id: string, session: Session): Promise<FileInfo | null> {
    const row = await this.visibleRow(id, session);
    return row ? this.toInfo(row) : null;
  }

  /** The same check for subscribing: true when the caller may follow the file. */
  async canSee(id: string, session: Session): Promise<boolean> {
    return (await this.visibleRow(id, session)) !== null;
  }

  /**
   * The content of the content route: with a signed link (`query`), or the caller's session
   * (owner or admin). A bad or expired link is refused even when a session is given: the link
   * is what the caller chose to present.
   */
  async content(id: string, variant: FileVariant, query: SignedQuery, session: Session | undefined): Promise<ContentAnswer> {
    const problem = this.signer.problem(contentPath(id, variant), query);
    if (problem !== undefined && problem !== 'missing') return linkRefusal(problem);
    let row: FileRow | null;
    if (problem === undefined) {
      row = UUID.test(id) ? await this.row(id) : null;
    } else {
      if (!session || !session.authenticated) {
        return { found: false, status: 401, code: 'UNAUTHENTICATED', message: 'A signed link or a session is needed' };
      }
      row = await this.visibleRow(id, session);
    }
    const notFound = { found: false, status: 404, code: 'NOT_FOUND', message: `No ${variant} for file ${id}` } as const;
    if (!row) return notFound;
    const object = await this.storage.open(storageKeyOf(row.id, variant));
    if (!object) return notFound;
    const thumbnail = variant === 'thumbnail';
    return {
      found: true,
      stream: object.stream,
      size: object.size,
      contentType: thumbnail ? 'image/png' : row.file_type,
      fileName: thumbnail ? `${row.file_name.replace(/\.[^.]*$/, '')}-thumbnail.png` : row.file_name,
      inline: thumbnail || INLINE_TYPES.has(row.file_type),
    };
  }

  /** The file as subscribers and queries see it (links signed now). */
  toInfo(row: FileRow): FileInfo {
    const result = row.result;
    const thumbnail = result?.image?.thumbnail;
    return {
      id: row.id,
      file_name: row.file_name,
      file_type: row.file_type,
      file_size: Number(row.file_size),
      owner_id: row.owner_id,
      source_account_id: row.source_account_id,
      status: row.status,
      processing_job_id: row.processing_job_id,
      file_url: this.signer.sign(contentPath(row.id, 'content'), this.settings.urlTtlSeconds).url,
      checksum_sha256: result?.checksum_sha256 ?? null,
      image: result?.image
        ? {
            width: result.image.width,
            height: result.image.height,
            format: result.image.format,
            thumbnail_url: thumbnail ? this.signer.sign(contentPath(row.id, 'thumbnail'), this.settings.urlTtlSeconds).url : null,
            thumbnail_width: thumbnail?.width ?? null,
            thumbnail_height: thumbnail?.height ?? null,
          }
        : null,
      data: result?.data ?? null,
      error: row.error,
      created_at: new Date(row.created_at),
      processed_at: row.processed_at ? new Date(row.processed_at) : null,
    };
  }

  async row(id: string): Promise<FileRow | null> {
    const [row] = (await this.dataSource.query('SELECT * FROM files WHERE id = $1', [id])) as FileRow[];
    return row ?? null;
  }

  /** Records a status change and tells the file's subscribers. */
  async update(id: string, change: { status: FileProcessingStatus; result?: ProcessingResult; error?: string }): Promise<void> {
    const finished = change.status === FileProcessingStatus.COMPLETED || change.status === FileProcessingStatus.FAILED;
    const [rows] = (await this.dataSource.query(
      `UPDATE files SET status = $2, result = COALESCE($3::jsonb, result), error = $4,
         processed_at = CASE WHEN $5 THEN now() ELSE processed_at END
       WHERE id = $1 RETURNING *`,
      [id, change.status, change.result ? JSON.stringify(change.result) : null, change.error ?? null, finished],
    )) as [FileRow[], number];
    if (rows[0]) this.events.publish(`${FILE_PROCESSING_UPDATED}:${id}`, this.toInfo(rows[0]));
  }

  private async visibleRow(id: string, session: Session): Promise<FileRow | null> {
    if (!UUID.test(id)) return null;
    const filter = rowFilterSql(session, FILES_TABLE, 'files', 2);
    const [row] = (await this.dataSource.query(`SELECT * FROM files WHERE id = $1 AND ${filter.clause}`, [id, ...filter.parameters])) as FileRow[];
    return row ?? null;
  }

  /** Every field is checked and every failing one reported; nothing is decoded before the sizes are known to fit. */
  private validate(
    raw: unknown,
  ): { input: { file_name: string; file_type: string }; content: Buffer; options: ResolvedProcessingOptions } | { errors: FieldError[] } {
    const source = (raw !== null && typeof raw === 'object' ? raw : {}) as Record<string, unknown>;
    const errors: FieldError[] = [];
    const fail = (field: string, code: FieldError['code'], message: string) => errors.push({ field, code, message });
    const { maxBytes, allowedTypes } = this.settings;

    const fileName = typeof source.file_name === 'string' ? source.file_name.trim() : source.file_name;
    if (fileName === undefined || fileName === null || fileName === '') fail('file_name', 'REQUIRED_FIELD', 'file_name is required');
    else if (typeof fileName !== 'string') fail('file_name', 'INVALID_FORMAT', 'file_name must be a string');
    else if (isUnstorableText(fileName)) fail('file_name', 'INVALID_FORMAT', `file_name ${UNSTORABLE_TEXT_MESSAGE}`);
    else if ([...fileName].length > MAX_FILE_NAME) fail('file_name', 'INVALID_LENGTH', `file_name must be at most ${MAX_FILE_NAME} characters`);
    else if (/[/\\\p{Cc}]/u.test(fileName) || fileName === '.' || fileName === '..') {
      fail('file_name', 'INVALID_FORMAT', 'file_name must be a name without a path or control characters');
    }

    const fileType = typeof source.file_type === 'string' ? source.file_type.trim().toLowerCase() : source.file_type;
    if (fileType === undefined || fileType === null || fileType === '') fail('file_type', 'REQUIRED_FIELD', 'file_type is required');
    else if (typeof fileType !== 'string' || !allowedTypes.includes(fileType)) {
      fail('file_type', 'INVALID_FORMAT', `file_type must be one of ${allowedTypes.join(', ')} (FILES_ALLOWED_TYPES)`);
    }

    const fileSize = source.file_size;
    let sizeOk = false;
    if (fileSize === undefined || fileSize === null) fail('file_size', 'REQUIRED_FIELD', 'file_size is required');
    else if (typeof fileSize !== 'number' || !Number.isInteger(fileSize) || fileSize < 1) {
      fail('file_size', 'INVALID_FORMAT', 'file_size must be a whole number of bytes, at least 1');
    } else if (fileSize > maxBytes) fail('file_size', 'INVALID_LENGTH', `file_size must be at most ${maxBytes} bytes (FILES_MAX_BYTES)`);
    else sizeOk = true;

    let content: Buffer | undefined;
    const data = source.file_data;
    if (data === undefined || data === null || data === '') fail('file_data', 'REQUIRED_FIELD', 'file_data is required');
    else if (typeof data !== 'string') fail('file_data', 'INVALID_FORMAT', 'file_data must be a base64 string');
    else if (data.length > 4 * Math.ceil(maxBytes / 3)) {
      fail('file_data', 'INVALID_LENGTH', `file_data must decode to at most ${maxBytes} bytes (FILES_MAX_BYTES)`);
    } else if (!isStrictBase64(data)) {
      fail('file_data', 'INVALID_FORMAT', 'file_data must be base64: the standard alphabet, padded with =, without line breaks');
    } else {
      content = Buffer.from(data, 'base64');
      if (sizeOk && content.length !== fileSize) {
        fail('file_size', 'INVALID_FORMAT', `file_size is ${String(fileSize)} but file_data decodes to ${content.length} bytes`);
      }
    }

    const options = resolveOptions(source.processing_options, errors);
    if (errors.length > 0 || !content) return { errors };
    return { input: { file_name: fileName as string, file_type: fileType as string }, content, options };
  }
}

/**
 * Whether `text` is base64 in the standard alphabet, padded with = to whole groups of four, with
 * nothing else (no line breaks), in linear time: not a regular expression of repeated groups, which
 * V8 matches with a backtracking stack that a long upload overflows.
 */
export function isStrictBase64(text: string): boolean {
  if (text.length % 4 !== 0) return false;
  const padding = text.endsWith('==') ? 2 : text.endsWith('=') ? 1 : 0;
  return !OUTSIDE_BASE64_ALPHABET.test(padding === 0 ? text : text.slice(0, -padding));
}

function resolveOptions(raw: unknown, errors: FieldError[]): ResolvedProcessingOptions {
  const source = (raw !== null && typeof raw === 'object' ? raw : {}) as Record<string, unknown>;
  const options: ResolvedProcessingOptions = {
    generate_thumbnail: true,
    thumbnail_size: THUMBNAIL_SIZE.default,
    parse_data: true,
    csv_delimiter: ',',
    csv_header: true,
    max_errors: MAX_ERRORS.default,
  };
  if (raw !== undefined && raw !== null && (typeof raw !== 'object' || Array.isArray(raw))) {
    errors.push({ field: 'processing_options', code: 'INVALID_FORMAT', message: 'processing_options must be an object' });
    return options;
  }
  const field = (name: string) => `processing_options.${name}`;
  for (const name of ['generate_thumbnail', 'parse_data', 'csv_header'] as const) {
    const value = source[name];
    if (value === undefined || value === null) continue;
    if (typeof value === 'boolean') options[name] = value;
    else errors.push({ field: field(name), code: 'INVALID_FORMAT', message: `${field(name)} must be true or false` });
  }
  for (const [name, range] of [
    ['thumbnail_size', THUMBNAIL_SIZE],
    ['max_errors', MAX_ERRORS],
  ] as const) {
    const value = source[name];
    if (value === undefined || value === null) continue;
    if (typeof value === 'number' && Number.isInteger(value) && value >= range.min && value <= range.max) options[name] = value;
    else errors.push({ field: field(name), code: 'INVALID_FORMAT', message: `${field(name)} must be a whole number from ${range.min} to ${range.max}` });
  }
  const delimiter = source.csv_delimiter;
  if (delimiter !== undefined && delimiter !== null) {
    if (typeof delimiter === 'string' && [...delimiter].length === 1 && !/["\r\n]/.test(delimiter) && !isUnstorableText(delimiter)) {
      options.csv_delimiter = delimiter;
    } else {
      errors.push({
        field: field('csv_delimiter'),
        code: 'INVALID_FORMAT',
        message: `${field('csv_delimiter')} must be one character, not a quote or line break`,
      });
    }
  }
  return options;
}

function linkRefusal(problem: Exclude<SignatureProblem, 'missing'>): ContentAnswer {
  return problem === 'expired'
    ? { found: false, status: 403, code: 'LINK_EXPIRED', message: 'This link has expired; ask for a new one' }
    : { found: false, status: 403, code: 'INVALID_SIGNATURE', message: 'This link is not valid' };
}
