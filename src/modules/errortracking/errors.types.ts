import { DateTimeResolver } from 'graphql-scalars';
import { Field, ID, InputType, Int, ObjectType, registerEnumType } from 'type-graphql';
import { PageInfo } from '../../common/page-info.types';
import { TIME_RANGES } from './errors.service';

export enum ErrorSeverity {
  FATAL = 'fatal',
  ERROR = 'error',
  WARNING = 'warning',
  INFO = 'info',
  DEBUG = 'debug',
}
registerEnumType(ErrorSeverity, { name: 'ErrorSeverity', description: 'Sentry’s event levels; an error has the level of its latest event' });

export enum ErrorStatusValue {
  UNRESOLVED = 'unresolved',
  RESOLVED = 'resolved',
  IGNORED = 'ignored',
}
registerEnumType(ErrorStatusValue, {
  name: 'ErrorStatus',
  description:
    'UNRESOLVED until resolved or ignored; a resolved error seen again in a newer release (or, resolved without a release, at all) is UNRESOLVED again',
});

@ObjectType({ description: 'A frame of a stack trace, oldest call first (the frame that raised is last)' })
export class StackFrame {
  @Field(() => String, { nullable: true })
  filename!: string | null;

  @Field(() => String, { nullable: true })
  function!: string | null;

  @Field(() => String, { nullable: true })
  module!: string | null;

  @Field(() => Int, { nullable: true })
  lineno!: number | null;

  @Field(() => Int, { nullable: true })
  colno!: number | null;

  @Field({ description: 'The application’s own code, not a dependency’s or the runtime’s' })
  inApp!: boolean;

  @Field(() => String, { nullable: true, description: 'The source lines around the frame, as the SDK sent them' })
  source!: string | null;
}

@ObjectType({ description: 'The source of the frame that raised (the innermost one of the application’s own code)' })
export class SourceMap {
  @Field()
  filename!: string;

  @Field()
  source!: string;
}

@ObjectType('Error', { description: 'Events with one fingerprint, grouped as Sentry groups them' })
export class ErrorNode {
  @Field(() => ID)
  id!: string;

  @Field({ description: 'The latest event’s `Type: value`, or its message' })
  message!: string;

  @Field(() => String, { nullable: true, description: 'The exception type, when the events have one' })
  type!: string | null;

  @Field(() => ErrorSeverity)
  severity!: ErrorSeverity;

  @Field(() => ErrorStatusValue)
  status!: ErrorStatusValue;

  @Field(() => Int, { description: 'Events received (kept after old events are removed)' })
  occurrenceCount!: number;

  @Field(() => DateTimeResolver, { description: 'The earliest event’s own timestamp' })
  firstSeen!: Date;

  @Field(() => DateTimeResolver, { description: 'The latest event’s own timestamp' })
  lastSeen!: Date;

  @Field(() => String, { nullable: true, description: 'The latest release the events named' })
  release!: string | null;

  @Field(() => Int)
  projectId!: number;

  /** The latest event, as `<project>:<event id>`, for the stack trace's loader. */
  latestEventKey!: string | null;
}

@ObjectType()
export class ErrorEdge {
  @Field(() => ErrorNode)
  node!: ErrorNode;

  @Field({ description: 'Opaque; pass as `after`' })
  cursor!: string;
}

@ObjectType({ description: 'Errors, newest first; errors created while paging appear before the first page, never between pages' })
export class ErrorConnection {
  @Field(() => [ErrorEdge])
  edges!: ErrorEdge[];

  @Field(() => PageInfo)
  pageInfo!: PageInfo;
}

@InputType({ description: 'Every field narrows the list; an empty filter lists every error' })
export class ErrorFilter {
  @Field(() => ErrorSeverity, { nullable: true })
  severity?: ErrorSeverity | null;

  @Field(() => String, { nullable: true, description: 'The service of the errors’ project' })
  service?: string | null;

  @Field(() => String, {
    nullable: true,
    description: `Errors with an event in this period, by the events’ own timestamps: ${Object.keys(TIME_RANGES).join(', ')}`,
  })
  timeRange?: string | null;

  @Field(() => ErrorStatusValue, { nullable: true })
  status?: ErrorStatusValue | null;

  @Field(() => Int, { nullable: true })
  project?: number | null;
}

@InputType({ description: 'Which received errors to announce; every field narrows' })
export class ErrorReceivedFilter {
  @Field(() => ErrorSeverity, { nullable: true })
  severity?: ErrorSeverity | null;

  @Field(() => String, { nullable: true })
  service?: string | null;

  @Field(() => Int, { nullable: true })
  project?: number | null;
}
