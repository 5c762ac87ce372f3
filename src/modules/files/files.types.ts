import { DateTimeResolver, UUIDResolver } from 'graphql-scalars';
import { Field, InputType, Int, ObjectType, registerEnumType } from 'type-graphql';
import { FieldError } from '../../common/field-error.types';

/** Uploading is for any signed-in caller (every role but the unauthorised one). */
export const UPLOAD_FILE_ROLES: string[] = [];

export enum FileProcessingStatus {
  PENDING = 'PENDING',
  PROCESSING = 'PROCESSING',
  COMPLETED = 'COMPLETED',
  FAILED = 'FAILED',
}

registerEnumType(FileProcessingStatus, {
  name: 'FileProcessingStatus',
  description: 'Where the processing of an uploaded file is',
  valuesConfig: {
    PENDING: { description: 'Stored; the processing job is queued' },
    PROCESSING: { description: 'A worker is processing it' },
    COMPLETED: { description: 'Processed; the results are in the file' },
    FAILED: { description: 'The content could not be processed as its type says (see error); the file itself is kept' },
  },
});

export const THUMBNAIL_SIZE = { default: 256, min: 16, max: 1024 };
export const MAX_ERRORS = { default: 10, min: 1, max: 100 };

@InputType({ description: 'What processing does beyond the checksum, which every file gets' })
export class ProcessingOptions {
  @Field(() => Boolean, { nullable: true, defaultValue: true, description: 'Images: make a thumbnail (PNG)' })
  generate_thumbnail?: boolean | null;

  @Field(() => Int, {
    nullable: true,
    defaultValue: THUMBNAIL_SIZE.default,
    description: `Images: the thumbnail's longer side in pixels, ${THUMBNAIL_SIZE.min} to ${THUMBNAIL_SIZE.max}; never enlarged`,
  })
  thumbnail_size?: number | null;

  @Field(() => Boolean, { nullable: true, defaultValue: true, description: 'CSV and JSON: parse, counting rows and columns' })
  parse_data?: boolean | null;

  @Field(() => String, { nullable: true, defaultValue: ',', description: 'CSV: the delimiter, one character' })
  csv_delimiter?: string | null;

  @Field(() => Boolean, { nullable: true, defaultValue: true, description: 'CSV: the first row names the columns' })
  csv_header?: boolean | null;

  @Field(() => Int, {
    nullable: true,
    defaultValue: MAX_ERRORS.default,
    description: `CSV and JSON: how many parse errors to report, ${MAX_ERRORS.min} to ${MAX_ERRORS.max}`,
  })
  max_errors?: number | null;
}

@InputType()
export class FileUploadInput {
  @Field({ description: 'Shown in downloads; no path, at most 255 characters' })
  file_name!: string;

  @Field({ description: 'The media type, one of FILES_ALLOWED_TYPES' })
  file_type!: string;

  @Field(() => Int, { description: 'The size in bytes of the decoded content, at most FILES_MAX_BYTES (10 MiB)' })
  file_size!: number;

  @Field({ description: 'The content, base64 (standard alphabet, padded); send it as a variable' })
  file_data!: string;

  @Field(() => ProcessingOptions, { nullable: true })
  processing_options?: ProcessingOptions | null;
}

@ObjectType()
export class FileUploadOutput {
  @Field()
  success!: boolean;

  @Field(() => UUIDResolver, { nullable: true })
  file_id?: string | null;

  @Field(() => String, { nullable: true, description: 'A signed link to the content, valid for FILES_URL_TTL_SECONDS' })
  file_url?: string | null;

  @Field(() => UUIDResolver, { nullable: true })
  processing_job_id?: string | null;

  @Field()
  message!: string;

  @Field(() => [FieldError], { nullable: true })
  errors?: FieldError[] | null;

  /** Overall failure code of the handler envelope (spec 1 §2.3); not part of the GraphQL type. */
  error_code?: 'VALIDATION_ERROR' | 'UNAUTHENTICATED' | 'INTERNAL_ERROR';
}

@ObjectType({ description: "An image's size, and its thumbnail when one was made" })
export class ImageInfo {
  @Field(() => Int)
  width!: number;

  @Field(() => Int)
  height!: number;

  @Field({ description: 'As decoded: png, jpeg, gif, webp...' })
  format!: string;

  @Field(() => String, { nullable: true, description: 'A signed link to the PNG thumbnail' })
  thumbnail_url?: string | null;

  @Field(() => Int, { nullable: true })
  thumbnail_width?: number | null;

  @Field(() => Int, { nullable: true })
  thumbnail_height?: number | null;
}

@ObjectType({ description: 'One problem found parsing CSV or JSON' })
export class DataParseError {
  @Field(() => Int, { description: 'The line of the file (1 is the first)' })
  line!: number;

  @Field()
  message!: string;
}

@ObjectType({ description: 'What parsing a CSV or JSON file found' })
export class DataParseResult {
  @Field({ description: 'csv or json' })
  format!: string;

  @Field(() => Int, { description: 'CSV: data rows (the header aside), bad ones included; JSON: array items, or 1 for one value' })
  row_count!: number;

  @Field(() => [String], { description: 'CSV: the header (or column_1...); JSON: the keys of the objects, in order of appearance' })
  columns!: string[];

  @Field(() => Int)
  error_count!: number;

  @Field(() => [DataParseError], { description: 'The first errors, at most max_errors' })
  errors!: DataParseError[];
}

@ObjectType({ description: 'An uploaded file (its owner and admins only)' })
export class FileInfo {
  @Field(() => UUIDResolver)
  id!: string;

  @Field()
  file_name!: string;

  @Field()
  file_type!: string;

  @Field(() => Int)
  file_size!: number;

  @Field(() => String, { nullable: true, description: 'The user who uploaded it' })
  owner_id!: string | null;

  /** Not in the schema: the row filter of a subscription's payload (src/platform/row-filter.ts). */
  source_account_id!: string;

  @Field(() => FileProcessingStatus)
  status!: FileProcessingStatus;

  @Field(() => UUIDResolver, { nullable: true })
  processing_job_id!: string | null;

  @Field({ description: 'A signed link to the content, valid for FILES_URL_TTL_SECONDS from this answer' })
  file_url!: string;

  @Field(() => String, { nullable: true, description: 'SHA-256 of the content, hex; set once processed' })
  checksum_sha256!: string | null;

  @Field(() => ImageInfo, { nullable: true })
  image!: ImageInfo | null;

  @Field(() => DataParseResult, { nullable: true })
  data!: DataParseResult | null;

  @Field(() => String, { nullable: true, description: 'Why processing FAILED' })
  error!: string | null;

  @Field(() => DateTimeResolver)
  created_at!: Date;

  @Field(() => DateTimeResolver, { nullable: true })
  processed_at!: Date | null;
}
