import { createHmac, timingSafeEqual } from 'node:crypto';
import { pipeline, Transform } from 'node:stream';
import type { FastifyInstance } from 'fastify';
import { addRouteHook } from './fastify/route-hooks';

declare module 'fastify' {
  interface FastifyContextConfig {
    /** Keep the exact bytes of the body as request.rawBody (webhook signatures are over them). */
    rawBody?: boolean;
  }
  interface FastifyRequest {
    /** The body as received, on routes with `config: { rawBody: true }`. */
    rawBody?: Buffer;
  }
}

/**
 * Keeps the exact bytes of the body as request.rawBody on routes with `config: { rawBody: true }`:
 * a stream between the request and the body parser copies the bytes as they pass, whatever the
 * content type, and the parser (Fastify's own for JSON) reads them as on any route. Only those
 * routes pay for it, where a parser of our own that read every JSON body as bytes would cost every
 * other request too.
 */
export function keepRawBodies(app: FastifyInstance): void {
  addRouteHook(
    app,
    'preParsing',
    (route) => route.config?.rawBody === true,
    (request, _reply, payload, done) => {
      const chunks: Buffer[] = [];
      const copier = new Transform({
        transform(chunk: Buffer, _encoding, callback) {
          chunks.push(chunk);
          callback(null, chunk);
        },
        flush(callback) {
          request.rawBody = Buffer.concat(chunks);
          callback();
        },
      });
      // A failure of the request's stream reaches the parser through the copier.
      pipeline(payload, copier, () => undefined);
      done(null, copier);
    },
  );
}

const HEX_DIGEST = /^[0-9a-f]{64}$/i;

/**
 * Whether `signature` (a header's value: hex, after `prefix` such as `sha256=` when one is given)
 * is the HMAC-SHA256 of the exact bytes received (request.rawBody). Compared in constant time; a
 * missing body, or a missing, repeated, malformed or wrong-length signature is false, never an
 * exception.
 */
export function verifyHmacSha256(payload: Buffer | undefined, secret: string | Buffer, signature: string | string[] | undefined, prefix = ''): boolean {
  if (payload === undefined || typeof signature !== 'string' || !signature.startsWith(prefix)) return false;
  const hex = signature.slice(prefix.length);
  if (!HEX_DIGEST.test(hex)) return false;
  return timingSafeEqual(Buffer.from(hex, 'hex'), createHmac('sha256', secret).update(payload).digest());
}

const BASE64_DIGEST = /^[A-Za-z0-9+/]{43}=$/;

/**
 * The same check for a base64 digest (Shopify's `X-Shopify-Hmac-Sha256`, Standard Webhooks'
 * `v1,<base64>`): constant time; anything malformed is false.
 */
export function verifyHmacSha256Base64(payload: Buffer | undefined, secret: string | Buffer, signature: string | string[] | undefined): boolean {
  if (payload === undefined || typeof signature !== 'string' || !BASE64_DIGEST.test(signature)) return false;
  return timingSafeEqual(Buffer.from(signature, 'base64'), createHmac('sha256', secret).update(payload).digest());
}

/**
 * Stripe-Signature `t=<unix time>,v1=<hex>[,v1=...]`: the signed timestamp (seconds) when one v1
 * is the HMAC-SHA256 of `<t>.<raw body>` with `secret`, as Stripe's SDK checks it; undefined for a
 * missing, malformed or wrong signature. How old the timestamp may be is the caller's tolerance.
 */
export function stripeSignatureTimestamp(payload: Buffer | undefined, secret: string | Buffer, header: string | string[] | undefined): number | undefined {
  if (payload === undefined || typeof header !== 'string') return undefined;
  let timestamp: string | undefined;
  const signatures: string[] = [];
  for (const part of header.split(',')) {
    const [key, value] = part.split('=', 2).map((item) => item.trim());
    if (key === 't') timestamp = value;
    else if (key === 'v1' && value) signatures.push(value);
  }
  if (!timestamp || !/^\d{1,12}$/.test(timestamp) || signatures.length === 0) return undefined;
  const signed = Buffer.concat([Buffer.from(`${timestamp}.`, 'utf8'), payload]);
  return signatures.some((signature) => verifyHmacSha256(signed, secret, signature)) ? Number(timestamp) : undefined;
}
