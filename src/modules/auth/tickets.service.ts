import { randomUUID } from 'node:crypto';
import type { EntityManager } from 'typeorm';
import { sha256 } from '../../common/sha256';
import { one } from '../../db/sql';

/** What a ticket lets its holder do once; the prefix of its text is Nhost's. */
export const TICKET_PREFIX = {
  emailVerify: 'verifyEmail',
  emailConfirmChange: 'emailConfirmChange',
  passwordReset: 'passwordReset',
  signinPasswordless: 'otp',
  mfaTotp: 'mfaTotp',
  mfaSms: 'mfaSms',
} as const;

export type TicketKind = keyof typeof TICKET_PREFIX;

export interface RedeemedTicket {
  userId: string;
  /** The address an e-mail change moves to. */
  newEmail: string | null;
}

/**
 * Single-use tickets (`<prefix>:<uuid>`), kept as SHA-256 hashes with their kind, user and expiry.
 * A user holds at most one live ticket of each kind: issuing one voids the previous. Redeeming
 * deletes the row in the same statement that reads it, so a ticket works once even when two
 * requests race with it.
 */
export class Tickets {
  async issue(manager: EntityManager, kind: TicketKind, userId: string, ttlSeconds: number, newEmail: string | null = null): Promise<string> {
    const ticket = `${TICKET_PREFIX[kind]}:${randomUUID()}`;
    await manager.query('DELETE FROM auth_tickets WHERE user_id = $1 AND kind = $2', [userId, kind]);
    await manager.query(
      `INSERT INTO auth_tickets (ticket_hash, kind, user_id, new_email, expires_at)
       VALUES ($1, $2, $3, $4, now() + make_interval(secs => $5))`,
      [sha256(ticket), kind, userId, newEmail, ttlSeconds],
    );
    return ticket;
  }

  /** Uses up the ticket; null when it is unknown, of another kind, used or expired. */
  async redeem(manager: EntityManager, kind: TicketKind, ticket: string): Promise<RedeemedTicket | null> {
    if (!ticket.startsWith(`${TICKET_PREFIX[kind]}:`)) return null;
    const row = await one<{ user_id: string; new_email: string | null; live: boolean }>(
      manager,
      'DELETE FROM auth_tickets WHERE ticket_hash = $1 AND kind = $2 RETURNING user_id, new_email, expires_at > now() AS live',
      [sha256(ticket), kind],
    );
    return row?.live ? { userId: row.user_id, newEmail: row.new_email } : null;
  }

  /**
   * A live ticket of `kind`, locked until the transaction of `manager` ends, without using it:
   * a second-factor ticket survives a wrong code (up to a limit, see recordFailure).
   */
  async hold(manager: EntityManager, kind: TicketKind, ticket: string): Promise<{ userId: string } | null> {
    if (!ticket.startsWith(`${TICKET_PREFIX[kind]}:`)) return null;
    const row = await one<{ user_id: string }>(
      manager,
      'SELECT user_id FROM auth_tickets WHERE ticket_hash = $1 AND kind = $2 AND expires_at > now() FOR UPDATE',
      [sha256(ticket), kind],
    );
    return row ? { userId: row.user_id } : null;
  }

  /** Counts a wrong code against a held ticket; the ticket is void once it has had `limit` of them. */
  async recordFailure(manager: EntityManager, ticket: string, limit: number): Promise<void> {
    const hash = sha256(ticket);
    const row = await one<{ failed_attempts: number }>(
      manager,
      'UPDATE auth_tickets SET failed_attempts = failed_attempts + 1 WHERE ticket_hash = $1 RETURNING failed_attempts',
      [hash],
    );
    if (row && row.failed_attempts >= limit) await manager.query('DELETE FROM auth_tickets WHERE ticket_hash = $1', [hash]);
  }

  /**
   * Invitation tickets (bulkCreateUsers with send_invitations, table user_invitations): the raw
   * ticket of the mailed link, without a prefix. Redeeming one voids every invitation of the user.
   */
  async redeemInvitation(manager: EntityManager, ticket: string): Promise<string | null> {
    const row = await one<{ user_id: string; live: boolean }>(
      manager,
      'DELETE FROM user_invitations WHERE ticket_hash = $1 RETURNING user_id, expires_at > now() AS live',
      [sha256(ticket)],
    );
    if (!row?.live) return null;
    await manager.query('DELETE FROM user_invitations WHERE user_id = $1', [row.user_id]);
    return row.user_id;
  }

  /** Whether an invitation ticket is live, without using it (the link in the mail only leads on). */
  async invitationIsLive(manager: EntityManager, ticket: string): Promise<boolean> {
    const rows = (await manager.query('SELECT 1 FROM user_invitations WHERE ticket_hash = $1 AND expires_at > now()', [sha256(ticket)])) as unknown[];
    return rows.length > 0;
  }
}
