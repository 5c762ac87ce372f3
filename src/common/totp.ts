/** otplib and its hash and base32 plugins are required at the first code checked, not at start. */
const otplib = () => require('otplib') as typeof import('otplib');

/** RFC 6238 as authenticator apps use it: SHA-1, 6 digits, 30-second steps. */
export const TOTP_PERIOD_SECONDS = 30;
const CODE = /^\d{6}$/;

/** A new base32 secret of `bytes` random bytes. */
export function generateTotpSecret(bytes: number): string {
  return otplib().generateSecret({ length: bytes });
}

/** The otpauth:// URI an authenticator app takes (as a QR code or typed in). */
export function totpUri(secret: string, issuer: string, label: string): string {
  return otplib().generateURI({ issuer, label, secret, period: TOTP_PERIOD_SECONDS });
}

/**
 * The time step of `code` when it is a current code of `secret` (one step of skew either way)
 * newer than `lastStep`, the step of the last code accepted: a code is accepted once, and never an
 * older one. Undefined otherwise. The caller records the step it gets.
 */
export async function acceptedTotpStep(secret: string, code: string, lastStep: number | undefined): Promise<number | undefined> {
  if (!CODE.test(code)) return undefined;
  const result = await otplib().verify({ secret, token: code, epochTolerance: TOTP_PERIOD_SECONDS, period: TOTP_PERIOD_SECONDS, afterTimeStep: lastStep });
  return result.valid && 'timeStep' in result ? result.timeStep : undefined;
}
