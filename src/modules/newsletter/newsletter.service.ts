import type pg from 'pg';
import type { Logger } from 'pino';
import type { DataSource, EntityManager } from 'typeorm';
import type { PostgresDriver } from 'typeorm/driver/postgres/PostgresDriver';
import type { Config, NewsletterConfig } from '../../config';
import { MAIL_ADDRESS } from '../../common/mail-address';
import { LOCK_KEYS } from '../../db/lock-keys';
import { JOBS_SCHEMA, type JobQueue } from '../../platform/job-queue';
import { MailError, type Mailer, type MailMessage, type MailVariables } from '../../platform/mail/mailer';
import type { MailTemplates } from '../../platform/mail/templates';
import { publicUrl } from '../../platform/urls';
import { checkConfirmToken, checkUnsubscribeToken, confirmToken, unsubscribeToken } from './newsletter.tokens';

/** The welcome series: W1 at confirmation, W2 to W5 on the days of NEWSLETTER_SERIES_DAYS. */
export const SERIES_TEMPLATES = ['W1-welcome', 'W2-first-plugin', 'W3-case-study', 'W4-nclaw', 'W5-cloud-preview'] as const;
export type SeriesTemplate = (typeof SERIES_TEMPLATES)[number];
export const CONFIRM_TEMPLATE = 'T1-confirm';
export const UNSUBSCRIBED_TEMPLATE = 'T2-unsub';
export const ISSUE_TEMPLATE = 'N1-biweekly';
export const LICENSE_ALERT_TEMPLATE = 'T3-license-alert';

/** A license about to renew, as the payments module's services give it. */
export interface LicenseRenewal {
  id: string;
  product: string | null;
  renewal_date: Date;
  email: string;
  name: string | null;
}

const RENEWAL_DATE = new Intl.DateTimeFormat('en-GB', { day: 'numeric', month: 'long', year: 'numeric', timeZone: 'UTC' });
/** The variables of N1 (spec 3 §2.4); ISSUE_NUMBER is filled in from the issue when absent. */
export const ISSUE_VARIABLES = [
  'ISSUE_NUMBER',
  'HEADLINE',
  'RELEASE_HEADLINE',
  'RELEASE_SUMMARY',
  'CLI_SNIPPET',
  'CHANGELOG_URL',
  'COMMUNITY_SHOWCASE',
  'DOCS_URL',
  'DOCS_TITLE',
  'DOCS_TEASER',
  'ROADMAP_TEASER',
] as const;

export const SERIES_QUEUE = 'newsletter-series';
export const ISSUE_QUEUE = 'newsletter-issue';
export const CLEANUP_QUEUE = 'newsletter-cleanup';

export const SUBSCRIBER_STATUSES = ['pending', 'active', 'unsubscribed'] as const;
export type SubscriberStatus = (typeof SUBSCRIBER_STATUSES)[number];

/** A recipient of an issue is given up on after this many failed deliveries. */
const MAX_DELIVERY_ATTEMPTS = 5;
/** During a send, the remaining recipients' status is read again at least this often (spec: 10 s). */
const STATUS_RECHECK_MS = 1000;
const MAX_EMAIL_LENGTH = 254;
const MAX_NAME_LENGTH = 200;
const MAX_SOURCE_LENGTH = 100;
export const MAX_PAGE = 500;

/** A request the newsletter refuses; `code` is the GraphQL extensions.code / REST error_code. */
export class NewsletterError extends Error {
  override readonly name = 'NewsletterError';
  constructor(
    readonly code: 'INVALID_EMAIL' | 'BAD_REQUEST' | 'NOT_FOUND' | 'CONFLICT' | 'NOT_CONFIGURED',
    message: string,
  ) {
    super(message);
  }
}

export interface Subscriber {
  id: string;
  email: string;
  name: string | null;
  source: string | null;
  is_verified: boolean;
  status: SubscriberStatus;
  subscribed_at: Date | null;
  unsubscribed_at: Date | null;
  created_at: Date;
  verification_expires_at: Date;
  confirmations_sent: number;
}

export interface SubscriberMail {
  id: string;
  template: string;
  /** queued (in the mail queue), scheduled, sending, sent, failed, cancelled; for issues: pending, sending, sent, skipped, failed. */
  status: string;
  due_at: Date;
  sent_at: Date | null;
  issue_number: number | null;
}

export interface IssueProgress {
  id: string;
  issue_number: number;
  status: 'sending' | 'sent';
  recipients: number;
  pending: number;
  sent: number;
  skipped: number;
  failed: number;
  requested_by: string;
  created_at: Date;
  completed_at: Date | null;
}

export type ConfirmOutcome = 'confirmed' | 'already-confirmed' | 'invalid' | 'expired' | 'unsubscribed';
export type UnsubscribeOutcome = 'unsubscribed' | 'already-unsubscribed' | 'invalid';

export interface SubscribeInput {
  email?: unknown;
  name?: unknown;
  source?: unknown;
}

export interface SendIssueInput {
  issueNumber: number;
  variables: Record<string, unknown>;
  dryRun?: boolean;
  /** Who asked: `cli`, `admin:<user id>`, `schedule`. */
  requestedBy: string;
}

export type SendIssueResult = { dryRun: true; recipients: number } | { dryRun: false; resumed: boolean; issue: IssueProgress };

export interface SubscriberFilter {
  status?: SubscriberStatus | null;
  verified?: boolean | null;
  /** Part of the address, any case. */
  search?: string | null;
  first?: number | null;
  offset?: number | null;
}

export interface NewsletterDependencies {
  config: Config;
  dataSource: DataSource;
  mailer: Mailer;
  jobs: Pick<JobQueue, 'send' | 'get' | 'cancel'>;
  /** The compiled templates, to check an issue's variables before anything is queued. */
  templates: MailTemplates;
  logger: Logger;
  /** A recipient claimed this long ago by a send that did not finish is taken again (the issue queue's timeout). */
  issueLeaseSeconds: number;
}

interface Rows<T> {
  rows: T[];
  count: number;
}

/** Runs one statement on the pool, or inside `transaction`, with its rows and affected count. */
async function run<T = Record<string, unknown>>(on: pg.Pool | EntityManager, text: string, parameters: unknown[] = []): Promise<Rows<T>> {
  if ('queryRunner' in on) {
    const result = (await on.queryRunner!.query(text, parameters, true)) as { records: T[]; affected?: number };
    return { rows: result.records, count: result.affected ?? result.records.length };
  }
  const result = await (on as pg.Pool).query(text, parameters);
  return { rows: result.rows as T[], count: result.rowCount ?? 0 };
}

const SUBSCRIBER_COLUMNS = `id, email, name, source, is_verified, status, subscribed_at, unsubscribed_at, created_at,
  verification_expires_at, confirmations_sent`;

/** An address as it is stored and signed: trimmed, lower-cased. */
export function normalizeEmail(value: string): string {
  return value.trim().toLowerCase();
}

/**
 * The newsletter (spec 3 §1.2): double opt-in subscription, confirmation, unsubscription, the
 * welcome series, the bi-weekly issue and the clean-up. No HTTP and no GraphQL here: routes,
 * resolvers, jobs and the CLI call these methods.
 */
export class NewsletterService {
  private readonly settings: NewsletterConfig;
  private readonly pool: pg.Pool;
  private readonly log: Logger;

  constructor(private readonly deps: NewsletterDependencies) {
    this.settings = deps.config.newsletter;
    this.pool = (deps.dataSource.driver as PostgresDriver).master as pg.Pool;
    this.log = deps.logger;
  }

  /** Why the newsletter cannot run (its secrets are unset in production), or undefined. */
  get configurationProblem(): string | undefined {
    return this.settings.confirmSecret && this.settings.unsubscribeSecret
      ? undefined
      : 'the newsletter is not configured: NEWSLETTER_CONFIRM_SECRET and NEWSLETTER_UNSUBSCRIBE_SECRET must be set';
  }

  private secrets(): { confirm: string; unsubscribe: string } {
    const problem = this.configurationProblem;
    if (problem) throw new NewsletterError('NOT_CONFIGURED', problem);
    return { confirm: this.settings.confirmSecret!, unsubscribe: this.settings.unsubscribeSecret! };
  }

  // ---- Links and headers -------------------------------------------------------------------

  confirmUrl(email: string, expiresAt: Date): string {
    return publicUrl(this.deps.config, '/newsletter/confirm', { token: confirmToken(this.secrets().confirm, email, expiresAt), email });
  }

  unsubscribeUrl(email: string): string {
    return publicUrl(this.deps.config, '/newsletter/unsubscribe', { email, token: unsubscribeToken(this.secrets().unsubscribe, email) });
  }

  /** What every newsletter mail carries: the unsubscribe link (footer and RFC 8058 headers), sender, list. */
  private listMail(subscriber: Pick<Subscriber, 'email' | 'name'>, template: string, variables: MailVariables, idempotencyKey: string): MailMessage {
    const unsubscribe = this.unsubscribeUrl(subscriber.email);
    const { listId, from } = this.settings;
    const host = new URL(this.deps.config.publicUrl).hostname;
    return {
      to: subscriber.email,
      template,
      from,
      variables: { name: subscriber.name ?? 'there', email: subscriber.email, unsubscribe_url: unsubscribe, ...variables },
      headers: {
        'List-Unsubscribe': `<${unsubscribe}>`,
        'List-Unsubscribe-Post': 'List-Unsubscribe=One-Click',
        ...(listId ? { 'List-Id': `<${listId}.${host}>` } : {}),
      },
      idempotencyKey,
      ...(listId ? { tags: { list: listId } } : {}),
    };
  }

  // ---- Subscribe ---------------------------------------------------------------------------

  /**
   * Accepts a subscription: a new address gets a pending row and T1; a pending one a fresh link
   * (up to NEWSLETTER_CONFIRM_RESEND_LIMIT times); an unsubscribed one starts over; a confirmed
   * one nothing. The caller answers the same in every case. Throws INVALID_EMAIL or BAD_REQUEST.
   */
  async subscribe(input: SubscribeInput): Promise<void> {
    this.secrets();
    const email = typeof input.email === 'string' ? normalizeEmail(input.email) : '';
    if (!email || email.length > MAX_EMAIL_LENGTH || !MAIL_ADDRESS.test(email) || email.indexOf('@') > 64) {
      throw new NewsletterError('INVALID_EMAIL', 'email must be an e-mail address such as ada@example.com');
    }
    const name = optionalText(input.name, 'name', MAX_NAME_LENGTH);
    const source = optionalText(input.source, 'source', MAX_SOURCE_LENGTH);
    const ttl = this.settings.confirmTtlSeconds;

    await this.deps.dataSource.transaction(async (manager) => {
      const inserted = await run<Subscriber>(
        manager,
        `INSERT INTO newsletter_subscribers (email, name, source, verification_expires_at)
         VALUES ($1, $2, $3, date_trunc('second', now()) + make_interval(secs => $4))
         ON CONFLICT (email) DO NOTHING RETURNING ${SUBSCRIBER_COLUMNS}`,
        [email, name, source, ttl],
      );
      let subscriber = inserted.rows[0];
      if (!subscriber) {
        const existing = (await run<Subscriber>(manager, `SELECT ${SUBSCRIBER_COLUMNS} FROM newsletter_subscribers WHERE email = $1 FOR UPDATE`, [email])).rows[0];
        // Deleted by the clean-up between the two statements: the caller may simply ask again.
        if (!existing) throw new NewsletterError('CONFLICT', 'the subscription changed meanwhile; please try again');
        if (existing.status === 'active') return;
        if (existing.status === 'pending' && existing.confirmations_sent > this.settings.confirmResendLimit) return;
        // A pending address gets a fresh link; an unsubscribed one asks again, and confirms again.
        subscriber = (
          await run<Subscriber>(
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
      const message = this.listMail(
        subscriber,
        CONFIRM_TEMPLATE,
        { confirm_url: this.confirmUrl(subscriber.email, subscriber.verification_expires_at), expires_hours: Math.round(ttl / 3600) },
        `newsletter-confirm/${subscriber.id}/${subscriber.confirmations_sent}/${subscriber.verification_expires_at.getTime()}`,
      );
      await this.recordQueuedMail(manager, subscriber.id, message);
    });
  }

  /** Queues a transactional mail (T1, T2) in the caller's transaction and records it. */
  private async recordQueuedMail(manager: EntityManager, subscriberId: string, message: MailMessage): Promise<void> {
    const jobId = await this.deps.mailer.send(message, { transaction: manager });
    await run(manager, `INSERT INTO newsletter_mails (subscriber_id, template, status, job_id) VALUES ($1, $2, 'queued', $3)`, [
      subscriberId,
      message.template,
      jobId,
    ]);
  }

  // ---- Confirm -----------------------------------------------------------------------------

  /**
   * Confirms an address with the token of its T1 link: within its deadline a pending subscriber
   * becomes verified and active, W1 goes out and W2 to W5 are scheduled. An invalid or expired
   * token changes nothing; confirming twice is harmless.
   */
  async confirm(rawEmail: string, token: string): Promise<ConfirmOutcome> {
    const secret = this.secrets().confirm;
    const email = normalizeEmail(rawEmail);
    const check = checkConfirmToken(secret, email, token);
    if (!check.valid) return 'invalid';
    return this.deps.dataSource.transaction(async (manager) => {
      const subscriber = (await run<Subscriber>(manager, `SELECT ${SUBSCRIBER_COLUMNS} FROM newsletter_subscribers WHERE email = $1 FOR UPDATE`, [email])).rows[0];
      if (subscriber?.status === 'active') return 'already-confirmed';
      // The row of an expired link may be gone (clean-up): either way a new link is needed.
      if (check.expired || !subscriber) return 'expired';
      if (subscriber.status === 'unsubscribed') return 'unsubscribed';
      await run(
        manager,
        `UPDATE newsletter_subscribers SET is_verified = true, status = 'active', subscribed_at = now(), updated_at = now() WHERE id = $1`,
        [subscriber.id],
      );
      await this.scheduleSeries(manager, subscriber.id);
      return 'confirmed';
    });
  }

  /** W1 now, W2 to W5 after their days (NEWSLETTER_SERIES_DAYS x NEWSLETTER_DAY_SECONDS), as delayed jobs. */
  private async scheduleSeries(manager: EntityManager, subscriberId: string): Promise<void> {
    const offsets = [0, ...this.settings.seriesDays];
    const now = Date.now();
    for (const [index, template] of SERIES_TEMPLATES.entries()) {
      const dueAt = new Date(now + offsets[index] * this.settings.daySeconds * 1000);
      await this.queueSeriesMail(manager, subscriberId, template, dueAt);
    }
  }

  private async queueSeriesMail(manager: EntityManager, subscriberId: string, template: SeriesTemplate, dueAt: Date): Promise<string> {
    const mailId = (
      await run<{ id: string }>(
        manager,
        `INSERT INTO newsletter_mails (subscriber_id, template, status, due_at) VALUES ($1, $2, 'scheduled', $3) RETURNING id`,
        [subscriberId, template, dueAt],
      )
    ).rows[0].id;
    const jobId = await this.deps.jobs.send(SERIES_QUEUE, { mailId }, { transaction: manager, startAfter: dueAt });
    await run(manager, 'UPDATE newsletter_mails SET job_id = $2 WHERE id = $1', [mailId, jobId]);
    return mailId;
  }

  /**
   * The `newsletter-series` worker: delivers one series mail if it is still scheduled and its
   * subscriber still active (read now, so an unsubscription stops it at once), else drops it.
   * A crash between delivery and the record sends it again under the same idempotency key.
   */
  async deliverSeriesMail(mailId: string): Promise<{ outcome: 'sent' | 'cancelled' | 'not-scheduled' }> {
    const claimed = (
      await run<{ template: SeriesTemplate; subscriber_id: string; email: string; name: string | null; deliverable: boolean }>(
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
      await run(this.pool, `UPDATE newsletter_mails SET status = 'cancelled' WHERE id = $1`, [mailId]);
      return { outcome: 'cancelled' };
    }
    await this.deps.mailer.deliver(this.listMail(claimed, claimed.template, seriesVariables(this.deps.config), `newsletter-series/${mailId}`));
    await run(this.pool, `UPDATE newsletter_mails SET status = 'sent', sent_at = now() WHERE id = $1`, [mailId]);
    return { outcome: 'sent' };
  }

  /** W1 to W5 by hand to one active subscriber, now (the admin mutation and the CLI). */
  async sendSeriesMailByHand(rawEmail: string, template: string): Promise<SubscriberMail> {
    if (!(SERIES_TEMPLATES as readonly string[]).includes(template)) {
      throw new NewsletterError('BAD_REQUEST', `template must be one of ${SERIES_TEMPLATES.join(', ')}`);
    }
    const subscriber = await this.subscriber(rawEmail);
    if (!subscriber) throw new NewsletterError('NOT_FOUND', `no subscriber has the address ${normalizeEmail(rawEmail)}`);
    if (subscriber.status !== 'active') {
      throw new NewsletterError('CONFLICT', `${subscriber.email} is ${subscriber.status}: only active subscribers get the series`);
    }
    const mailId = await this.deps.dataSource.transaction((manager) =>
      this.queueSeriesMail(manager, subscriber.id, template as SeriesTemplate, new Date()),
    );
    return (await this.mailsOf(subscriber.id)).find((mail) => mail.id === mailId)!;
  }

  // ---- Unsubscribe -------------------------------------------------------------------------

  /** Whether the link is genuine, and the address's state (the confirmation page of a GET). */
  async unsubscribeStatus(rawEmail: string, token: string): Promise<{ valid: boolean; status: SubscriberStatus | 'unknown' }> {
    const email = normalizeEmail(rawEmail);
    if (!checkUnsubscribeToken(this.secrets().unsubscribe, email, token)) return { valid: false, status: 'unknown' };
    const subscriber = await this.subscriber(email);
    return { valid: true, status: subscriber?.status ?? 'unknown' };
  }

  /**
   * Unsubscribes with the token of a mail's link: status `unsubscribed`, the scheduled series
   * mails cancelled, the address dropped from issues being sent, T2 sent. Every send reads the
   * status right before delivering, so no mail leaves for the address once this has committed.
   */
  async unsubscribe(rawEmail: string, token: string): Promise<UnsubscribeOutcome> {
    const email = normalizeEmail(rawEmail);
    if (!checkUnsubscribeToken(this.secrets().unsubscribe, email, token)) return 'invalid';
    const cancelledJobs = await this.deps.dataSource.transaction(async (manager) => {
      const subscriber = (await run<Subscriber>(manager, `SELECT ${SUBSCRIBER_COLUMNS} FROM newsletter_subscribers WHERE email = $1 FOR UPDATE`, [email])).rows[0];
      // An address without a row (cleaned up) has nothing to stop: the answer is the same.
      if (!subscriber || subscriber.status === 'unsubscribed') return null;
      await run(manager, `UPDATE newsletter_subscribers SET status = 'unsubscribed', unsubscribed_at = now(), updated_at = now() WHERE id = $1`, [subscriber.id]);
      const cancelled = await run<{ job_id: string | null }>(
        manager,
        `UPDATE newsletter_mails SET status = 'cancelled' WHERE subscriber_id = $1 AND status = 'scheduled' RETURNING job_id`,
        [subscriber.id],
      );
      await run(manager, `UPDATE newsletter_issue_recipients SET status = 'skipped' WHERE subscriber_id = $1 AND status = 'pending'`, [subscriber.id]);
      await this.recordQueuedMail(manager, subscriber.id, this.listMail(subscriber, UNSUBSCRIBED_TEMPLATE, {}, `newsletter-unsubscribed/${subscriber.id}/${Date.now()}`));
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

  // ---- The bi-weekly issue -----------------------------------------------------------------

  /** Checks an issue's variables (every N1 variable, a string or a number; nothing else) and renders N1 once. */
  private async issueVariables(issueNumber: number, given: Record<string, unknown>): Promise<MailVariables> {
    if (!Number.isInteger(issueNumber) || issueNumber < 1 || issueNumber > 1_000_000) {
      throw new NewsletterError('BAD_REQUEST', 'the issue number must be a whole number from 1 to 1000000');
    }
    if (typeof given !== 'object' || given === null || Array.isArray(given)) {
      throw new NewsletterError('BAD_REQUEST', 'the variables must be a JSON object');
    }
    const unknown = Object.keys(given).filter((key) => !(ISSUE_VARIABLES as readonly string[]).includes(key));
    if (unknown.length > 0) {
      throw new NewsletterError('BAD_REQUEST', `unknown variables ${unknown.join(', ')} (N1 takes ${ISSUE_VARIABLES.join(', ')})`);
    }
    const values: MailVariables = { ISSUE_NUMBER: issueNumber };
    for (const name of ISSUE_VARIABLES) {
      const value = given[name];
      if (name === 'ISSUE_NUMBER' && value !== undefined && String(value) !== String(issueNumber)) {
        throw new NewsletterError('BAD_REQUEST', `ISSUE_NUMBER is ${JSON.stringify(value)} but the issue is ${issueNumber}`);
      }
      if (name === 'ISSUE_NUMBER') continue;
      if ((typeof value !== 'string' || value.trim() === '') && typeof value !== 'number') {
        throw new NewsletterError('BAD_REQUEST', `variable ${name} is missing: N1 needs ${ISSUE_VARIABLES.join(', ')} (strings)`);
      }
      values[name] = value;
    }
    for (const name of ['CHANGELOG_URL', 'DOCS_URL']) {
      const url = String(values[name]);
      if (!URL.canParse(url) || !/^https?:$/.test(new URL(url).protocol)) throw new NewsletterError('BAD_REQUEST', `${name} must be an http(s) URL`);
    }
    try {
      await this.deps.templates.render(ISSUE_TEMPLATE, { name: 'there', email: 'check@example.com', unsubscribe_url: this.deps.config.publicUrl, ...values });
    } catch (error) {
      if (error instanceof MailError) throw new NewsletterError('BAD_REQUEST', error.message);
      throw error;
    }
    return values;
  }

  /**
   * Sends issue N to every verified, active subscriber through the `newsletter-issue` queue: one
   * row per recipient (unique per issue), taken in batches. Asking again for an issue that is
   * still sending, with the same variables, resumes it; a finished one is refused.
   */
  async sendIssue(input: SendIssueInput): Promise<SendIssueResult> {
    this.secrets();
    const variables = await this.issueVariables(input.issueNumber, input.variables);
    if (input.dryRun) {
      const { rows } = await run<{ count: number }>(this.pool, `SELECT count(*)::int AS count FROM newsletter_subscribers WHERE is_verified AND status = 'active'`);
      return { dryRun: true, recipients: rows[0].count };
    }
    const outcome = await this.deps.dataSource.transaction(async (manager) => {
      // One issue number at a time, across processes, until this transaction ends.
      await run(manager, 'SELECT pg_advisory_xact_lock($1::bigint + $2::bigint)', [LOCK_KEYS.newsletterIssueBase, input.issueNumber]);
      const existing = (
        await run<{ id: string; status: string; variables: MailVariables }>(manager, 'SELECT id, status, variables FROM newsletter_issues WHERE issue_number = $1', [input.issueNumber])
      ).rows[0];
      if (existing) {
        if (JSON.stringify(sortedKeys(existing.variables)) !== JSON.stringify(sortedKeys(variables))) {
          throw new NewsletterError('CONFLICT', `issue ${input.issueNumber} exists with other variables; an issue number is sent once`);
        }
        if (existing.status === 'sent') throw new NewsletterError('CONFLICT', `issue ${input.issueNumber} was already sent`);
        const open = (
          await run<{ count: number }>(manager, `SELECT count(*)::int AS count FROM newsletter_issue_recipients WHERE issue_id = $1 AND status IN ('pending', 'sending')`, [existing.id])
        ).rows[0].count;
        // Stale claims (a crashed send) are taken again once their lease has passed.
        await run(manager, `UPDATE newsletter_issue_recipients SET claimed_at = NULL, status = 'pending' WHERE issue_id = $1 AND status = 'sending' AND claimed_at < now() - make_interval(secs => $2)`, [
          existing.id,
          this.deps.issueLeaseSeconds,
        ]);
        await this.queueIssueBatches(manager, existing.id, open);
        return { id: existing.id, resumed: true };
      }
      const id = (
        await run<{ id: string }>(
          manager,
          `INSERT INTO newsletter_issues (issue_number, variables, status, recipients, requested_by) VALUES ($1, $2, 'sending', 0, $3) RETURNING id`,
          [input.issueNumber, JSON.stringify(variables), input.requestedBy],
        )
      ).rows[0].id;
      const recipients = await run(
        manager,
        `INSERT INTO newsletter_issue_recipients (issue_id, subscriber_id)
         SELECT $1, id FROM newsletter_subscribers WHERE is_verified AND status = 'active'`,
        [id],
      );
      await run(manager, 'UPDATE newsletter_issues SET recipients = $2 WHERE id = $1', [id, recipients.count]);
      if (recipients.count === 0) await run(manager, `UPDATE newsletter_issues SET status = 'sent', completed_at = now() WHERE id = $1`, [id]);
      else await this.queueIssueBatches(manager, id, recipients.count);
      return { id, resumed: false };
    });
    const issue = (await this.issues({ id: outcome.id }))[0];
    this.log.info({ issue: issue.issue_number, recipients: issue.recipients, resumed: outcome.resumed }, 'newsletter issue queued');
    return { dryRun: false, resumed: outcome.resumed, issue };
  }

  /** One job per batch of open recipients; each takes whichever open rows are left. */
  private async queueIssueBatches(manager: EntityManager, issueId: string, open: number): Promise<void> {
    const batches = Math.max(1, Math.ceil(open / this.settings.sendBatchSize));
    for (let batch = 0; batch < batches; batch++) await this.deps.jobs.send(ISSUE_QUEUE, { issueId }, { transaction: manager });
  }

  /**
   * The `newsletter-issue` worker: claims a batch of the issue's open recipients (SKIP LOCKED, so
   * jobs on several processes share the work), delivers N1 to each whose subscriber is still
   * active (re-read at least every second) and records each delivery as it is acknowledged. A
   * claim whose job died is taken again after the lease, and re-sent under the same Message-ID
   * and idempotency key.
   */
  async sendIssueBatch(issueId: string, signal?: AbortSignal): Promise<{ sent: number; skipped: number; failed: number }> {
    const issue = (await run<{ issue_number: number; variables: MailVariables; status: string }>(this.pool, 'SELECT issue_number, variables, status FROM newsletter_issues WHERE id = $1', [issueId])).rows[0];
    if (!issue || issue.status !== 'sending') return { sent: 0, skipped: 0, failed: 0 };
    const claimed = (
      await run<{ id: string; email: string; name: string | null; deliverable: boolean }>(
        this.pool,
        `WITH picked AS (
           SELECT subscriber_id FROM newsletter_issue_recipients
           WHERE issue_id = $1 AND (status = 'pending' OR (status = 'sending' AND claimed_at < now() - make_interval(secs => $3)))
           ORDER BY subscriber_id LIMIT $2 FOR UPDATE SKIP LOCKED
         ), claimed AS (
           UPDATE newsletter_issue_recipients r SET status = 'sending', claimed_at = now(), attempts = r.attempts + 1
           FROM picked WHERE r.issue_id = $1 AND r.subscriber_id = picked.subscriber_id
           RETURNING r.subscriber_id
         )
         SELECT s.id, s.email, s.name, (s.is_verified AND s.status = 'active') AS deliverable
         FROM claimed JOIN newsletter_subscribers s ON s.id = claimed.subscriber_id ORDER BY s.id`,
        [issueId, this.settings.sendBatchSize, this.deps.issueLeaseSeconds],
      )
    ).rows;
    const counts = { sent: 0, skipped: 0, failed: 0 };
    const stopped = new Set(claimed.filter((row) => !row.deliverable).map((row) => row.id));
    let checkedAt = Date.now();
    const recheck = async (remaining: string[]) => {
      checkedAt = Date.now();
      const { rows } = await run<{ id: string }>(
        this.pool,
        `SELECT id FROM newsletter_subscribers WHERE id = ANY($1::uuid[]) AND NOT (is_verified AND status = 'active')`,
        [remaining],
      );
      for (const row of rows) stopped.add(row.id);
    };
    let failure: unknown;
    // Deliveries are recorded as they are acknowledged: while one UPDATE runs, the next ones
    // gather, and the following UPDATE records them all (one statement per round trip, not per mail).
    const acknowledged: string[] = [];
    let recording: Promise<void> | undefined;
    const record = () =>
      (recording ??= (async () => {
        while (acknowledged.length > 0) {
          const ids = acknowledged.splice(0);
          await run(this.pool, `UPDATE newsletter_issue_recipients SET status = 'sent', sent_at = now(), error = NULL WHERE issue_id = $1 AND subscriber_id = ANY($2::uuid[])`, [issueId, ids]);
        }
      })().finally(() => (recording = undefined)));
    const queue = claimed.filter((row) => row.deliverable);
    const next = () => queue.shift();
    const workers = Array.from({ length: Math.min(this.settings.sendConcurrency, queue.length) }, async () => {
      for (let recipient = next(); recipient && failure === undefined && !signal?.aborted; recipient = next()) {
        if (Date.now() - checkedAt >= STATUS_RECHECK_MS) await recheck([recipient.id, ...queue.map((row) => row.id)]);
        if (stopped.has(recipient.id)) continue;
        try {
          await this.deps.mailer.deliver(
            this.listMail(recipient, ISSUE_TEMPLATE, issue.variables, `newsletter-issue-${issue.issue_number}/${recipient.id}`),
          );
          acknowledged.push(recipient.id);
          void record().catch((error: unknown) => (failure ??= error));
          counts.sent++;
        } catch (error) {
          // Left claimed: taken again after the lease, until MAX_DELIVERY_ATTEMPTS.
          const message = (error as Error).message.slice(0, 500);
          const { rows } = await run<{ status: string }>(
            this.pool,
            `UPDATE newsletter_issue_recipients SET error = $3, status = CASE WHEN attempts >= $4 OR $5 THEN 'failed' ELSE status END
             WHERE issue_id = $1 AND subscriber_id = $2 RETURNING status`,
            [issueId, recipient.id, message, MAX_DELIVERY_ATTEMPTS, error instanceof MailError],
          );
          if (rows[0]?.status === 'failed') counts.failed++;
          // A bad address fails alone; a transport failure stops the batch (the queue retries it).
          else failure = error;
        }
      }
    });
    await Promise.all(workers);
    while (recording || acknowledged.length > 0) await record().catch((error: unknown) => (failure ??= error));
    const skip = [...stopped];
    if (skip.length > 0) {
      await run(this.pool, `UPDATE newsletter_issue_recipients SET status = 'skipped' WHERE issue_id = $1 AND subscriber_id = ANY($2::uuid[]) AND status = 'sending'`, [issueId, skip]);
      counts.skipped += skip.length;
    }
    // Claimed but not reached (the job was stopped): back to pending for another job.
    const unreached = queue.map((row) => row.id);
    if (unreached.length > 0) {
      await run(this.pool, `UPDATE newsletter_issue_recipients SET status = 'pending', claimed_at = NULL WHERE issue_id = $1 AND subscriber_id = ANY($2::uuid[]) AND status = 'sending'`, [issueId, unreached]);
    }
    await run(
      this.pool,
      `UPDATE newsletter_issues SET status = 'sent', completed_at = now()
       WHERE id = $1 AND status = 'sending' AND NOT EXISTS (SELECT 1 FROM newsletter_issue_recipients WHERE issue_id = $1 AND status IN ('pending', 'sending'))`,
      [issueId],
    );
    if (failure !== undefined) throw failure;
    return counts;
  }

  // ---- T3-license-alert --------------------------------------------------------------------

  /**
   * Queues T3 for each license renewing within NEWSLETTER_LICENSE_ALERT_DAYS, once per license
   * and renewal date: the newsletter_license_alerts row (its primary key) and the mail's job are
   * written in one transaction, so a second worker or a rerun after a crash finds the row and
   * sends nothing. An address that unsubscribed from our mail gets none (recorded as skipped).
   */
  async queueLicenseAlerts(renewing: (withinSeconds: number) => Promise<LicenseRenewal[]>): Promise<{ queued: number; skipped: number }> {
    this.secrets();
    const counts = { queued: 0, skipped: 0 };
    for (const license of await renewing(this.settings.licenseAlertDays * this.settings.daySeconds)) {
      const outcome = await this.deps.dataSource.transaction(async (manager) => {
        const email = normalizeEmail(license.email);
        const claimed = await run(
          manager,
          `INSERT INTO newsletter_license_alerts (license_id, renewal_date, email, status) VALUES ($1, $2, $3, 'queued')
           ON CONFLICT (license_id, renewal_date) DO NOTHING RETURNING license_id`,
          [license.id, license.renewal_date, email],
        );
        if (claimed.count === 0) return null;
        const subscriber = (await run<{ status: SubscriberStatus }>(manager, 'SELECT status FROM newsletter_subscribers WHERE email = $1', [email])).rows[0];
        if (subscriber?.status === 'unsubscribed') {
          await run(manager, `UPDATE newsletter_license_alerts SET status = 'skipped' WHERE license_id = $1 AND renewal_date = $2`, [license.id, license.renewal_date]);
          return 'skipped' as const;
        }
        const message = this.listMail(
          { email, name: license.name },
          LICENSE_ALERT_TEMPLATE,
          { product: license.product ?? 'Plinth', renewal_date: RENEWAL_DATE.format(license.renewal_date), manage_url: this.settings.licenseManageUrl },
          `newsletter-license-alert/${license.id}/${license.renewal_date.getTime()}`,
        );
        const jobId = await this.deps.mailer.send(message, { transaction: manager });
        await run(manager, 'UPDATE newsletter_license_alerts SET job_id = $3 WHERE license_id = $1 AND renewal_date = $2', [license.id, license.renewal_date, jobId]);
        return 'queued' as const;
      });
      if (outcome) counts[outcome] += 1;
    }
    if (counts.queued + counts.skipped > 0) this.log.info(counts, 'license renewal notices (T3) queued');
    return counts;
  }

  // ---- Clean-up ----------------------------------------------------------------------------

  /** Deletes unverified rows whose link expired and that are older than NEWSLETTER_CLEANUP_AFTER_DAYS; the count. */
  async cleanup(): Promise<number> {
    const { count } = await run(
      this.pool,
      `DELETE FROM newsletter_subscribers
       WHERE NOT is_verified AND verification_expires_at < now() AND created_at < now() - make_interval(secs => $1)`,
      [this.settings.cleanupAfterDays * this.settings.daySeconds],
    );
    if (count > 0) this.log.info({ deleted: count }, 'newsletter clean-up deleted unconfirmed subscribers');
    return count;
  }

  // ---- Admin views -------------------------------------------------------------------------

  async subscriber(rawEmail: string): Promise<Subscriber | null> {
    const { rows } = await run<Subscriber>(this.pool, `SELECT ${SUBSCRIBER_COLUMNS} FROM newsletter_subscribers WHERE email = $1`, [normalizeEmail(rawEmail)]);
    return rows[0] ?? null;
  }

  async subscribers(filter: SubscriberFilter): Promise<{ total: number; items: Subscriber[] }> {
    const first = filter.first ?? 50;
    const offset = filter.offset ?? 0;
    if (!Number.isInteger(first) || first < 1 || first > MAX_PAGE) throw new NewsletterError('BAD_REQUEST', `first must be a whole number from 1 to ${MAX_PAGE}`);
    if (!Number.isInteger(offset) || offset < 0) throw new NewsletterError('BAD_REQUEST', 'offset must be a whole number from 0');
    const search = filter.search ? `%${filter.search.toLowerCase().replace(/[\\%_]/g, (character) => `\\${character}`)}%` : null;
    const { rows } = await run<Subscriber & { total: number }>(
      this.pool,
      `SELECT ${SUBSCRIBER_COLUMNS}, count(*) OVER ()::int AS total FROM newsletter_subscribers
       WHERE ($1::text IS NULL OR status = $1) AND ($2::boolean IS NULL OR is_verified = $2) AND ($3::text IS NULL OR email LIKE $3)
       ORDER BY created_at DESC, id LIMIT $4 OFFSET $5`,
      [filter.status ?? null, filter.verified ?? null, search, first, offset],
    );
    if (rows.length === 0 && offset > 0) {
      const { rows: counted } = await run<{ total: number }>(
        this.pool,
        `SELECT count(*)::int AS total FROM newsletter_subscribers
         WHERE ($1::text IS NULL OR status = $1) AND ($2::boolean IS NULL OR is_verified = $2) AND ($3::text IS NULL OR email LIKE $3)`,
        [filter.status ?? null, filter.verified ?? null, search],
      );
      return { total: counted[0].total, items: [] };
    }
    return { total: rows[0]?.total ?? 0, items: rows.map(({ total: _total, ...subscriber }) => subscriber) };
  }

  /** Subscribers per status (every status, 0 when none), and how many of them are verified. */
  async counts(): Promise<{ status: SubscriberStatus; count: number; verified: number }[]> {
    const { rows } = await run<{ status: SubscriberStatus; count: number; verified: number }>(
      this.pool,
      `SELECT s.status, count(n.id)::int AS count, count(n.id) FILTER (WHERE n.is_verified)::int AS verified
       FROM unnest($1::text[]) AS s(status) LEFT JOIN newsletter_subscribers n ON n.status = s.status
       GROUP BY s.status ORDER BY array_position($1::text[], s.status)`,
      [SUBSCRIBER_STATUSES],
    );
    return rows;
  }

  /** One subscriber's mails, newest first: confirmation, series and issues. */
  async mailsOf(subscriberId: string): Promise<SubscriberMail[]> {
    const { rows } = await run<SubscriberMail>(
      this.pool,
      // A mail handed to the mail queue (T1, T2) takes its job's outcome while pg-boss keeps the job.
      `SELECT m.id::text, m.template,
         CASE WHEN m.status = 'queued' AND j.state = 'completed' THEN 'sent' WHEN m.status = 'queued' AND j.state = 'failed' THEN 'failed' ELSE m.status END AS status,
         m.due_at, CASE WHEN m.status = 'queued' AND j.state = 'completed' THEN j.completed_on ELSE m.sent_at END AS sent_at,
         NULL::int AS issue_number
       FROM newsletter_mails m
       LEFT JOIN LATERAL (
         SELECT state::text, completed_on FROM ${JOBS_SCHEMA}.job WHERE id = m.job_id
         UNION ALL SELECT state::text, completed_on FROM ${JOBS_SCHEMA}.archive WHERE id = m.job_id
         LIMIT 1
       ) j ON m.status = 'queued'
       WHERE m.subscriber_id = $1
       UNION ALL
       SELECT i.id::text, $2, r.status, i.created_at, r.sent_at, i.issue_number
       FROM newsletter_issue_recipients r JOIN newsletter_issues i ON i.id = r.issue_id WHERE r.subscriber_id = $1
       ORDER BY due_at DESC, template`,
      [subscriberId, ISSUE_TEMPLATE],
    );
    return rows;
  }

  /** Issues with their progress, newest first (or the one with `id`). */
  async issues(filter: { id?: string; first?: number | null }): Promise<IssueProgress[]> {
    const first = filter.first ?? 20;
    if (!Number.isInteger(first) || first < 1 || first > MAX_PAGE) throw new NewsletterError('BAD_REQUEST', `first must be a whole number from 1 to ${MAX_PAGE}`);
    const { rows } = await run<IssueProgress>(
      this.pool,
      `SELECT i.id, i.issue_number, i.status, i.recipients, i.requested_by, i.created_at, i.completed_at,
         count(r.subscriber_id) FILTER (WHERE r.status IN ('pending', 'sending'))::int AS pending,
         count(r.subscriber_id) FILTER (WHERE r.status = 'sent')::int AS sent,
         count(r.subscriber_id) FILTER (WHERE r.status = 'skipped')::int AS skipped,
         count(r.subscriber_id) FILTER (WHERE r.status = 'failed')::int AS failed
       FROM (SELECT * FROM newsletter_issues WHERE $1::uuid IS NULL OR id = $1 ORDER BY issue_number DESC LIMIT $2) i
       LEFT JOIN newsletter_issue_recipients r ON r.issue_id = i.id
       GROUP BY i.id, i.issue_number, i.status, i.recipients, i.requested_by, i.created_at, i.completed_at
       ORDER BY i.issue_number DESC`,
      [filter.id ?? null, first],
    );
    return rows;
  }

  /** The highest issue number so far and its variables (the schedule sends the next one). */
  async lastIssue(): Promise<{ issue_number: number; variables: MailVariables; created_at: Date } | null> {
    const { rows } = await run<{ issue_number: number; variables: MailVariables; created_at: Date }>(
      this.pool,
      'SELECT issue_number, variables, created_at FROM newsletter_issues ORDER BY issue_number DESC LIMIT 1',
    );
    return rows[0] ?? null;
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

function optionalText(value: unknown, field: string, maxLength: number): string | null {
  if (value === undefined || value === null || value === '') return null;
  if (typeof value !== 'string' || value.trim().length > maxLength || /[\r\n]/.test(value)) {
    throw new NewsletterError('BAD_REQUEST', `${field} must be one line of at most ${maxLength} characters`);
  }
  return value.trim() || null;
}

function sortedKeys(values: MailVariables): [string, string][] {
  return Object.keys(values)
    .sort()
    .map((key) => [key, String(values[key])]);
}
