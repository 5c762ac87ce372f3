import { randomUUID } from 'node:crypto';
import { QueryFailedError, type DataSource, type EntityManager } from 'typeorm';
import type { PaymentProviderName } from '../../config';
import type { FieldError } from '../../common/field-error.types';
import { fieldErrors } from '../../common/validation';
import type { EventPublisher } from '../../graphql/pubsub';
import { ADMIN_ROLE, type Session } from '../../http/session';
import { ownerFilter } from './billing.service';
import { PaymentRecord } from './payment.entity';
import { Payment, PaymentInput, PaymentStatus, type PaymentOutput } from './payments.types';
import type { ChargeRequest, ChargeResult } from './primary.provider';
import type { ProviderSwitch } from './provider-switch.service';

/** Published (with the Payment) whenever a payment is recorded or changes status, one topic per provider id. */
export const PAYMENT_UPDATED = 'PAYMENT_UPDATED';
export const paymentTopic = (providerPaymentId: string) => `${PAYMENT_UPDATED}:${providerPaymentId}`;

/** The providers' side of a payment: each takes a charge and answers with a result, never an exception. */
export type Charger = Record<PaymentProviderName, { charge(request: ChargeRequest): Promise<ChargeResult> }>;

export interface PaymentSettings {
  maxAmount: number;
}

/** Longest client Idempotency-Key taken (the provider's limit is 255, ours adds the customer id). */
export const MAX_IDEMPOTENCY_KEY_LENGTH = 200;
const IDEMPOTENCY_KEY = /^[\x21-\x7e]+$/;

/** A row the status moves of a final one may not leave (a FAILED call that never reached the provider is not final). */
const FINAL_CONDITION = `(status = 'SUCCEEDED' OR (status = 'FAILED' AND provider_payment_id IS NOT NULL))`;

export class PaymentsService {
  constructor(
    private readonly dataSource: DataSource,
    private readonly providers: ProviderSwitch,
    private readonly chargers: Charger,
    private readonly events: EventPublisher,
    private readonly settings: PaymentSettings,
  ) {}

  /**
   * processPayment (spec 1 §2.2): validates, records the payment, charges it at the active
   * provider with an idempotency key (the client's Idempotency-Key, scoped to the customer, so a
   * retried call charges once and answers the same payment) and records the outcome. Every
   * failure is an answer with success=false, never an exception.
   */
  async processPayment(raw: unknown, session: Session, clientKey?: string | string[]): Promise<PaymentOutput> {
    const input = normalise(raw);
    const errors = await fieldErrors(input);
    if (!errors.some((error) => error.field === 'amount') && input.amount > this.settings.maxAmount) {
      errors.push({ field: 'amount', message: `amount must be at most ${this.settings.maxAmount}`, code: 'INVALID_FORMAT' });
    }
    if (clientKey !== undefined && (typeof clientKey !== 'string' || clientKey.length > MAX_IDEMPOTENCY_KEY_LENGTH || !IDEMPOTENCY_KEY.test(clientKey))) {
      errors.push({
        field: 'idempotency_key',
        message: `the Idempotency-Key header must be one value of 1 to ${MAX_IDEMPOTENCY_KEY_LENGTH} visible ASCII characters`,
        code: 'INVALID_FORMAT',
      });
    }
    if (errors.length > 0) return refused('Validation failed', 'VALIDATION_ERROR', errors);
    if (session.role !== ADMIN_ROLE && session.userId !== input.customer_id) {
      return refused('You may only charge yourself', 'FORBIDDEN', [
        { field: 'customer_id', message: 'customer_id must be your own user id', code: 'FORBIDDEN' },
      ]);
    }

    const provider = await this.providers.active();
    const idempotencyKey = typeof clientKey === 'string' ? `${input.customer_id}:${clientKey}` : randomUUID();
    let record: PaymentRecord;
    try {
      record = await this.recordAttempt(provider, idempotencyKey, input);
    } catch (error) {
      if (error instanceof QueryFailedError && (error.driverError as { code?: string }).code === '23503') {
        return refused('Validation failed', 'VALIDATION_ERROR', [
          { field: 'customer_id', message: 'customer_id is not a user', code: 'NOT_FOUND' },
        ]);
      }
      throw error;
    }
    if (!sameRequest(record, input)) {
      return refused('This Idempotency-Key was already used for a different payment', 'IDEMPOTENCY_KEY_REUSED', [
        { field: 'idempotency_key', message: 'this Idempotency-Key was already used for a different payment', code: 'ALREADY_EXISTS' },
      ]);
    }

    const result = await this.chargers[provider].charge({
      paymentId: record.id,
      customerId: input.customer_id,
      amount: input.amount,
      currency: input.currency,
      paymentMethodId: input.payment_method_id,
      description: input.description ?? null,
      idempotencyKey,
    });
    if (result.failure?.code === 'IDEMPOTENCY_KEY_REUSED') {
      return { ...refused(result.failure.message, result.failure.code), status: record.status, payment_intent_id: record.providerPaymentId };
    }
    const stored = await this.applyResult(record.id, result);
    return outputOf(stored ?? record, result);
  }

  /** Payments, newest first: the caller's own, or everyone's (or one customer's) for an admin. */
  async list(session: Session, customerId: string | null, first: number): Promise<Payment[]> {
    const owner = ownerFilter(session, customerId);
    if (owner === false) return [];
    const query = this.dataSource.getRepository(PaymentRecord).createQueryBuilder('payment').orderBy('payment.created_at', 'DESC').take(first);
    if (owner) query.where('payment.customer_user_id = :owner', { owner });
    return (await query.getMany()).map(toPayment);
  }

  /** One payment by the provider's id, when the session may see it. */
  async findByProviderId(providerPaymentId: string): Promise<Payment | null> {
    const record = await this.dataSource.getRepository(PaymentRecord).findOneBy({ providerPaymentId });
    return record ? toPayment(record) : null;
  }

  /**
   * A status a provider's webhook reports (spec: as Stripe moves them). The payment is found by
   * the provider's id, or by our id in the provider's metadata (a call whose answer was lost);
   * a final state never moves back. Runs in the webhook's transaction; publishes after it commits.
   */
  async moveStatus(
    manager: EntityManager,
    provider: PaymentProviderName,
    change: { providerPaymentId: string; paymentId?: string; status: PaymentStatus; receiptUrl?: string | null; failure?: { code: string; message: string } },
  ): Promise<Payment | null> {
    const rows = (await manager.query(
      `UPDATE payments SET
         status = $3,
         provider_payment_id = $2,
         receipt_url = COALESCE($4, receipt_url),
         failure_code = $5,
         failure_message = $6,
         updated_at = now()
       WHERE provider = $1
         AND (provider_payment_id = $2 OR (provider_payment_id IS NULL AND id::text = $7))
         AND NOT ${FINAL_CONDITION}
       RETURNING id`,
      [provider, change.providerPaymentId, change.status, change.receiptUrl ?? null, change.failure?.code ?? null, change.failure?.message ?? null, change.paymentId ?? ''],
    )) as [{ id: string }[], number];
    const [updated] = rows[0];
    if (!updated) return null;
    const record = await manager.getRepository(PaymentRecord).findOneByOrFail({ id: updated.id });
    return toPayment(record);
  }

  /** Tells subscribers of a payment's change (after its transaction commits). */
  announce(payment: Payment): void {
    if (payment.payment_intent_id) this.events.publish(paymentTopic(payment.payment_intent_id), payment);
  }

  /** The payment row of this idempotency key: a new one, or the one a previous call with the key made. */
  private async recordAttempt(provider: PaymentProviderName, idempotencyKey: string, input: PaymentInput): Promise<PaymentRecord> {
    const rows = (await this.dataSource.query(
      `INSERT INTO payments (provider, idempotency_key, customer_user_id, amount, currency, description, status)
       VALUES ($1, $2, $3, $4, $5, $6, 'PROCESSING')
       ON CONFLICT (provider, idempotency_key) DO UPDATE SET updated_at = payments.updated_at
       RETURNING id`,
      [provider, idempotencyKey, input.customer_id, input.amount, input.currency, input.description ?? null],
    )) as { id: string }[];
    return this.dataSource.getRepository(PaymentRecord).findOneByOrFail({ id: rows[0].id });
  }

  /** Records what the provider said, unless the row is already final (a webhook was quicker). */
  private async applyResult(paymentId: string, result: ChargeResult): Promise<PaymentRecord | null> {
    const rows = (await this.dataSource.query(
      `UPDATE payments SET
         status = $2,
         provider_payment_id = COALESCE($3, provider_payment_id),
         receipt_url = COALESCE($4, receipt_url),
         failure_code = $5,
         failure_message = $6,
         updated_at = now()
       WHERE id = $1 AND NOT ${FINAL_CONDITION}
       RETURNING id`,
      [paymentId, result.status, result.providerPaymentId, result.receiptUrl ?? null, result.failure?.code ?? null, result.failure?.message ?? null],
    )) as [{ id: string }[], number];
    const record = await this.dataSource.getRepository(PaymentRecord).findOneByOrFail({ id: paymentId });
    if (rows[0].length > 0) this.announce(toPayment(record));
    return record;
  }
}

function refused(message: string, errorCode: string, errors?: FieldError[]): PaymentOutput {
  return {
    success: false,
    payment_intent_id: null,
    status: PaymentStatus.FAILED,
    message,
    receipt_url: null,
    error_code: errorCode,
    ...(errors ? { errors } : {}),
  };
}

/** The answer of a call: the payment as stored (a retry answers the same payment), the call's own client secret. */
function outputOf(record: PaymentRecord, result: ChargeResult): PaymentOutput {
  const status = record.status;
  const failure = status === PaymentStatus.SUCCEEDED ? undefined : (result.failure ?? (record.failureCode ? { code: record.failureCode, message: record.failureMessage ?? '' } : undefined));
  const base = { payment_intent_id: record.providerPaymentId, status, receipt_url: record.receiptUrl };
  if (status === PaymentStatus.REQUIRES_ACTION) {
    return {
      ...base,
      success: false,
      message: 'The payment needs the customer to authenticate it (3-D Secure): confirm it with client_secret',
      client_secret: result.clientSecret ?? null,
      error_code: 'REQUIRES_ACTION',
    };
  }
  if (failure) return { ...base, success: false, message: failure.message, error_code: failure.code };
  return {
    ...base,
    success: true,
    message: status === PaymentStatus.SUCCEEDED ? 'Payment succeeded' : 'Payment is processing; its outcome follows by paymentUpdated',
  };
}

function sameRequest(record: PaymentRecord, input: PaymentInput): boolean {
  return (
    record.customerUserId === input.customer_id &&
    record.amount === input.amount &&
    record.currency === input.currency &&
    (record.description ?? null) === (input.description ?? null)
  );
}

export function toPayment(record: PaymentRecord): Payment {
  return {
    id: record.id,
    provider: record.provider,
    payment_intent_id: record.providerPaymentId,
    customer_id: record.customerUserId,
    amount: record.amount,
    currency: record.currency,
    description: record.description,
    status: record.status,
    failure_code: record.failureCode,
    failure_message: record.failureMessage,
    receipt_url: record.receiptUrl,
    created_at: record.createdAt,
    updated_at: record.updatedAt,
  };
}

/** Copies the known fields of untrusted input (GraphQL or an engine's envelope). */
function normalise(raw: unknown): PaymentInput {
  const source = (raw !== null && typeof raw === 'object' ? raw : {}) as Record<string, unknown>;
  const input = new PaymentInput();
  input.amount = source.amount as number;
  const currency = typeof source.currency === 'string' ? source.currency.trim().toUpperCase() : source.currency;
  input.currency = currency as string;
  input.payment_method_id = (typeof source.payment_method_id === 'string' ? source.payment_method_id.trim() : source.payment_method_id) as string;
  input.customer_id = (typeof source.customer_id === 'string' ? source.customer_id.trim().toLowerCase() : source.customer_id) as string;
  const description = typeof source.description === 'string' ? source.description.trim() : source.description;
  input.description = description === '' ? null : (description as string | null | undefined);
  return input;
}
