import type { DataSource } from 'typeorm';
import type { PasswordHasher } from '../../common/passwords';
import type { Config } from '../../config';
import { displayName, emailAddress, locale, type DeanonymizeInput } from './account-input';
import type { AccountMail } from './account-mail.service';
import { authError, invalidRequest } from './auth-errors';
import { activeUser, USER_COLUMNS, type UserRow } from './auth-user';
import type { NewAccounts } from './new-accounts.service';
import { rows } from '../../db/sql';
import type { RedirectPolicy } from './redirects';
import type { AuthSession, SessionTokens } from './session-tokens.service';
import type { SignUpPolicy } from './sign-up-policy.service';

/** The role of anonymous users (spec 2 §2.3), their only one until they are upgraded. */
export const ANONYMOUS_ROLE = 'anonymous';

/** Anonymous users (AUTH_ANONYMOUS_USERS_ENABLED): their sign-in, and their upgrade to an e-mail account. */
export class AnonymousUsers {
  constructor(
    private readonly dataSource: DataSource,
    private readonly tokens: SessionTokens,
    /** Every account this service creates follows it. */
    private readonly signUps: SignUpPolicy,
    private readonly newAccounts: NewAccounts,
    private readonly mail: AccountMail,
    private readonly passwords: PasswordHasher,
    private readonly redirects: RedirectPolicy,
    private readonly settings: Config['auth'],
  ) {}

  /**
   * POST /auth/signin/anonymous (AUTH_ANONYMOUS_USERS_ENABLED): a new account without an address,
   * role `anonymous`; a sign-up, so not while sign-up is disabled.
   */
  async signInAnonymous(input: { displayName?: string; locale?: string; metadata?: Record<string, unknown> }): Promise<{ session: AuthSession }> {
    if (!this.settings.anonymousUsersEnabled) throw authError('disabled-endpoint', 'Anonymous users are disabled (AUTH_ANONYMOUS_USERS_ENABLED)');
    this.signUps.assertOpen();
    const name = displayName(input.displayName) ?? 'Anonymous';
    const language = locale(input.locale);
    return this.dataSource.transaction(async (manager) => {
      const [user] = (await manager.query(
        `INSERT INTO users (email, password_hash, name, locale, default_role, allowed_roles, metadata, email_verified, is_anonymous)
         VALUES (NULL, NULL, $1, $2, $3, $4, $5, false, true)
         RETURNING ${USER_COLUMNS}`,
        [name, language, ANONYMOUS_ROLE, [ANONYMOUS_ROLE], input.metadata ?? {}],
      )) as UserRow[];
      return { session: await this.tokens.start(user, manager) };
    });
  }

  /**
   * POST /auth/user/deanonymize (Nhost's body): the anonymous account becomes an e-mail account,
   * with a password (`email-password`) or a mailed link (`passwordless`), the roles of a new user
   * (or those asked for, as at sign-up), and every anonymous session ended: the user signs in
   * again with the new credentials (after verifying the address when that is required).
   */
  async deanonymize(userId: string, input: DeanonymizeInput): Promise<void> {
    const email = emailAddress(input.email, 'email');
    const options = input.options ?? {};
    const redirectTo = this.redirects.target(options.redirectTo);
    this.newAccounts.checkProfile(options);
    const { defaultRole, allowedRoles } = this.newAccounts.requestedRoles(options);
    let passwordHash: string | null = null;
    if (input.signInMethod === 'email-password') {
      if (input.password === undefined) throw invalidRequest('password is required with signInMethod email-password');
      if (this.settings.emailVerifiedRequired) this.mail.requireMail();
      await this.signUps.checkPassword(input.password);
      passwordHash = await this.passwords.hash(input.password);
    } else {
      if (!this.settings.passwordlessEmailEnabled)
        throw authError('disabled-endpoint', 'Passwordless sign-in is disabled (AUTH_EMAIL_PASSWORDLESS_EMAIL_ENABLED)');
      this.mail.requireMail();
    }
    await this.dataSource.transaction(async (manager) => {
      const user = await activeUser(manager, userId);
      if (!user.is_anonymous) throw authError('user-not-anonymous');
      const taken = (await manager.query('SELECT 1 FROM users WHERE lower(email) = $1', [email])) as unknown[];
      if (taken.length > 0) throw authError('email-already-in-use');
      const [upgraded] = await rows<UserRow>(
        manager,
        `UPDATE users SET email = $2, password_hash = $3, is_anonymous = false, email_verified = false, default_role = $4,
           allowed_roles = $5, name = coalesce($6, name), locale = coalesce($7, locale), metadata = coalesce($8, metadata), avatar_url = $9
         WHERE id = $1 RETURNING ${USER_COLUMNS}`,
        [
          userId,
          email,
          passwordHash,
          defaultRole,
          allowedRoles,
          displayName(options.displayName) ?? null,
          options.locale ?? null,
          options.metadata ?? null,
          this.newAccounts.avatarUrl(email),
        ],
      );
      await this.tokens.revokeAll(userId, manager);
      if (input.signInMethod === 'passwordless') {
        await this.mail.sendSignInLink(manager, upgraded, email, redirectTo);
      } else if (this.settings.emailVerifiedRequired) {
        await this.mail.sendVerification(manager, upgraded, email, redirectTo);
      }
    });
  }
}
