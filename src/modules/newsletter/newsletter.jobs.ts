import type { JobDefinition } from '../../platform/jobs';
import type { RecurringTask } from '../../platform/recurring';
import { ISSUE_QUEUE_SETTINGS } from './issues.service';
import { CLEANUP_QUEUE, ISSUE_QUEUE, SERIES_QUEUE } from './newsletter.model';
import type { NewsletterFlows, NewsletterServices } from './newsletter.services';

/** The newsletter's queues and their workers. */
export function newsletterJobs({ series, issues, subscriptions }: NewsletterFlows): JobDefinition[] {
  return [
    {
      queue: SERIES_QUEUE,
      settings: { retryLimit: 10, retryDelaySeconds: 30, retryBackoff: true },
      work: (data: { mailId: string }) => series.deliverSeriesMail(data.mailId),
    },
    {
      queue: ISSUE_QUEUE,
      settings: ISSUE_QUEUE_SETTINGS,
      work: (data: { issueId: string }, job) => issues.sendIssueBatch(data.issueId, job.signal),
    },
    {
      queue: CLEANUP_QUEUE,
      work: async () => ({ deleted: await subscriptions.cleanup() }),
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
  if (services.configurationProblem) return [];
  const { settings, issues } = services;
  const dayMs = settings.daySeconds * 1000;
  const checkEveryMs = settings.schedulerIntervalSeconds * 1000;
  // The first runs come one look after the first start, not during it (a fresh server's job list holds only what it was asked to do).
  const firstLook = async () => checkEveryMs;
  const tasks: RecurringTask[] = [
    {
      name: 'cleanup',
      schedule: { everyMs: dayMs },
      firstRunInMs: firstLook,
      checkEveryMs,
      run: () => services.jobs.send(CLEANUP_QUEUE, {}),
    },
    {
      // Every hour (of the newsletter's day): a notice is due 7 days before, so it leaves within the hour.
      name: 'license-alerts',
      schedule: { everyMs: Math.max(1, Math.round(dayMs / 24)) },
      firstRunInMs: firstLook,
      checkEveryMs,
      run: () => services.licenseAlerts.queueLicenseAlerts(services.renewingLicenses),
    },
  ];
  if (settings.issueScheduleVarsFile) {
    const everyMs = settings.issueIntervalDays * dayMs;
    tasks.push({
      name: 'issue',
      schedule: { everyMs },
      // The first scheduled issue comes one interval after the last one sent (or after now).
      firstRunInMs: async () => {
        const last = await issues.lastIssue();
        return last ? Math.max(0, everyMs - (Date.now() - last.created_at.getTime())) : everyMs;
      },
      checkEveryMs,
      run: () => issues.sendScheduledIssue(),
    });
  }
  return tasks;
}
