import { createHmac, timingSafeEqual } from 'node:crypto';

/**
 * The HMAC-SHA256 tokens of the newsletter's links (spec 3 §5.3). A confirmation token is
 * `<expiry>.<hex HMAC>` over the address and that expiry (Unix seconds), made with
 * NEWSLETTER_CONFIRM_SECRET: the link carries its own deadline and cannot be moved. An
 * unsubscribe token is the hex HMAC of the address with NEWSLETTER_UNSUBSCRIBE_SECRET, and does not
 * expire (RFC 8058: a List-Unsubscribe link must keep working).
 */

const HEX_DIGEST = /^[0-9a-f]{64}$/;
const CONFIRM_TOKEN = /^(\d{1,12})\.([0-9a-f]{64})$/;

function hmac(secret: string, text: string): Buffer {
  return createHmac('sha256', Buffer.from(secret, 'hex')).update(text, 'utf8').digest();
}

/** Compared in constant time; both sides are 32 bytes. */
function sameDigest(hex: string, expected: Buffer): boolean {
  return timingSafeEqual(Buffer.from(hex, 'hex'), expected);
}

export function confirmToken(secret: string, email: string, expiresAt: Date): string {
  const expiry = Math.floor(expiresAt.getTime() / 1000);
  return `${expiry}.${hmac(secret, `confirm\n${email}\n${expiry}`).toString('hex')}`;
}

export type ConfirmTokenCheck = { valid: true; expiresAt: Date; expired: boolean } | { valid: false };

/** Whether `token` was made for `email` with this secret, and whether its deadline has passed. */
export function checkConfirmToken(secret: string, email: string, token: string, now = new Date()): ConfirmTokenCheck {
  const match = CONFIRM_TOKEN.exec(token);
  if (!match) return { valid: false };
  const [, expiry, digest] = match;
  if (!sameDigest(digest, hmac(secret, `confirm\n${email}\n${expiry}`))) return { valid: false };
  const expiresAt = new Date(Number(expiry) * 1000);
  return { valid: true, expiresAt, expired: expiresAt.getTime() <= now.getTime() };
}

export function unsubscribeToken(secret: string, email: string): string {
  return hmac(secret, `unsubscribe\n${email}`).toString('hex');
}

export function checkUnsubscribeToken(secret: string, email: string, token: string): boolean {
  return HEX_DIGEST.test(token) && sameDigest(token, hmac(secret, `unsubscribe\n${email}`));
}
