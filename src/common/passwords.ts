import { randomBytes } from 'node:crypto';
import { Algorithm, hash, verify } from '@node-rs/argon2';

/** argon2id with the library's defaults (19 MiB, 2 passes, 1 lane: OWASP's recommendation). */
export function hashPassword(password: string): Promise<string> {
  return hash(password, { algorithm: Algorithm.Argon2id });
}

/** A hash of a password nobody knows: checked against when there is no account, so both cases cost one hash. */
let standIn: Promise<string> | undefined;

/**
 * Whether `password` matches `passwordHash`. Without a hash (no such account, or an invited user
 * without a password) it still computes one argon2id hash and answers false, so the time taken
 * does not tell whether the account exists.
 */
export async function passwordMatches(password: string, passwordHash: string | null | undefined): Promise<boolean> {
  if (!passwordHash) {
    standIn ??= hashPassword(randomBytes(16).toString('hex'));
    await verify(await standIn, password).catch(() => false);
    return false;
  }
  return verify(passwordHash, password).catch(() => false);
}
