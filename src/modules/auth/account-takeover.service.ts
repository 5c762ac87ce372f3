import type { Logger } from 'pino';
import type { EntityManager } from 'typeorm';
import { USER_COLUMNS, type UserRow } from './auth-user';
import { rows } from '../../db/sql';

/**
 * How the owner of an address proved its mailbox on an account nobody had verified (takeOver): a
 * provider vouching for the address, a sign-in link, a password-reset ticket, an invitation.
 */
export type MailboxProof = `provider:${string}` | 'magic-link' | 'password-reset' | 'invitation';

/**
 * takeOver's one statement ($1 the user): the password, pending address change and second
 * factors of the account go, with its tickets, invitations, SMS codes, linked providers and
 * sessions; the address counts as verified. Answers the account and what there was to clear.
 */
const TAKE_OVER = `WITH before AS (
         SELECT password_hash IS NOT NULL AS password, new_email IS NOT NULL AS email_change,
                totp_secret_sealed IS NOT NULL OR active_mfa_type IS NOT NULL AS second_factor, phone_number IS NOT NULL AS phone
         FROM users WHERE id = $1
       ), tickets AS (DELETE FROM auth_tickets WHERE user_id = $1 RETURNING 1),
       invitations AS (DELETE FROM user_invitations WHERE user_id = $1 RETURNING 1),
       codes AS (DELETE FROM auth_sms_codes WHERE user_id = $1 RETURNING 1),
       providers AS (DELETE FROM auth_user_providers WHERE user_id = $1 RETURNING provider),
       sessions AS (UPDATE auth_refresh_tokens SET revoked_at = now() WHERE user_id = $1 AND revoked_at IS NULL RETURNING family_id),
       account AS (
         UPDATE users SET password_hash = NULL, new_email = NULL, active_mfa_type = NULL, totp_secret_sealed = NULL, totp_last_step = NULL,
           phone_number = NULL, phone_number_verified = false, email_verified = true
         WHERE id = $1 RETURNING ${USER_COLUMNS}
       )
       SELECT account.*, before.*,
         (SELECT count(*) FROM tickets)::int + (SELECT count(*) FROM invitations)::int + (SELECT count(*) FROM codes)::int AS tickets,
         (SELECT array_agg(provider ORDER BY provider) FROM providers) AS providers,
         (SELECT count(DISTINCT family_id) FROM sessions)::int AS sessions
       FROM account, before`;

/** What TAKE_OVER answers: the account, and what it cleared. */
type TakenOverRow = UserRow & {
  password: boolean;
  email_change: boolean;
  second_factor: boolean;
  phone: boolean;
  tickets: number;
  providers: string[] | null;
  sessions: number;
};

/** Account takeover by the owner of its address (docs/decisions.md): used by every flow that proves a mailbox. */
export class AccountTakeover {
  constructor(private readonly logger: Logger) {}

  /**
   * The owner of the address proved the mailbox on an account nobody had verified: whoever typed
   * the address there first (a sign-up, registerUser, an anonymous user's upgrade) keeps no way
   * in. The password set before is cleared, the sessions revoked, the pending tickets (password
   * reset, address change, sign-in links), invitations and SMS codes deleted, the second factors
   * and phone number removed, the linked providers unlinked (the caller links the proving one);
   * the address counts as verified. Profile, roles and metadata stay: an operator may have set
   * them (bulkCreateUsers), and a sign-up may only ask for roles of AUTH_ALLOWED_ROLES. Anything
   * cleared is logged (what, not its values). Runs in the caller's transaction; answers the account.
   */
  async takeOver(manager: EntityManager, user: UserRow, proof: MailboxProof): Promise<UserRow> {
    const [row] = await rows<TakenOverRow>(manager, TAKE_OVER, [user.id]);
    const { password, email_change: emailChange, second_factor: secondFactor, phone, tickets, providers, sessions, ...account } = row;
    if (password || emailChange || secondFactor || phone || tickets > 0 || providers || sessions > 0) {
      this.logger.warn(
        { userId: user.id, proof, cleared: { password, emailChange, secondFactor, phone, tickets, providers: providers ?? [], sessions } },
        'the owner of the address took over an account nobody had verified: what was set on it before is cleared',
      );
    }
    return account;
  }
}
