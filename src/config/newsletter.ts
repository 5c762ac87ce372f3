import path from 'node:path';
import { z } from 'zod';
import { MAIL_ADDRESS } from '../common/mail-address';
import type { Area } from './area';
import type { Environment } from './environment';
import { publicUrlOf } from './server';
import { hexSecret, integer, nonEmpty } from './validators';

// The newsletter (spec 3 §1.2, §2.2–2.4): double opt-in, the welcome series, the bi-weekly issue.
export const newsletterVariables = {
  NEWSLETTER_CONFIRM_SECRET: hexSecret.optional().meta({
    description: 'signs confirmation links: 64 hex digits (`openssl rand -hex 32`); in production the newsletter answers 503 without it',
    unset: 'generated in development',
  }),
  NEWSLETTER_UNSUBSCRIBE_SECRET: hexSecret.optional().meta({
    description: 'signs unsubscribe links: 64 hex digits (`openssl rand -hex 32`); in production the newsletter answers 503 without it',
    unset: 'generated in development',
  }),
  NEWSLETTER_CONFIRM_TTL_SECONDS: integer(60, 30 * 86_400)
    .default(48 * 3600)
    .describe('validity of a confirmation link'),
  NEWSLETTER_CONFIRM_RESEND_LIMIT: integer(0, 100)
    .default(3)
    .describe('fresh confirmation links a pending address may get before subscribing again stays silent'),
  NEWSLETTER_SUBSCRIBE_RATE_LIMIT_POINTS: integer(1, 1_000_000).default(3).describe('subscribe attempts per client address and window'),
  NEWSLETTER_SUBSCRIBE_RATE_LIMIT_DURATION_SECONDS: integer(1, 86_400)
    .default(3600)
    .describe('the window, in seconds, of `NEWSLETTER_SUBSCRIBE_RATE_LIMIT_POINTS`'),
  NEWSLETTER_DAY_SECONDS: integer(1, 86_400)
    .default(86_400)
    .describe("the length of a day in the newsletter's schedules (series, clean-up, cadence); tests shorten it"),
  NEWSLETTER_SERIES_DAYS: z
    .string()
    .trim()
    .regex(/^\d{1,3}(\s*,\s*\d{1,3}){3}$/, { error: 'must be four whole numbers of days, such as 3,7,14,21' })
    .transform((value) => value.split(',').map((day) => Number(day.trim())))
    .refine((days) => days.every((day, index) => day > 0 && (index === 0 || day > days[index - 1])), {
      error: 'must be four increasing numbers of days above 0, such as 3,7,14,21',
    })
    .default([3, 7, 14, 21])
    .describe('days of W2 to W5 after confirmation'),
  NEWSLETTER_CLEANUP_AFTER_DAYS: integer(1, 3650)
    .default(7)
    .describe('unconfirmed rows whose link expired are deleted at this age (daily job, `plinth newsletter cleanup`)'),
  NEWSLETTER_ISSUE_INTERVAL_DAYS: integer(1, 365).default(14).describe('days between two scheduled issues'),
  NEWSLETTER_ISSUE_SCHEDULE_VARS_FILE: nonEmpty.optional().meta({
    description: "set: the next issue goes out every `NEWSLETTER_ISSUE_INTERVAL_DAYS` with this file's N1 variables (not when unchanged)",
    unset: 'unset (no schedule)',
  }),
  NEWSLETTER_SCHEDULER_INTERVAL_SECONDS: integer(1, 3600).default(60).describe('how often workers look for due scheduled work (clean-up, the issue schedule)'),
  NEWSLETTER_SEND_BATCH_SIZE: integer(1, 10_000).default(200).describe('recipients one issue-send job claims at once'),
  NEWSLETTER_SEND_CONCURRENCY: integer(1, 1000).default(20).describe('sends at once in one issue-send job'),
  NEWSLETTER_LICENSE_ALERT_DAYS: integer(1, 90)
    .default(7)
    .describe('T3-license-alert goes this many (newsletter) days before a license renews (once per renewal date)'),
  NEWSLETTER_LICENSE_MANAGE_URL: z
    .url({ protocol: /^https?$/, error: 'must be an http(s) URL' })
    .optional()
    .meta({ description: "the page T3-license-alert's button opens, where a license holder manages it", unset: '`<PLINTH_PUBLIC_URL>/account/licenses`' }),
  EMAIL_DELIVERY_FROM: z
    .string()
    .trim()
    .regex(MAIL_ADDRESS, { error: 'must be an e-mail address such as news@example.com' })
    .optional()
    .meta({ description: 'sender of newsletter mail', unset: '`AUTH_EMAIL_FROM`' }),
  EMAIL_DELIVERY_LIST_ID_NEWSLETTER: z
    .string()
    .trim()
    .regex(/^[A-Za-z0-9_.-]{1,128}$/, { error: 'must be 1 to 128 letters, digits, ".", "_" or "-"' })
    .optional()
    .meta({ description: 'the list at the delivery service named in each newsletter mail (`List-Id`, a `list` tag)', unset: 'unset' }),
};

export const newsletter = {
  name: 'newsletter',
  title: 'Newsletter',
  variables: newsletterVariables,
  settings: (values: Environment) => ({
    newsletter: {
      /** Outside production start-up generates missing ones (dev-secrets.ts); in production the newsletter is off without them. */
      confirmSecret: values.NEWSLETTER_CONFIRM_SECRET?.toLowerCase(),
      unsubscribeSecret: values.NEWSLETTER_UNSUBSCRIBE_SECRET?.toLowerCase(),
      confirmTtlSeconds: values.NEWSLETTER_CONFIRM_TTL_SECONDS,
      confirmResendLimit: values.NEWSLETTER_CONFIRM_RESEND_LIMIT,
      subscribeRateLimit: {
        points: values.NEWSLETTER_SUBSCRIBE_RATE_LIMIT_POINTS,
        durationSeconds: values.NEWSLETTER_SUBSCRIBE_RATE_LIMIT_DURATION_SECONDS,
      },
      daySeconds: values.NEWSLETTER_DAY_SECONDS,
      seriesDays: values.NEWSLETTER_SERIES_DAYS,
      cleanupAfterDays: values.NEWSLETTER_CLEANUP_AFTER_DAYS,
      issueIntervalDays: values.NEWSLETTER_ISSUE_INTERVAL_DAYS,
      /** Set: the next issue is sent every issueIntervalDays with the variables of this file. Unset: no schedule. */
      issueScheduleVarsFile: values.NEWSLETTER_ISSUE_SCHEDULE_VARS_FILE && path.resolve(values.NEWSLETTER_ISSUE_SCHEDULE_VARS_FILE),
      schedulerIntervalSeconds: values.NEWSLETTER_SCHEDULER_INTERVAL_SECONDS,
      sendBatchSize: values.NEWSLETTER_SEND_BATCH_SIZE,
      sendConcurrency: values.NEWSLETTER_SEND_CONCURRENCY,
      from: { address: values.EMAIL_DELIVERY_FROM ?? values.AUTH_EMAIL_FROM, name: values.AUTH_EMAIL_FROM_NAME },
      listId: values.EMAIL_DELIVERY_LIST_ID_NEWSLETTER,
      licenseAlertDays: values.NEWSLETTER_LICENSE_ALERT_DAYS,
      licenseManageUrl: values.NEWSLETTER_LICENSE_MANAGE_URL ?? `${publicUrlOf(values)}/account/licenses`,
    },
  }),
} satisfies Area;
