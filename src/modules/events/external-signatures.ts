import type { ExternalProvider } from '../../config';
import { stripeSignatureTimestamp, verifyHmacSha256, verifyHmacSha256Base64 } from '../../platform/signatures';

type Headers = Record<string, string | string[] | undefined>;

/** A verified delivery: what its signature covered besides the body. */
export interface SignedDelivery {
  verified: true;
  /** The signed timestamp (unix seconds), for schemes that sign one. */
  signedAt?: number;
  /** The provider's id of this delivery; `signed` when the signature covers it (a header otherwise). */
  deliveryId?: { value: string; signed: boolean };
}

export type SignatureCheck = SignedDelivery | { verified: false; reason: string };

const header = (headers: Headers, name: string): string | undefined => {
  const value = headers[name];
  return typeof value === 'string' && value !== '' ? value : undefined;
};
const missing = (name: string): SignatureCheck => ({ verified: false, reason: `the ${name} header is missing` });
const noTime = (name: string): SignatureCheck => ({ verified: false, reason: `the ${name} header is missing or not a Unix time in seconds` });
const mismatch = (name: string): SignatureCheck => ({ verified: false, reason: `the ${name} signature does not match the body` });
const UNIX_SECONDS = /^\d{1,12}$/;

/** The body's own id (Stripe's event `id`, Slack's `event_id`), covered by the signature. */
function bodyId(payload: unknown, key: string): SignedDelivery['deliveryId'] {
  const value = payload !== null && typeof payload === 'object' ? (payload as Record<string, unknown>)[key] : undefined;
  return typeof value === 'string' && value !== '' ? { value, signed: true } : undefined;
}

/**
 * Checks an inbound webhook's signature by its provider's scheme, over the exact bytes received,
 * in constant time. Each scheme is the provider's documented one:
 * - hmac-sha256: hex HMAC of the body in a configurable header (GitHub: `X-Hub-Signature-256:
 *   sha256=<hex>`), the delivery id from a header that is not signed (GitHub: `X-GitHub-Delivery`);
 * - stripe: `Stripe-Signature: t=<ts>,v1=<hex of "<ts>.<body>">`, the event's `id` in the body;
 * - slack: `X-Slack-Signature: v0=<hex of "v0:<ts>:<body>">` with `X-Slack-Request-Timestamp`,
 *   the Events API's `event_id` in the body;
 * - shopify: `X-Shopify-Hmac-Sha256: <base64 of the body's HMAC>`, `X-Shopify-Webhook-Id` (not signed);
 * - standard-webhooks (Svix): `webhook-signature: v1,<base64 of "<id>.<ts>.<body>">` with
 *   `webhook-id` and `webhook-timestamp` (or their `svix-` names).
 */
export function checkSignature(provider: ExternalProvider, raw: Buffer | undefined, payload: unknown, headers: Headers): SignatureCheck {
  switch (provider.scheme) {
    case 'hmac-sha256': {
      const signature = headers[provider.signatureHeader];
      if (signature === undefined) return missing(provider.signatureHeader);
      if (!verifyHmacSha256(raw, provider.secret, signature, provider.signaturePrefix)) return mismatch(provider.signatureHeader);
      const id = provider.deliveryHeader ? header(headers, provider.deliveryHeader) : undefined;
      return { verified: true, deliveryId: id === undefined ? undefined : { value: id, signed: false } };
    }
    case 'stripe': {
      if (header(headers, 'stripe-signature') === undefined) return missing('stripe-signature');
      const signedAt = stripeSignatureTimestamp(raw, provider.secret, headers['stripe-signature']);
      if (signedAt === undefined) return mismatch('stripe-signature');
      return { verified: true, signedAt, deliveryId: bodyId(payload, 'id') };
    }
    case 'slack': {
      const signature = header(headers, 'x-slack-signature');
      const timestamp = header(headers, 'x-slack-request-timestamp');
      if (signature === undefined) return missing('x-slack-signature');
      if (timestamp === undefined || !UNIX_SECONDS.test(timestamp) || raw === undefined) return noTime('x-slack-request-timestamp');
      const signed = Buffer.concat([Buffer.from(`v0:${timestamp}:`, 'utf8'), raw]);
      if (!verifyHmacSha256(signed, provider.secret, signature, 'v0=')) return mismatch('x-slack-signature');
      return { verified: true, signedAt: Number(timestamp), deliveryId: bodyId(payload, 'event_id') };
    }
    case 'shopify': {
      const signature = header(headers, 'x-shopify-hmac-sha256');
      if (signature === undefined) return missing('x-shopify-hmac-sha256');
      if (!verifyHmacSha256Base64(raw, provider.secret, signature)) return mismatch('x-shopify-hmac-sha256');
      const id = header(headers, 'x-shopify-webhook-id');
      return { verified: true, deliveryId: id === undefined ? undefined : { value: id, signed: false } };
    }
    case 'standard-webhooks': {
      const prefix = header(headers, 'webhook-signature') !== undefined ? 'webhook' : 'svix';
      const signature = header(headers, `${prefix}-signature`);
      const id = header(headers, `${prefix}-id`);
      const timestamp = header(headers, `${prefix}-timestamp`);
      if (signature === undefined) return missing('webhook-signature');
      if (id === undefined) return missing(`${prefix}-id`);
      if (timestamp === undefined || !UNIX_SECONDS.test(timestamp) || raw === undefined) return noTime(`${prefix}-timestamp`);
      const signed = Buffer.concat([Buffer.from(`${id}.${timestamp}.`, 'utf8'), raw]);
      // Space-separated `v1,<base64>` entries: more than one while the secret is being rotated.
      const matches = signature.split(' ').some((entry) => {
        const [version, digest] = entry.split(',', 2);
        return version === 'v1' && verifyHmacSha256Base64(signed, provider.secret, digest);
      });
      if (!matches) return mismatch(`${prefix}-signature`);
      return { verified: true, signedAt: Number(timestamp), deliveryId: { value: id, signed: true } };
    }
  }
}
