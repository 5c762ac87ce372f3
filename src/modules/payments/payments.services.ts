import type { SessionSettings } from '../../platform/session';
import type { Platform } from '../../platform/module';
import type { RateLimits } from '../../platform/rate-limits';
import { BackupProvider } from './backup.provider';
import { BillingService } from './billing.service';
import { CheckoutService } from './checkout.service';
import { PaymentsService } from './payments.service';
import { PrimaryProvider } from './primary.provider';
import { ProviderSwitch } from './provider-switch.service';
import { WebhooksService } from './webhooks.service';

export interface PaymentsServices {
  payments: PaymentsService;
  providers: ProviderSwitch;
  billing: BillingService;
  webhooks: WebhooksService;
  checkout: CheckoutService;
  /** X-Admin-Key of the billing admin endpoints; unset: every key is refused. */
  adminKey: string | undefined;
  /** BILLING_PROVIDER, shown in health output only. */
  billingProviderAlias: string | undefined;
  /** How the REST routes read a bearer token (POST /billing/checkout). */
  session: SessionSettings;
  /** For the checkouts quota of POST /billing/checkout. */
  rateLimits: RateLimits;
}

export async function createPaymentsServices({ config, dataSource, pubSub, http, rateLimits }: Platform): Promise<PaymentsServices> {
  const settings = config.payments;
  const providers = new ProviderSwitch(dataSource, settings);
  await providers.seed();
  const primary = new PrimaryProvider(settings);
  const backup = new BackupProvider(settings, http);
  const payments = new PaymentsService(dataSource, providers, { primary, backup }, pubSub, { maxAmount: settings.maxAmount });
  const billing = new BillingService(dataSource, { licenseActivationLimit: settings.licenseActivationLimit });
  return {
    payments,
    providers,
    billing,
    webhooks: new WebhooksService(dataSource, billing, payments, settings),
    checkout: new CheckoutService(providers, primary, backup, settings),
    adminKey: settings.adminKey,
    billingProviderAlias: settings.billingProviderAlias,
    session: {
      adminSecret: config.graphql.adminSecret!,
      jwtSecret: config.graphql.jwtSecret!,
      unauthorizedRole: config.graphql.unauthorizedRole,
    },
    rateLimits,
  };
}
