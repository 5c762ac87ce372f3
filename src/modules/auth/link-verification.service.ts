import type { DataSource, EntityManager } from 'typeorm';
import type { Config } from '../../config';
import { emailAddress } from './account-input';
import type { AccountMail } from './account-mail.service';
import type { AccountTakeover } from './account-takeover.service';
import { authError, invalidRequest, isAuthError } from './auth-errors';
import { activeUser, USER_COLUMNS, type UserRow } from './auth-user';
import { withQuery, type RedirectPolicy } from './redirects';
import type { SignIn } from './sign-in.service';
import type { TicketKind, Tickets } from './tickets.service';

/** The verification links' `type`, and the ticket kind each redeems. */
export const VERIFY_TYPES = {
  emailVerify: 'emailVerify',
  emailConfirmChange: 'emailConfirmChange',
  signinPasswordless: 'signinPasswordless',
  passwordReset: 'passwordReset',
} as const satisfies Record<string, TicketKind>;

export type VerifyType = keyof typeof VERIFY_TYPES;

/** The query of an invitation link's landing (GET /auth/invitations/accept), and what the app is sent. */
export const INVITE_TYPE = 'invite';

const UNIQUE_VIOLATION = '23505';

/**
 * The mailed links, followed: GET /auth/verify redeems the ticket of a verification, address
 * change, sign-in or password-reset link; an invitation link leads to the app. And a new
 * verification link for an address not yet verified.
 */
export class LinkVerification {
  constructor(
    private readonly dataSource: DataSource,
    private readonly tickets: Tickets,
    private readonly takeover: AccountTakeover,
    private readonly signIn: SignIn,
    private readonly mail: AccountMail,
    private readonly redirects: RedirectPolicy,
    private readonly settings: Config['auth'],
  ) {}

  /**
   * GET /auth/verify: redeems the ticket of a mailed link and answers where to redirect: to
   * `redirectTo` with `refreshToken` and `type` added to its query (a session), or with `error`
   * and `errorDescription` when the ticket or account does not allow it. A `redirectTo` that is
   * not allowed is refused (authError): nobody is sent there, even with an error.
   */
  async verify(query: { ticket: string; type: string; redirectTo?: string }, ip: string): Promise<string> {
    const redirectTo = this.redirects.target(query.redirectTo);
    if (!(query.type in VERIFY_TYPES)) throw invalidRequest(`type must be one of ${Object.keys(VERIFY_TYPES).join(', ')}`);
    const type = query.type as VerifyType;
    try {
      const result = await this.dataSource.transaction(async (manager) => {
        const redeemed = await this.tickets.redeem(manager, VERIFY_TYPES[type], query.ticket);
        if (!redeemed) throw authError('invalid-ticket');
        const user = await activeUser(manager, redeemed.userId);
        // Every link went to the address it verifies: following it proves the mailbox. A link
        // that signs in takes an account nobody had verified over; the verification mail confirms
        // the sign-up it was sent for, password included (docs/decisions.md).
        if (type === 'emailConfirmChange') await this.moveEmail(manager, user, redeemed.newEmail);
        else if (!user.email_verified && type !== 'emailVerify')
          await this.takeover.takeOver(manager, user, type === 'passwordReset' ? 'password-reset' : 'magic-link');
        else await manager.query('UPDATE users SET email_verified = true WHERE id = $1', [user.id]);
        // As any sign-in: a second factor, when on, is still asked for (the MFA ticket instead of a session).
        return this.signIn.complete(await activeUser(manager, user.id), manager, ip);
      });
      if (result.mfa) return withQuery(redirectTo, { mfaTicket: result.mfa.ticket, type });
      return withQuery(redirectTo, { refreshToken: result.session!.refreshToken, type });
    } catch (error) {
      if (!isAuthError(error)) throw error;
      return withQuery(redirectTo, { error: error.code, errorDescription: error.message });
    }
  }

  private async moveEmail(manager: EntityManager, user: UserRow, newEmail: string | null): Promise<void> {
    if (!newEmail) throw authError('invalid-ticket');
    try {
      await manager.query('UPDATE users SET email = $2, new_email = NULL, email_verified = true WHERE id = $1', [user.id, newEmail]);
    } catch (error) {
      // Taken since the change was asked for; the transaction is rolled back with this error.
      if ((error as { driverError?: { code?: string } }).driverError?.code !== UNIQUE_VIOLATION) throw error;
      throw authError('email-already-in-use');
    }
  }

  /**
   * POST /auth/user/email/send-verification-email: a new link for an address not yet verified.
   * The answer is OK whether the address has no account, an unverified one or a verified one
   * (which gets no mail): it does not tell which.
   */
  async sendVerificationEmail(emailInput: string, redirectToInput?: string): Promise<void> {
    this.mail.requireMail();
    const email = emailAddress(emailInput, 'email');
    const redirectTo = this.redirects.target(redirectToInput);
    await this.dataSource.transaction(async (manager) => {
      const [user] = (await manager.query(`SELECT ${USER_COLUMNS} FROM users WHERE lower(email) = $1`, [email])) as UserRow[];
      if (!user || user.email_verified) return;
      await this.mail.sendVerification(manager, user, email, redirectTo);
    });
  }

  /**
   * GET /auth/invitations/accept (the link of an invitation mail): leads to the app with the
   * ticket, where the invited user chooses a password (POST /auth/user/password {ticket}). The
   * ticket is not used here, so a mail scanner following the link cannot spend it.
   */
  async invitationLanding(ticket: string): Promise<string> {
    const target = this.settings.clientUrl;
    if (!(await this.tickets.invitationIsLive(this.dataSource.manager, ticket))) {
      const error = authError('invalid-ticket');
      return withQuery(target, { error: error.code, errorDescription: error.message, type: INVITE_TYPE });
    }
    return withQuery(target, { ticket, type: INVITE_TYPE });
  }
}
