import type { JobDefinition } from '../../platform/jobs';
import type { ReportsServices } from './reports.services';
import { REPORT_QUEUE } from './reports.service';

/** The report worker. A failure of the report itself ends it FAILED; a crash or timeout is retried from the start. */
export function reportsJobs({ runner }: ReportsServices): JobDefinition<{ reportId: string }>[] {
  return [
    {
      queue: REPORT_QUEUE,
      settings: {
        // A million rows take well under a minute; the timeout is also how long a crashed run
        // holds its job before another worker starts it again.
        timeoutSeconds: 600,
        concurrency: 2,
        retryLimit: 2,
        retryDelaySeconds: 1,
      },
      work: async ({ reportId }, job) => runner.run(reportId, job.signal),
    },
  ];
}
