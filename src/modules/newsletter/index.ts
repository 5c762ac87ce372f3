import type { Logger } from 'pino';
import type { NewsletterConfig } from '../../config';
import type { JobSender } from '../../platform/jobs';
import { mailTemplates } from '../../platform/mail/mailer';
import type { PlinthModule } from '../../platform/module';
import type { RateLimiter } from '../../platform/rate-limits';
import { paymentsModule } from '../payments';
import { issueLeaseSeconds, newsletterJobs, newsletterRecurring } from './newsletter.jobs';
import { NewsletterResolver } from './newsletter.resolver';
import { newsletterRoutes } from './newsletter.routes';
import { NewsletterService, type LicenseRenewal } from './newsletter.service';

export interface NewsletterServices {
  newsletter: NewsletterService;
  settings: NewsletterConfig;
  jobs: JobSender;
  logger: Logger;
  /** The payments module's licenses renewing within so many seconds (T3). */
  renewingLicenses(withinSeconds: number): Promise<LicenseRenewal[]>;
  /** The subscribe limit (NEWSLETTER_SUBSCRIBE_RATE_LIMIT_*), per client address. */
  subscribeLimiter(): RateLimiter;
  /** PLINTH_PUBLIC_URL. */
  publicUrl(): string;
  /** Origins the form proxy may send people back to: PLINTH_PUBLIC_URL's and GQL_GRAPHQL_CORS_DOMAIN's. */
  allowedOrigins(): string[];
}

/**
 * The newsletter (spec 3 §1.2, issue 14): double opt-in subscription, the welcome series, the
 * bi-weekly issue, unsubscription and clean-up; REST routes for people and forms, admin GraphQL.
 */
export const newsletterModule: PlinthModule<NewsletterServices> = {
  name: 'newsletter',
  resolvers: [NewsletterResolver],
  create: ({ config, dataSource, mailer, jobs, logger, rateLimits }, modules) => {
    const log = logger.child({ module: 'newsletter' });
    const newsletter = new NewsletterService({
      config,
      dataSource,
      mailer,
      jobs,
      templates: mailTemplates(config),
      logger: log,
      issueLeaseSeconds: issueLeaseSeconds(config.jobs),
    });
    const problem = newsletter.configurationProblem;
    if (problem) log.warn(`${problem}; its routes answer 503`);
    else mailer.requireDelivery('the newsletter');
    // The license records are the payments module's; only its services reach them.
    const { billing } = modules.get(paymentsModule);
    const origins = [new URL(config.publicUrl).origin, ...(config.graphql.corsOrigins === '*' ? [] : config.graphql.corsOrigins)];
    return {
      newsletter,
      settings: config.newsletter,
      jobs,
      logger: log,
      renewingLicenses: (withinSeconds) => billing.licensesRenewingWithin(withinSeconds),
      subscribeLimiter: () => rateLimits.get('newsletterSubscribe'),
      publicUrl: () => config.publicUrl,
      allowedOrigins: () => origins,
    };
  },
  routes: (app, services) => newsletterRoutes(app, services),
  jobs: ({ newsletter }) => newsletterJobs(newsletter),
  recurring: newsletterRecurring,
};
