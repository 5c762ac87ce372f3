import { DateTimeResolver, UUIDResolver } from 'graphql-scalars';
import { Field, Float, InputType, Int, ObjectType, registerEnumType } from 'type-graphql';
import { FieldError } from '../../common/field-error.types';

/** Asking for a report is for any signed-in caller; some kinds are for admins only (report-kinds.ts). */
export const GENERATE_REPORT_ROLES: string[] = [];

export enum ReportKind {
  USERS = 'USERS',
  FILES = 'FILES',
  JOBS = 'JOBS',
}

export enum ReportFormat {
  CSV = 'CSV',
  JSON = 'JSON',
}

export enum ReportStatus {
  QUEUED = 'QUEUED',
  RUNNING = 'RUNNING',
  COMPLETED = 'COMPLETED',
  FAILED = 'FAILED',
  CANCELLED = 'CANCELLED',
}

registerEnumType(ReportKind, {
  name: 'ReportKind',
  description: 'What a report lists, one row per item, oldest first',
  valuesConfig: {
    USERS: { description: 'Accounts (admins only)' },
    FILES: { description: 'Uploaded files: your own, or every file for an admin' },
    JOBS: { description: 'Background jobs (admins only)' },
  },
});

registerEnumType(ReportFormat, {
  name: 'ReportFormat',
  valuesConfig: {
    CSV: { description: 'RFC 4180, a header row, UTF-8' },
    JSON: { description: 'One JSON array of objects' },
  },
});

registerEnumType(ReportStatus, {
  name: 'ReportStatus',
  description: 'QUEUED -> RUNNING -> COMPLETED | FAILED; QUEUED or RUNNING -> CANCELLED',
  valuesConfig: {
    QUEUED: { description: 'Accepted, waiting for a worker' },
    RUNNING: { description: 'A worker is writing it (after a crash it starts again from the first row)' },
    COMPLETED: { description: 'Written; result_url gives it' },
    FAILED: { description: 'Could not be written; error says why' },
    CANCELLED: { description: 'Cancelled before it completed; nothing is kept' },
  },
});

@InputType({ description: 'What to report on and how to write it' })
export class ReportInput {
  @Field(() => ReportKind)
  kind!: ReportKind;

  @Field(() => ReportFormat, { nullable: true, defaultValue: ReportFormat.CSV })
  format?: ReportFormat | null;

  @Field(() => DateTimeResolver, { nullable: true, description: 'Only items created at or after this instant' })
  from?: Date | null;

  @Field(() => DateTimeResolver, { nullable: true, description: 'Only items created before this instant' })
  to?: Date | null;
}

@ObjectType({ description: 'The answer of generateReport: the job is queued, or the input refused' })
export class GenerateReportOutput {
  @Field()
  success!: boolean;

  @Field()
  message!: string;

  @Field(() => UUIDResolver, { nullable: true, description: 'Follow it with reportJob and reportJobUpdated' })
  job_id?: string | null;

  @Field(() => ReportStatus, { nullable: true })
  status?: ReportStatus | null;

  @Field(() => Int, { nullable: true, description: 'Seconds the report should take, from the number of rows the database expects' })
  estimated_duration?: number | null;

  @Field(() => [FieldError], { nullable: true })
  errors?: FieldError[] | null;

  /** Overall failure code of the handler envelope (spec 1 §2.3); not part of the GraphQL type. */
  error_code?: 'VALIDATION_ERROR' | 'FORBIDDEN' | 'UNAUTHENTICATED' | 'INTERNAL_ERROR';
}

@ObjectType({ description: 'A report job (the user who asked for it and admins only)' })
export class ReportJob {
  @Field(() => UUIDResolver)
  job_id!: string;

  @Field(() => ReportKind)
  kind!: ReportKind;

  @Field(() => ReportFormat)
  format!: ReportFormat;

  @Field(() => DateTimeResolver, { nullable: true })
  from!: Date | string | null;

  @Field(() => DateTimeResolver, { nullable: true })
  to!: Date | string | null;

  @Field(() => ReportStatus)
  status!: ReportStatus;

  @Field(() => Float, { description: 'From 0 to 1: rows written over the rows counted when the run started' })
  progress!: number;

  @Field(() => Float, { description: 'Rows written so far (Float: reports may pass 2^31 rows)' })
  rows_written!: number;

  @Field(() => Float, { nullable: true, description: 'Rows counted when the run started' })
  total_rows!: number | null;

  @Field(() => Int)
  estimated_duration!: number;

  @Field(() => String, { nullable: true, description: 'A signed link to the result once COMPLETED, valid for REPORTS_URL_TTL_SECONDS' })
  result_url!: string | null;

  @Field(() => Float, { nullable: true, description: 'Bytes of the result' })
  result_size!: number | null;

  @Field(() => String, { nullable: true, description: 'Why it FAILED' })
  error!: string | null;

  @Field(() => String, { nullable: true })
  requested_by!: string | null;

  /** Not in the schema: the row filter of a subscription's payload (src/platform/row-filter.ts). */
  source_account_id!: string;

  @Field(() => DateTimeResolver)
  created_at!: Date | string;

  @Field(() => DateTimeResolver, { nullable: true })
  started_at!: Date | string | null;

  @Field(() => DateTimeResolver, { nullable: true })
  finished_at!: Date | string | null;
}
