import type { PaymentProviderName, PaymentsConfig } from '../../config';
import type { BackupProvider } from './backup.provider';
import type { PrimaryProvider } from './primary.provider';
import type { ProviderSwitch } from './provider-switch.service';

export type CheckoutResult =
  | { url: string; provider: PaymentProviderName }
  /** UNKNOWN_PRODUCT, or the provider's failure: PROVIDER_TIMEOUT, PROVIDER_UNAVAILABLE, PROVIDER_ERROR... */
  | { error: string; message: string };

/** POST /billing/checkout: the hosted checkout of the active provider, for one configured product. */
export class CheckoutService {
  constructor(
    private readonly providers: ProviderSwitch,
    private readonly primary: PrimaryProvider,
    private readonly backup: BackupProvider,
    private readonly settings: PaymentsConfig,
  ) {}

  async checkout(customerId: string, product: string, email: string | null): Promise<CheckoutResult> {
    const provider = await this.providers.active();
    const ids = provider === 'primary' ? this.settings.primary.priceIds : this.settings.backup.variantIds;
    const id = Object.hasOwn(ids, product) ? ids[product] : undefined;
    if (!id) {
      const known = Object.keys(ids);
      return {
        error: 'UNKNOWN_PRODUCT',
        message: `product must be one of the ${provider} provider's products: ${known.length > 0 ? known.join(', ') : 'none is configured'}`,
      };
    }
    const common = { customerId, email, successUrl: this.settings.checkoutSuccessUrl };
    const result =
      provider === 'primary'
        ? await this.primary.createCheckout({ ...common, product, priceId: id, cancelUrl: this.settings.checkoutCancelUrl })
        : await this.backup.createCheckout({ ...common, variantId: id });
    if ('failure' in result) return { error: result.failure.code, message: result.failure.message };
    return { url: result.url, provider };
  }
}
