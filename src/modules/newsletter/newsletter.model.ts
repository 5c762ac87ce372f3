import type { Logger } from 'pino';
import type { DataSource } from 'typeorm';
import type { Config } from '../../config';
import type { JobQueue } from '../../platform/job-queue';
import type { Mailer } from '../../platform/mail/mailer';
import type { MailTemplates } from '../../platform/mail/templates';

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

export const MAX_PAGE = 500;

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

/** What each of the newsletter's services is built from. */
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

export const SUBSCRIBER_COLUMNS = `id, email, name, source, is_verified, status, subscribed_at, unsubscribed_at, created_at,
  verification_expires_at, confirmations_sent`;

/** An address as it is stored and signed: trimmed, lower-cased. */
export function normalizeEmail(value: string): string {
  return value.trim().toLowerCase();
}
