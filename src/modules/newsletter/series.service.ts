import type { EntityManager } from 'typeorm';
import { Refusal } from '../../common/refusal';
import type { Config } from '../../config';
import type { MailVariables } from '../../platform/mail/mailer';
import { publicUrl } from '../../platform/urls';
import type { NewsletterAdmin } from './newsletter-admin.service';
import { NewsletterFlow } from './newsletter-flow';
import { normalizeEmail, SERIES_QUEUE, SERIES_TEMPLATES, type NewsletterDependencies, type SeriesTemplate, type SubscriberMail } from './newsletter.model';
import { rowsAndCount } from '../../db/sql';

/**
 * The welcome series (spec 3 §1.2): W1 at confirmation, W2 to W5 on the days of
 * NEWSLETTER_SERIES_DAYS, each a delayed job that delivers only while its subscriber is active;
 * and a series mail sent by hand.
 */
export class WelcomeSeries extends NewsletterFlow {
  constructor(
    deps: NewsletterDependencies,
    private readonly admin: NewsletterAdmin,
  ) {
    super(deps);
  }

  /** W1 now, W2 to W5 after their days (NEWSLETTER_SERIES_DAYS x NEWSLETTER_DAY_SECONDS), as delayed jobs. */
  async schedule(manager: EntityManager, subscriberId: string): Promise<void> {
    const offsets = [0, ...this.settings.seriesDays];
    const now = Date.now();
    for (const [index, template] of SERIES_TEMPLATES.entries()) {
      const dueAt = new Date(now + offsets[index] * this.settings.daySeconds * 1000);
      await this.queueSeriesMail(manager, subscriberId, template, dueAt);
    }
  }

  private async queueSeriesMail(manager: EntityManager, subscriberId: string, template: SeriesTemplate, dueAt: Date): Promise<string> {
    const mailId = (
      await rowsAndCount<{ id: string }>(
        manager,
        `INSERT INTO newsletter_mails (subscriber_id, template, status, due_at) VALUES ($1, $2, 'scheduled', $3) RETURNING id`,
        [subscriberId, template, dueAt],
      )
    ).rows[0].id;
    const jobId = await this.deps.jobs.send(SERIES_QUEUE, { mailId }, { transaction: manager, startAfter: dueAt });
    await rowsAndCount(manager, 'UPDATE newsletter_mails SET job_id = $2 WHERE id = $1', [mailId, jobId]);
    return mailId;
  }

  /**
   * The `newsletter-series` worker: delivers one series mail if it is still scheduled and its
   * subscriber still active (read now, so an unsubscription stops it at once), else drops it.
   * A crash between delivery and the record sends it again under the same idempotency key.
   */
  async deliverSeriesMail(mailId: string): Promise<{ outcome: 'sent' | 'cancelled' | 'not-scheduled' }> {
    const claimed = (
      await rowsAndCount<{ template: SeriesTemplate; subscriber_id: string; email: string; name: string | null; deliverable: boolean }>(
        this.pool,
        `UPDATE newsletter_mails m SET status = 'sending'
         FROM newsletter_subscribers s
         WHERE m.id = $1 AND m.status IN ('scheduled', 'sending') AND s.id = m.subscriber_id
         RETURNING m.template, m.subscriber_id, s.email, s.name, (s.is_verified AND s.status = 'active') AS deliverable`,
        [mailId],
      )
    ).rows[0];
    if (!claimed) return { outcome: 'not-scheduled' };
    if (!claimed.deliverable) {
      await rowsAndCount(this.pool, `UPDATE newsletter_mails SET status = 'cancelled' WHERE id = $1`, [mailId]);
      return { outcome: 'cancelled' };
    }
    await this.deps.mailer.deliver(this.mail.message(claimed, claimed.template, seriesVariables(this.deps.config), `newsletter-series/${mailId}`));
    await rowsAndCount(this.pool, `UPDATE newsletter_mails SET status = 'sent', sent_at = now() WHERE id = $1`, [mailId]);
    return { outcome: 'sent' };
  }

  /** W1 to W5 by hand to one active subscriber, now (the admin mutation and the CLI). */
  async sendSeriesMailByHand(rawEmail: string, template: string): Promise<SubscriberMail> {
    if (!(SERIES_TEMPLATES as readonly string[]).includes(template)) {
      throw new Refusal('BAD_REQUEST', `template must be one of ${SERIES_TEMPLATES.join(', ')}`, 400);
    }
    const subscriber = await this.admin.subscriber(rawEmail);
    if (!subscriber) throw new Refusal('NOT_FOUND', `no subscriber has the address ${normalizeEmail(rawEmail)}`, 404);
    if (subscriber.status !== 'active') {
      throw new Refusal('CONFLICT', `${subscriber.email} is ${subscriber.status}: only active subscribers get the series`, 409);
    }
    const mailId = await this.deps.dataSource.transaction((manager) => this.queueSeriesMail(manager, subscriber.id, template as SeriesTemplate, new Date()));
    return (await this.admin.mailsOf(subscriber.id)).find((mail) => mail.id === mailId)!;
  }
}

/** The series templates' links: all under PLINTH_PUBLIC_URL. */
function seriesVariables(config: Config): MailVariables {
  return {
    docs_url: publicUrl(config, '/docs'),
    plugins_url: publicUrl(config, '/docs/plugins'),
    case_study_url: publicUrl(config, '/blog/case-studies'),
    nclaw_url: publicUrl(config, '/docs/nclaw'),
    cloud_url: publicUrl(config, '/cloud'),
  };
}
