import type { PlinthModule } from '../../platform/module';
import { PaymentsResolver } from './payments.resolver';
import { paymentsActions, paymentsRoutes } from './payments.routes';
import { PaymentsService } from './payments.service';
import { PrimaryProvider } from './primary.provider';
import { ProviderSwitch } from './provider-switch.service';
import { BackupProvider } from './backup.provider';

export interface PaymentsServices {
  payments: PaymentsService;
  providers: ProviderSwitch;
  /** X-Admin-Key of the billing admin endpoints; unset: every key is refused. */
  adminKey: string | undefined;
  /** BILLING_PROVIDER, shown in health output only. */
  billingProviderAlias: string | undefined;
}

/** Payments (processPayment), the primary/backup provider switch and the providers' webhooks. */
export const paymentsModule: PlinthModule<PaymentsServices> = {
  name: 'payments',
  resolvers: [PaymentsResolver],
  create: async ({ config, dataSource, pubSub, http }) => {
    const settings = config.payments;
    const providers = new ProviderSwitch(dataSource, settings);
    await providers.seed();
    const primary = new PrimaryProvider(settings);
    const backup = new BackupProvider(settings, http);
    return {
      payments: new PaymentsService(dataSource, providers, { primary, backup }, pubSub, { maxAmount: settings.maxAmount }),
      providers,
      adminKey: settings.adminKey,
      billingProviderAlias: settings.billingProviderAlias,
    };
  },
  routes: (app, services) => paymentsRoutes(app, services),
  actions: (services) => paymentsActions(services),
};
