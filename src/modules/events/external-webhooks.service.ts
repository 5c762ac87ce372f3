import type { DataSource } from 'typeorm';
import type { ExternalProvider } from '../../config';
import { verifyHmacSha256 } from '../../platform/signatures';

export type ExternalDeliveryOutcome =
  | { result: 'unknown-provider' }
  | { result: 'unauthorized'; reason: string }
  | { result: 'stored'; id: string; duplicate: boolean };

/** Headers never stored with a delivery: credentials, and the signature itself. */
const UNSTORED_HEADERS = new Set(['authorization', 'cookie', 'proxy-authorization']);

/**
 * Inbound webhooks of external providers (EXTERNAL_WEBHOOK_<PROVIDER>_*): the HMAC-SHA256 hex
 * signature of the exact bytes received is checked in constant time against the provider's
 * header; a verified delivery is stored once (by the provider's delivery id, when it sends one)
 * in `external_webhook_deliveries`, which event triggers can watch.
 */
export class ExternalWebhooksService {
  constructor(
    private readonly dataSource: DataSource,
    private readonly providers: Record<string, ExternalProvider>,
  ) {}

  async receive(
    providerName: string,
    rawBody: Buffer | undefined,
    payload: unknown,
    headers: Record<string, string | string[] | undefined>,
  ): Promise<ExternalDeliveryOutcome> {
    const provider = Object.hasOwn(this.providers, providerName) ? this.providers[providerName] : undefined;
    if (!provider) return { result: 'unknown-provider' };
    const signature = headers[provider.signatureHeader];
    if (signature === undefined) return { result: 'unauthorized', reason: `the ${provider.signatureHeader} header is missing` };
    if (!verifyHmacSha256(rawBody, provider.secret, signature, provider.signaturePrefix)) {
      return { result: 'unauthorized', reason: `the ${provider.signatureHeader} signature does not match the body` };
    }
    const deliveryHeader = provider.deliveryHeader ? headers[provider.deliveryHeader] : undefined;
    const deliveryId = typeof deliveryHeader === 'string' && deliveryHeader !== '' ? deliveryHeader.slice(0, 200) : null;
    const kept = Object.fromEntries(
      Object.entries(headers).filter(([name, value]) => typeof value === 'string' && !UNSTORED_HEADERS.has(name) && name !== provider.signatureHeader),
    );
    const rows: { id: string; inserted: boolean }[] = await this.dataSource.query(
      `WITH inserted AS (
         INSERT INTO external_webhook_deliveries (provider, delivery_id, headers, payload) VALUES ($1, $2, $3, $4)
         ON CONFLICT (provider, delivery_id) DO NOTHING RETURNING id)
       SELECT id, true AS inserted FROM inserted
       UNION ALL SELECT id, false FROM external_webhook_deliveries WHERE provider = $1 AND delivery_id = $2 AND NOT EXISTS (SELECT 1 FROM inserted)`,
      [providerName, deliveryId, kept, JSON.stringify(payload)],
    );
    return { result: 'stored', id: rows[0].id, duplicate: !rows[0].inserted };
  }
}
