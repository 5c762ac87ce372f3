import fs from 'node:fs/promises';
import type pg from 'pg';
import type { Logger } from 'pino';
import type { DataSource } from 'typeorm';
import type { PostgresDriver } from 'typeorm/driver/postgres/PostgresDriver';
import type { JobsConfig, NewsletterConfig } from '../../config';
import { queueSettings } from '../../platform/job-queue';
import type { JobDefinition, JobSender } from '../../platform/jobs';
import { CLEANUP_QUEUE, ISSUE_QUEUE, NewsletterError, SERIES_QUEUE, type LicenseRenewal, type NewsletterService } from './newsletter.service';

/** The issue queue's defaults: a batch must finish within its timeout, which is also the lease of its claims. */
export const ISSUE_QUEUE_SETTINGS = { timeoutSeconds: 120, retryLimit: 10, retryDelaySeconds: 5, retryBackoff: true };

/** How long an issue recipient's claim holds: the issue queue's timeout (after which its job is given up) and a margin. */
export function issueLeaseSeconds(jobs: JobsConfig): number {
  return queueSettings({ queue: ISSUE_QUEUE, settings: ISSUE_QUEUE_SETTINGS, work: async () => undefined }, jobs).timeoutSeconds + 2;
}

/** The newsletter's queues and their workers. */
export function newsletterJobs(newsletter: NewsletterService): JobDefinition[] {
  return [
    {
      queue: SERIES_QUEUE,
      settings: { retryLimit: 10, retryDelaySeconds: 30, retryBackoff: true },
      work: (data: { mailId: string }) => newsletter.deliverSeriesMail(data.mailId),
    },
    {
      queue: ISSUE_QUEUE,
      settings: ISSUE_QUEUE_SETTINGS,
      work: (data: { issueId: string }, job) => newsletter.sendIssueBatch(data.issueId, job.signal),
    },
    {
      queue: CLEANUP_QUEUE,
      work: async () => ({ deleted: await newsletter.cleanup() }),
    },
  ];
}

export interface SchedulerOptions {
  dataSource: DataSource;
  jobs: JobSender;
  newsletter: NewsletterService;
  settings: NewsletterConfig;
  logger: Logger;
  shutdown: AbortSignal;
  /** The payments module's licenses renewing within so many seconds (T3-license-alert). */
  renewingLicenses: (withinSeconds: number) => Promise<LicenseRenewal[]>;
}

/**
 * The newsletter's recurring work: the clean-up once a day, the license renewal notices (T3)
 * looked for every hour and, when
 * NEWSLETTER_ISSUE_SCHEDULE_VARS_FILE is set, the next issue every NEWSLETTER_ISSUE_INTERVAL_DAYS.
 * Each worker process looks every NEWSLETTER_SCHEDULER_INTERVAL_SECONDS; a due task is claimed
 * by moving its time on in one UPDATE, so one process alone runs it, whatever their number.
 */
export function startNewsletterScheduler(options: SchedulerOptions): void {
  const { settings, logger } = options;
  const pool = (options.dataSource.driver as PostgresDriver).master as pg.Pool;
  const day = settings.daySeconds;
  const tasks: { name: string; everySeconds: number; firstAfterSeconds: () => Promise<number>; run: () => Promise<void> }[] = [
    {
      name: 'cleanup',
      everySeconds: day,
      firstAfterSeconds: async () => 0,
      run: async () => void (await options.jobs.send(CLEANUP_QUEUE, {})),
    },
    {
      // Every hour (of the newsletter's day): a notice is due 7 days before, so it leaves within the hour.
      name: 'license-alerts',
      everySeconds: day / 24,
      firstAfterSeconds: async () => 0,
      run: async () => void (await options.newsletter.queueLicenseAlerts(options.renewingLicenses)),
    },
  ];
  if (settings.issueScheduleVarsFile) {
    const every = settings.issueIntervalDays * day;
    tasks.push({
      name: 'issue',
      everySeconds: every,
      // The first scheduled issue comes one interval after the last one sent (or after now).
      firstAfterSeconds: async () => {
        const last = await options.newsletter.lastIssue();
        return last ? Math.max(0, every - (Date.now() - last.created_at.getTime()) / 1000) : every;
      },
      run: () => sendScheduledIssue(options),
    });
  }

  const tick = async () => {
    for (const task of tasks) {
      const first = await task.firstAfterSeconds();
      await pool.query(
        `INSERT INTO newsletter_schedule (task, next_run_at) VALUES ($1, now() + make_interval(secs => $2)) ON CONFLICT (task) DO NOTHING`,
        [task.name, first],
      );
      const due = await pool.query(
        `UPDATE newsletter_schedule SET next_run_at = now() + make_interval(secs => $2) WHERE task = $1 AND next_run_at <= now() RETURNING task`,
        [task.name, task.everySeconds],
      );
      if (due.rowCount === 0) continue;
      await task.run().catch((error: unknown) => logger.error({ err: error, task: task.name }, 'scheduled newsletter task failed'));
    }
  };
  let running = false;
  const timer = setInterval(() => {
    if (running) return;
    running = true;
    tick()
      .catch((error: unknown) => logger.warn({ err: error }, 'newsletter scheduler could not look for due tasks'))
      .finally(() => (running = false));
  }, settings.schedulerIntervalSeconds * 1000);
  timer.unref();
  options.shutdown.addEventListener('abort', () => clearInterval(timer), { once: true });
}

/** The next issue number with the variables file as it is now; the same content as the last issue is not sent again. */
async function sendScheduledIssue({ newsletter, settings, logger }: SchedulerOptions): Promise<void> {
  const file = settings.issueScheduleVarsFile!;
  const variables = JSON.parse(await fs.readFile(file, 'utf8')) as Record<string, unknown>;
  const last = await newsletter.lastIssue();
  const { ISSUE_NUMBER: _ignored, ...content } = variables;
  if (last) {
    const { ISSUE_NUMBER: _previous, ...previous } = last.variables;
    if (JSON.stringify(Object.entries(previous).sort()) === JSON.stringify(Object.entries(content).sort())) {
      logger.warn({ file, lastIssue: last.issue_number }, 'scheduled newsletter issue not sent: the variables file has not changed since the last issue');
      return;
    }
  }
  try {
    const result = await newsletter.sendIssue({ issueNumber: (last?.issue_number ?? 0) + 1, variables: content, requestedBy: 'schedule' });
    if (!result.dryRun) logger.info({ issue: result.issue.issue_number, recipients: result.issue.recipients }, 'scheduled newsletter issue started');
  } catch (error) {
    if (!(error instanceof NewsletterError)) throw error;
    logger.error({ file, reason: error.message }, 'scheduled newsletter issue not sent: fix the variables file');
  }
}
