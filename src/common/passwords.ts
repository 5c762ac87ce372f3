import { randomBytes } from 'node:crypto';
import { Algorithm, hash, verify } from '@node-rs/argon2';

/** argon2id's cost: AUTH_PASSWORD_HASH_MEMORY_KIB, _ITERATIONS and _PARALLELISM. */
export interface PasswordHashSettings {
  memoryKib: number;
  iterations: number;
  parallelism: number;
}

/**
 * Password hashes: argon2id at the configured cost. A hash records its parameters
 * (`$argon2id$v=19$m=…,t=…,p=…$`), so hashes made at an earlier cost still verify, and sign-in
 * replaces them (`isCurrent`).
 */
export class PasswordHasher {
  private readonly options: { algorithm: Algorithm; memoryCost: number; timeCost: number; parallelism: number };
  private readonly currentPrefix: string;
  /** A hash of a password nobody knows: checked against when there is no account, so both cases cost one hash. */
  private standIn: Promise<string> | undefined;

  constructor(settings: PasswordHashSettings) {
    this.options = { algorithm: Algorithm.Argon2id, memoryCost: settings.memoryKib, timeCost: settings.iterations, parallelism: settings.parallelism };
    this.currentPrefix = `$argon2id$v=19$m=${settings.memoryKib},t=${settings.iterations},p=${settings.parallelism}$`;
  }

  hash(password: string): Promise<string> {
    return hash(password, this.options);
  }

  /**
   * Whether `password` matches `passwordHash`. Without a hash (no such account, or an invited user
   * without a password) it still computes one argon2id hash at the current cost and answers false,
   * so the time taken does not tell whether the account exists.
   */
  async matches(password: string, passwordHash: string | null | undefined): Promise<boolean> {
    if (!passwordHash) {
      this.standIn ??= this.hash(randomBytes(16).toString('hex'));
      await verify(await this.standIn, password).catch(() => false);
      return false;
    }
    return verify(passwordHash, password).catch(() => false);
  }

  /** Whether `passwordHash` was made at the current cost (argon2id, version 19, these parameters). */
  isCurrent(passwordHash: string): boolean {
    return passwordHash.startsWith(this.currentPrefix);
  }
}
