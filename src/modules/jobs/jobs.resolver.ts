import { Arg, Authorized, ID, Int, Mutation, Query, Resolver } from 'type-graphql';
import { ADMIN_ROLE } from '../../common/roles';
import { DEFAULT_JOBS_PAGE, MAX_JOBS_PAGE } from './jobs.service';
import type { JobsServices } from './jobs.services';
import { Job, JobStateValue } from './jobs.types';

@Resolver()
export class JobsResolver {
  constructor(private readonly services: JobsServices) {}

  @Authorized(ADMIN_ROLE)
  @Query(() => [Job], { description: 'Background jobs, newest first' })
  jobs(
    @Arg('queue', () => String, { nullable: true }) queue: string | null,
    @Arg('state', () => JobStateValue, { nullable: true }) state: JobStateValue | null,
    @Arg('first', () => Int, { nullable: true, defaultValue: DEFAULT_JOBS_PAGE, description: `1 to ${MAX_JOBS_PAGE}` })
    first: number | null,
  ): Promise<Job[]> {
    return this.services.jobs.list({ queue, state, first });
  }

  @Authorized(ADMIN_ROLE)
  @Mutation(() => Job, { description: 'Runs a FAILED job again (allowing one more retry), or a CANCELLED one' })
  retryJob(@Arg('id', () => ID) id: string): Promise<Job> {
    return this.services.jobs.retry(id);
  }

  @Authorized(ADMIN_ROLE)
  @Mutation(() => Job, { description: 'Cancels a job that has not finished; a running one is not interrupted, its outcome is dropped' })
  cancelJob(@Arg('id', () => ID) id: string): Promise<Job> {
    return this.services.jobs.cancel(id);
  }
}
