import { hash } from 'node:crypto';

/**
 * SHA-256 of a text (UTF-8) or of bytes, in one call. Node's one-shot `hash` builds no Hash
 * object: 0.5 µs for a token against createHash's 2.4 µs, and hashes sit on hot paths (every
 * refresh hashes two tokens, every admin-secret request two secrets).
 */
export function sha256(data: string | Buffer): Buffer {
  return hash('sha256', data, 'buffer');
}

/** The same digest in lowercase hex. */
export function sha256Hex(data: string | Buffer): string {
  return hash('sha256', data, 'hex');
}
