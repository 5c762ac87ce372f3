import type { EntityManager } from 'typeorm';
import { MAIL_ADDRESS } from '../../common/mail-address';
import { Refusal } from '../../common/refusal';
import type { MailMessage } from '../../platform/mail/mailer';
import type { NewsletterAdmin } from './newsletter-admin.service';
import { NewsletterFlow } from './newsletter-flow';
import {
  CONFIRM_TEMPLATE,
  normalizeEmail,
  SUBSCRIBER_COLUMNS,
  UNSUBSCRIBED_TEMPLATE,
  type ConfirmOutcome,
  type NewsletterDependencies,
  type SubscribeInput,
  type Subscriber,
  type SubscriberStatus,
  type UnsubscribeOutcome,
} from './newsletter.model';
import { rowsAndCount } from '../../db/sql';
import { checkConfirmToken, checkUnsubscribeToken } from './newsletter.tokens';
import type { WelcomeSeries } from './series.service';

const MAX_EMAIL_LENGTH = 254;
const MAX_NAME_LENGTH = 200;
const MAX_SOURCE_LENGTH = 100;

/**
 * Subscriptions (spec 3 §1.2): double opt-in (subscribe, then confirm with the T1 link, which
 * starts the welcome series), unsubscription with T2, and the clean-up of addresses never confirmed.
 */
export class Subscriptions extends NewsletterFlow {
  constructor(
    deps: NewsletterDependencies,
    private readonly series: WelcomeSeries,
    private readonly admin: NewsletterAdmin,
  ) {
    super(deps);
  }

  /**
   * Accepts a subscription: a new address gets a pending row and T1; a pending one a fresh link
   * (up to NEWSLETTER_CONFIRM_RESEND_LIMIT times); an unsubscribed one starts over; a confirmed
   * one nothing. The caller answers the same in every case. Throws INVALID_EMAIL or BAD_REQUEST.
   */
  async subscribe(input: SubscribeInput): Promise<void> {
    this.mail.secrets();
    const email = typeof input.email === 'string' ? normalizeEmail(input.email) : '';
    if (!email || email.length > MAX_EMAIL_LENGTH || !MAIL_ADDRESS.test(email) || email.indexOf('@') > 64) {
      throw new Refusal('INVALID_EMAIL', 'email must be an e-mail address such as ada@example.com', 400);
    }
    const name = optionalText(input.name, 'name', MAX_NAME_LENGTH);
    const source = optionalText(input.source, 'source', MAX_SOURCE_LENGTH);
    const ttl = this.settings.confirmTtlSeconds;

    await this.deps.dataSource.transaction(async (manager) => {
      const inserted = await rowsAndCount<Subscriber>(
        manager,
        `INSERT INTO newsletter_subscribers (email, name, source, verification_expires_at)
         VALUES ($1, $2, $3, date_trunc('second', now()) + make_interval(secs => $4))
         ON CONFLICT (email) DO NOTHING RETURNING ${SUBSCRIBER_COLUMNS}`,
        [email, name, source, ttl],
      );
      let subscriber = inserted.rows[0];
      if (!subscriber) {
        const existing = (
          await rowsAndCount<Subscriber>(manager, `SELECT ${SUBSCRIBER_COLUMNS} FROM newsletter_subscribers WHERE email = $1 FOR UPDATE`, [email])
        ).rows[0];
        // Deleted by the clean-up between the two statements: the caller may simply ask again.
        if (!existing) throw new Refusal('CONFLICT', 'the subscription changed meanwhile; please try again', 409);
        if (existing.status === 'active') return;
        if (existing.status === 'pending' && existing.confirmations_sent > this.settings.confirmResendLimit) return;
        // A pending address gets a fresh link; an unsubscribed one asks again, and confirms again.
        subscriber = (
          await rowsAndCount<Subscriber>(
            manager,
            `UPDATE newsletter_subscribers SET
               status = 'pending', is_verified = false, updated_at = now(),
               verification_expires_at = date_trunc('second', now()) + make_interval(secs => $2),
               confirmations_sent = CASE WHEN status = 'pending' THEN confirmations_sent + 1 ELSE 1 END,
               name = coalesce($3, name), source = coalesce($4, source)
             WHERE id = $1 RETURNING ${SUBSCRIBER_COLUMNS}`,
            [existing.id, ttl, name, source],
          )
        ).rows[0];
      }
      const message = this.mail.message(
        subscriber,
        CONFIRM_TEMPLATE,
        { confirm_url: this.mail.confirmUrl(subscriber.email, subscriber.verification_expires_at), expires_hours: Math.round(ttl / 3600) },
        `newsletter-confirm/${subscriber.id}/${subscriber.confirmations_sent}/${subscriber.verification_expires_at.getTime()}`,
      );
      await this.recordQueuedMail(manager, subscriber.id, message);
    });
  }

  /** Queues a transactional mail (T1, T2) in the caller's transaction and records it. */
  private async recordQueuedMail(manager: EntityManager, subscriberId: string, message: MailMessage): Promise<void> {
    const jobId = await this.deps.mailer.send(message, { transaction: manager });
    await rowsAndCount(manager, `INSERT INTO newsletter_mails (subscriber_id, template, status, job_id) VALUES ($1, $2, 'queued', $3)`, [
      subscriberId,
      message.template,
      jobId,
    ]);
  }

  /**
   * Confirms an address with the token of its T1 link: within its deadline a pending subscriber
   * becomes verified and active, W1 goes out and W2 to W5 are scheduled. An invalid or expired
   * token changes nothing; confirming twice is harmless.
   */
  async confirm(rawEmail: string, token: string): Promise<ConfirmOutcome> {
    const secret = this.mail.secrets().confirm;
    const email = normalizeEmail(rawEmail);
    const check = checkConfirmToken(secret, email, token);
    if (!check.valid) return 'invalid';
    return this.deps.dataSource.transaction(async (manager) => {
      const subscriber = (
        await rowsAndCount<Subscriber>(manager, `SELECT ${SUBSCRIBER_COLUMNS} FROM newsletter_subscribers WHERE email = $1 FOR UPDATE`, [email])
      ).rows[0];
      if (subscriber?.status === 'active') return 'already-confirmed';
      // The row of an expired link may be gone (clean-up): either way a new link is needed.
      if (check.expired || !subscriber) return 'expired';
      if (subscriber.status === 'unsubscribed') return 'unsubscribed';
      await rowsAndCount(
        manager,
        `UPDATE newsletter_subscribers SET is_verified = true, status = 'active', subscribed_at = now(), updated_at = now() WHERE id = $1`,
        [subscriber.id],
      );
      await this.series.schedule(manager, subscriber.id);
      return 'confirmed';
    });
  }

  /** Whether the link is genuine, and the address's state (the confirmation page of a GET). */
  async unsubscribeStatus(rawEmail: string, token: string): Promise<{ valid: boolean; status: SubscriberStatus | 'unknown' }> {
    const email = normalizeEmail(rawEmail);
    if (!checkUnsubscribeToken(this.mail.secrets().unsubscribe, email, token)) return { valid: false, status: 'unknown' };
    const subscriber = await this.admin.subscriber(email);
    return { valid: true, status: subscriber?.status ?? 'unknown' };
  }

  /**
   * Unsubscribes with the token of a mail's link: status `unsubscribed`, the scheduled series
   * mails cancelled, the address dropped from issues being sent, T2 sent. Every send reads the
   * status right before delivering, so no mail leaves for the address once this has committed.
   */
  async unsubscribe(rawEmail: string, token: string): Promise<UnsubscribeOutcome> {
    const email = normalizeEmail(rawEmail);
    if (!checkUnsubscribeToken(this.mail.secrets().unsubscribe, email, token)) return 'invalid';
    const cancelledJobs = await this.deps.dataSource.transaction(async (manager) => {
      const subscriber = (
        await rowsAndCount<Subscriber>(manager, `SELECT ${SUBSCRIBER_COLUMNS} FROM newsletter_subscribers WHERE email = $1 FOR UPDATE`, [email])
      ).rows[0];
      // An address without a row (cleaned up) has nothing to stop: the answer is the same.
      if (!subscriber || subscriber.status === 'unsubscribed') return null;
      await rowsAndCount(manager, `UPDATE newsletter_subscribers SET status = 'unsubscribed', unsubscribed_at = now(), updated_at = now() WHERE id = $1`, [
        subscriber.id,
      ]);
      const cancelled = await rowsAndCount<{ job_id: string | null }>(
        manager,
        `UPDATE newsletter_mails SET status = 'cancelled' WHERE subscriber_id = $1 AND status = 'scheduled' RETURNING job_id`,
        [subscriber.id],
      );
      await rowsAndCount(manager, `UPDATE newsletter_issue_recipients SET status = 'skipped' WHERE subscriber_id = $1 AND status = 'pending'`, [subscriber.id]);
      await this.recordQueuedMail(
        manager,
        subscriber.id,
        this.mail.message(subscriber, UNSUBSCRIBED_TEMPLATE, {}, `newsletter-unsubscribed/${subscriber.id}/${Date.now()}`),
      );
      return cancelled.rows.map((row) => row.job_id).filter((id): id is string => id !== null);
    });
    if (cancelledJobs === null) return 'already-unsubscribed';
    // Tidying only: the series worker drops a cancelled mail anyway.
    for (const id of cancelledJobs) {
      const job = await this.deps.jobs.get(id).catch(() => null);
      if (job) await this.deps.jobs.cancel(job).catch(() => false);
    }
    return 'unsubscribed';
  }

  /** Deletes unverified rows whose link expired and that are older than NEWSLETTER_CLEANUP_AFTER_DAYS; the count. */
  async cleanup(): Promise<number> {
    const { count } = await rowsAndCount(
      this.pool,
      `DELETE FROM newsletter_subscribers
       WHERE NOT is_verified AND verification_expires_at < now() AND created_at < now() - make_interval(secs => $1)`,
      [this.settings.cleanupAfterDays * this.settings.daySeconds],
    );
    if (count > 0) this.deps.logger.info({ deleted: count }, 'newsletter clean-up deleted unconfirmed subscribers');
    return count;
  }
}

function optionalText(value: unknown, field: string, maxLength: number): string | null {
  if (value === undefined || value === null || value === '') return null;
  if (typeof value !== 'string' || value.trim().length > maxLength || /[\r\n]/.test(value)) {
    throw new Refusal('BAD_REQUEST', `${field} must be one line of at most ${maxLength} characters`, 400);
  }
  return value.trim() || null;
}
