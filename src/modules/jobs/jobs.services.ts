import type { Platform } from '../../platform/module';
import { JobsService } from './jobs.service';

export interface JobsServices {
  jobs: JobsService;
}

export function createJobsServices({ jobs }: Platform): JobsServices {
  return { jobs: new JobsService(jobs) };
}
