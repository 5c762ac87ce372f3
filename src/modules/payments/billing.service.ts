import { randomBytes } from 'node:crypto';
import type { DataSource, EntityManager, ObjectLiteral, SelectQueryBuilder } from 'typeorm';
import type { PaymentProviderName } from '../../config';
import { fieldErrors } from '../../common/validation';
import { ADMIN_ROLE } from '../../common/roles';
import { type Session } from '../../platform/session';
import { filterRows, type OwnedTable } from '../../platform/row-filter';
import { LicenseRecord, type LicenseStatus } from './license.entity';
import { LicenseActivationInput, type BillingSubscription, type License, type LicenseActivationOutput } from './payments.types';
import { SubscriptionRecord } from './subscription.entity';
import { UUID } from '../../common/ids';

/** A license about to renew, and who holds it. */
export interface RenewingLicense {
  id: string;
  product: string | null;
  renewal_date: Date;
  email: string;
  name: string | null;
}

/** Subscription statuses, in Stripe's words (the backup provider's are translated to them). */
export type SubscriptionStatus = 'active' | 'trialing' | 'past_due' | 'paused' | 'unpaid' | 'incomplete' | 'canceled' | 'expired';

/** What one webhook event says about a subscription; unknown parts are left as they are. */
export interface SubscriptionChange {
  provider: PaymentProviderName;
  externalId: string;
  /** Our user id, when the event carries it (client_reference_id, custom data). */
  customerUserId?: string | null;
  customerEmail?: string | null;
  product?: string | null;
  status?: SubscriptionStatus;
  currentPeriodEnd?: Date | null;
  /** The provider object whose license this subscription's is (see LicenseRecord.sourceId). */
  licenseSourceId: string;
}

/** A one-off purchase that grants a license of its own. */
export interface OrderChange {
  provider: PaymentProviderName;
  orderId: string;
  customerUserId?: string | null;
  customerEmail?: string | null;
  product?: string | null;
}

/** Crockford's base 32: no I, L, O or U to misread. */
const KEY_ALPHABET = '0123456789ABCDEFGHJKMNPQRSTVWXYZ';

/** A new license key: 20 random base-32 characters (100 bits) in four groups. */
export function newLicenseKey(): string {
  const bytes = randomBytes(20);
  const characters = [...bytes].map((byte) => KEY_ALPHABET[byte & 31]);
  return [0, 5, 10, 15].map((start) => characters.slice(start, start + 5).join('')).join('-');
}

/** A subscription no event changes any more: expired, or canceled at primary (where cancellation is final). */
const FINAL_SUBSCRIPTION = `(subscriptions.status = 'expired' OR (subscriptions.provider = 'primary' AND subscriptions.status = 'canceled'))`;

/** A subscription status as the license it grants stands. */
function licenseStatusOf(status: string): LicenseStatus {
  if (status === 'active' || status === 'trialing' || status === 'past_due') return 'active';
  if (status === 'canceled') return 'canceled';
  return 'expired';
}

/**
 * Subscriptions and licenses, whichever provider sold them. Webhook events change them inside
 * the event's transaction (so an event is applied whole, once); customers read their own.
 */
export class BillingService {
  constructor(
    private readonly dataSource: DataSource,
    private readonly settings: { licenseActivationLimit: number },
  ) {}

  /**
   * Records what an event says of a subscription and brings its license in line. Events arrive in
   * any order: each fills in what it knows; the period end only moves forward (but to where an
   * ending subscription ends); an expired subscription, or a canceled one at primary, stays so.
   */
  async applySubscription(manager: EntityManager, change: SubscriptionChange): Promise<SubscriptionRecord> {
    const [row] = (await manager.query(
      `INSERT INTO subscriptions (provider, external_id, customer_user_id, customer_email, product, status, current_period_end)
       VALUES ($1, $2, (SELECT id FROM users WHERE id = $3::uuid), $4, $5, COALESCE($6, 'incomplete'), $7)
       ON CONFLICT (provider, external_id) DO UPDATE SET
         customer_user_id = COALESCE(EXCLUDED.customer_user_id, subscriptions.customer_user_id),
         customer_email = COALESCE(EXCLUDED.customer_email, subscriptions.customer_email),
         product = COALESCE(EXCLUDED.product, subscriptions.product),
         status = CASE WHEN ${FINAL_SUBSCRIPTION} THEN subscriptions.status ELSE COALESCE($6, subscriptions.status) END,
         current_period_end = CASE
           WHEN ${FINAL_SUBSCRIPTION} THEN subscriptions.current_period_end
           -- An ending subscription's period ends when the provider says, earlier than planned or not.
           WHEN $6 IN ('canceled', 'expired') THEN COALESCE(EXCLUDED.current_period_end, subscriptions.current_period_end)
           ELSE GREATEST(EXCLUDED.current_period_end, subscriptions.current_period_end) END,
         updated_at = now()
       RETURNING id`,
      [
        change.provider,
        change.externalId,
        validUserId(change.customerUserId),
        change.customerEmail ?? null,
        change.product ?? null,
        change.status ?? null,
        change.currentPeriodEnd ?? null,
      ],
    )) as { id: string }[];
    const subscription = await manager.getRepository(SubscriptionRecord).findOneByOrFail({ id: row.id });
    const status = licenseStatusOf(subscription.status);
    await this.upsertLicense(manager, {
      provider: change.provider,
      sourceId: change.licenseSourceId,
      subscriptionId: subscription.id,
      customerUserId: subscription.customerUserId,
      product: subscription.product,
      status,
      renewalDate: status === 'active' ? subscription.currentPeriodEnd : null,
      expiresAt: status === 'active' ? null : (subscription.currentPeriodEnd ?? new Date()),
    });
    return subscription;
  }

  /** A paid one-off order: a license that does not renew (or the license its subscription already has). */
  async applyOrder(manager: EntityManager, order: OrderChange): Promise<void> {
    await this.upsertLicense(manager, {
      provider: order.provider,
      sourceId: order.orderId,
      subscriptionId: null,
      customerUserId: (await this.existingUser(manager, order.customerUserId)) ?? null,
      product: order.product ?? null,
      status: null,
      renewalDate: null,
      expiresAt: null,
    });
  }

  /**
   * activateLicense: counts `instance` against the license's limit, once per instance (activating
   * it again answers success and counts nothing). Works alike for both providers' licenses.
   */
  async activateLicense(rawKey: unknown, rawInstance: unknown): Promise<LicenseActivationOutput> {
    const input = new LicenseActivationInput();
    input.key = (typeof rawKey === 'string' ? rawKey.trim().toUpperCase() : rawKey) as string;
    input.instance = (typeof rawInstance === 'string' ? rawInstance.trim() : rawInstance) as string;
    const errors = await fieldErrors(input);
    if (errors.length > 0) return { success: false, message: 'Validation failed', error_code: 'VALIDATION_ERROR', errors };

    return this.dataSource.transaction(async (manager) => {
      const license = await manager
        .getRepository(LicenseRecord)
        .createQueryBuilder('license')
        .setLock('pessimistic_write')
        .where('license.license_key = :key', { key: input.key })
        .getOne();
      if (!license) return { success: false, message: 'No license has this key', error_code: 'LICENSE_NOT_FOUND' };
      const usable = license.status === 'active' || (license.status === 'canceled' && license.expiresAt !== null && license.expiresAt > new Date());
      if (!usable) return { success: false, message: `The license is ${license.status}`, error_code: 'LICENSE_INACTIVE', license: toLicense(license) };
      const known = (await manager.query('SELECT 1 FROM license_activations WHERE license_id = $1 AND instance = $2', [
        license.id,
        input.instance,
      ])) as unknown[];
      if (known.length > 0) return { success: true, message: 'This instance was already activated', license: toLicense(license) };
      if (license.activationCount >= license.activationLimit) {
        return {
          success: false,
          message: `The license is activated on its limit of ${license.activationLimit} instances`,
          error_code: 'ACTIVATION_LIMIT_REACHED',
          license: toLicense(license),
        };
      }
      await manager.query('INSERT INTO license_activations (license_id, instance) VALUES ($1, $2)', [license.id, input.instance]);
      await manager.query('UPDATE licenses SET activation_count = activation_count + 1, updated_at = now() WHERE id = $1', [license.id]);
      license.activationCount += 1;
      return { success: true, message: 'License activated', license: toLicense(license) };
    });
  }

  /**
   * Active licenses whose renewal falls within `withinSeconds` from now and not yet passed, with
   * their holder's address (holders without one, or deleted, are left out): for the renewal
   * notice another module sends.
   */
  async licensesRenewingWithin(withinSeconds: number): Promise<RenewingLicense[]> {
    return (await this.dataSource.query(
      `SELECT l.id, l.product, l.renewal_date, u.email, u.name
       FROM licenses l JOIN users u ON u.id = l.customer_user_id
       WHERE l.status = 'active' AND l.renewal_date > now() AND l.renewal_date <= now() + make_interval(secs => $1)
         AND u.email IS NOT NULL AND u.deleted_at IS NULL
       ORDER BY l.renewal_date, l.id`,
      [withinSeconds],
    )) as RenewingLicense[];
  }

  /** Subscriptions, newest first: the caller's own; an admin's choice of customer, or all. */
  async subscriptions(session: Session, customerId: string | null, first: number): Promise<BillingSubscription[]> {
    const query = this.dataSource.getRepository(SubscriptionRecord).createQueryBuilder('s').orderBy('s.created_at', 'DESC').take(first);
    return (await customerRows(query, 's', session, customerId).getMany()).map(toSubscription);
  }

  async licenses(session: Session, customerId: string | null, first: number): Promise<License[]> {
    const query = this.dataSource.getRepository(LicenseRecord).createQueryBuilder('l').orderBy('l.created_at', 'DESC').take(first);
    return (await customerRows(query, 'l', session, customerId).getMany()).map(toLicense);
  }

  private async upsertLicense(
    manager: EntityManager,
    license: {
      provider: PaymentProviderName;
      sourceId: string;
      subscriptionId: string | null;
      customerUserId: string | null;
      product: string | null;
      /** null: an order, which leaves the status of a license it finds as it is. */
      status: LicenseStatus | null;
      renewalDate: Date | null;
      expiresAt: Date | null;
    },
  ): Promise<void> {
    await manager.query(
      `INSERT INTO licenses (license_key, product, customer_user_id, provider, source_id, subscription_id, status, activation_limit, renewal_date, expires_at)
       VALUES ($1, $2, $3, $4, $5, $6, COALESCE($7, 'active'), $8, $9, $10)
       ON CONFLICT (provider, source_id) DO UPDATE SET
         product = COALESCE(EXCLUDED.product, licenses.product),
         customer_user_id = COALESCE(EXCLUDED.customer_user_id, licenses.customer_user_id),
         subscription_id = COALESCE(EXCLUDED.subscription_id, licenses.subscription_id),
         status = COALESCE($7, licenses.status),
         renewal_date = CASE WHEN $7::text IS NULL THEN licenses.renewal_date ELSE EXCLUDED.renewal_date END,
         expires_at = CASE WHEN $7::text IS NULL THEN licenses.expires_at ELSE EXCLUDED.expires_at END,
         updated_at = now()`,
      [
        newLicenseKey(),
        license.product,
        license.customerUserId,
        license.provider,
        license.sourceId,
        license.subscriptionId,
        license.status,
        this.settings.licenseActivationLimit,
        license.renewalDate,
        license.expiresAt,
      ],
    );
  }

  private async existingUser(manager: EntityManager, userId: string | null | undefined): Promise<string | undefined> {
    const valid = validUserId(userId);
    if (!valid) return undefined;
    const rows = (await manager.query('SELECT id FROM users WHERE id = $1', [valid])) as { id: string }[];
    return rows[0]?.id;
  }
}

/** A user id from a provider's event, when it is one (anything else is ignored, never an error). */
function validUserId(value: string | null | undefined): string | null {
  return typeof value === 'string' && UUID.test(value) ? value.toLowerCase() : null;
}

/** Payments, subscriptions and licenses are user-owned rows: their customer's, and its source account's admins'. */
export const CUSTOMER_ROWS: OwnedTable = { owner: 'customer_user_id', uuid: true };

/** The rows of a list the session may see (spec 2 §2.3), narrowed to one customer when an admin names one. */
export function customerRows<Row extends ObjectLiteral>(
  query: SelectQueryBuilder<Row>,
  alias: string,
  session: Session,
  customerId: string | null,
): SelectQueryBuilder<Row> {
  filterRows(query, alias, session, CUSTOMER_ROWS);
  return session.role === ADMIN_ROLE && customerId ? query.andWhere(`"${alias}"."customer_user_id" = :customerId`, { customerId }) : query;
}

export function toSubscription(record: SubscriptionRecord): BillingSubscription {
  return {
    id: record.id,
    provider: record.provider,
    external_id: record.externalId,
    customer_id: record.customerUserId,
    product: record.product,
    status: record.status,
    current_period_end: record.currentPeriodEnd,
    created_at: record.createdAt,
    updated_at: record.updatedAt,
  };
}

export function toLicense(record: LicenseRecord): License {
  return {
    id: record.id,
    key: record.licenseKey,
    product: record.product,
    customer_id: record.customerUserId,
    provider: record.provider,
    status: record.status,
    activation_limit: record.activationLimit,
    activation_count: record.activationCount,
    renewal_date: record.renewalDate,
    expires_at: record.expiresAt,
    created_at: record.createdAt,
  };
}
