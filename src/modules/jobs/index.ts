import type { PlinthModule } from '../../platform/module';
import { JobsResolver } from './jobs.resolver';
import { JobsService } from './jobs.service';

export interface JobsServices {
  jobs: JobsService;
}

/** The jobs admin: list, retry and cancel background jobs (admin only; also `plinth jobs`). */
export const jobsModule: PlinthModule<JobsServices> = {
  name: 'jobs',
  resolvers: [JobsResolver],
  create: ({ jobs }) => ({ jobs: new JobsService(jobs) }),
};
