import type { NewsletterConfig } from '../../config';
import type { JobSender } from '../../platform/jobs';
import { mailTemplates } from '../../platform/mail/mailer';
import type { ModuleServices, Platform } from '../../platform/module';
import type { RateLimiter } from '../../platform/rate-limits';
import { paymentsModule } from '../payments';
import { issueLeaseSeconds, Issues } from './issues.service';
import { LicenseAlerts } from './license-alerts.service';
import { newsletterConfigurationProblem } from './list-mail';
import { NewsletterAdmin } from './newsletter-admin.service';
import type { LicenseRenewal, NewsletterDependencies } from './newsletter.model';
import { WelcomeSeries } from './series.service';
import { Subscriptions } from './subscriptions.service';

/** The newsletter's services, one per flow: what routes, resolvers, jobs, recurring tasks and the CLI call. */
export interface NewsletterFlows {
  subscriptions: Subscriptions;
  series: WelcomeSeries;
  issues: Issues;
  licenseAlerts: LicenseAlerts;
  admin: NewsletterAdmin;
}

export function newsletterFlows(deps: NewsletterDependencies): NewsletterFlows {
  const admin = new NewsletterAdmin(deps);
  const series = new WelcomeSeries(deps, admin);
  return {
    subscriptions: new Subscriptions(deps, series, admin),
    series,
    issues: new Issues(deps, admin),
    licenseAlerts: new LicenseAlerts(deps),
    admin,
  };
}

export interface NewsletterServices extends NewsletterFlows {
  /** Why the newsletter cannot run (its routes answer 503, it schedules nothing), or undefined. */
  configurationProblem: string | undefined;
  settings: NewsletterConfig;
  jobs: JobSender;
  /** The payments module's licenses renewing within so many seconds (T3). */
  renewingLicenses(withinSeconds: number): Promise<LicenseRenewal[]>;
  /** The subscribe limit (NEWSLETTER_SUBSCRIBE_RATE_LIMIT_*), per client address. */
  subscribeLimiter(): RateLimiter;
  /** The issue schedule (NEWSLETTER_ISSUE_SCHEDULE_VARS_FILE): whether there is one, its interval, and when the next issue is due after the last one. */
  issueSchedule(): Promise<IssueSchedule>;
  /** PLINTH_PUBLIC_URL. */
  publicUrl(): string;
  /** Origins the form proxy may send people back to: PLINTH_PUBLIC_URL's and GQL_GRAPHQL_CORS_DOMAIN's. */
  allowedOrigins(): string[];
}

export interface IssueSchedule {
  scheduled: boolean;
  intervalDays: number;
  /** The last issue's time plus the interval (at the next look of a worker after it); null without a schedule or an issue yet. */
  nextDueAt: Date | null;
}

export function createNewsletterServices({ config, dataSource, mailer, jobs, logger, rateLimits }: Platform, modules: ModuleServices): NewsletterServices {
  const log = logger.child({ module: 'newsletter' });
  const flows = newsletterFlows({
    config,
    dataSource,
    mailer,
    jobs,
    templates: mailTemplates(config),
    logger: log,
    issueLeaseSeconds: issueLeaseSeconds(config.jobs),
  });
  const problem = newsletterConfigurationProblem(config.newsletter);
  if (problem) log.warn(`${problem}; its routes answer 503`);
  else mailer.requireDelivery('the newsletter');
  // The license records are the payments module's; only its services reach them.
  const { billing } = modules.get(paymentsModule);
  const origins = [new URL(config.publicUrl).origin, ...(config.graphql.corsOrigins === '*' ? [] : config.graphql.corsOrigins)];
  return {
    ...flows,
    configurationProblem: problem,
    settings: config.newsletter,
    jobs,
    renewingLicenses: (withinSeconds) => billing.licensesRenewingWithin(withinSeconds),
    subscribeLimiter: () => rateLimits.get('newsletterSubscribe'),
    issueSchedule: async () => {
      const { issueScheduleVarsFile, issueIntervalDays, daySeconds } = config.newsletter;
      const scheduled = Boolean(issueScheduleVarsFile) && !problem;
      const last = scheduled ? await flows.issues.lastIssue() : null;
      return {
        scheduled,
        intervalDays: issueIntervalDays,
        nextDueAt: last ? new Date(last.created_at.getTime() + issueIntervalDays * daySeconds * 1000) : null,
      };
    },
    publicUrl: () => config.publicUrl,
    allowedOrigins: () => origins,
  };
}
