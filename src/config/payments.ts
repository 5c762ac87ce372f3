import { z } from 'zod';
import type { Area } from './area';
import type { Environment, PatternSettings } from './environment';
import { publicUrlOf } from './server';
import { baseUrl, integer, nonEmpty, productionSecretProblem } from './validators';

/** The two payment providers of spec 3: primary (Stripe-compatible) and backup (Lemon Squeezy-compatible). */
export const PAYMENT_PROVIDERS = ['primary', 'backup'] as const;
export type PaymentProviderName = (typeof PAYMENT_PROVIDERS)[number];

/** PRIMARY_PROVIDER_PRICE_ID_<PRODUCT> and BACKUP_PROVIDER_VARIANT_ID_<PRODUCT>: one per product. */
const PRODUCT_VARIABLE = /^(PRIMARY_PROVIDER_PRICE_ID|BACKUP_PROVIDER_VARIANT_ID)_([A-Z][A-Z0-9_]*)$/;

const checkoutUrl = nonEmpty.refine((value) => URL.canParse(value) && /^https?:/.test(value), { error: 'must be an absolute http(s) URL' }).optional();

// Payments and the billing provider switch (spec 1 §2.2, spec 3 §2.1).
export const paymentsVariables = {
  PAYMENT_PROVIDER: z
    .enum(PAYMENT_PROVIDERS, { error: 'must be primary or backup' })
    .default('primary')
    .describe('the provider selection stored on first start (`primary` or `backup`); after that `POST /admin/payment-provider` decides, for every instance'),
  BILLING_PROVIDER: z
    .enum(PAYMENT_PROVIDERS, { error: 'must be primary or backup' })
    .optional()
    .meta({ description: 'an alias shown by `GET /billing/health` only', unset: 'none' }),
  ADMIN_KEY: z.string().min(16, { error: 'must be at least 16 characters' }).optional().meta({
    description: '`X-Admin-Key` of `/admin/payment-provider` (16+ characters, 32+ in production); unset: those endpoints refuse every key',
    unset: 'none',
  }),
  PRIMARY_PROVIDER_API_URL: baseUrl
    .optional()
    .meta({ description: 'the primary (Stripe-compatible) provider, reached with the official SDK', unset: "the provider's address" }),
  PRIMARY_PROVIDER_API_KEY: nonEmpty.optional().meta({ description: "the primary provider's API key", unset: 'none' }),
  PRIMARY_PROVIDER_WEBHOOK_SECRET: nonEmpty.optional().meta({ description: 'verifies `POST /webhooks/primary`', unset: 'none' }),
  BACKUP_PROVIDER_API_URL: baseUrl.default('https://api.lemonsqueezy.com').describe("the backup (Lemon Squeezy-compatible) provider's JSON:API"),
  BACKUP_PROVIDER_API_KEY: nonEmpty
    .optional()
    .meta({ description: "the backup provider's API key; needed, with the store id and the webhook secret, to switch to backup", unset: 'none' }),
  BACKUP_PROVIDER_STORE_ID: nonEmpty
    .regex(/^\d+$/, { error: 'must be the numeric id of the store' })
    .optional()
    .meta({ description: 'the numeric id of the store at backup; needed to switch to backup', unset: 'none' }),
  BACKUP_PROVIDER_WEBHOOK_SECRET: nonEmpty
    .optional()
    .meta({ description: 'verifies `POST /webhooks/backup` (32+ characters in production); needed to switch to backup', unset: 'none' }),
  PAYMENTS_MAX_AMOUNT: integer(1, 99_999_999).default(99_999_999).describe('largest processPayment amount, in minor units'),
  PAYMENTS_PROVIDER_TIMEOUT_MS: integer(100, 600_000).default(20_000).describe('one provider call, whole'),
  PAYMENTS_PROVIDER_MAX_RETRIES: integer(0, 10).default(1).describe('retries of a provider call lost on the network (same idempotency key)'),
  PAYMENTS_WEBHOOK_TOLERANCE_SECONDS: integer(1, 86_400).default(300).describe('oldest `Stripe-Signature` timestamp accepted (replays)'),
  PAYMENTS_LICENSE_ACTIVATION_LIMIT: integer(1, 1_000_000).default(5).describe('instances one license may be activated on'),
  BILLING_CHECKOUT_SUCCESS_URL: checkoutUrl.meta({
    description: 'where the hosted checkout sends the customer back after paying',
    unset: '`<PLINTH_PUBLIC_URL>/billing/success`',
  }),
  BILLING_CHECKOUT_CANCEL_URL: checkoutUrl.meta({
    description: 'where the hosted checkout sends the customer back after cancelling',
    unset: '`<PLINTH_PUBLIC_URL>/billing/cancel`',
  }),
};

type ProductIds = Record<'PRIMARY_PROVIDER_PRICE_ID' | 'BACKUP_PROVIDER_VARIANT_ID', Record<string, string>>;

/** The provider ids of each product (PRIMARY_PROVIDER_PRICE_ID_PRO gives primary's price of `pro`). */
export function productIdsFromEnv(env: Record<string, string | undefined>, problems: string[]): ProductIds {
  const found: ProductIds = { PRIMARY_PROVIDER_PRICE_ID: {}, BACKUP_PROVIDER_VARIANT_ID: {} };
  for (const [variable, value] of Object.entries(env)) {
    const match = PRODUCT_VARIABLE.exec(variable);
    if (!match || value === undefined) continue;
    const id = value.trim();
    const valid = match[1] === 'BACKUP_PROVIDER_VARIANT_ID' ? /^\d+$/.test(id) : /^[A-Za-z0-9_]{1,255}$/.test(id);
    if (!valid) {
      const shape = match[1] === 'BACKUP_PROVIDER_VARIANT_ID' ? 'a numeric variant id' : 'a price id such as price_1Pz';
      problems.push(`${variable} must be ${shape} (got ${JSON.stringify(value)})`);
      continue;
    }
    found[match[1] as keyof ProductIds][match[2].toLowerCase()] = id;
  }
  return found;
}

export const payments = {
  name: 'payments',
  title: 'Payments',
  variables: paymentsVariables,
  patterns: [
    {
      variable: 'PRIMARY_PROVIDER_PRICE_ID_<PRODUCT>',
      default: 'none',
      description: 'the price of a product at primary; `POST /billing/checkout` takes the product in lower case (`PRO` gives `pro`)',
    },
    { variable: 'BACKUP_PROVIDER_VARIANT_ID_<PRODUCT>', default: 'none', description: 'the (numeric) variant of a product at backup' },
  ],
  problems: (values: Environment) => [
    ...productionSecretProblem('ADMIN_KEY', values.ADMIN_KEY, values.NODE_ENV),
    ...productionSecretProblem('BACKUP_PROVIDER_WEBHOOK_SECRET', values.BACKUP_PROVIDER_WEBHOOK_SECRET, values.NODE_ENV),
  ],
  settings: (values: Environment, found: PatternSettings) => {
    const publicUrl = publicUrlOf(values);
    return {
      /** Payments, the provider switch and its webhooks (spec 1 §2.2, spec 3 §2.1). */
      payments: {
        /** The selection stored when none is stored yet; the stored one wins after. */
        initialProvider: values.PAYMENT_PROVIDER,
        billingProviderAlias: values.BILLING_PROVIDER,
        adminKey: values.ADMIN_KEY,
        maxAmount: values.PAYMENTS_MAX_AMOUNT,
        providerTimeoutMs: values.PAYMENTS_PROVIDER_TIMEOUT_MS,
        providerMaxRetries: values.PAYMENTS_PROVIDER_MAX_RETRIES,
        webhookToleranceSeconds: values.PAYMENTS_WEBHOOK_TOLERANCE_SECONDS,
        licenseActivationLimit: values.PAYMENTS_LICENSE_ACTIVATION_LIMIT,
        checkoutSuccessUrl: values.BILLING_CHECKOUT_SUCCESS_URL ?? `${publicUrl}/billing/success`,
        checkoutCancelUrl: values.BILLING_CHECKOUT_CANCEL_URL ?? `${publicUrl}/billing/cancel`,
        primary: {
          /** Unset: the provider's public address (the SDK's default). */
          apiUrl: values.PRIMARY_PROVIDER_API_URL,
          apiKey: values.PRIMARY_PROVIDER_API_KEY,
          webhookSecret: values.PRIMARY_PROVIDER_WEBHOOK_SECRET,
          /** Price id by product (lower case). */
          priceIds: found.products.PRIMARY_PROVIDER_PRICE_ID,
        },
        backup: {
          apiUrl: values.BACKUP_PROVIDER_API_URL,
          apiKey: values.BACKUP_PROVIDER_API_KEY,
          storeId: values.BACKUP_PROVIDER_STORE_ID,
          webhookSecret: values.BACKUP_PROVIDER_WEBHOOK_SECRET,
          /** Variant id by product (lower case). */
          variantIds: found.products.BACKUP_PROVIDER_VARIANT_ID,
        },
      },
    };
  },
} satisfies Area;
