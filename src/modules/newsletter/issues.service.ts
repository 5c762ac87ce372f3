import fs from 'node:fs/promises';
import type { EntityManager } from 'typeorm';
import { Refusal } from '../../common/refusal';
import type { JobsConfig } from '../../config';
import { LOCK_KEYS } from '../../db/lock-keys';
import { queueSettings } from '../../platform/job-queue';
import { MailError, type MailVariables } from '../../platform/mail/mailer';
import type { NewsletterAdmin } from './newsletter-admin.service';
import { NewsletterFlow } from './newsletter-flow';
import { ISSUE_QUEUE, ISSUE_TEMPLATE, ISSUE_VARIABLES, type NewsletterDependencies, type SendIssueInput, type SendIssueResult } from './newsletter.model';
import { rowsAndCount } from '../../db/sql';

/** A recipient of an issue is given up on after this many failed deliveries. */
const MAX_DELIVERY_ATTEMPTS = 5;
/** During a send, the remaining recipients' status is read again at least this often (spec: 10 s). */
const STATUS_RECHECK_MS = 1000;

/** The issue queue's defaults: a batch must finish within its timeout, which is also the lease of its claims. */
export const ISSUE_QUEUE_SETTINGS = { timeoutSeconds: 120, retryLimit: 10, retryDelaySeconds: 5, retryBackoff: true };

/** How long an issue recipient's claim holds: the issue queue's timeout (after which its job is given up) and a margin. */
export function issueLeaseSeconds(jobs: JobsConfig): number {
  return queueSettings({ queue: ISSUE_QUEUE, settings: ISSUE_QUEUE_SETTINGS, work: async () => undefined }, jobs).timeoutSeconds + 2;
}

/**
 * The bi-weekly issue (N1): sent to every verified, active subscriber through the
 * `newsletter-issue` queue in batches, by hand (admin API, CLI) or on the schedule
 * (NEWSLETTER_ISSUE_SCHEDULE_VARS_FILE).
 */
export class Issues extends NewsletterFlow {
  constructor(
    deps: NewsletterDependencies,
    private readonly admin: NewsletterAdmin,
  ) {
    super(deps);
  }

  /** Checks an issue's variables (every N1 variable, a string or a number; nothing else) and renders N1 once. */
  private async issueVariables(issueNumber: number, given: Record<string, unknown>): Promise<MailVariables> {
    if (!Number.isInteger(issueNumber) || issueNumber < 1 || issueNumber > 1_000_000) {
      throw new Refusal('BAD_REQUEST', 'the issue number must be a whole number from 1 to 1000000', 400);
    }
    if (typeof given !== 'object' || given === null || Array.isArray(given)) {
      throw new Refusal('BAD_REQUEST', 'the variables must be a JSON object', 400);
    }
    const unknown = Object.keys(given).filter((key) => !(ISSUE_VARIABLES as readonly string[]).includes(key));
    if (unknown.length > 0) {
      throw new Refusal('BAD_REQUEST', `unknown variables ${unknown.join(', ')} (N1 takes ${ISSUE_VARIABLES.join(', ')})`, 400);
    }
    const values: MailVariables = { ISSUE_NUMBER: issueNumber };
    for (const name of ISSUE_VARIABLES) {
      const value = given[name];
      if (name === 'ISSUE_NUMBER' && value !== undefined && String(value) !== String(issueNumber)) {
        throw new Refusal('BAD_REQUEST', `ISSUE_NUMBER is ${JSON.stringify(value)} but the issue is ${issueNumber}`, 400);
      }
      if (name === 'ISSUE_NUMBER') continue;
      if ((typeof value !== 'string' || value.trim() === '') && typeof value !== 'number') {
        throw new Refusal('BAD_REQUEST', `variable ${name} is missing: N1 needs ${ISSUE_VARIABLES.join(', ')} (strings)`, 400);
      }
      values[name] = value;
    }
    for (const name of ['CHANGELOG_URL', 'DOCS_URL']) {
      const url = String(values[name]);
      if (!URL.canParse(url) || !/^https?:$/.test(new URL(url).protocol)) throw new Refusal('BAD_REQUEST', `${name} must be an http(s) URL`, 400);
    }
    try {
      await this.deps.templates.render(ISSUE_TEMPLATE, { name: 'there', email: 'check@example.com', unsubscribe_url: this.deps.config.publicUrl, ...values });
    } catch (error) {
      if (error instanceof MailError) throw new Refusal('BAD_REQUEST', error.message, 400);
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
    this.mail.secrets();
    const variables = await this.issueVariables(input.issueNumber, input.variables);
    if (input.dryRun) {
      const { rows } = await rowsAndCount<{ count: number }>(
        this.pool,
        `SELECT count(*)::int AS count FROM newsletter_subscribers WHERE is_verified AND status = 'active'`,
      );
      return { dryRun: true, recipients: rows[0].count };
    }
    const outcome = await this.deps.dataSource.transaction(async (manager) => {
      // One issue number at a time, across processes, until this transaction ends.
      await rowsAndCount(manager, 'SELECT pg_advisory_xact_lock($1::bigint + $2::bigint)', [LOCK_KEYS.newsletterIssueBase, input.issueNumber]);
      const existing = (
        await rowsAndCount<{ id: string; status: string; variables: MailVariables }>(
          manager,
          'SELECT id, status, variables FROM newsletter_issues WHERE issue_number = $1',
          [input.issueNumber],
        )
      ).rows[0];
      if (existing) {
        if (JSON.stringify(sortedKeys(existing.variables)) !== JSON.stringify(sortedKeys(variables))) {
          throw new Refusal('CONFLICT', `issue ${input.issueNumber} exists with other variables; an issue number is sent once`, 409);
        }
        if (existing.status === 'sent') throw new Refusal('CONFLICT', `issue ${input.issueNumber} was already sent`, 409);
        const open = (
          await rowsAndCount<{ count: number }>(
            manager,
            `SELECT count(*)::int AS count FROM newsletter_issue_recipients WHERE issue_id = $1 AND status IN ('pending', 'sending')`,
            [existing.id],
          )
        ).rows[0].count;
        // Stale claims (a crashed send) are taken again once their lease has passed.
        await rowsAndCount(
          manager,
          `UPDATE newsletter_issue_recipients SET claimed_at = NULL, status = 'pending' WHERE issue_id = $1 AND status = 'sending' AND claimed_at < now() - make_interval(secs => $2)`,
          [existing.id, this.deps.issueLeaseSeconds],
        );
        await this.queueIssueBatches(manager, existing.id, open);
        return { id: existing.id, resumed: true };
      }
      const id = (
        await rowsAndCount<{ id: string }>(
          manager,
          `INSERT INTO newsletter_issues (issue_number, variables, status, recipients, requested_by) VALUES ($1, $2, 'sending', 0, $3) RETURNING id`,
          [input.issueNumber, JSON.stringify(variables), input.requestedBy],
        )
      ).rows[0].id;
      const recipients = await rowsAndCount(
        manager,
        `INSERT INTO newsletter_issue_recipients (issue_id, subscriber_id)
         SELECT $1, id FROM newsletter_subscribers WHERE is_verified AND status = 'active'`,
        [id],
      );
      await rowsAndCount(manager, 'UPDATE newsletter_issues SET recipients = $2 WHERE id = $1', [id, recipients.count]);
      if (recipients.count === 0) await rowsAndCount(manager, `UPDATE newsletter_issues SET status = 'sent', completed_at = now() WHERE id = $1`, [id]);
      else await this.queueIssueBatches(manager, id, recipients.count);
      return { id, resumed: false };
    });
    const issue = (await this.admin.issues({ id: outcome.id }))[0];
    this.deps.logger.info({ issue: issue.issue_number, recipients: issue.recipients, resumed: outcome.resumed }, 'newsletter issue queued');
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
    const issue = (
      await rowsAndCount<{ issue_number: number; variables: MailVariables; status: string }>(
        this.pool,
        'SELECT issue_number, variables, status FROM newsletter_issues WHERE id = $1',
        [issueId],
      )
    ).rows[0];
    if (!issue || issue.status !== 'sending') return { sent: 0, skipped: 0, failed: 0 };
    const claimed = (
      await rowsAndCount<{ id: string; email: string; name: string | null; deliverable: boolean }>(
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
      const { rows } = await rowsAndCount<{ id: string }>(
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
          await rowsAndCount(
            this.pool,
            `UPDATE newsletter_issue_recipients SET status = 'sent', sent_at = now(), error = NULL WHERE issue_id = $1 AND subscriber_id = ANY($2::uuid[])`,
            [issueId, ids],
          );
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
            this.mail.message(recipient, ISSUE_TEMPLATE, issue.variables, `newsletter-issue-${issue.issue_number}/${recipient.id}`),
          );
          acknowledged.push(recipient.id);
          void record().catch((error: unknown) => (failure ??= error));
          counts.sent++;
        } catch (error) {
          // Left claimed: taken again after the lease, until MAX_DELIVERY_ATTEMPTS.
          const message = (error as Error).message.slice(0, 500);
          const { rows } = await rowsAndCount<{ status: string }>(
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
      await rowsAndCount(
        this.pool,
        `UPDATE newsletter_issue_recipients SET status = 'skipped' WHERE issue_id = $1 AND subscriber_id = ANY($2::uuid[]) AND status = 'sending'`,
        [issueId, skip],
      );
      counts.skipped += skip.length;
    }
    // Claimed but not reached (the job was stopped): back to pending for another job.
    const unreached = queue.map((row) => row.id);
    if (unreached.length > 0) {
      await rowsAndCount(
        this.pool,
        `UPDATE newsletter_issue_recipients SET status = 'pending', claimed_at = NULL WHERE issue_id = $1 AND subscriber_id = ANY($2::uuid[]) AND status = 'sending'`,
        [issueId, unreached],
      );
    }
    await rowsAndCount(
      this.pool,
      `UPDATE newsletter_issues SET status = 'sent', completed_at = now()
       WHERE id = $1 AND status = 'sending' AND NOT EXISTS (SELECT 1 FROM newsletter_issue_recipients WHERE issue_id = $1 AND status IN ('pending', 'sending'))`,
      [issueId],
    );
    if (failure !== undefined) throw failure;
    return counts;
  }

  /** The highest issue number so far and its variables (the schedule sends the next one). */
  async lastIssue(): Promise<{ issue_number: number; variables: MailVariables; created_at: Date } | null> {
    const { rows } = await rowsAndCount<{ issue_number: number; variables: MailVariables; created_at: Date }>(
      this.pool,
      'SELECT issue_number, variables, created_at FROM newsletter_issues ORDER BY issue_number DESC LIMIT 1',
    );
    return rows[0] ?? null;
  }

  /**
   * The scheduled issue: the next issue number with NEWSLETTER_ISSUE_SCHEDULE_VARS_FILE's
   * variables as they are now; the same content as the last issue is not sent again (logged).
   */
  async sendScheduledIssue(): Promise<void> {
    const file = this.settings.issueScheduleVarsFile!;
    const logger = this.deps.logger;
    const variables = JSON.parse(await fs.readFile(file, 'utf8')) as Record<string, unknown>;
    const last = await this.lastIssue();
    const { ISSUE_NUMBER: _ignored, ...content } = variables;
    if (last) {
      const { ISSUE_NUMBER: _previous, ...previous } = last.variables;
      if (JSON.stringify(Object.entries(previous).sort()) === JSON.stringify(Object.entries(content).sort())) {
        logger.warn({ file, lastIssue: last.issue_number }, 'scheduled newsletter issue not sent: the variables file has not changed since the last issue');
        return;
      }
    }
    try {
      const result = await this.sendIssue({ issueNumber: (last?.issue_number ?? 0) + 1, variables: content, requestedBy: 'schedule' });
      if (!result.dryRun) logger.info({ issue: result.issue.issue_number, recipients: result.issue.recipients }, 'scheduled newsletter issue started');
    } catch (error) {
      if (!(error instanceof Refusal)) throw error;
      logger.error({ file, reason: error.message }, 'scheduled newsletter issue not sent: fix the variables file');
    }
  }
}

function sortedKeys(values: MailVariables): [string, string][] {
  return Object.keys(values)
    .sort()
    .map((key) => [key, String(values[key])]);
}
