import { timingSafeEqual } from 'node:crypto';
import { sha256 } from './sha256';

/**
 * Constant-time comparison of two secrets. Both sides are hashed first so that neither the
 * comparison time nor an early length check reveals how long the expected secret is.
 */
export function secretsEqual(given: string, expected: string): boolean {
  return timingSafeEqual(sha256(given), sha256(expected));
}
