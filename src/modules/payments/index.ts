import type { PlinthModule } from '../../platform/module';
import { PaymentsResolver } from './payments.resolver';
import { paymentsActions, paymentsRoutes } from './payments.routes';
import { createPaymentsServices, type PaymentsServices } from './payments.services';

/** Payments (processPayment), the primary/backup provider switch, the providers' webhooks, subscriptions, licenses and checkout. */
export const paymentsModule: PlinthModule<PaymentsServices> = {
  name: 'payments',
  resolvers: [PaymentsResolver],
  create: (platform) => createPaymentsServices(platform),
  routes: (app, services) => paymentsRoutes(app, services),
  actions: (services) => paymentsActions(services),
};
