import { createHmac, timingSafeEqual } from 'node:crypto';
import type { FastifyInstance } from 'fastify';

declare module 'fastify' {
  interface FastifyContextConfig {
    /** Keep the exact bytes of a JSON body as request.rawBody (webhook signatures are over them). */
    rawBody?: boolean;
  }
  interface FastifyRequest {
    /** The JSON body as received, on routes with `config: { rawBody: true }`. */
    rawBody?: Buffer;
  }
}

/**
 * Replaces Fastify's application/json parser with one that reads the body as bytes, keeps them
 * as request.rawBody on routes that ask for them, and parses them with Fastify's own JSON
 * parser and poisoning settings, so every route parses JSON exactly as before.
 */
export function installRawBodyParser(app: FastifyInstance): void {
  const { onProtoPoisoning = 'error', onConstructorPoisoning = 'error' } = app.initialConfig;
  const parseJson = app.getDefaultJsonParser(onProtoPoisoning, onConstructorPoisoning);
  app.addContentTypeParser('application/json', { parseAs: 'buffer' }, (request, body, done) => {
    if (request.routeOptions.config.rawBody) request.rawBody = body as Buffer;
    // Decoded as Fastify decodes a body it reads as a string.
    parseJson(request, body.toString('utf8'), done);
  });
}

const HEX_DIGEST = /^[0-9a-f]{64}$/i;

/**
 * Whether `signature` (a header's value: hex, after `prefix` such as `sha256=` when one is given)
 * is the HMAC-SHA256 of the exact bytes received (request.rawBody). Compared in constant time; a
 * missing body, or a missing, repeated, malformed or wrong-length signature is false, never an
 * exception.
 */
export function verifyHmacSha256(
  payload: Buffer | undefined,
  secret: string | Buffer,
  signature: string | string[] | undefined,
  prefix = '',
): boolean {
  if (payload === undefined || typeof signature !== 'string' || !signature.startsWith(prefix)) return false;
  const hex = signature.slice(prefix.length);
  if (!HEX_DIGEST.test(hex)) return false;
  return timingSafeEqual(Buffer.from(hex, 'hex'), createHmac('sha256', secret).update(payload).digest());
}
