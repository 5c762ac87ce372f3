import type { DataSource } from 'typeorm';
import { sha256Hex } from '../../common/sha256';
import type { ExternalProvider } from '../../config';
import { checkSignature } from './external-signatures';

export type ExternalDeliveryOutcome =
  { result: 'unknown-provider' } | { result: 'unauthorized'; reason: string } | { result: 'stored'; id: string } | { result: 'duplicate' };

/** Headers never stored with a delivery: credentials. */
const UNSTORED_HEADERS = new Set(['authorization', 'cookie', 'proxy-authorization']);
/** The headers that carry a scheme's signature, never stored either. */
const SIGNATURE_HEADERS = new Set(['stripe-signature', 'x-slack-signature', 'x-shopify-hmac-sha256', 'webhook-signature', 'svix-signature']);

/** A delivery already seen: its transaction is rolled back, so nothing it wrote stays. */
class DuplicateDelivery extends Error {}

/**
 * Inbound webhooks of external providers (EXTERNAL_WEBHOOK_<PROVIDER>_*): the signature of the
 * exact bytes received is checked by the provider's scheme, a signed timestamp against the
 * provider's tolerance, and a verified delivery is stored once in `external_webhook_deliveries`
 * (which event triggers can watch). Once: its dedup keys (the provider's delivery id, and the
 * body's SHA-256 unless the id is signed) are claimed in `external_webhook_receipts` in the
 * transaction that stores it; a key claimed within the window (EXTERNAL_WEBHOOK_DEDUP_WINDOW_HOURS)
 * makes it a duplicate, which stores and fires nothing. A concurrent identical delivery waits on
 * the first one's key and then finds it taken. Older records are deleted by the events'
 * maintenance (cleanUpOldEvents).
 */
export class ExternalWebhooksService {
  constructor(
    private readonly dataSource: DataSource,
    private readonly providers: Record<string, ExternalProvider>,
    private readonly dedupWindowHours: number,
  ) {}

  async receive(
    providerName: string,
    rawBody: Buffer | undefined,
    payload: unknown,
    headers: Record<string, string | string[] | undefined>,
    now = Date.now(),
  ): Promise<ExternalDeliveryOutcome> {
    const provider = Object.hasOwn(this.providers, providerName) ? this.providers[providerName] : undefined;
    if (!provider) return { result: 'unknown-provider' };
    const check = checkSignature(provider, rawBody, payload, headers);
    if (!check.verified) return { result: 'unauthorized', reason: check.reason };
    if (check.signedAt !== undefined) {
      const skew = Math.round(now / 1000 - check.signedAt);
      if (Math.abs(skew) > provider.toleranceSeconds) {
        const when = skew > 0 ? `${skew} s old` : `${-skew} s in the future`;
        return {
          result: 'unauthorized',
          reason: `the signed timestamp is ${when}; more than ${provider.toleranceSeconds} s either way is refused (a replay, or a clock far off)`,
        };
      }
    }
    const { deliveryId } = check;
    const keys = new Set<string>();
    if (deliveryId) keys.add(`id:${sha256Hex(deliveryId.value)}`);
    // A header's id is not signed: a replay could carry a new one, so the exact body counts too.
    if (!deliveryId?.signed) keys.add(`body:${sha256Hex(rawBody ?? Buffer.alloc(0))}`);
    // One order for every delivery's keys, so two deliveries never wait on each other's in turn.
    const sortedKeys = [...keys].sort();
    const kept = Object.fromEntries(
      Object.entries(headers).filter(
        ([name, value]) => typeof value === 'string' && !UNSTORED_HEADERS.has(name) && !SIGNATURE_HEADERS.has(name) && name !== provider.signatureHeader,
      ),
    );
    try {
      return await this.dataSource.transaction(async (manager) => {
        const claimed: unknown[] = await manager.query(
          `INSERT INTO external_webhook_receipts (provider, dedup_key) SELECT $1, unnest($2::text[])
           ON CONFLICT (provider, dedup_key) DO UPDATE SET received_at = now()
             WHERE external_webhook_receipts.received_at < now() - make_interval(hours => $3)
           RETURNING 1`,
          [providerName, sortedKeys, this.dedupWindowHours],
        );
        if (claimed.length < sortedKeys.length) throw new DuplicateDelivery();
        const [row]: { id: string }[] = await manager.query(
          'INSERT INTO external_webhook_deliveries (provider, delivery_id, headers, payload) VALUES ($1, $2, $3, $4) RETURNING id',
          [providerName, deliveryId ? deliveryId.value.slice(0, 200) : null, kept, JSON.stringify(payload)],
        );
        return { result: 'stored', id: row.id } as const;
      });
    } catch (error) {
      if (error instanceof DuplicateDelivery) return { result: 'duplicate' };
      throw error;
    }
  }
}
