import fs from 'node:fs/promises';
import type { JobsConfig } from '../../config';
import { queueSettings } from '../../platform/job-queue';
import type { JobDefinition } from '../../platform/jobs';
import type { RecurringTask } from '../../platform/recurring';
import type { NewsletterServices } from '.';
import { CLEANUP_QUEUE, ISSUE_QUEUE, NewsletterError, SERIES_QUEUE, type NewsletterService } from './newsletter.service';

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

/**
 * The newsletter's recurring tasks, once it is configured: the clean-up once a day, the license
 * renewal notices (T3) looked for every hour and, when NEWSLETTER_ISSUE_SCHEDULE_VARS_FILE is set,
 * the next issue every NEWSLETTER_ISSUE_INTERVAL_DAYS (days of NEWSLETTER_DAY_SECONDS). Worker
 * processes look every NEWSLETTER_SCHEDULER_INTERVAL_SECONDS whether one is due.
 */
export function newsletterRecurring(services: NewsletterServices): RecurringTask[] {
  const { newsletter, settings } = services;
  if (newsletter.configurationProblem) return [];
  const dayMs = settings.daySeconds * 1000;
  const checkEveryMs = settings.schedulerIntervalSeconds * 1000;
  const tasks: RecurringTask[] = [
    {
      name: 'cleanup',
      schedule: { everyMs: dayMs },
      firstRunInMs: async () => 0,
      checkEveryMs,
      run: () => services.jobs.send(CLEANUP_QUEUE, {}),
    },
    {
      // Every hour (of the newsletter's day): a notice is due 7 days before, so it leaves within the hour.
      name: 'license-alerts',
      schedule: { everyMs: Math.max(1, Math.round(dayMs / 24)) },
      firstRunInMs: async () => 0,
      checkEveryMs,
      run: () => newsletter.queueLicenseAlerts(services.renewingLicenses),
    },
  ];
  if (settings.issueScheduleVarsFile) {
    const everyMs = settings.issueIntervalDays * dayMs;
    tasks.push({
      name: 'issue',
      schedule: { everyMs },
      // The first scheduled issue comes one interval after the last one sent (or after now).
      firstRunInMs: async () => {
        const last = await newsletter.lastIssue();
        return last ? Math.max(0, everyMs - (Date.now() - last.created_at.getTime())) : everyMs;
      },
      checkEveryMs,
      run: () => sendScheduledIssue(services),
    });
  }
  return tasks;
}

/** The next issue number with the variables file as it is now; the same content as the last issue is not sent again. */
async function sendScheduledIssue({ newsletter, settings, logger }: NewsletterServices): Promise<void> {
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
