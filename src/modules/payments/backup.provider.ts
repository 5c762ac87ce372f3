import type { PaymentsConfig } from '../../config';
import { OutboundHttpError, type OutboundHttp } from '../../platform/outbound-http';
import { PaymentStatus } from './payments.types';
import type { ChargeRequest, ChargeResult, CheckoutRequest } from './primary.provider';

const JSON_API = 'application/vnd.api+json';

interface CheckoutDocument {
  data?: { type?: string; id?: string; attributes?: { url?: unknown } };
  errors?: { detail?: string; status?: string }[];
}

export type BackupCheckoutRequest = Omit<CheckoutRequest, 'priceId' | 'cancelUrl' | 'product'> & { variantId: string };

/**
 * The backup provider: Lemon Squeezy's REST API (JSON:API) at BACKUP_PROVIDER_API_URL, through
 * the platform's outbound HTTP client. It sells through hosted checkouts only; it has no API that
 * charges a saved payment method.
 */
export class BackupProvider {
  constructor(
    private readonly settings: PaymentsConfig,
    private readonly http: OutboundHttp,
  ) {}

  /** Lemon Squeezy cannot charge a payment method by API: the payment is refused, nothing is charged. */
  async charge(_request: ChargeRequest): Promise<ChargeResult> {
    return {
      providerPaymentId: null,
      status: PaymentStatus.FAILED,
      failure: {
        code: 'PROVIDER_UNSUPPORTED',
        message: 'The active (backup) payment provider takes payments through its hosted checkout only (POST /billing/checkout)',
      },
    };
  }

  /** A checkout for one variant, carrying our user id as custom data (its webhooks return it). */
  async createCheckout(request: BackupCheckoutRequest): Promise<{ url: string } | { failure: { code: string; message: string } }> {
    const { apiUrl, apiKey, storeId } = this.settings.backup;
    try {
      const response = await this.http.requestJson<CheckoutDocument>(`${apiUrl}/v1/checkouts`, {
        method: 'POST',
        headers: { accept: JSON_API, 'content-type': JSON_API, authorization: `Bearer ${apiKey}` },
        json: {
          data: {
            type: 'checkouts',
            attributes: {
              checkout_data: { ...(request.email ? { email: request.email } : {}), custom: { user_id: request.customerId } },
              product_options: { redirect_url: request.successUrl },
            },
            relationships: {
              store: { data: { type: 'stores', id: storeId } },
              variant: { data: { type: 'variants', id: request.variantId } },
            },
          },
        },
        timeoutMs: this.settings.providerTimeoutMs,
      });
      const url = response.body?.data?.attributes?.url;
      if (response.status === 201 && typeof url === 'string' && /^https?:\/\//.test(url)) return { url };
      if (response.status === 401 || response.status === 403) {
        return { failure: { code: 'PROVIDER_ERROR', message: 'The payment provider refused our credentials' } };
      }
      if (response.status >= 500) return { failure: { code: 'PROVIDER_UNAVAILABLE', message: 'The payment provider failed; try again shortly' } };
      return { failure: { code: 'PROVIDER_ERROR', message: `The payment provider refused the checkout (HTTP ${response.status})` } };
    } catch (error) {
      if (!(error instanceof OutboundHttpError)) throw error;
      const timedOut = error.code === 'TIMEOUT';
      return {
        failure: {
          code: timedOut ? 'PROVIDER_TIMEOUT' : 'PROVIDER_UNAVAILABLE',
          message: timedOut ? 'The payment provider did not answer in time' : 'The payment provider could not be reached',
        },
      };
    }
  }
}
