import type { EntityManager } from 'typeorm';
import type { Config } from '../../config';
import type { MailMessage, Mailer } from '../../platform/mail/mailer';
import { authUrl } from '../../platform/urls';
import { authError } from './auth-errors';
import type { UserRow } from './auth-user';
import type { Tickets } from './tickets.service';

/**
 * The mails the auth service sends an account, each with a single-use link to GET /auth/verify:
 * the ticket is issued and the mail queued in the caller's transaction, so neither outlives a
 * flow that fails.
 */
export class AccountMail {
  constructor(
    private readonly tickets: Tickets,
    private readonly mailer: Mailer,
    private readonly config: Pick<Config, 'auth'>,
    /** False when mail cannot be delivered (production without SMTP_HOST): routes that mail answer disabled-endpoint. */
    private readonly canMail: boolean,
  ) {}

  /** Checked before anything else, so that the answer does not depend on the address. */
  requireMail(): void {
    if (!this.canMail) throw authError('disabled-endpoint', 'This server cannot send mail (SMTP_HOST is unset)');
  }

  /** Template verify-email: the link verifies `email`. */
  async sendVerification(manager: EntityManager, user: UserRow, email: string, redirectTo: string): Promise<void> {
    const ticket = await this.tickets.issue(manager, 'emailVerify', user.id, this.config.auth.ticketTtlSeconds.verifyEmail);
    const link = authUrl(this.config, '/verify', { ticket, type: 'emailVerify', redirectTo });
    await this.mail(manager, { to: email, template: 'verify-email', variables: { display_name: user.name, email, link } });
  }

  /** Template magic-link: the link signs the user in. */
  async sendSignInLink(manager: EntityManager, user: UserRow, email: string, redirectTo: string): Promise<void> {
    const ticket = await this.tickets.issue(manager, 'signinPasswordless', user.id, this.config.auth.ticketTtlSeconds.passwordless);
    const link = authUrl(this.config, '/verify', { ticket, type: 'signinPasswordless', redirectTo });
    await this.mail(manager, { to: email, template: 'magic-link', variables: { display_name: user.name, link } });
  }

  /** Template reset-password: the link starts a password reset. */
  async sendPasswordReset(manager: EntityManager, user: UserRow, email: string, redirectTo: string): Promise<void> {
    const ticket = await this.tickets.issue(manager, 'passwordReset', user.id, this.config.auth.ticketTtlSeconds.passwordReset);
    const link = authUrl(this.config, '/verify', { ticket, type: 'passwordReset', redirectTo });
    await this.mail(manager, { to: email, template: 'reset-password', variables: { display_name: user.name, link } });
  }

  /** Template confirm-email-change, to the new address: the link moves the account to it. */
  async sendEmailChange(manager: EntityManager, user: UserRow, newEmail: string, redirectTo: string): Promise<void> {
    const ticket = await this.tickets.issue(manager, 'emailConfirmChange', user.id, this.config.auth.ticketTtlSeconds.emailChange, newEmail);
    const link = authUrl(this.config, '/verify', { ticket, type: 'emailConfirmChange', redirectTo });
    await this.mail(manager, { to: newEmail, template: 'confirm-email-change', variables: { display_name: user.name, new_email: newEmail, link } });
  }

  private async mail(manager: EntityManager, message: MailMessage): Promise<void> {
    await this.mailer.send(message, { transaction: manager });
  }
}
