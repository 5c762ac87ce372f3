import { createHmac, randomBytes } from 'node:crypto';
import Stripe from 'stripe';
import type { TestDatabase } from '../support/database';

export const ADMIN_KEY = 'test-billing-admin-key-0123456789';
export const PRIMARY_WEBHOOK_SECRET = 'whsec_test_primary_0123456789';
export const BACKUP_WEBHOOK_SECRET = 'backup-signing-secret-0123456789';

/** A user row to charge (payments reference users). */
export async function createUser(database: TestDatabase, email: string): Promise<string> {
  const [row] = await database.query<{ id: string }>('INSERT INTO users (email, name) VALUES ($1, $2) RETURNING id', [email, email.split('@')[0]]);
  return row.id;
}

/** The settings of a server whose primary provider is the local one at `primaryUrl`. */
export function paymentSettings(primary: { url: string; apiKey: string }, overrides: Record<string, string> = {}): Record<string, string> {
  return {
    ADMIN_KEY,
    PRIMARY_PROVIDER_API_URL: primary.url,
    PRIMARY_PROVIDER_API_KEY: primary.apiKey,
    PRIMARY_PROVIDER_WEBHOOK_SECRET: PRIMARY_WEBHOOK_SECRET,
    PRIMARY_PROVIDER_PRICE_ID_PRO: 'price_pro_monthly',
    PAYMENTS_PROVIDER_MAX_RETRIES: '0',
    ...overrides,
  };
}

/** The backup provider's settings, all three required ones and a variant of product pro. */
export const BACKUP_SETTINGS = {
  BACKUP_PROVIDER_API_KEY: 'backup-api-key-0123456789',
  BACKUP_PROVIDER_STORE_ID: '4242',
  BACKUP_PROVIDER_WEBHOOK_SECRET: BACKUP_WEBHOOK_SECRET,
  BACKUP_PROVIDER_VARIANT_ID_PRO: '777',
};

/** A primary provider event as Stripe delivers it. */
export function primaryEvent(type: string, object: Record<string, unknown>, id = `evt_${randomBytes(12).toString('hex')}`) {
  return {
    id,
    object: 'event',
    api_version: '2026-10-28.endive',
    created: Math.floor(Date.now() / 1000),
    type,
    livemode: false,
    pending_webhooks: 1,
    data: { object },
  };
}

/** The Stripe-Signature header the provider sends, made by the official SDK's test helper. */
export function primarySignature(payload: string, options: { timestamp?: number; secret?: string } = {}): string {
  return Stripe.webhooks.generateTestHeaderString({ payload, secret: options.secret ?? PRIMARY_WEBHOOK_SECRET, timestamp: options.timestamp });
}

/** X-Signature as the backup provider makes it: hex HMAC-SHA256 of the body. */
export function backupSignature(payload: string, secret = BACKUP_WEBHOOK_SECRET): string {
  return createHmac('sha256', secret).update(payload).digest('hex');
}

export interface WebhookAnswer {
  status: number;
  body: { received?: boolean; duplicate?: boolean; error_code?: string; message?: string };
}

async function postWebhook(url: string, payload: string, headers: Record<string, string>): Promise<WebhookAnswer> {
  const response = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: payload });
  return { status: response.status, body: (await response.json()) as WebhookAnswer['body'] };
}

/** Delivers a primary event, signed unless a header is given. */
export function postPrimary(base: string, event: unknown, header?: string | null): Promise<WebhookAnswer> {
  const payload = JSON.stringify(event);
  const signature = header === undefined ? primarySignature(payload) : header;
  return postWebhook(`${base}/webhooks/primary`, payload, signature === null ? {} : { 'stripe-signature': signature });
}

/** Delivers a backup event, signed unless a header is given. */
export function postBackup(base: string, event: unknown, header?: string | null): Promise<WebhookAnswer> {
  const payload = JSON.stringify(event);
  const signature = header === undefined ? backupSignature(payload) : header;
  return postWebhook(
    `${base}/webhooks/backup`,
    payload,
    signature === null ? {} : { 'x-signature': signature, 'x-event-name': (event as { meta: { event_name: string } }).meta.event_name },
  );
}

/** A backup provider event as Lemon Squeezy delivers it (JSON:API resource under data). */
export function backupEvent(
  eventName: string,
  type: 'orders' | 'subscriptions',
  id: string,
  attributes: Record<string, unknown>,
  custom: Record<string, unknown> = {},
) {
  const now = new Date().toISOString();
  return {
    meta: { test_mode: true, event_name: eventName, webhook_id: 'c5b5a1c4-6c0a-4b1e-9d8e-5f0e1e2a3b4c', custom_data: custom },
    data: {
      type,
      id,
      attributes: { store_id: 4242, customer_id: 91, created_at: now, updated_at: now, test_mode: true, ...attributes },
      relationships: {},
      links: { self: `https://api.lemonsqueezy.com/v1/${type}/${id}` },
    },
  };
}

export function backupOrder(id: string, userId: string | undefined, overrides: Record<string, unknown> = {}) {
  return backupEvent(
    'order_created',
    'orders',
    id,
    {
      identifier: randomBytes(8).toString('hex'),
      order_number: Number(id),
      user_email: 'buyer@example.com',
      currency: 'USD',
      status: 'paid',
      total: 999,
      first_order_item: { id: 1, order_id: Number(id), product_id: 55, variant_id: 777, product_name: 'Pro', variant_name: 'Monthly', price: 999 },
      urls: { receipt: `https://app.lemonsqueezy.com/my-orders/${id}` },
      ...overrides,
    },
    userId ? { user_id: userId } : {},
  );
}

export function backupSubscription(eventName: string, id: string, orderId: string, userId: string | undefined, overrides: Record<string, unknown> = {}) {
  return backupEvent(
    eventName,
    'subscriptions',
    id,
    {
      order_id: Number(orderId),
      order_item_id: 1,
      product_id: 55,
      variant_id: 777,
      user_email: 'buyer@example.com',
      status: 'active',
      cancelled: false,
      renews_at: new Date(Date.now() + 30 * 86_400_000).toISOString(),
      ends_at: null,
      ...overrides,
    },
    userId ? { user_id: userId } : {},
  );
}
