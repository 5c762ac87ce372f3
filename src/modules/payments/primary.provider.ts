import type Stripe from 'stripe';
import type { PaymentsConfig } from '../../config';
import { PaymentStatus } from './payments.types';

/** What a provider said about a payment, or why it could not say. */
export interface ChargeResult {
  providerPaymentId: string | null;
  status: PaymentStatus;
  clientSecret?: string | null;
  receiptUrl?: string | null;
  /** Set when the payment did not go through (or its outcome is unknown). */
  failure?: { code: string; message: string };
}

export interface ChargeRequest {
  /** Our payment's id, carried in the provider's metadata so its webhooks find the row. */
  paymentId: string;
  customerId: string;
  amount: number;
  /** Upper case ISO 4217. */
  currency: string;
  paymentMethodId: string;
  description: string | null;
  idempotencyKey: string;
}

export interface CheckoutRequest {
  product: string;
  /** The configured price of the product. */
  priceId: string;
  customerId: string;
  email: string | null;
  successUrl: string;
  cancelUrl: string;
}

/** Stripe's payment intent statuses, as ours (spec 1 §2.2). */
export function statusOfIntent(status: string): PaymentStatus {
  switch (status) {
    case 'succeeded':
      return PaymentStatus.SUCCEEDED;
    case 'requires_action':
      return PaymentStatus.REQUIRES_ACTION;
    // A confirmed intent left without a usable method, or cancelled, took no money.
    case 'requires_payment_method':
    case 'canceled':
      return PaymentStatus.FAILED;
    // processing, and requires_capture / requires_confirmation, which our confirmed,
    // automatically captured intents do not stay in.
    default:
      return PaymentStatus.PROCESSING;
  }
}

/**
 * The primary provider through the official Stripe SDK, pointed at PRIMARY_PROVIDER_API_URL
 * when it is set. Every failure comes back as a ChargeResult, never as an exception.
 */
const NOT_CONFIGURED = { code: 'PROVIDER_NOT_CONFIGURED', message: 'The primary payment provider is not configured (PRIMARY_PROVIDER_API_KEY)' };

/**
 * The SDK (megabytes resident) is loaded when the first call needs it, not by every process at
 * start-up; its errors are only met after a call, so they come from the loaded module too.
 */
let stripeModule: typeof Stripe | undefined;
function loadStripe(): typeof Stripe {
  return (stripeModule ??= require('stripe') as typeof Stripe);
}

export class PrimaryProvider {
  private client: Stripe | undefined;
  private readonly configured: boolean;

  constructor(private readonly settings: PaymentsConfig) {
    this.configured = settings.primary.apiKey !== undefined;
  }

  /** Without a key the client is never used (calls answer PROVIDER_NOT_CONFIGURED). */
  private get stripe(): Stripe {
    if (this.client) return this.client;
    const settings = this.settings;
    const target = settings.primary.apiUrl ? new URL(settings.primary.apiUrl) : undefined;
    const StripeClient = loadStripe();
    this.client = new StripeClient(settings.primary.apiKey ?? 'sk_unset', {
      ...(target
        ? {
            host: target.hostname,
            port: target.port ? Number(target.port) : target.protocol === 'https:' ? 443 : 80,
            protocol: target.protocol === 'https:' ? 'https' : 'http',
          }
        : {}),
      timeout: settings.providerTimeoutMs,
      maxNetworkRetries: settings.providerMaxRetries,
      telemetry: false,
    });
    return this.client;
  }

  async charge(request: ChargeRequest): Promise<ChargeResult> {
    if (!this.configured) return { providerPaymentId: null, status: PaymentStatus.FAILED, failure: NOT_CONFIGURED };
    try {
      const intent = await this.stripe.paymentIntents.create(
        {
          amount: request.amount,
          currency: request.currency.toLowerCase(),
          payment_method: request.paymentMethodId,
          confirm: true,
          // Cards and other methods confirmed here, with no page to come back to.
          automatic_payment_methods: { enabled: true, allow_redirects: 'never' },
          ...(request.description ? { description: request.description } : {}),
          // What a webhook needs to record the payment should its answer never reach us.
          metadata: { plinth_payment_id: request.paymentId, plinth_customer_id: request.customerId, plinth_idempotency_key: request.idempotencyKey },
          expand: ['latest_charge'],
        },
        { idempotencyKey: request.idempotencyKey },
      );
      return resultOfIntent(intent);
    } catch (error) {
      return failureOf(error);
    }
  }

  /** A hosted Checkout session for a subscription to one price; its completion comes by webhook. */
  async createCheckout(request: CheckoutRequest): Promise<{ url: string } | { failure: { code: string; message: string } }> {
    if (!this.configured) return { failure: NOT_CONFIGURED };
    try {
      const session = await this.stripe.checkout.sessions.create({
        mode: 'subscription',
        line_items: [{ price: request.priceId, quantity: 1 }],
        client_reference_id: request.customerId,
        ...(request.email ? { customer_email: request.email } : {}),
        success_url: request.successUrl,
        cancel_url: request.cancelUrl,
        // On the session and on the subscription it makes: every later event names customer and product.
        metadata: { plinth_customer_id: request.customerId, plinth_product: request.product },
        subscription_data: { metadata: { plinth_customer_id: request.customerId, plinth_product: request.product } },
      });
      if (!session.url) return { failure: { code: 'PROVIDER_ERROR', message: 'The payment provider gave no checkout address' } };
      return { url: session.url };
    } catch (error) {
      const { failure } = failureOf(error);
      return { failure: failure! };
    }
  }
}

function resultOfIntent(intent: Stripe.PaymentIntent): ChargeResult {
  const status = statusOfIntent(intent.status);
  const charge = typeof intent.latest_charge === 'object' ? intent.latest_charge : null;
  return {
    providerPaymentId: intent.id,
    status,
    clientSecret: status === PaymentStatus.REQUIRES_ACTION ? intent.client_secret : null,
    receiptUrl: charge?.receipt_url ?? null,
    ...(status === PaymentStatus.FAILED ? { failure: { code: 'PAYMENT_FAILED', message: intent.last_payment_error?.message ?? 'The payment failed' } } : {}),
  };
}

/** The SDK's errors as results: declines and refusals are FAILED; a timeout's outcome is unknown. */
function failureOf(error: unknown): ChargeResult {
  const failed = (code: string, message: string, providerPaymentId: string | null = null): ChargeResult => ({
    providerPaymentId,
    status: PaymentStatus.FAILED,
    failure: { code, message },
  });
  // Only a call raises these, so the SDK is loaded by then.
  const errors = loadStripe().errors;
  if (error instanceof errors.StripeCardError) {
    const intent = (error.raw as { payment_intent?: { id?: string } }).payment_intent;
    const reason = error.decline_code ?? error.code;
    return failed('CARD_DECLINED', `The card was declined${reason ? ` (${reason})` : ''}`, intent?.id ?? null);
  }
  if (error instanceof errors.StripeConnectionError) {
    if ((error.detail as { code?: string } | undefined)?.code === 'ETIMEDOUT') {
      // The provider may still have taken it: the same idempotency key finds out safely.
      return {
        providerPaymentId: null,
        status: PaymentStatus.PROCESSING,
        failure: {
          code: 'PROVIDER_TIMEOUT',
          message: 'The payment provider did not answer in time; the outcome is unknown. Retry with the same Idempotency-Key',
        },
      };
    }
    return failed('PROVIDER_UNAVAILABLE', 'The payment provider could not be reached; nothing was charged');
  }
  if (error instanceof errors.StripeIdempotencyError) {
    return failed('IDEMPOTENCY_KEY_REUSED', 'This Idempotency-Key was already used for a different payment');
  }
  if (error instanceof errors.StripeInvalidRequestError) {
    if (error.param === 'payment_method') return failed('INVALID_PAYMENT_METHOD', 'The payment method is unknown to the payment provider');
    return failed('PAYMENT_REFUSED', 'The payment provider refused the payment request');
  }
  if (error instanceof errors.StripeAuthenticationError || error instanceof errors.StripePermissionError) {
    return failed('PROVIDER_ERROR', 'The payment provider refused our credentials');
  }
  if (error instanceof errors.StripeRateLimitError) {
    return failed('PROVIDER_UNAVAILABLE', 'The payment provider is busy; nothing was charged. Try again shortly');
  }
  if (error instanceof errors.StripeAPIError) {
    // Stripe: a 5xx may or may not have been processed.
    return {
      providerPaymentId: null,
      status: PaymentStatus.PROCESSING,
      failure: { code: 'PROVIDER_ERROR', message: 'The payment provider failed; the outcome is unknown. Retry with the same Idempotency-Key' },
    };
  }
  return failed('PROVIDER_ERROR', 'The payment provider gave an answer that could not be read');
}
