import path from 'node:path';
import { z } from 'zod';
import { MAIL_ADDRESS } from '../common/mail-address';
import type { Area } from './area';
import type { Environment } from './environment';
import { baseUrl, integer, nonEmpty } from './validators';

export const mailVariables = {
  SMTP_HOST: nonEmpty
    .optional()
    .meta({ description: 'SMTP server; unset: mail is written to `<PLINTH_DATA_DIR>/mail/*.eml` (not allowed in production)', unset: 'unset' }),
  SMTP_PORT: integer(1, 65535).default(587).describe('SMTP port'),
  SMTP_USER: nonEmpty.optional().meta({ description: 'SMTP login, with `SMTP_PASSWORD` (both or neither)', unset: 'unset' }),
  // Taken exactly as given: spaces may be part of a password.
  SMTP_PASSWORD: z.string().optional().meta({ description: 'SMTP password, with `SMTP_USER` (both or neither), taken exactly as given', unset: 'unset' }),
  SMTP_SECURE: z
    .enum(['starttls', 'tls', 'none'], { error: 'must be starttls, tls or none' })
    .default('starttls')
    .describe('`starttls` (required, never falls back to plain), `tls` (from the first byte, port 465) or `none`'),
  SMTP_CONNECTION_TIMEOUT_MS: integer(100, 600_000).default(10_000).describe('SMTP time limit: connecting'),
  SMTP_GREETING_TIMEOUT_MS: integer(100, 600_000).default(10_000).describe("SMTP time limit: the server's greeting"),
  SMTP_SOCKET_TIMEOUT_MS: integer(100, 3_600_000).default(60_000).describe('SMTP time limit: an idle connection'),
  SMTP_POOL_SIZE: integer(1, 100).default(5).describe('SMTP connections kept open per process'),
  AUTH_EMAIL_FROM: z
    .string()
    .trim()
    .regex(MAIL_ADDRESS, { error: 'must be an e-mail address such as noreply@example.com' })
    .default('noreply@localhost')
    .describe('sender address of every mail'),
  AUTH_EMAIL_FROM_NAME: nonEmpty
    .refine((value) => !/[\r\n]/.test(value), { error: 'must be one line' })
    .default('Plinth')
    .describe('sender name of every mail'),
  AUTH_EMAIL_TEMPLATES_DIR: nonEmpty.default('./email-templates').describe('`<name>.mjml` or `<name>.html` here replaces the built-in template `<name>`'),
  MAIL_TEMPLATE_CACHE_SIZE: integer(1, 10_000).default(100).describe('compiled mail templates kept in memory'),
  MAIL_RETRY_LIMIT: integer(0, 1000).default(10).describe('retries of a mail the SMTP server did not take'),
  MAIL_RETRY_DELAY_SECONDS: integer(1, 86_400).default(30).describe('delay before the first retry of a mail (it doubles at each retry)'),
  EMAIL_DELIVERY_API_KEY: nonEmpty
    .optional()
    .meta({ description: "set: every mail goes to the HTTP delivery API (Resend's `POST /emails`) instead of SMTP", unset: 'unset' }),
  EMAIL_DELIVERY_API_URL: baseUrl.default('https://api.resend.com').describe('the HTTP delivery API'),
};

export const mail = {
  name: 'mail',
  title: 'Mail',
  variables: mailVariables,
  problems: (values: Environment) =>
    (values.SMTP_USER === undefined) !== (values.SMTP_PASSWORD === undefined) ? ['SMTP_USER and SMTP_PASSWORD must be set together'] : [],
  settings: (values: Environment) => ({
    mail: {
      /** Unset without SMTP_HOST: mail is written to .eml files outside production, refused in it. */
      smtp: values.SMTP_HOST
        ? {
            host: values.SMTP_HOST,
            port: values.SMTP_PORT,
            /** Both or neither. */
            user: values.SMTP_USER,
            password: values.SMTP_PASSWORD,
            secure: values.SMTP_SECURE,
            connectionTimeoutMs: values.SMTP_CONNECTION_TIMEOUT_MS,
            greetingTimeoutMs: values.SMTP_GREETING_TIMEOUT_MS,
            socketTimeoutMs: values.SMTP_SOCKET_TIMEOUT_MS,
            poolSize: values.SMTP_POOL_SIZE,
          }
        : undefined,
      from: { address: values.AUTH_EMAIL_FROM, name: values.AUTH_EMAIL_FROM_NAME },
      templatesDir: path.resolve(values.AUTH_EMAIL_TEMPLATES_DIR),
      templateCacheSize: values.MAIL_TEMPLATE_CACHE_SIZE,
      retryLimit: values.MAIL_RETRY_LIMIT,
      retryDelaySeconds: values.MAIL_RETRY_DELAY_SECONDS,
      /** Set: mail goes to an HTTP delivery API with Resend's shape instead of SMTP. */
      api: values.EMAIL_DELIVERY_API_KEY ? { url: values.EMAIL_DELIVERY_API_URL, key: values.EMAIL_DELIVERY_API_KEY } : undefined,
    },
  }),
} satisfies Area;
