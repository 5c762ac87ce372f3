import type { PlinthModule } from '../../platform/module';
import { newsletterJobs, newsletterRecurring } from './newsletter.jobs';
import { NewsletterResolver } from './newsletter.resolver';
import { newsletterRoutes } from './newsletter.routes';
import { createNewsletterServices, type NewsletterServices } from './newsletter.services';

/**
 * The newsletter (spec 3 §1.2): double opt-in subscription, the welcome series, the
 * bi-weekly issue, unsubscription and clean-up; REST routes for people and forms, admin GraphQL.
 */
export const newsletterModule: PlinthModule<NewsletterServices> = {
  name: 'newsletter',
  resolvers: [NewsletterResolver],
  create: createNewsletterServices,
  routes: (app, services) => newsletterRoutes(app, services),
  jobs: newsletterJobs,
  recurring: newsletterRecurring,
};
