import type { DataSource } from 'typeorm';
import type { PasswordHasher } from '../../common/passwords';
import type { Config } from '../../config';
import { queryPrepared } from '../../db/prepared-statements';
import { emailAddress, type SignUpInput, type SignUpOptions } from './account-input';
import type { AccountMail } from './account-mail.service';
import { authError } from './auth-errors';
import { USER_COLUMNS, type UserRow } from './auth-user';
import type { NewAccounts } from './new-accounts.service';
import type { RedirectPolicy } from './redirects';
import type { AuthSession, SessionTokens, SignInResult } from './session-tokens.service';
import type { SignIn } from './sign-in.service';
import type { SignUpPolicy } from './sign-up-policy.service';

/**
 * Sign-in's look-up of the account and its hash ($1 the address, lower case); prepared, as it runs
 * on every attempt. Exported for the sign-in floor (bench/bare-signin.ts).
 */
export const USER_WITH_PASSWORD_BY_EMAIL = `SELECT ${USER_COLUMNS}, password_hash FROM users WHERE lower(email) = $1`;

/** Sign-up and sign-in with an e-mail address: with a password, or with a link mailed to it. */
export class EmailSignIn {
  constructor(
    private readonly dataSource: DataSource,
    private readonly tokens: SessionTokens,
    /** Every account this service creates follows it. */
    private readonly signUps: SignUpPolicy,
    private readonly newAccounts: NewAccounts,
    private readonly signIn: SignIn,
    private readonly mail: AccountMail,
    private readonly passwords: PasswordHasher,
    private readonly redirects: RedirectPolicy,
    private readonly settings: Config['auth'],
  ) {}

  /** POST /auth/signup/email-password: the account, and a session unless the address must be verified first. */
  async signUpEmailPassword(input: SignUpInput): Promise<{ session: AuthSession | null }> {
    this.signUps.assertOpen();
    if (this.settings.emailVerifiedRequired) this.mail.requireMail();
    const email = emailAddress(input.email, 'email');
    const options = input.options ?? {};
    const redirectTo = this.redirects.target(options.redirectTo);
    this.newAccounts.checkProfile(options);
    await this.signUps.checkPassword(input.password);
    const passwordHash = await this.passwords.hash(input.password);

    return this.dataSource.transaction(async (manager) => {
      const user = await this.newAccounts.insert(manager, email, passwordHash, options);
      if (this.settings.emailVerifiedRequired) {
        await this.mail.sendVerification(manager, user, email, redirectTo);
        return { session: null };
      }
      return { session: await this.tokens.start(user, manager) };
    });
  }

  /**
   * POST /auth/signin/email-password. Every failure costs one argon2 hash, whether or not the
   * address has an account, so the time taken does not tell.
   */
  async signInEmailPassword(emailInput: string, password: string, ip: string): Promise<SignInResult> {
    const email = emailAddress(emailInput, 'email');
    const [row] = await queryPrepared<UserRow & { password_hash: string | null }>(this.dataSource, USER_WITH_PASSWORD_BY_EMAIL, [email]);
    const matches = await this.passwords.matches(password, row?.password_hash);
    if (!row || !matches || row.deleted_at) throw authError('invalid-email-password');
    const { password_hash: passwordHash, ...user } = row;
    if (passwordHash && !this.passwords.isCurrent(passwordHash)) await this.rehash(user.id, passwordHash, password);
    return this.signIn.complete(user, undefined, ip);
  }

  /**
   * A password whose hash was made at another cost (AUTH_PASSWORD_HASH_*) gets a new one, once,
   * at the sign-in that proves it; unless the password changed since it was read.
   */
  private async rehash(userId: string, oldHash: string, password: string): Promise<void> {
    const passwordHash = await this.passwords.hash(password);
    await this.dataSource.query('UPDATE users SET password_hash = $3 WHERE id = $1 AND password_hash = $2', [userId, oldHash, passwordHash]);
  }

  /**
   * POST /auth/signin/passwordless/email (and its alias /auth/signin/magic-link): mails a
   * single-use link (template magic-link) that signs the user in through GET /auth/verify. A new
   * address gets an account first, with the sign-up options, unless sign-up is disabled.
   */
  async signInPasswordlessEmail(input: { email: string; options?: SignUpOptions }): Promise<void> {
    if (!this.settings.passwordlessEmailEnabled)
      throw authError('disabled-endpoint', 'Passwordless sign-in is disabled (AUTH_EMAIL_PASSWORDLESS_EMAIL_ENABLED)');
    this.mail.requireMail();
    const email = emailAddress(input.email, 'email');
    const options = input.options ?? {};
    const redirectTo = this.redirects.target(options.redirectTo);
    await this.dataSource.transaction(async (manager) => {
      let [user] = (await manager.query(`SELECT ${USER_COLUMNS} FROM users WHERE lower(email) = $1`, [email])) as UserRow[];
      if (!user) {
        this.signUps.assertOpen();
        user = await this.newAccounts.insert(manager, email, null, options);
      }
      if (user.disabled || user.deleted_at) throw authError('disabled-user');
      await this.mail.sendSignInLink(manager, user, email, redirectTo);
    });
  }
}
