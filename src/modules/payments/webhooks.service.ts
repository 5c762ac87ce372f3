import type { DataSource, EntityManager } from 'typeorm';
import { sha256Hex } from '../../common/sha256';
import type { PaymentProviderName, PaymentsConfig } from '../../config';
import { stripeSignatureTimestamp, verifyHmacSha256 } from '../../platform/signatures';
import type { BillingService, SubscriptionStatus } from './billing.service';
import type { Payment } from './payments.types';
import { PaymentStatus } from './payments.types';
import type { PaymentsService } from './payments.service';
import { statusOfIntent } from './primary.provider';

export type SignatureCheck = 'valid' | 'invalid' | 'unconfigured';

export type WebhookResult = { outcome: 'processed' | 'duplicate' } | { error: 'INVALID_EVENT'; message: string };

type Json = Record<string, unknown>;

const object = (value: unknown): Json => (value !== null && typeof value === 'object' && !Array.isArray(value) ? (value as Json) : {});
const text = (value: unknown): string | undefined => (typeof value === 'string' && value !== '' ? value : undefined);
const seconds = (value: unknown): Date | undefined => (typeof value === 'number' && Number.isFinite(value) ? new Date(value * 1000) : undefined);
const isoDate = (value: unknown): Date | undefined => {
  const date = typeof value === 'string' ? new Date(value) : undefined;
  return date && !Number.isNaN(date.getTime()) ? date : undefined;
};
const idOf = (value: unknown): string | undefined => text(value) ?? text(object(value).id) ?? (typeof value === 'number' ? String(value) : undefined);

/** Lemon Squeezy's subscription statuses in Stripe's words. */
const BACKUP_STATUSES: Record<string, SubscriptionStatus> = {
  on_trial: 'trialing',
  active: 'active',
  paused: 'paused',
  past_due: 'past_due',
  unpaid: 'unpaid',
  cancelled: 'canceled',
  expired: 'expired',
};

/**
 * The providers' webhooks (spec 3 §4.1, §6): signatures checked over the exact bytes received,
 * then each event applied exactly once, whichever provider is active: its id is inserted into
 * webhook_events under a unique key in the transaction that applies it, so a second delivery
 * (even one arriving at the same moment, which waits on the first's row) changes nothing.
 */
export class WebhooksService {
  constructor(
    private readonly dataSource: DataSource,
    private readonly billing: BillingService,
    private readonly payments: PaymentsService,
    private readonly settings: PaymentsConfig,
  ) {}

  /**
   * Stripe-Signature: `t=<unix time>,v1=<hex>[,v1=...]`, each v1 the HMAC-SHA256 of
   * `<t>.<raw body>` with the endpoint secret, as the SDK's constructEvent checks it; a
   * timestamp older than the tolerance is a replay.
   */
  verifyPrimary(raw: Buffer | undefined, header: string | string[] | undefined, now = Date.now()): SignatureCheck {
    const secret = this.settings.primary.webhookSecret;
    if (!secret) return 'unconfigured';
    const timestamp = stripeSignatureTimestamp(raw, secret, header);
    if (timestamp === undefined || now / 1000 - timestamp > this.settings.webhookToleranceSeconds) return 'invalid';
    return 'valid';
  }

  /** X-Signature: the HMAC-SHA256 (hex) of the raw body with the signing secret. */
  verifyBackup(raw: Buffer | undefined, header: string | string[] | undefined): SignatureCheck {
    const secret = this.settings.backup.webhookSecret;
    if (!secret) return 'unconfigured';
    return verifyHmacSha256(raw, secret, header) ? 'valid' : 'invalid';
  }

  /** A verified primary event: payment intent outcomes, checkouts, subscriptions and invoices. */
  async receivePrimary(body: unknown): Promise<WebhookResult> {
    const event = object(body);
    const id = text(event.id);
    const type = text(event.type);
    if (!id || !type || id.length > 255 || type.length > 255) return { error: 'INVALID_EVENT', message: 'the event must have a string id and type' };
    const data = object(object(event.data).object);
    return this.once('primary', id, type, (manager) => this.applyPrimary(manager, type, data));
  }

  /**
   * A verified backup event. Lemon Squeezy's deliveries carry no event id; a redelivery sends the
   * same bytes, so the event's key is the SHA-256 of its body.
   */
  async receiveBackup(raw: Buffer, body: unknown): Promise<WebhookResult> {
    const event = object(body);
    const meta = object(event.meta);
    const type = text(meta.event_name);
    if (!type || type.length > 255) return { error: 'INVALID_EVENT', message: 'the event must have meta.event_name' };
    const id = sha256Hex(raw);
    return this.once('backup', id, type, (manager) => this.applyBackup(manager, type, object(event.data), object(meta.custom_data)));
  }

  private async once(
    provider: PaymentProviderName,
    eventId: string,
    type: string,
    apply: (manager: EntityManager) => Promise<Payment | null | void>,
  ): Promise<WebhookResult> {
    const result = await this.dataSource.transaction(async (manager) => {
      const inserted = (await manager.query(
        'INSERT INTO webhook_events (provider, event_id, event_type) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING RETURNING event_id',
        [provider, eventId, type],
      )) as unknown[];
      if (inserted.length === 0) return { outcome: 'duplicate' as const };
      return { outcome: 'processed' as const, payment: (await apply(manager)) ?? null };
    });
    if (result.outcome === 'processed' && result.payment) this.payments.announce(result.payment);
    return { outcome: result.outcome };
  }

  private async applyPrimary(manager: EntityManager, type: string, data: Json): Promise<Payment | null | void> {
    if (type.startsWith('payment_intent.')) {
      const providerPaymentId = text(data.id);
      if (!providerPaymentId || !text(data.status)) return;
      const status = statusOfIntent(String(data.status));
      const error = object(data.last_payment_error);
      const metadata = object(data.metadata);
      return this.payments.moveStatus(manager, 'primary', {
        providerPaymentId,
        payment: {
          id: text(metadata.plinth_payment_id),
          idempotencyKey: text(metadata.plinth_idempotency_key),
          customerId: text(metadata.plinth_customer_id),
          amount: typeof data.amount === 'number' && Number.isSafeInteger(data.amount) && data.amount > 0 ? data.amount : undefined,
          currency: typeof data.currency === 'string' && /^[a-z]{3}$/i.test(data.currency) ? data.currency : undefined,
          description: text(data.description),
        },
        status,
        failure:
          status === PaymentStatus.FAILED
            ? { code: error.code === 'card_declined' ? 'CARD_DECLINED' : 'PAYMENT_FAILED', message: text(error.message) ?? 'The payment failed' }
            : undefined,
      });
    }
    switch (type) {
      case 'checkout.session.completed': {
        const subscription = idOf(data.subscription);
        if (data.mode !== 'subscription' || !subscription) return;
        const metadata = object(data.metadata);
        await this.billing.applySubscription(manager, {
          provider: 'primary',
          externalId: subscription,
          licenseSourceId: subscription,
          customerUserId: text(data.client_reference_id) ?? text(metadata.plinth_customer_id),
          customerEmail: text(object(data.customer_details).email) ?? text(data.customer_email),
          product: this.primaryProduct(metadata.plinth_product),
          status: data.payment_status === 'paid' ? 'active' : undefined,
        });
        return;
      }
      case 'customer.subscription.created':
      case 'customer.subscription.updated':
      case 'customer.subscription.deleted': {
        const id = text(data.id);
        if (!id) return;
        const metadata = object(data.metadata);
        const item = object((object(data.items).data as unknown[] | undefined)?.[0]);
        const deleted = type === 'customer.subscription.deleted';
        await this.billing.applySubscription(manager, {
          provider: 'primary',
          externalId: id,
          licenseSourceId: id,
          customerUserId: text(metadata.plinth_customer_id),
          product: this.primaryProduct(metadata.plinth_product, idOf(object(item.price).id)),
          status: deleted ? 'canceled' : primaryStatus(data.status),
          currentPeriodEnd: deleted
            ? (seconds(data.ended_at) ?? seconds(data.current_period_end) ?? seconds(item.current_period_end))
            : (seconds(data.current_period_end) ?? seconds(item.current_period_end)),
        });
        return;
      }
      case 'invoice.paid':
      case 'invoice.payment_failed': {
        const details = object(object(data.parent).subscription_details);
        const subscription = idOf(data.subscription) ?? idOf(details.subscription);
        // An invoice outside a subscription renews nothing.
        if (!subscription) return;
        const lines = ((object(data.lines).data as unknown[] | undefined) ?? []).map(object);
        const periodEnds = lines.map((line) => seconds(object(line.period).end)).filter((end): end is Date => end !== undefined);
        const price = idOf(object(lines[0]?.price).id) ?? idOf(object(object(lines[0]?.pricing).price_details).price);
        const metadata = object(details.metadata);
        await this.billing.applySubscription(manager, {
          provider: 'primary',
          externalId: subscription,
          licenseSourceId: subscription,
          customerUserId: text(metadata.plinth_customer_id),
          customerEmail: text(data.customer_email),
          product: this.primaryProduct(metadata.plinth_product, price),
          status: type === 'invoice.paid' ? 'active' : 'past_due',
          currentPeriodEnd: type === 'invoice.paid' && periodEnds.length > 0 ? new Date(Math.max(...periodEnds.map((end) => end.getTime()))) : undefined,
        });
        return;
      }
      default:
        // Other types are acknowledged and kept as received, as the provider expects.
        return;
    }
  }

  private async applyBackup(manager: EntityManager, type: string, data: Json, custom: Json): Promise<void> {
    const attributes = object(data.attributes);
    const customerUserId = text(custom.user_id);
    if (data.type === 'subscriptions' && type.startsWith('subscription_')) {
      const id = idOf(data.id);
      const order = idOf(attributes.order_id);
      if (!id || !order) return;
      const status = BACKUP_STATUSES[String(attributes.status)];
      const ending = status === 'canceled' || status === 'expired';
      await this.billing.applySubscription(manager, {
        provider: 'backup',
        externalId: id,
        licenseSourceId: order,
        customerUserId,
        customerEmail: text(attributes.user_email),
        product: this.backupProduct(attributes.variant_id),
        status,
        currentPeriodEnd: ending ? (isoDate(attributes.ends_at) ?? isoDate(attributes.renews_at)) : isoDate(attributes.renews_at),
      });
      return;
    }
    if (type === 'order_created' && data.type === 'orders') {
      const id = idOf(data.id);
      if (!id || attributes.status !== 'paid') return;
      await this.billing.applyOrder(manager, {
        provider: 'backup',
        orderId: id,
        customerUserId,
        customerEmail: text(attributes.user_email),
        product: this.backupProduct(object(attributes.first_order_item).variant_id),
      });
    }
  }

  /** Our product: the one named in the metadata we set, else the one whose price this is. */
  private primaryProduct(named: unknown, priceId?: string): string | undefined {
    const products = this.settings.primary.priceIds;
    if (typeof named === 'string' && Object.hasOwn(products, named)) return named;
    return Object.keys(products).find((product) => products[product] === priceId);
  }

  private backupProduct(variantId: unknown): string | undefined {
    const variants = this.settings.backup.variantIds;
    const id = idOf(variantId);
    return Object.keys(variants).find((product) => variants[product] === id);
  }
}

function primaryStatus(value: unknown): SubscriptionStatus | undefined {
  switch (value) {
    case 'active':
    case 'trialing':
    case 'past_due':
    case 'paused':
    case 'unpaid':
    case 'incomplete':
    case 'canceled':
      return value;
    case 'incomplete_expired':
      return 'expired';
    default:
      return undefined;
  }
}
