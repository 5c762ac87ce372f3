import type pg from 'pg';
import { Refusal } from '../../common/refusal';
import { JOBS_SCHEMA } from '../../platform/job-queue';
import {
  ISSUE_TEMPLATE,
  MAX_PAGE,
  normalizeEmail,
  SUBSCRIBER_COLUMNS,
  SUBSCRIBER_STATUSES,
  type IssueProgress,
  type NewsletterDependencies,
  type Subscriber,
  type SubscriberFilter,
  type SubscriberMail,
  type SubscriberStatus,
} from './newsletter.model';
import { poolOf, rowsAndCount } from '../../db/sql';

/** The newsletter's admin views (GraphQL and CLI): subscribers, their mails, the counts, the issues' progress. */
export class NewsletterAdmin {
  private readonly pool: pg.Pool;

  constructor(deps: Pick<NewsletterDependencies, 'dataSource'>) {
    this.pool = poolOf(deps.dataSource);
  }

  async subscriber(rawEmail: string): Promise<Subscriber | null> {
    const { rows } = await rowsAndCount<Subscriber>(this.pool, `SELECT ${SUBSCRIBER_COLUMNS} FROM newsletter_subscribers WHERE email = $1`, [
      normalizeEmail(rawEmail),
    ]);
    return rows[0] ?? null;
  }

  /** The subscriber with this id, or null. */
  async subscriberById(id: string): Promise<Subscriber | null> {
    const { rows } = await rowsAndCount<Subscriber>(this.pool, `SELECT ${SUBSCRIBER_COLUMNS} FROM newsletter_subscribers WHERE id = $1`, [id]);
    return rows[0] ?? null;
  }

  async subscribers(filter: SubscriberFilter): Promise<{ total: number; items: Subscriber[] }> {
    const first = filter.first ?? 50;
    const offset = filter.offset ?? 0;
    if (!Number.isInteger(first) || first < 1 || first > MAX_PAGE) throw new Refusal('BAD_REQUEST', `first must be a whole number from 1 to ${MAX_PAGE}`, 400);
    if (!Number.isInteger(offset) || offset < 0) throw new Refusal('BAD_REQUEST', 'offset must be a whole number from 0', 400);
    const search = filter.search ? `%${filter.search.toLowerCase().replace(/[\\%_]/g, (character) => `\\${character}`)}%` : null;
    const { rows } = await rowsAndCount<Subscriber & { total: number }>(
      this.pool,
      `SELECT ${SUBSCRIBER_COLUMNS}, count(*) OVER ()::int AS total FROM newsletter_subscribers
       WHERE ($1::text IS NULL OR status = $1) AND ($2::boolean IS NULL OR is_verified = $2) AND ($3::text IS NULL OR email LIKE $3)
       ORDER BY created_at DESC, id LIMIT $4 OFFSET $5`,
      [filter.status ?? null, filter.verified ?? null, search, first, offset],
    );
    if (rows.length === 0 && offset > 0) {
      const { rows: counted } = await rowsAndCount<{ total: number }>(
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
    const { rows } = await rowsAndCount<{ status: SubscriberStatus; count: number; verified: number }>(
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
    const { rows } = await rowsAndCount<SubscriberMail>(
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

  /** Issues with their progress, newest first (or the one with `id`), `first` of them from `offset`. */
  async issues(filter: { id?: string; first?: number | null; offset?: number }): Promise<IssueProgress[]> {
    const first = filter.first ?? 20;
    const offset = filter.offset ?? 0;
    if (!Number.isInteger(first) || first < 1 || first > MAX_PAGE) throw new Refusal('BAD_REQUEST', `first must be a whole number from 1 to ${MAX_PAGE}`, 400);
    if (!Number.isInteger(offset) || offset < 0) throw new Refusal('BAD_REQUEST', 'offset must be a whole number from 0', 400);
    const { rows } = await rowsAndCount<IssueProgress>(
      this.pool,
      `SELECT i.id, i.issue_number, i.status, i.recipients, i.requested_by, i.created_at, i.completed_at,
         count(r.subscriber_id) FILTER (WHERE r.status IN ('pending', 'sending'))::int AS pending,
         count(r.subscriber_id) FILTER (WHERE r.status = 'sent')::int AS sent,
         count(r.subscriber_id) FILTER (WHERE r.status = 'skipped')::int AS skipped,
         count(r.subscriber_id) FILTER (WHERE r.status = 'failed')::int AS failed
       FROM (SELECT * FROM newsletter_issues WHERE $1::uuid IS NULL OR id = $1 ORDER BY issue_number DESC LIMIT $2 OFFSET $3) i
       LEFT JOIN newsletter_issue_recipients r ON r.issue_id = i.id
       GROUP BY i.id, i.issue_number, i.status, i.recipients, i.requested_by, i.created_at, i.completed_at
       ORDER BY i.issue_number DESC`,
      [filter.id ?? null, first, offset],
    );
    return rows;
  }
}
