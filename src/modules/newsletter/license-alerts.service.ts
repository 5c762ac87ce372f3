import { NewsletterFlow } from './newsletter-flow';
import { LICENSE_ALERT_TEMPLATE, normalizeEmail, type LicenseRenewal, type SubscriberStatus } from './newsletter.model';
import { rowsAndCount } from '../../db/sql';

const RENEWAL_DATE = new Intl.DateTimeFormat('en-GB', { day: 'numeric', month: 'long', year: 'numeric', timeZone: 'UTC' });

/** License renewal notices (T3): a notice before each renewal, through the platform mailer. */
export class LicenseAlerts extends NewsletterFlow {
  /**
   * Queues T3 for each license renewing within NEWSLETTER_LICENSE_ALERT_DAYS, once per license
   * and renewal date: the newsletter_license_alerts row (its primary key) and the mail's job are
   * written in one transaction, so a second worker or a rerun after a crash finds the row and
   * sends nothing. An address that unsubscribed from our mail gets none (recorded as skipped).
   */
  async queueLicenseAlerts(renewing: (withinSeconds: number) => Promise<LicenseRenewal[]>): Promise<{ queued: number; skipped: number }> {
    this.mail.secrets();
    const counts = { queued: 0, skipped: 0 };
    for (const license of await renewing(this.settings.licenseAlertDays * this.settings.daySeconds)) {
      const outcome = await this.deps.dataSource.transaction(async (manager) => {
        const email = normalizeEmail(license.email);
        const claimed = await rowsAndCount(
          manager,
          `INSERT INTO newsletter_license_alerts (license_id, renewal_date, email, status) VALUES ($1, $2, $3, 'queued')
           ON CONFLICT (license_id, renewal_date) DO NOTHING RETURNING license_id`,
          [license.id, license.renewal_date, email],
        );
        if (claimed.count === 0) return null;
        const subscriber = (await rowsAndCount<{ status: SubscriberStatus }>(manager, 'SELECT status FROM newsletter_subscribers WHERE email = $1', [email]))
          .rows[0];
        if (subscriber?.status === 'unsubscribed') {
          await rowsAndCount(manager, `UPDATE newsletter_license_alerts SET status = 'skipped' WHERE license_id = $1 AND renewal_date = $2`, [
            license.id,
            license.renewal_date,
          ]);
          return 'skipped' as const;
        }
        const message = this.mail.message(
          { email, name: license.name },
          LICENSE_ALERT_TEMPLATE,
          { product: license.product ?? 'Plinth', renewal_date: RENEWAL_DATE.format(license.renewal_date), manage_url: this.settings.licenseManageUrl },
          `newsletter-license-alert/${license.id}/${license.renewal_date.getTime()}`,
        );
        const jobId = await this.deps.mailer.send(message, { transaction: manager });
        await rowsAndCount(manager, 'UPDATE newsletter_license_alerts SET job_id = $3 WHERE license_id = $1 AND renewal_date = $2', [
          license.id,
          license.renewal_date,
          jobId,
        ]);
        return 'queued' as const;
      });
      if (outcome) counts[outcome] += 1;
    }
    if (counts.queued + counts.skipped > 0) this.deps.logger.info(counts, 'license renewal notices (T3) queued');
    return counts;
  }
}
