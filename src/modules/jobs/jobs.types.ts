import { DateTimeResolver, JSONObjectResolver } from 'graphql-scalars';
import { Field, ID, Int, ObjectType, registerEnumType } from 'type-graphql';

/** pg-boss's job states (platform/jobs.ts JOB_STATES), as GraphQL enum values. */
export enum JobStateValue {
  CREATED = 'created',
  RETRY = 'retry',
  ACTIVE = 'active',
  COMPLETED = 'completed',
  CANCELLED = 'cancelled',
  FAILED = 'failed',
}

registerEnumType(JobStateValue, {
  name: 'JobState',
  description: 'Where a job is in its life',
  valuesConfig: {
    CREATED: { description: 'Queued, waiting for a worker' },
    RETRY: { description: 'Failed or released, waiting to run again (see startAfter)' },
    ACTIVE: { description: 'A worker is running it' },
    COMPLETED: { description: 'Done' },
    CANCELLED: { description: 'Cancelled before it finished' },
    FAILED: { description: 'Failed, with no retry left' },
  },
});

@ObjectType({ description: 'A background job (admin only)' })
export class Job {
  @Field(() => ID)
  id!: string;

  @Field()
  queue!: string;

  @Field(() => JobStateValue)
  state!: JobStateValue;

  @Field(() => JSONObjectResolver, { description: 'What the job was sent with' })
  data!: Record<string, unknown>;

  @Field(() => JSONObjectResolver, {
    nullable: true,
    description: "What the worker returned when completed; the last attempt's error ({name, message}) after a failure",
  })
  output!: Record<string, unknown> | null;

  @Field(() => String, { nullable: true, description: "The last attempt's error message, while the job is FAILED or RETRY" })
  error!: string | null;

  @Field(() => Int, { description: 'Attempts after the first one' })
  retryCount!: number;

  @Field(() => Int, { description: 'Retries allowed' })
  retryLimit!: number;

  @Field(() => DateTimeResolver)
  createdOn!: Date;

  @Field(() => DateTimeResolver, { description: 'Not run before this' })
  startAfter!: Date;

  @Field(() => DateTimeResolver, { nullable: true })
  startedOn!: Date | null;

  @Field(() => DateTimeResolver, { nullable: true })
  completedOn!: Date | null;
}
