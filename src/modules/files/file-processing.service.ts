import type { Logger } from 'pino';
import type sharp from 'sharp';
import { sha256Hex } from '../../common/sha256';
import type { ObjectStorage } from '../../platform/storage';
import { type FileRow, type FilesService, type ProcessingResult, type ResolvedProcessingOptions, storageKeyOf } from './files.service';
import { type DataParseError, type DataParseResult, FileProcessingStatus } from './files.types';

const IMAGE_TYPES = new Set(['image/png', 'image/jpeg', 'image/gif', 'image/webp']);
/** Columns a JSON parse reports at most (keys of objects in order of appearance). */
const MAX_COLUMNS = 1000;
/** Images larger than this many pixels are not decoded (a small file can claim a huge canvas). */
const MAX_IMAGE_PIXELS = 100_000_000;

/** Text from the content, made storable in jsonb (no NUL, no lone surrogate) and bounded. */
function storable(text: string, max = 200): string {
  const cleaned = text.replace(/\u0000|[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/g, '\uFFFD');
  return [...cleaned].length > max ? `${[...cleaned].slice(0, max).join('')}…` : cleaned;
}

/**
 * sharp with libvips (megabytes resident) is loaded by the first image processed, in the worker
 * that runs the job, not by every process at start-up.
 */
let sharpModule: typeof sharp | undefined;
function loadSharp(): typeof sharp {
  return (sharpModule ??= require('sharp') as typeof sharp);
}

/** The content does not hold what its type says: the file is FAILED with this message, not retried. */
class ContentError extends Error {}

/**
 * The processing job of an uploaded file: SHA-256 of every file; for images, the dimensions and a
 * PNG thumbnail; for CSV and JSON, a parse counting rows and columns and keeping the first errors.
 * Running it again (a retry after a crash) does the same work and records the same result.
 */
export class FileProcessing {
  constructor(
    private readonly files: FilesService,
    private readonly storage: ObjectStorage,
    private readonly logger: Logger,
  ) {}

  async process(fileId: string, signal: AbortSignal): Promise<{ status: FileProcessingStatus }> {
    const row = await this.files.row(fileId);
    if (!row) return { status: FileProcessingStatus.FAILED }; // deleted meanwhile: nothing to do
    if (row.status === FileProcessingStatus.COMPLETED || row.status === FileProcessingStatus.FAILED) return { status: row.status };
    await this.files.update(fileId, { status: FileProcessingStatus.PROCESSING });
    const content = await this.storage.read(row.storage_key);
    if (!content) throw new Error(`the content of file ${fileId} is missing from storage`);
    signal.throwIfAborted();

    const result: ProcessingResult = { checksum_sha256: sha256Hex(content) };
    try {
      if (IMAGE_TYPES.has(row.file_type)) result.image = await this.image(row, content);
      else if (row.options.parse_data && row.file_type === 'text/csv') result.data = await parseCsvContent(content, row.options);
      else if (row.options.parse_data && row.file_type === 'application/json') result.data = parseJsonContent(content, row.options);
    } catch (error) {
      if (!(error instanceof ContentError)) throw error;
      await this.files.update(fileId, { status: FileProcessingStatus.FAILED, result, error: error.message });
      return { status: FileProcessingStatus.FAILED };
    }
    signal.throwIfAborted();
    await this.files.update(fileId, { status: FileProcessingStatus.COMPLETED, result });
    return { status: FileProcessingStatus.COMPLETED };
  }

  private async image(row: FileRow, content: Buffer): Promise<NonNullable<ProcessingResult['image']>> {
    const expected = row.file_type.slice('image/'.length);
    let metadata: sharp.Metadata;
    try {
      metadata = await loadSharp()(content, { limitInputPixels: MAX_IMAGE_PIXELS }).metadata();
    } catch (error) {
      throw new ContentError(`not a readable ${expected.toUpperCase()} image: ${(error as Error).message}`);
    }
    if (metadata.format !== expected || !metadata.width || !metadata.height) {
      throw new ContentError(`the content is ${metadata.format ?? 'not an image'}, not ${expected} as file_type says`);
    }
    // EXIF orientation turns the picture; report its size as shown.
    const turned = (metadata.orientation ?? 1) >= 5;
    const image: NonNullable<ProcessingResult['image']> = {
      width: turned ? metadata.height : metadata.width,
      height: turned ? metadata.width : metadata.height,
      format: metadata.format,
    };
    if (row.options.generate_thumbnail) {
      const size = row.options.thumbnail_size;
      let thumbnail: { data: Buffer; info: sharp.OutputInfo };
      try {
        thumbnail = await loadSharp()(content, { limitInputPixels: MAX_IMAGE_PIXELS })
          .rotate()
          .resize(size, size, { fit: 'inside', withoutEnlargement: true })
          .png()
          .toBuffer({ resolveWithObject: true });
      } catch (error) {
        throw new ContentError(`the image could not be decoded: ${(error as Error).message}`);
      }
      await this.storage.put(storageKeyOf(row.id, 'thumbnail'), thumbnail.data);
      image.thumbnail = { width: thumbnail.info.width, height: thumbnail.info.height };
    }
    this.logger.debug({ fileId: row.id, width: image.width, height: image.height }, 'image processed');
    return image;
  }
}

/**
 * Parses CSV with the header (or column_<n> names), counting data rows; a row with a different
 * number of fields than the header is an error of its line and still counted. A syntax error
 * (an unclosed quote) ends the parse there.
 */
export async function parseCsvContent(content: Buffer, options: ResolvedProcessingOptions): Promise<DataParseResult> {
  const errors: DataParseError[] = [];
  let errorCount = 0;
  const addError = (line: number, message: string) => {
    errorCount++;
    if (errors.length < options.max_errors) errors.push({ line, message: storable(message) });
  };
  let columns: string[] | undefined;
  let width = 0;
  let rowCount = 0;
  // Required by the first CSV parsed, not at start.
  const parser = (require('csv-parse') as typeof import('csv-parse')).parse({
    delimiter: options.csv_delimiter,
    bom: true,
    info: true,
    relax_column_count: true,
    skip_empty_lines: true,
  });
  // Events rather than an iterator: the records before a fatal error (an unclosed quote) count.
  await new Promise<void>((resolve) => {
    parser.on('data', ({ record, info }: { record: string[]; info: { lines: number } }) => {
      if (!columns) {
        width = record.length;
        columns = options.csv_header
          ? record.slice(0, MAX_COLUMNS).map((name) => storable(name.trim()))
          : record.slice(0, MAX_COLUMNS).map((_, index) => `column_${index + 1}`);
        if (options.csv_header) return;
      }
      rowCount++;
      if (record.length !== width) addError(info.lines, `expected ${width} fields, found ${record.length}`);
    });
    parser.on('error', (error: Error & { lines?: number }) => {
      addError(error.lines ?? rowCount + 1, error.message.replace(/^Invalid (Record Length|Opening Quote|Closing Quote): /, ''));
      resolve();
    });
    parser.on('end', () => resolve());
    parser.end(content);
  });
  return { format: 'csv', row_count: rowCount, columns: columns ?? [], error_count: errorCount, errors };
}

/** Parses JSON: an array counts its items (objects give the columns), any other value is one row. */
export function parseJsonContent(content: Buffer, options: ResolvedProcessingOptions): DataParseResult {
  const text = content.toString('utf8').replace(/^\uFEFF/, '');
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (error) {
    const message = (error as Error).message;
    const position = /position (\d+)/.exec(message);
    const line = position ? text.slice(0, Number(position[1])).split('\n').length : 1;
    return { format: 'json', row_count: 0, columns: [], error_count: 1, errors: [{ line, message: storable(message) }].slice(0, options.max_errors) };
  }
  const rows = Array.isArray(value) ? value : [value];
  const columns = new Set<string>();
  for (const item of rows) {
    if (columns.size >= MAX_COLUMNS) break;
    if (item !== null && typeof item === 'object' && !Array.isArray(item)) {
      for (const key of Object.keys(item)) {
        if (columns.size >= MAX_COLUMNS) break;
        columns.add(storable(key));
      }
    }
  }
  return { format: 'json', row_count: rows.length, columns: [...columns], error_count: 0, errors: [] };
}
