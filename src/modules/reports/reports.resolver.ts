import { UUIDResolver } from 'graphql-scalars';
import { Arg, Authorized, Ctx, Mutation, Query, Resolver, Root, Subscription, type SubscriptionHandlerData } from 'type-graphql';
import type { GraphQLContext } from '../../graphql/context';
import { enforceQuota } from '../../graphql/rate-limits';
import { rowVisible } from '../../platform/row-filter';
import type { ReportsServices } from './reports.services';
import { REPORT_JOB_UPDATED, REPORT_JOBS_TABLE } from './reports.service';
import { GENERATE_REPORT_ROLES, GenerateReportOutput, ReportInput, ReportJob } from './reports.types';

@Resolver()
export class ReportsResolver {
  constructor(private readonly services: ReportsServices) {}

  @Authorized(GENERATE_REPORT_ROLES)
  @Mutation(() => GenerateReportOutput, {
    description: 'Queues a report and answers at once with its job_id, status and estimated_duration; follow it with reportJob or reportJobUpdated',
  })
  async generateReport(@Arg('input', () => ReportInput) input: ReportInput, @Ctx() context: GraphQLContext): Promise<GenerateReportOutput> {
    await enforceQuota(context, 'reports');
    return this.services.reports.generate(input, context.session);
  }

  @Authorized(GENERATE_REPORT_ROLES)
  @Query(() => ReportJob, { nullable: true, description: 'A report job; null unless you asked for it or are an admin' })
  reportJob(@Arg('job_id', () => UUIDResolver) jobId: string, @Ctx() context: GraphQLContext): Promise<ReportJob | null> {
    return this.services.reports.reportJob(jobId, context.session);
  }

  @Authorized(GENERATE_REPORT_ROLES)
  @Mutation(() => ReportJob, { description: 'Stops a QUEUED or RUNNING report job; nothing of it is kept' })
  cancelReportJob(@Arg('job_id', () => UUIDResolver) jobId: string, @Ctx() context: GraphQLContext): Promise<ReportJob> {
    return this.services.reports.cancel(jobId, context.session);
  }

  @Authorized(GENERATE_REPORT_ROLES)
  @Subscription(() => ReportJob, {
    description: 'Each change of a report job: RUNNING, progress about every half second, then COMPLETED, FAILED or CANCELLED',
    topics: REPORT_JOB_UPDATED,
    topicId: ({ args }: { args: { job_id: string } }) => args.job_id,
    filter: ({ payload, context }: SubscriptionHandlerData<ReportJob, { job_id: string }, GraphQLContext>) =>
      rowVisible(context.session, REPORT_JOBS_TABLE, { ...payload }),
  })
  reportJobUpdated(@Arg('job_id', () => UUIDResolver) _jobId: string, @Root() job: ReportJob): ReportJob {
    return job;
  }
}
