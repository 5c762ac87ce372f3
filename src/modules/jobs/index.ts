import type { PlinthModule } from '../../platform/module';
import { JobsResolver } from './jobs.resolver';
import { createJobsServices, type JobsServices } from './jobs.services';

/** The jobs admin: list, retry and cancel background jobs (admin only; also `plinth jobs`). */
export const jobsModule: PlinthModule<JobsServices> = {
  name: 'jobs',
  resolvers: [JobsResolver],
  create: (platform) => createJobsServices(platform),
};
