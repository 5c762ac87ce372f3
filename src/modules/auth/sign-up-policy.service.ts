import type { Config } from '../../config';
import type { RateLimitName } from '../../platform/rate-limits';
import { AUTH_ERRORS, authError, invalidRequest } from './auth-errors';
import type { BreachedPasswords } from './breached-passwords.service';

/** The limit every sign-up takes a point of, per client address (AUTH_RATE_LIMIT_SIGNUPS_*). */
export const SIGN_UP_LIMIT = 'authSignups' satisfies RateLimitName;

/** Why a password may not be used, by its length. */
export type PasswordLengthProblem = 'too-short' | 'too-long';

/**
 * The rules of every way an account is made from outside: sign-up with a password, passwordless
 * and external-provider sign-in of a new address, anonymous sign-in, and registerUser (GraphQL
 * and its handler route). Each asks `assertOpen` before creating, checks a password it is given
 * with `passwordLength` and `isBreached` (or `checkPassword`, which throws the auth service's
 * errors), and takes a point of SIGN_UP_LIMIT where its route is declared. Administrators'
 * creation (bulkCreateUsers) is not a sign-up (docs/decisions.md).
 */
export class SignUpPolicy {
  constructor(
    private readonly settings: Pick<Config['auth'], 'signupDisabled' | 'passwordMinLength' | 'passwordMaxLength'>,
    private readonly breached: BreachedPasswords,
  ) {}

  /** False with AUTH_DISABLE_SIGNUP. */
  isOpen(): boolean {
    return !this.settings.signupDisabled;
  }

  /** AUTH_DISABLE_SIGNUP: 403 signup-disabled. */
  assertOpen(): void {
    if (!this.isOpen()) throw authError('signup-disabled');
  }

  /** Why a breached password is refused (Nhost's password-in-hibp-database), for callers that answer per field. */
  readonly breachedPasswordMessage = AUTH_ERRORS['password-in-hibp-database'].message;

  /** AUTH_PASSWORD_MIN_LENGTH and AUTH_PASSWORD_MAX_LENGTH, for messages. */
  get passwordBounds(): { minLength: number; maxLength: number } {
    return { minLength: this.settings.passwordMinLength, maxLength: this.settings.passwordMaxLength };
  }

  /** The length in characters (not UTF-16 units) against AUTH_PASSWORD_MIN_LENGTH and AUTH_PASSWORD_MAX_LENGTH. */
  passwordLength(password: string): PasswordLengthProblem | undefined {
    const length = [...password].length;
    const { minLength, maxLength } = this.passwordBounds;
    if (length < minLength) return 'too-short';
    if (length > maxLength) return 'too-long';
    return undefined;
  }

  /** AUTH_PASSWORD_HIBP_ENABLED: whether the password is in a list of breached ones. */
  isBreached(password: string): Promise<boolean> {
    return this.breached.isBreached(password);
  }

  /** Both checks, as the auth routes answer them: password-too-short, invalid-request, password-in-hibp-database. */
  async checkPassword(password: string): Promise<void> {
    const { minLength, maxLength } = this.passwordBounds;
    const problem = this.passwordLength(password);
    if (problem === 'too-short') throw authError('password-too-short', `Password must be at least ${minLength} characters`);
    if (problem === 'too-long') throw invalidRequest(`password must be at most ${maxLength} characters`);
    if (await this.isBreached(password)) throw authError('password-in-hibp-database');
  }
}
