import type { DataSource } from 'typeorm';
import type { PasswordHasher } from '../../common/passwords';
import { emailAddress } from './account-input';
import type { AccountMail } from './account-mail.service';
import type { AccountTakeover } from './account-takeover.service';
import { authError } from './auth-errors';
import { activeUser, toAuthUser, USER_COLUMNS, type AuthUser, type UserRow } from './auth-user';
import type { RedirectPolicy } from './redirects';
import type { SessionTokens } from './session-tokens.service';
import type { SignUpPolicy } from './sign-up-policy.service';
import type { Tickets } from './tickets.service';

/** A user's own account: read, its password reset or changed, its address changed. */
export class UserAccount {
  constructor(
    private readonly dataSource: DataSource,
    private readonly tokens: SessionTokens,
    private readonly tickets: Tickets,
    /** Its password rules hold for a new password too. */
    private readonly signUps: SignUpPolicy,
    private readonly takeover: AccountTakeover,
    private readonly mail: AccountMail,
    private readonly passwords: PasswordHasher,
    private readonly redirects: RedirectPolicy,
  ) {}

  /** GET /auth/user. */
  async user(userId: string): Promise<AuthUser> {
    return toAuthUser(await activeUser(this.dataSource.manager, userId));
  }

  /**
   * POST /auth/user/password/reset: mails a link (template reset-password) to an active account.
   * The answer is the same whether or not the address has one.
   */
  async sendPasswordReset(emailInput: string, redirectToInput?: string): Promise<void> {
    this.mail.requireMail();
    const email = emailAddress(emailInput, 'email');
    const redirectTo = this.redirects.target(redirectToInput);
    await this.dataSource.transaction(async (manager) => {
      const [user] = (await manager.query(`SELECT ${USER_COLUMNS} FROM users WHERE lower(email) = $1`, [email])) as UserRow[];
      if (!user || user.disabled || user.deleted_at) return;
      await this.mail.sendPasswordReset(manager, user, email, redirectTo);
    });
  }

  /**
   * POST /auth/user/password: the signed-in user's new password, or the holder of a ticket's: a
   * password-reset ticket, or an invitation's (bulkCreateUsers); either also verifies the address
   * it was mailed to (and takes an account nobody had verified over). A ticket ends every session
   * of the account, the signed-in user's change every other one (`sessionId` the one kept, null
   * for none): whoever had the old password is signed out.
   */
  async changePassword(newPassword: string, by: { userId: string; sessionId: string | null } | { ticket: string }): Promise<void> {
    await this.signUps.checkPassword(newPassword);
    const passwordHash = await this.passwords.hash(newPassword);
    await this.dataSource.transaction(async (manager) => {
      if ('userId' in by) {
        if ((await activeUser(manager, by.userId)).is_anonymous) throw authError('forbidden-anonymous');
        await manager.query('UPDATE users SET password_hash = $2 WHERE id = $1', [by.userId, passwordHash]);
        await this.tokens.revokeAll(by.userId, manager, by.sessionId);
        return;
      }
      const userId = by.ticket.includes(':')
        ? (await this.tickets.redeem(manager, 'passwordReset', by.ticket))?.userId
        : await this.tickets.redeemInvitation(manager, by.ticket);
      if (!userId) throw authError('invalid-ticket');
      const user = await activeUser(manager, userId);
      if (!user.email_verified) await this.takeover.takeOver(manager, user, by.ticket.includes(':') ? 'password-reset' : 'invitation');
      // The ticket came by mail to the account's address: holding it proves the mailbox.
      await manager.query('UPDATE users SET password_hash = $2, email_verified = true WHERE id = $1', [userId, passwordHash]);
      await this.tokens.revokeAll(userId, manager);
    });
  }

  /**
   * POST /auth/user/email/change: mails a link (template confirm-email-change) to the new
   * address; the address changes when that link is followed.
   */
  async changeEmail(userId: string, newEmailInput: string, redirectToInput?: string): Promise<void> {
    this.mail.requireMail();
    const newEmail = emailAddress(newEmailInput, 'newEmail');
    const redirectTo = this.redirects.target(redirectToInput);
    await this.dataSource.transaction(async (manager) => {
      const user = await activeUser(manager, userId);
      if (user.is_anonymous) throw authError('forbidden-anonymous');
      const taken = (await manager.query('SELECT 1 FROM users WHERE lower(email) = $1', [newEmail])) as unknown[];
      if (taken.length > 0) throw authError('email-already-in-use');
      await manager.query('UPDATE users SET new_email = $2 WHERE id = $1', [userId, newEmail]);
      await this.mail.sendEmailChange(manager, user, newEmail, redirectTo);
    });
  }
}
