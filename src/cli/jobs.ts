import { Command } from 'commander';
import pino from 'pino';
import type { Config } from '../config';
import { createLogger } from '../platform/logger';
import { JobsService } from '../modules/jobs/jobs.service';
import type { Job } from '../modules/jobs/jobs.types';
import { JobQueue } from '../platform/job-queue';
import { JOB_STATES } from '../platform/jobs';
import { withDatabase } from './database';
import { table } from './table';

/** Runs `use` with the jobs admin on the configured database; no worker runs. */
async function withJobs<T>(config: Config, use: (jobs: JobsService) => Promise<T>): Promise<T> {
  // Standard output is the command's answer; logs go to standard error.
  const logger = createLogger(config, pino.destination(2));
  return withDatabase(config, logger, async (dataSource, endpoint) => {
    const queue = new JobQueue({ dataSource, url: endpoint.url, config: config.jobs, logger, supervise: false, shutdown: new AbortController().signal });
    await queue.start();
    try {
      return await use(new JobsService(queue));
    } finally {
      await queue.stop();
    }
  });
}

function describe(job: Job): string {
  return `job ${job.id} (queue ${job.queue}) is ${job.state.toUpperCase()}`;
}

function jobsTable(jobs: Job[]): string {
  return table([
    ['ID', 'QUEUE', 'STATE', 'RETRIES', 'CREATED', 'ERROR'],
    ...jobs.map((job) => [job.id, job.queue, job.state.toUpperCase(), `${job.retryCount}/${job.retryLimit}`, job.createdOn.toISOString(), job.error ?? '']),
  ]);
}

/** `plinth jobs list|retry|cancel`: the same service as the admin GraphQL API. */
export function jobsCommand(configuration: () => Config): Command {
  const jobs = new Command('jobs').description('list, retry and cancel background jobs (as the admin GraphQL API does)');

  jobs
    .command('list')
    .description('list jobs, newest first')
    .option('-q, --queue <queue>', 'only this queue')
    .option('-s, --state <state>', `only this state: ${JOB_STATES.join(', ')}`)
    .option('-n, --first <count>', 'at most this many (1-500)', '50')
    .option('--json', 'print the jobs as JSON')
    .action(async (options: { queue?: string; state?: string; first: string; json?: boolean }) => {
      const found = await withJobs(configuration(), (service) => service.list({ queue: options.queue, state: options.state, first: Number(options.first) }));
      process.stdout.write(`${options.json ? JSON.stringify(found, null, 2) : jobsTable(found)}\n`);
      process.exit(0);
    });

  jobs
    .command('retry <id>')
    .description('run a failed job again (allowing one more retry), or a cancelled one')
    .action(async (id: string) => {
      process.stdout.write(`${describe(await withJobs(configuration(), (service) => service.retry(id)))}\n`);
      process.exit(0);
    });

  jobs
    .command('cancel <id>')
    .description('cancel a job that has not finished')
    .action(async (id: string) => {
      process.stdout.write(`${describe(await withJobs(configuration(), (service) => service.cancel(id)))}\n`);
      process.exit(0);
    });

  return jobs;
}
