import type { DataSource, EntityManager } from 'typeorm';
import type { Config } from '../../config';
import { authError } from './auth-errors';
import type { UserRow } from './auth-user';
import type { SessionTokens, SignInResult } from './session-tokens.service';
import type { SmsFactor } from './sms.service';
import type { Tickets } from './tickets.service';

/**
 * The end of every sign-in, whatever proved who the user is (a password, a mailed link, a
 * provider): the account's state checked, then a session, or the ticket of its second factor.
 */
export class SignIn {
  constructor(
    private readonly dataSource: DataSource,
    private readonly tokens: SessionTokens,
    private readonly tickets: Tickets,
    /** Sends the code of an `mfaSms` sign-in. */
    private readonly sms: SmsFactor,
    private readonly settings: Config['auth'],
  ) {}

  /**
   * The checks after the credentials, common to every sign-in method; a second factor gives a
   * ticket instead. Written with `manager` when given (a transaction); without it the session is
   * one statement, and a second factor's ticket and code get a transaction of their own.
   */
  async complete(user: UserRow, manager: EntityManager | undefined, ip: string): Promise<SignInResult> {
    if (user.disabled || user.deleted_at) throw authError('disabled-user');
    if (this.settings.emailVerifiedRequired && !user.email_verified) throw authError('unverified-user');
    if (user.active_mfa_type === 'totp' || user.active_mfa_type === 'sms') {
      const kind = user.active_mfa_type === 'totp' ? 'mfaTotp' : 'mfaSms';
      const challenge = async (writer: EntityManager): Promise<SignInResult> => {
        const ticket = await this.tickets.issue(writer, kind, user.id, this.settings.ticketTtlSeconds.mfa);
        if (kind === 'mfaSms') await this.sms.sendSignInCode(writer, user, ip);
        return { session: null, mfa: { ticket } };
      };
      return manager ? challenge(manager) : this.dataSource.transaction(challenge);
    }
    return { session: await this.tokens.start(user, manager), mfa: null };
  }
}
