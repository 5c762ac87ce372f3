import { randomUUID } from 'node:crypto';
import type { DataSource, EntityManager } from 'typeorm';
import { sha256 } from '../../common/sha256';
import type { PaymentProviderName } from '../../config';
import type { FieldError } from '../../common/field-error.types';
import { fieldErrors } from '../../common/validation';
import { queryPrepared } from '../../db/prepared-statements';
import type { EventPublisher } from '../../platform/pubsub';
import { ADMIN_ROLE } from '../../common/roles';
import { type Session } from '../../platform/session';
import { UUID } from '../../common/ids';
import { customerRows } from './billing.service';
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

/** A payment in a state it never leaves (a FAILED call that never reached the provider is not final). */
const finalCondition = (table: string) => `(${table}.status = 'SUCCEEDED' OR (${table}.status = 'FAILED' AND ${table}.provider_payment_id IS NOT NULL))`;

/** The id of the payment an idempotency key makes at a provider: a name-based UUID (SHA-256, version 8). */
export function paymentIdOf(provider: PaymentProviderName, idempotencyKey: string): string {
  const hash = sha256(`${provider}\n${idempotencyKey}`);
  hash[6] = (hash[6] & 0x0f) | 0x80;
  hash[8] = (hash[8] & 0x3f) | 0x80;
  const hex = hash.subarray(0, 16).toString('hex');
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}

const keyReused = (): PaymentOutput =>
  refused('This Idempotency-Key was already used for a different payment', 'IDEMPOTENCY_KEY_REUSED', [
    { field: 'idempotency_key', message: 'this Idempotency-Key was already used for a different payment', code: 'ALREADY_EXISTS' },
  ]);

export class PaymentsService {
  constructor(
    private readonly dataSource: DataSource,
    private readonly providers: ProviderSwitch,
    private readonly chargers: Charger,
    private readonly events: EventPublisher,
    private readonly settings: PaymentSettings,
  ) {}

  /**
   * processPayment (spec 1 §2.2): validates, charges the payment at the active provider with an
   * idempotency key (the client's Idempotency-Key, scoped to the customer, so a retried call
   * charges once and answers the same payment) and records it with the outcome. Every failure is
   * an answer with success=false, never an exception.
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

    const idempotencyKey = typeof clientKey === 'string' ? `${input.customer_id}:${clientKey}` : randomUUID();
    // One read: the active provider, the customer, and the payment an earlier call with this key
    // made. It also sets the request's session variables for the write after the provider call.
    const [context] = await queryPrepared<
      { active_provider: PaymentProviderName; customer_exists: boolean } & { [Column in keyof PaymentRow]: PaymentRow[Column] | null }
    >(
      this.dataSource,
      `SELECT active.active_provider, EXISTS (SELECT 1 FROM users WHERE id = $1) AS customer_exists, ${PAYMENT_COLUMNS.map((column) => `earlier.${column}`).join(', ')}
       FROM (SELECT ${this.providers.activeProviderSql('$3')} AS active_provider) active
       LEFT JOIN payments earlier ON earlier.provider = active.active_provider AND earlier.idempotency_key = $2`,
      [input.customer_id, idempotencyKey, this.providers.backupConfigured],
    );
    if (!context.customer_exists) {
      return refused('Validation failed', 'VALIDATION_ERROR', [{ field: 'customer_id', message: 'customer_id is not a user', code: 'NOT_FOUND' }]);
    }
    if (context.id !== null) {
      const earlier = recordOf(context as PaymentRow);
      if (!sameRequest(earlier, input)) return keyReused();
      // A final payment is answered as it stands: the provider is not asked again (it may be down).
      if (isFinal(earlier)) return outputOf(earlier, { providerPaymentId: earlier.providerPaymentId, status: earlier.status });
    }

    // The id follows from the key, so a retry sends the provider the same metadata (the provider
    // compares parameters) and its webhooks find the row even before this call stores it.
    const provider = context.active_provider;
    const paymentId = paymentIdOf(provider, idempotencyKey);
    const result = await this.chargers[provider].charge({
      paymentId,
      customerId: input.customer_id,
      amount: input.amount,
      currency: input.currency,
      paymentMethodId: input.payment_method_id,
      description: input.description ?? null,
      idempotencyKey,
    });
    if (result.failure?.code === 'IDEMPOTENCY_KEY_REUSED') return keyReused();
    const record = await this.record({
      id: paymentId,
      provider,
      idempotencyKey,
      customerId: input.customer_id,
      amount: input.amount,
      currency: input.currency,
      description: input.description ?? null,
      result,
    });
    return outputOf(record, result);
  }

  /** Payments, newest first: the caller's own, or everyone's (or one customer's) for an admin. */
  async list(session: Session, customerId: string | null, first: number): Promise<Payment[]> {
    const query = this.dataSource.getRepository(PaymentRecord).createQueryBuilder('payment').orderBy('payment.created_at', 'DESC').take(first);
    return (await customerRows(query, 'payment', session, customerId).getMany()).map(toPayment);
  }

  /**
   * A status a provider's webhook reports (spec: as Stripe moves them). The payment is found by
   * the provider's id, or by our id in the provider's metadata (a call whose answer was lost);
   * a final state never moves back. A payment not recorded yet (its call's answer still on the
   * way, or lost with a crash) is recorded from the event. Runs in the webhook's transaction; the
   * caller announces the change once it commits.
   */
  async moveStatus(
    manager: EntityManager,
    provider: PaymentProviderName,
    change: {
      providerPaymentId: string;
      status: PaymentStatus;
      receiptUrl?: string | null;
      failure?: { code: string; message: string };
      /** What the provider's metadata and the intent say of the payment, to record it when it is missing. */
      payment?: { id?: string; idempotencyKey?: string; customerId?: string; amount?: number; currency?: string; description?: string | null };
    },
  ): Promise<Payment | null> {
    const known = change.payment ?? {};
    const values = [change.status, change.receiptUrl ?? null, change.failure?.code ?? null, change.failure?.message ?? null];
    const [updated] = (await manager.query(
      `UPDATE payments SET
         status = $3, provider_payment_id = $2, receipt_url = COALESCE($4, receipt_url), failure_code = $5, failure_message = $6, updated_at = now()
       WHERE provider = $1
         AND (provider_payment_id = $2 OR (provider_payment_id IS NULL AND id::text = $7))
         AND NOT ${finalCondition('payments')}
       RETURNING *`,
      [provider, change.providerPaymentId, ...values, known.id ?? ''],
    )) as [PaymentRow[], number];
    if (updated.length > 0) return toPayment(recordOf(updated[0]));
    const { id, idempotencyKey, customerId, amount, currency } = known;
    if (!id || !UUID.test(id) || !idempotencyKey || !customerId || !UUID.test(customerId) || !amount || !currency) return null;
    // ON CONFLICT DO NOTHING: a row that exists (final, or under another key) stays as it is.
    const inserted = (await manager.query(
      `INSERT INTO payments (id, provider, provider_payment_id, idempotency_key, customer_user_id, amount, currency, description,
                             status, receipt_url, failure_code, failure_message)
       VALUES ($1, $2, $3, $4, (SELECT id FROM users WHERE id = $5::uuid), $6, $7, $8, $9, $10, $11, $12)
       ON CONFLICT DO NOTHING
       RETURNING *`,
      [id, provider, change.providerPaymentId, idempotencyKey, customerId, amount, currency.toUpperCase(), known.description ?? null, ...values],
    )) as PaymentRow[];
    return inserted.length > 0 ? toPayment(recordOf(inserted[0])) : null;
  }

  /** Tells subscribers of a payment's change (after its transaction commits). */
  announce(payment: Payment): void {
    if (payment.payment_intent_id) this.events.publish(paymentTopic(payment.payment_intent_id), payment);
  }

  /**
   * Stores a payment and what the provider said of it, in one statement (one commit): a new row,
   * or the row of an earlier call with the key, unless that row is final (a webhook was quicker).
   */
  private async record(payment: {
    id: string;
    provider: PaymentProviderName;
    idempotencyKey: string;
    customerId: string;
    amount: number;
    currency: string;
    description: string | null;
    result: ChargeResult;
  }): Promise<PaymentRecord> {
    const { result } = payment;
    const rows = await queryPrepared<PaymentRow & { inserted: boolean }>(
      this.dataSource,
      `INSERT INTO payments AS payment (id, provider, idempotency_key, customer_user_id, amount, currency, description,
                             status, provider_payment_id, receipt_url, failure_code, failure_message)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)
       ON CONFLICT (provider, idempotency_key) DO UPDATE SET
         status = EXCLUDED.status,
         provider_payment_id = COALESCE(EXCLUDED.provider_payment_id, payment.provider_payment_id),
         receipt_url = COALESCE(EXCLUDED.receipt_url, payment.receipt_url),
         failure_code = EXCLUDED.failure_code,
         failure_message = EXCLUDED.failure_message,
         updated_at = now()
       WHERE NOT ${finalCondition('payment')}
       RETURNING ${PAYMENT_COLUMNS.join(', ')}, (xmax = 0) AS inserted`,
      [
        payment.id,
        payment.provider,
        payment.idempotencyKey,
        payment.customerId,
        payment.amount,
        payment.currency,
        payment.description,
        result.status,
        result.providerPaymentId,
        result.receiptUrl ?? null,
        result.failure?.code ?? null,
        result.failure?.message ?? null,
      ],
    );
    if (rows.length === 0) {
      return this.dataSource.getRepository(PaymentRecord).findOneByOrFail({ provider: payment.provider, idempotencyKey: payment.idempotencyKey });
    }
    const record = recordOf(rows[0]);
    // A new payment has no subscriber yet: its id is in this call's answer. A retry's change may.
    if (!rows[0].inserted) this.announce(toPayment(record));
    return record;
  }
}

/** A payments row as PostgreSQL returns it. */
interface PaymentRow {
  id: string;
  provider: PaymentRecord['provider'];
  provider_payment_id: string | null;
  idempotency_key: string;
  customer_user_id: string | null;
  source_account_id: string;
  amount: string;
  currency: string;
  description: string | null;
  status: PaymentStatus;
  failure_code: string | null;
  failure_message: string | null;
  receipt_url: string | null;
  created_at: Date;
  updated_at: Date;
}

/** Every column of a payments row, named (a prepared statement's `*` fails once a column is added). */
const PAYMENT_COLUMNS: readonly (keyof PaymentRow)[] = [
  'id',
  'provider',
  'provider_payment_id',
  'idempotency_key',
  'customer_user_id',
  'source_account_id',
  'amount',
  'currency',
  'description',
  'status',
  'failure_code',
  'failure_message',
  'receipt_url',
  'created_at',
  'updated_at',
];

function recordOf(row: PaymentRow): PaymentRecord {
  return Object.assign(new PaymentRecord(), {
    id: row.id,
    provider: row.provider,
    providerPaymentId: row.provider_payment_id,
    idempotencyKey: row.idempotency_key,
    customerUserId: row.customer_user_id,
    sourceAccountId: row.source_account_id,
    amount: Number(row.amount),
    currency: row.currency,
    description: row.description,
    status: row.status,
    failureCode: row.failure_code,
    failureMessage: row.failure_message,
    receiptUrl: row.receipt_url,
    createdAt: row.created_at,
    updatedAt: row.updated_at,
  });
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
  const failure =
    status === PaymentStatus.SUCCEEDED
      ? undefined
      : (result.failure ?? (record.failureCode ? { code: record.failureCode, message: record.failureMessage ?? '' } : undefined));
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

function sameRequest(earlier: PaymentRecord, input: PaymentInput): boolean {
  return (
    earlier.customerUserId === input.customer_id &&
    earlier.amount === input.amount &&
    earlier.currency === input.currency &&
    (earlier.description ?? null) === (input.description ?? null)
  );
}

/** finalCondition, on a record. */
function isFinal(record: PaymentRecord): boolean {
  return record.status === PaymentStatus.SUCCEEDED || (record.status === PaymentStatus.FAILED && record.providerPaymentId !== null);
}

export function toPayment(record: PaymentRecord): Payment {
  return {
    id: record.id,
    provider: record.provider,
    payment_intent_id: record.providerPaymentId,
    customer_id: record.customerUserId,
    source_account_id: record.sourceAccountId,
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
