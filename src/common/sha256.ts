import { hash } from 'node:crypto';

/**
 * SHA-256 of a text (UTF-8) or of bytes, in one call. Node's one-shot `hash` builds no Hash
 * object, so it is several times cheaper than createHash, and hashes sit on hot paths (every
 * refresh hashes two tokens, every admin-secret request two secrets).
 */
export function sha256(data: string | Buffer): Buffer {
  return hash('sha256', data, 'buffer');
}

/** The same digest in lowercase hex. */
export function sha256Hex(data: string | Buffer): string {
  return hash('sha256', data, 'hex');
}
