import net from 'node:net';
import path from 'node:path';
import { z } from 'zod';
import { jwtSecretSchema, type JwtSecretConfig } from './jwt-secret';
import { customServicesFromEnv, type CustomService } from './custom-services';
import { oauthProvidersFromEnv, type OAuthProviderName, type OAuthProviderSettings } from './oauth-providers';
import { MAIL_ADDRESS } from '../common/mail-address';
import { ADMIN_ROLE } from '../common/roles';
import type { PasswordHashSettings } from '../common/passwords';
import { owaspMinimumMemoryKib } from './password-hash';

export type { JwtSecretConfig } from './jwt-secret';
export type { CustomService } from './custom-services';

const integer = (min: number, max: number) =>
  z.coerce
    .number({ error: 'must be a number' })
    .int({ error: 'must be a whole number' })
    .min(min, { error: `must be at least ${min}` })
    .max(max, { error: `must be at most ${max}` });

const boolean = z
  .enum(['true', 'false', '1', '0', 'yes', 'no'], { error: 'must be true or false' })
  .transform((value) => value === 'true' || value === '1' || value === 'yes');

const nonEmpty = z.string().trim().min(1, { error: 'must not be empty' });

/**
 * Which peers may set X-Forwarded-For: `true` (every peer), a hop count (that many proxies in
 * front, whatever their address), or a comma-separated list of addresses, CIDR ranges and the
 * names loopback, linklocal and uniquelocal. Off by default: the client address is the peer's.
 */
export type TrustProxy = boolean | number | string[];

export const TRUSTED_PROXY_NAMES = ['loopback', 'linklocal', 'uniquelocal'] as const;

function isAddressOrRange(entry: string): boolean {
  if ((TRUSTED_PROXY_NAMES as readonly string[]).includes(entry)) return true;
  const [address, prefix, ...rest] = entry.split('/');
  const family = net.isIP(address);
  if (family === 0 || rest.length > 0) return false;
  if (prefix === undefined) return true;
  return /^\d{1,3}$/.test(prefix) && Number(prefix) <= (family === 4 ? 32 : 128);
}

const trustProxy = z
  .string()
  .trim()
  .transform((value): TrustProxy => {
    if (value === 'true' || value === 'false') return value === 'true';
    if (/^\d+$/.test(value)) return Number(value);
    return value.split(',').map((entry) => entry.trim());
  })
  .refine((value) => typeof value !== 'number' || value <= 100, { error: 'must be at most 100 hops' })
  .refine((value) => !Array.isArray(value) || value.every(isAddressOrRange), {
    error: 'must be true, false, a hop count, or a comma-separated list of addresses and CIDR ranges such as 10.0.0.0/8 (or loopback, linklocal, uniquelocal)',
  });

/** Where people reach a service: links in mails are built on it, so it must be absolute and end without a slash. */
const baseUrl = nonEmpty.refine(
  (value) => {
    if (!URL.canParse(value)) return false;
    const url = new URL(value);
    return (
      (url.protocol === 'http:' || url.protocol === 'https:') &&
      !url.username && !url.password && !url.search && !url.hash && !value.includes('?') && !value.includes('#') &&
      !value.endsWith('/')
    );
  },
  { error: 'must be an absolute http(s) URL without a trailing slash, query or fragment, such as https://api.example.com' },
);

/**
 * Per-queue settings. Each has a default (JOBS_DEFAULT_<SETTING>); a module's JobDefinition
 * overrides it for its queue, and JOBS_<QUEUE>_<SETTING> overrides both (README, Jobs).
 */
export interface QueueSettings {
  /** Jobs of this queue one process runs at once. */
  concurrency: number;
  /** Retries after the first attempt fails (a timeout or a crash counts as a failed attempt). */
  retryLimit: number;
  /** Seconds before the first retry. */
  retryDelaySeconds: number;
  /** Doubles the delay at each retry (with up to as much again of random jitter). */
  retryBackoff: boolean;
  /**
   * A job running longer than this is aborted (its signal fires) and fails. It is also the
   * lease: after a crash, the job is taken back and retried once this (plus a two-second margin)
   * has passed since it started, at the next maintenance (JOBS_MAINTENANCE_INTERVAL_SECONDS).
   */
  timeoutSeconds: number;
}

/** Who may read /metrics (PLINTH_METRICS). */
export type MetricsAccess = { mode: 'off' } | { mode: 'loopback' } | { mode: 'token'; token: string };

/**
 * The per-queue job settings: their validation, read from JOBS_DEFAULT_<SETTING>, from
 * JOBS_<QUEUE>_<SETTING>, and applied to the settings a module declares.
 */
const QUEUE_SETTINGS = {
  concurrency: { variable: 'CONCURRENCY', schema: integer(1, 1000) },
  retryLimit: { variable: 'RETRY_LIMIT', schema: integer(0, 1000) },
  retryDelaySeconds: { variable: 'RETRY_DELAY_SECONDS', schema: integer(0, 86_400) },
  retryBackoff: { variable: 'RETRY_BACKOFF', schema: boolean },
  // pg-boss refuses expiries of 24 hours or more; the job's expiry is its timeout plus a margin.
  timeoutSeconds: { variable: 'TIMEOUT_SECONDS', schema: integer(1, 82_800) },
} as const satisfies Record<keyof QueueSettings, { variable: string; schema: z.ZodType }>;

type QueueSetting = keyof QueueSettings;
const QUEUE_SETTING_KEYS = Object.keys(QUEUE_SETTINGS) as QueueSetting[];
const QUEUE_VARIABLE = new RegExp(
  `^JOBS_([A-Z][A-Z0-9_]*)_(${QUEUE_SETTING_KEYS.map((key) => QUEUE_SETTINGS[key].variable).join('|')})$`,
);

/** The environment-variable form of a queue name: `report-render` -> `REPORT_RENDER`. */
export function queueVariableName(queue: string): string {
  return queue.toUpperCase().replace(/-/g, '_');
}

/** Checks one setting a module declares for a queue, with the rule of its variable; returns the problem. */
export function queueSettingProblem(setting: QueueSetting, value: unknown): string | undefined {
  const result = QUEUE_SETTINGS[setting].schema.safeParse(String(value));
  return result.success ? undefined : result.error.issues[0].message;
}

const PROCESS_ROLES = ['api', 'worker'] as const;
export type ProcessRole = (typeof PROCESS_ROLES)[number];
/** A URL path such as /docs: a slash, then letters, digits and . _ ~ - /, no trailing slash. */
const urlPath = nonEmpty.regex(/^\/([A-Za-z0-9._~-]+(\/[A-Za-z0-9._~-]+)*)?$/, {
  error: 'must be a path such as /docs: a leading slash, letters, digits and . _ ~ - /, no trailing slash',
});

/** API_DOCS_THEME (spec 1 §2.7): default follows the system's light or dark mode; moon and purple are dark; solarized is light. */
export const API_DOCS_THEMES = ['default', 'moon', 'purple', 'solarized'] as const;
export type ApiDocsTheme = (typeof API_DOCS_THEMES)[number];

/** What uploadAndProcessFile accepts by default: images it can process, data it can parse, and inert documents. */
export const DEFAULT_FILE_TYPES = ['image/png', 'image/jpeg', 'image/gif', 'image/webp', 'text/csv', 'application/json', 'text/plain', 'application/pdf'];
/** Room in an upload's request for everything but the file: the query, the other fields, JSON. */
const UPLOAD_ENVELOPE_BYTES = 64 * 1024;
const MEDIA_TYPE = /^[a-z0-9][a-z0-9!#$&^_.+-]{0,63}\/[a-z0-9][a-z0-9!#$&^_.+-]{0,63}$/;

/** Paths the server itself answers; the reference page cannot take one of them. */
const RESERVED_PATHS = ['/api-docs', '/healthz', '/readyz', '/metrics', '/v1/graphql'];

/** The two payment providers of spec 3: primary (Stripe-compatible) and backup (Lemon Squeezy-compatible). */
export const PAYMENT_PROVIDERS = ['primary', 'backup'] as const;
export type PaymentProviderName = (typeof PAYMENT_PROVIDERS)[number];

/** PRIMARY_PROVIDER_PRICE_ID_<PRODUCT> and BACKUP_PROVIDER_VARIANT_ID_<PRODUCT>: one per product. */
const PRODUCT_VARIABLE = /^(PRIMARY_PROVIDER_PRICE_ID|BACKUP_PROVIDER_VARIANT_ID)_([A-Z][A-Z0-9_]*)$/;
/** A secret of 32 random bytes written as 64 hex digits (`openssl rand -hex 32`). */
const hexSecret = z.string().trim().regex(/^[0-9a-fA-F]{64}$/, { error: 'must be 32 random bytes as 64 hex digits (openssl rand -hex 32)' });

const oneLine = nonEmpty.refine((value) => !/[\r\n]/.test(value), { error: 'must be one line' });

/** A role name: letters, digits, _ and -, as in X-Gql-Role. */
const roleName = z.string().trim().regex(/^[A-Za-z][A-Za-z0-9_-]{0,63}$/, { error: 'must be a role name such as user' });

/** AUTH_CLIENT_URL and AUTH_ALLOWED_REDIRECT_URLS entries: an absolute URL, `*` allowed for one host label. */
const redirectBase = nonEmpty.refine(
  (value) => {
    const probe = value.replace(/\*/g, 'wildcard');
    if (!URL.canParse(probe)) return false;
    const url = new URL(probe);
    return !url.username && !url.password && !url.hash && url.host !== '';
  },
  { error: 'must be an absolute URL such as https://app.example.com (a * stands for one host label)' },
);

/**
 * AUTH_JWT_SECRET: the signing key, as a raw key of 32 bytes or more or as the engine's JSON
 * object (HS256, HS384 or HS512). Unset: the key of GQL_GRAPHQL_JWT_SECRET.
 */
const authJwtSecret = z
  .string()
  .transform((text, ctx): { type?: 'HS256' | 'HS384' | 'HS512'; key: string; claims_namespace?: string } => {
    if (!text.trimStart().startsWith('{')) {
      if (Buffer.byteLength(text) < 32) ctx.addIssue({ code: 'custom', message: 'must be at least 32 bytes' });
      return { key: text };
    }
    const parsed = jwtSecretSchema.safeParse(text);
    if (!parsed.success) {
      ctx.addIssue({ code: 'custom', message: `must be a key of 32+ bytes or a JSON object such as {"type":"HS256","key":"..."}: ${parsed.error.issues[0].message}` });
      return z.NEVER;
    }
    const { type, key } = parsed.data;
    // Only a namespace the object names itself replaces the engine's.
    const { claims_namespace } = JSON.parse(text) as { claims_namespace?: string };
    if (type !== 'HS256' && type !== 'HS384' && type !== 'HS512') {
      ctx.addIssue({ code: 'custom', message: 'type must be HS256, HS384 or HS512: the auth service signs with a shared secret' });
      return z.NEVER;
    }
    return { type, key, claims_namespace };
  });

/** Every environment variable Plinth reads, with its default and its validation. */
const environmentSchema = z.object({
  NODE_ENV: z.enum(['development', 'production', 'test']).default('development'),
  HOST: nonEmpty.default('0.0.0.0'),
  PORT: integer(0, 65535).default(8080),
  LOG_LEVEL: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),

  DATABASE_URL: z
    .url({ protocol: /^postgres(ql)?$/, error: 'must be a postgres:// or postgresql:// URL' })
    .optional(),
  DATABASE_POOL_SIZE: integer(1, 1000).default(10),
  PLINTH_DATA_DIR: nonEmpty.default('.data'),
  PLINTH_EMBEDDED_PG_PORT: integer(1, 65535).default(5433),

  GQL_GRAPHQL_ADMIN_SECRET: nonEmpty.optional(),
  GQL_GRAPHQL_JWT_SECRET: jwtSecretSchema.optional(),
  GQL_GRAPHQL_UNAUTHORIZED_ROLE: nonEmpty.default('anonymous'),
  GQL_GRAPHQL_DEV_MODE: boolean.default(false),
  GQL_GRAPHQL_INTROSPECTION: boolean.default(true),
  GQL_GRAPHQL_MAX_DEPTH: integer(1, 1000).default(15),
  GQL_GRAPHQL_MAX_COMPLEXITY: integer(1, 1_000_000).default(1000),
  GQL_GRAPHQL_MAX_TOKENS: integer(100, 1_000_000).default(2000),
  GQL_GRAPHQL_MAX_DOCUMENT_BYTES: integer(1024, 100 * 1024 * 1024).default(100 * 1024),
  GQL_GRAPHQL_MAX_ALIASES: integer(0, 100_000).default(100),
  GQL_GRAPHQL_MAX_ROOT_FIELDS: integer(1, 100_000).default(50),
  GQL_GRAPHQL_DOCUMENT_CACHE_BYTES: integer(0, 1024 * 1024 * 1024).default(32 * 1024 * 1024),
  GQL_GRAPHQL_BODY_LIMIT: integer(1024, 1024 * 1024 * 1024).default(1024 * 1024),
  GQL_GRAPHQL_WS_INIT_TIMEOUT_MS: integer(100, 600_000).default(3000),
  // What one user (else one client address) may hold at once on this instance; the admin role is not limited.
  GQL_GRAPHQL_WS_MAX_CONNECTIONS_PER_USER: integer(1, 1_000_000).default(20),
  GQL_GRAPHQL_WS_MAX_SUBSCRIPTIONS_PER_CONNECTION: integer(1, 1_000_000).default(100),
  GQL_GRAPHQL_WS_MAX_SUBSCRIPTIONS_PER_USER: integer(1, 1_000_000).default(200),
  GQL_GRAPHQL_CORS_DOMAIN: z
    .string()
    .trim()
    .default('*')
    .transform((value) => (value === '*' ? ('*' as const) : value.split(',').map((origin) => origin.trim())))
    .refine((value) => value === '*' || value.every((origin) => /^https?:\/\/[^\s/]+$/.test(origin)), {
      error: 'must be * or a comma-separated list of origins such as https://app.example.com',
    }),

  // Compiled execution: one graphql-jit function per document and operation, kept in a bounded cache.
  GQL_GRAPHQL_COMPILED_EXECUTION: boolean.default(true),
  GQL_GRAPHQL_COMPILED_CACHE_ENTRIES: integer(1, 1_000_000).default(1000),
  // Subscribers with the same document, variables and session share one execution per event.
  GQL_GRAPHQL_SUBSCRIPTION_MULTIPLEXING: boolean.default(true),

  PLINTH_PUBLIC_URL: baseUrl.optional(),
  AUTH_SERVER_URL: baseUrl.optional(),

  AUTH_PASSWORD_MIN_LENGTH: integer(1, 1024).default(8),
  AUTH_PASSWORD_MAX_LENGTH: integer(8, 4096).default(256),
  // argon2id's cost; the default is libsodium's interactive profile (64 MiB, 2 passes), above OWASP's minimum.
  AUTH_PASSWORD_HASH_MEMORY_KIB: integer(7_168, 4_194_304).default(65_536),
  AUTH_PASSWORD_HASH_ITERATIONS: integer(1, 64).default(2),
  AUTH_PASSWORD_HASH_PARALLELISM: integer(1, 16).default(1),
  AUTH_INVITATION_TTL_SECONDS: integer(60, 365 * 86_400).default(7 * 86_400),
  ACTIONS_BULK_CREATE_MAX_USERS: integer(1, 100_000).default(1000),

  // The authentication service (/auth): tokens, sign-up and sign-in, tickets, redirects, roles.
  AUTH_JWT_SECRET: authJwtSecret.optional(),
  AUTH_ACCESS_TOKEN_EXPIRES_IN: integer(10, 7 * 86_400).optional(),
  AUTH_TOKEN_EXPIRY_SECONDS: integer(10, 7 * 86_400).optional(),
  AUTH_REFRESH_TOKEN_EXPIRES_IN: integer(1, 10 * 525_600).default(43_200),
  AUTH_REFRESH_TOKEN_REUSE_GRACE_SECONDS: integer(0, 300).default(5),
  AUTH_RECENT_SIGN_IN_SECONDS: integer(0, 365 * 86_400).default(86_400),
  AUTH_EMAIL_SIGNIN_EMAIL_VERIFIED_REQUIRED: boolean.default(true),
  AUTH_DISABLE_SIGNUP: boolean.default(false),
  AUTH_PASSWORD_HIBP_ENABLED: boolean.default(false),
  AUTH_PASSWORD_HIBP_API_URL: baseUrl.default('https://api.pwnedpasswords.com'),
  AUTH_PASSWORD_HIBP_TIMEOUT_MS: integer(100, 60_000).default(3_000),
  AUTH_ANONYMOUS_USERS_ENABLED: boolean.default(false),
  AUTH_GRAVATAR_ENABLED: boolean.default(true),
  AUTH_GRAVATAR_DEFAULT: z.enum(['404', 'mp', 'identicon', 'monsterid', 'wavatar', 'retro', 'robohash', 'blank']).default('blank'),
  AUTH_GRAVATAR_RATING: z.enum(['g', 'pg', 'r', 'x']).default('g'),
  AUTH_CLIENT_URL: redirectBase.optional(),
  AUTH_ALLOWED_REDIRECT_URLS: z
    .string()
    .transform((value) => value.split(',').map((entry) => entry.trim()).filter(Boolean))
    .refine((entries) => entries.every((entry) => redirectBase.safeParse(entry).success), {
      error: 'must be a comma-separated list of URLs such as https://app.example.com,https://*.example.com/callback',
    })
    .optional(),
  AUTH_EMAIL_PASSWORDLESS_EMAIL_ENABLED: boolean.default(false),
  AUTH_DEFAULT_ROLE: roleName.default('user'),
  AUTH_ALLOWED_ROLES: z
    .string()
    .default('user,me')
    .transform((value) => [...new Set(value.split(',').map((role) => role.trim()).filter(Boolean))])
    .refine((roles) => roles.length > 0 && roles.every((role) => roleName.safeParse(role).success), {
      error: 'must be a comma-separated list of role names such as user,me,premium',
    }),
  AUTH_CUSTOM_CLAIMS_WEBHOOK: z.url({ protocol: /^https?$/, error: 'must be an http(s) URL' }).optional(),
  AUTH_CUSTOM_CLAIMS_WEBHOOK_TIMEOUT_MS: integer(50, 60_000).default(2_000),
  AUTH_PORT: integer(1, 65535).optional(),
  AUTH_TICKET_VERIFY_EMAIL_TTL_SECONDS: integer(60, 365 * 86_400).default(7 * 86_400),
  AUTH_TICKET_PASSWORD_RESET_TTL_SECONDS: integer(60, 30 * 86_400).default(3_600),
  AUTH_TICKET_EMAIL_CHANGE_TTL_SECONDS: integer(60, 30 * 86_400).default(3_600),
  AUTH_TICKET_PASSWORDLESS_TTL_SECONDS: integer(60, 30 * 86_400).default(3_600),
  AUTH_TICKET_MFA_TTL_SECONDS: integer(30, 86_400).default(300),
  AUTH_CLEANUP_INTERVAL_SECONDS: integer(1, 86_400).default(3_600),
  AUTH_RATE_LIMIT_GLOBAL_BURST: integer(1, 1_000_000).default(100),
  AUTH_RATE_LIMIT_GLOBAL_INTERVAL_SECONDS: integer(1, 86_400).default(60),
  AUTH_RATE_LIMIT_BRUTE_FORCE_BURST: integer(1, 1_000_000).default(10),
  AUTH_RATE_LIMIT_BRUTE_FORCE_INTERVAL_SECONDS: integer(1, 86_400).default(300),
  AUTH_RATE_LIMIT_SIGNUPS_BURST: integer(1, 1_000_000).default(10),
  AUTH_RATE_LIMIT_SIGNUPS_INTERVAL_SECONDS: integer(1, 86_400).default(300),
  AUTH_RATE_LIMIT_EMAIL_BURST: integer(1, 1_000_000).default(10),
  AUTH_RATE_LIMIT_EMAIL_INTERVAL_SECONDS: integer(1, 86_400).default(3_600),
  // Second factors (spec 2 §1.2, §2.4): TOTP, its secrets encrypted at rest, roles that require one.
  AUTH_MFA_TOTP_ENABLED: boolean.default(false),
  AUTH_MFA_TOTP_ISSUER: oneLine.default('Plinth'),
  AUTH_ENCRYPTION_KEY: hexSecret.optional(),
  AUTH_MFA_REQUIRED_ROLES: z
    .string()
    .transform((value) => [...new Set(value.split(',').map((role) => role.trim()).filter(Boolean))])
    .refine((roles) => roles.every((role) => roleName.safeParse(role).success), { error: 'must be a comma-separated list of role names such as admin' })
    .default([]),
  AUTH_MFA_MAX_ATTEMPTS_PER_TICKET: integer(1, 100).default(5),
  AUTH_RATE_LIMIT_MFA_BURST: integer(1, 1_000_000).default(10),
  AUTH_RATE_LIMIT_MFA_INTERVAL_SECONDS: integer(1, 86_400).default(300),
  AUTH_MFA_SMS_ENABLED: boolean.default(false),
  AUTH_SMS_PROVIDER: z.enum(['twilio'], { error: 'must be twilio' }).optional(),
  AUTH_SMS_GATEWAY_ACCOUNT_SID: nonEmpty.optional(),
  AUTH_SMS_GATEWAY_AUTH_TOKEN: nonEmpty.optional(),
  AUTH_SMS_GATEWAY_MESSAGING_SERVICE_ID: nonEmpty.optional(),
  AUTH_SMS_GATEWAY_API_URL: baseUrl.default('https://api.twilio.com'),
  AUTH_SMS_CODE_TTL_SECONDS: integer(60, 3_600).default(300),
  AUTH_RATE_LIMIT_SMS_BURST: integer(1, 1_000_000).default(5),
  AUTH_RATE_LIMIT_SMS_INTERVAL_SECONDS: integer(1, 86_400).default(3_600),
  AUTH_RATE_LIMIT_SMS_ADDRESS_BURST: integer(1, 1_000_000).default(20),
  // External identity providers: AUTH_PROVIDER_<NAME>_* are read by oauthProvidersFromEnv.
  AUTH_PROVIDER_STATE_TTL_SECONDS: integer(30, 3_600).default(600),
  // Error tracking (spec 2 §2.5, §8).
  ERRORS_INGEST_RATE_LIMIT_PER_MINUTE: integer(1, 100_000_000).default(10_000),
  ERRORS_API_RATE_LIMIT_PER_MINUTE: integer(1, 1_000_000).default(100),
  ERRORS_MAX_EVENT_BYTES: integer(1024, 100 * 1024 * 1024).default(1024 * 1024),
  ERRORS_INGEST_MAX_BATCH: integer(1, 10_000).default(500),
  ERRORS_EVENT_RETENTION_DAYS: integer(1, 3650).default(90),
  ERRORS_MAINTENANCE_INTERVAL_SECONDS: integer(1, 86_400).default(60),
  ERRORS_SPIKE_THRESHOLD: integer(1, 100_000_000).default(500),
  ERRORS_SPIKE_WINDOW_MINUTES: integer(1, 1440).default(5),
  ERRORS_STATUS_PAGE_CACHE_SECONDS: integer(0, 3600).default(5),
  PLINTH_REQUEST_OUTCOMES_FLUSH_MS: integer(10, 600_000).default(5000),

  SMTP_HOST: nonEmpty.optional(),
  SMTP_PORT: integer(1, 65535).default(587),
  SMTP_USER: nonEmpty.optional(),
  // Taken exactly as given: spaces may be part of a password.
  SMTP_PASSWORD: z.string().optional(),
  SMTP_SECURE: z.enum(['starttls', 'tls', 'none'], { error: 'must be starttls, tls or none' }).default('starttls'),
  SMTP_CONNECTION_TIMEOUT_MS: integer(100, 600_000).default(10_000),
  SMTP_GREETING_TIMEOUT_MS: integer(100, 600_000).default(10_000),
  SMTP_SOCKET_TIMEOUT_MS: integer(100, 3_600_000).default(60_000),
  SMTP_POOL_SIZE: integer(1, 100).default(5),
  AUTH_EMAIL_FROM: z
    .string()
    .trim()
    .regex(MAIL_ADDRESS, { error: 'must be an e-mail address such as noreply@example.com' })
    .default('noreply@localhost'),
  AUTH_EMAIL_FROM_NAME: nonEmpty
    .refine((value) => !/[\r\n]/.test(value), { error: 'must be one line' })
    .default('Plinth'),
  AUTH_EMAIL_TEMPLATES_DIR: nonEmpty.default('./email-templates'),
  MAIL_TEMPLATE_CACHE_SIZE: integer(1, 10_000).default(100),
  MAIL_RETRY_LIMIT: integer(0, 1000).default(10),
  MAIL_RETRY_DELAY_SECONDS: integer(1, 86_400).default(30),

  PLINTH_SHUTDOWN_TIMEOUT_MS: integer(0, 600_000).default(10_000),
  PLINTH_IDLE_COLLECTION_MS: integer(0, 3_600_000)
    .refine((value) => value === 0 || value >= 1000, { error: 'must be 0 (off) or at least 1000' })
    // Off by default: the first seconds of a burst after a quiet spell cost more CPU (docs/decisions.md).
    .default(0),
  // On by default: once, when the server first goes quiet, it gives back what start-up used (docs/decisions.md).
  PLINTH_STARTUP_COLLECTION: boolean.default(true),

  LOG_FORMAT: z.enum(['auto', 'pretty', 'json'], { error: 'must be auto, pretty or json' }).default('auto'),
  PLINTH_METRICS: z.enum(['loopback', 'token', 'off'], { error: 'must be loopback, token or off' }).default('loopback'),
  PLINTH_METRICS_TOKEN: z.string().min(16, { error: 'must be at least 16 characters' }).optional(),
  TRUST_PROXY: trustProxy.default(false),
  // Node's own default, which Fastify turns off (0): a request must arrive whole within it (docs/decisions.md).
  HTTP_REQUEST_TIMEOUT_SECONDS: integer(0, 86_400).default(300),
  // Code that walks a request's JSON recursively (its variables' cost, text checks) overflows the stack on deep nesting.
  REQUEST_MAX_JSON_DEPTH: integer(2, 1000).default(64),
  RATE_LIMIT_STORE: z.enum(['memory', 'postgres'], { error: 'must be memory or postgres' }).default('memory'),
  RATE_LIMIT_REGISTRATION_POINTS: integer(1, 1_000_000).default(5),
  RATE_LIMIT_REGISTRATION_DURATION_SECONDS: integer(1, 86_400).default(60),
  // What each limit allows an engine's address for callers it names neither by user nor by address (docs/decisions.md).
  RATE_LIMIT_ENGINE_POINTS: integer(1, 100_000_000).default(1_000),
  RATE_LIMIT_ENGINE_DURATION_SECONDS: integer(1, 86_400).default(60),
  // Quotas per user (else client address) and window on what callers create; the admin role is not limited.
  RATE_LIMIT_UPLOADS_POINTS: integer(1, 1_000_000).default(100),
  RATE_LIMIT_UPLOADS_DURATION_SECONDS: integer(1, 86_400).default(3600),
  RATE_LIMIT_REPORTS_POINTS: integer(1, 1_000_000).default(20),
  RATE_LIMIT_REPORTS_DURATION_SECONDS: integer(1, 86_400).default(3600),
  RATE_LIMIT_CHECKOUTS_POINTS: integer(1, 1_000_000).default(60),
  RATE_LIMIT_CHECKOUTS_DURATION_SECONDS: integer(1, 86_400).default(3600),
  OUTBOUND_HTTP_CONNECT_TIMEOUT_MS: integer(1, 600_000).default(5_000),
  OUTBOUND_HTTP_TIMEOUT_MS: integer(1, 3_600_000).default(30_000),
  OUTBOUND_HTTP_MAX_RESPONSE_BYTES: integer(1, 1024 * 1024 * 1024).default(10 * 1024 * 1024),
  OUTBOUND_HTTP_MAX_CONNECTIONS_PER_ORIGIN: integer(1, 10_000).default(32),
  PLINTH_PROCESS_ROLES: z
    .string()
    .default('api,worker')
    .transform((value) => [...new Set(value.split(',').map((role) => role.trim()).filter(Boolean))])
    .refine((roles) => roles.length > 0 && roles.every((role) => (PROCESS_ROLES as readonly string[]).includes(role)), {
      error: 'must be api, worker or api,worker',
    })
    .transform((roles) => roles as ProcessRole[]),

  JOBS_DEFAULT_CONCURRENCY: QUEUE_SETTINGS.concurrency.schema.default(4),
  JOBS_DEFAULT_RETRY_LIMIT: QUEUE_SETTINGS.retryLimit.schema.default(3),
  JOBS_DEFAULT_RETRY_DELAY_SECONDS: QUEUE_SETTINGS.retryDelaySeconds.schema.default(2),
  JOBS_DEFAULT_RETRY_BACKOFF: QUEUE_SETTINGS.retryBackoff.schema.default(true),
  JOBS_DEFAULT_TIMEOUT_SECONDS: QUEUE_SETTINGS.timeoutSeconds.schema.default(30),
  JOBS_POLL_INTERVAL_SECONDS: integer(1, 3600).default(2),
  JOBS_MAINTENANCE_INTERVAL_SECONDS: integer(1, 3600).default(10),
  JOBS_SHUTDOWN_GRACE_SECONDS: integer(0, 600).default(5),

  EVENTS_CONCURRENCY: integer(1, 10_000).default(100),
  EVENTS_TRIGGER_CONCURRENCY: integer(1, 10_000).default(20),
  EVENTS_LEASE_MARGIN_SECONDS: integer(1, 86_400).default(30),
  EVENTS_POLL_INTERVAL_MS: integer(50, 600_000).default(2000),
  EVENTS_RETRY_SECOND_MS: integer(1, 1000).default(1000),
  EVENTS_CLEANUP_AFTER_HOURS: integer(0, 100_000).default(168),
  EVENTS_CLEANUP_INTERVAL_SECONDS: integer(1, 86_400).default(3600),
  EVENTS_CRON_TIME_ZONE: nonEmpty
    .refine((zone) => Intl.supportedValuesOf('timeZone').includes(zone) || zone === 'UTC', {
      error: 'must be an IANA time zone such as UTC or Europe/Paris',
    })
    .default('UTC'),
  EVENTS_CRON_AHEAD: integer(1, 10_000).default(100),
  EVENTS_MISSED_TOLERANCE_SECONDS: integer(0, 31 * 86_400).default(6 * 3600),
  // A week: longer than Stripe's three days of retries and GitHub's three days of redeliveries.
  EXTERNAL_WEBHOOK_DEDUP_WINDOW_HOURS: integer(1, 8760).default(168),

  PLINTH_PROJECT_NAME: oneLine.default('Plinth'),
  PLINTH_PLUGINS_DIR: nonEmpty.default('plugins'),
  PLINTH_SERVICES_DIR: nonEmpty.default('services'),

  // The action engine (user-declared actions): handler calls and the custom services' limiter.
  ACTIONS_HANDLER_TIMEOUT_SECONDS: integer(1, 3600).default(30),
  ACTIONS_SERVICE_RESTART_MAX_DELAY_MS: integer(100, 600_000).default(30_000),
  RATE_LIMIT_ACTION_HANDLERS_POINTS: integer(1, 1_000_000).default(5),
  RATE_LIMIT_ACTION_HANDLERS_DURATION_SECONDS: integer(1, 86_400).default(60),
  PLINTH_DIST_DIR: nonEmpty.default('.nself/dist'),
  PLINTH_PROXY_CONF_DIR: nonEmpty.default('nginx/conf.d'),
  API_DOCS_ENABLED: boolean.default(true),
  API_DOCS_PATH: urlPath
    .refine((value) => !RESERVED_PATHS.some((reserved) => value === reserved || value.startsWith(`${reserved}/`)), {
      error: `must not be one of the server's own paths (${RESERVED_PATHS.join(', ')})`,
    })
    .default('/docs'),
  API_DOCS_TITLE: oneLine.optional(),
  API_DOCS_THEME: z.enum(API_DOCS_THEMES, { error: `must be one of ${API_DOCS_THEMES.join(', ')}` }).default('default'),
  API_DOCS_AUTH_ENV_VAR: z
    .string()
    .trim()
    .regex(/^[A-Za-z_][A-Za-z0-9_]*$/, { error: 'must be the name of an environment variable, such as DOCS_ANON_JWT' })
    .optional(),
  API_DOCS_GRAPHQL_ENABLED: boolean.default(true),
  API_DOCS_GRAPHQL_ENDPOINT: urlPath.default('/v1/graphql'),
  // Files and reports (uploadAndProcessFile, generateReport, the storage behind them).
  FILES_MAX_BYTES: integer(1, 1024 * 1024 * 1024).default(10 * 1024 * 1024),
  FILES_ALLOWED_TYPES: z
    .string()
    .default(DEFAULT_FILE_TYPES.join(','))
    .transform((value) => [...new Set(value.split(',').map((type) => type.trim().toLowerCase()).filter(Boolean))])
    .refine((types) => types.length > 0 && types.every((type) => MEDIA_TYPE.test(type)), {
      error: 'must be a comma-separated list of media types such as image/png,text/csv',
    }),
  FILES_URL_TTL_SECONDS: integer(10, 7 * 86_400).default(3600),
  STORAGE_DRIVER: z.enum(['postgres', 'local'], { error: 'must be postgres or local' }).default('postgres'),
  STORAGE_LOCAL_DIR: nonEmpty.optional(),
  STORAGE_URL_SIGNING_SECRET: z.string().min(32, { error: 'must be at least 32 characters' }).optional(),
  REPORTS_URL_TTL_SECONDS: integer(10, 7 * 86_400).default(3600),
  API_DOCS_HIDE_ENDPOINTS: z
    .string()
    .transform((value) => value.split(',').map((prefix) => prefix.trim()))
    .refine((prefixes) => prefixes.every((prefix) => /^\/[A-Za-z0-9._~\-/{}:]*$/.test(prefix)), {
      error: 'must be a comma-separated list of path prefixes, each starting with /, such as /admin,/internal',
    })
    // A prefix names a path and everything under it, with or without its trailing slash.
    .transform((prefixes) => prefixes.map((prefix) => (prefix.length > 1 ? prefix.replace(/\/+$/, '') : prefix)))
    .optional(),

  // Payments and the billing provider switch (spec 1 §2.2, spec 3 §2.1).
  PAYMENT_PROVIDER: z.enum(PAYMENT_PROVIDERS, { error: 'must be primary or backup' }).default('primary'),
  BILLING_PROVIDER: z.enum(PAYMENT_PROVIDERS, { error: 'must be primary or backup' }).optional(),
  ADMIN_KEY: z.string().min(16, { error: 'must be at least 16 characters' }).optional(),
  PRIMARY_PROVIDER_API_URL: baseUrl.optional(),
  PRIMARY_PROVIDER_API_KEY: nonEmpty.optional(),
  PRIMARY_PROVIDER_WEBHOOK_SECRET: nonEmpty.optional(),
  BACKUP_PROVIDER_API_URL: baseUrl.default('https://api.lemonsqueezy.com'),
  BACKUP_PROVIDER_API_KEY: nonEmpty.optional(),
  BACKUP_PROVIDER_STORE_ID: nonEmpty.regex(/^\d+$/, { error: 'must be the numeric id of the store' }).optional(),
  BACKUP_PROVIDER_WEBHOOK_SECRET: nonEmpty.optional(),
  PAYMENTS_MAX_AMOUNT: integer(1, 99_999_999).default(99_999_999),
  PAYMENTS_PROVIDER_TIMEOUT_MS: integer(100, 600_000).default(20_000),
  PAYMENTS_PROVIDER_MAX_RETRIES: integer(0, 10).default(1),
  PAYMENTS_WEBHOOK_TOLERANCE_SECONDS: integer(1, 86_400).default(300),
  PAYMENTS_LICENSE_ACTIVATION_LIMIT: integer(1, 1_000_000).default(5),
  BILLING_CHECKOUT_SUCCESS_URL: nonEmpty.refine((value) => URL.canParse(value) && /^https?:/.test(value), { error: 'must be an absolute http(s) URL' }).optional(),
  BILLING_CHECKOUT_CANCEL_URL: nonEmpty.refine((value) => URL.canParse(value) && /^https?:/.test(value), { error: 'must be an absolute http(s) URL' }).optional(),
  // Newsletter (spec 3 §2.3, issue 14) and the HTTP mail-delivery provider of the platform mailer.
  NEWSLETTER_CONFIRM_SECRET: hexSecret.optional(),
  NEWSLETTER_UNSUBSCRIBE_SECRET: hexSecret.optional(),
  NEWSLETTER_CONFIRM_TTL_SECONDS: integer(60, 30 * 86_400).default(48 * 3600),
  NEWSLETTER_CONFIRM_RESEND_LIMIT: integer(0, 100).default(3),
  NEWSLETTER_SUBSCRIBE_RATE_LIMIT_POINTS: integer(1, 1_000_000).default(3),
  NEWSLETTER_SUBSCRIBE_RATE_LIMIT_DURATION_SECONDS: integer(1, 86_400).default(3600),
  NEWSLETTER_DAY_SECONDS: integer(1, 86_400).default(86_400),
  NEWSLETTER_SERIES_DAYS: z
    .string()
    .trim()
    .regex(/^\d{1,3}(\s*,\s*\d{1,3}){3}$/, { error: 'must be four whole numbers of days, such as 3,7,14,21' })
    .transform((value) => value.split(',').map((day) => Number(day.trim())))
    .refine((days) => days.every((day, index) => day > 0 && (index === 0 || day > days[index - 1])), {
      error: 'must be four increasing numbers of days above 0, such as 3,7,14,21',
    })
    .default([3, 7, 14, 21]),
  NEWSLETTER_CLEANUP_AFTER_DAYS: integer(1, 3650).default(7),
  NEWSLETTER_ISSUE_INTERVAL_DAYS: integer(1, 365).default(14),
  NEWSLETTER_ISSUE_SCHEDULE_VARS_FILE: nonEmpty.optional(),
  NEWSLETTER_SCHEDULER_INTERVAL_SECONDS: integer(1, 3600).default(60),
  NEWSLETTER_SEND_BATCH_SIZE: integer(1, 10_000).default(200),
  NEWSLETTER_SEND_CONCURRENCY: integer(1, 1000).default(20),
  // T3-license-alert: days before a license's renewal, and the page its button opens.
  NEWSLETTER_LICENSE_ALERT_DAYS: integer(1, 90).default(7),
  NEWSLETTER_LICENSE_MANAGE_URL: z.url({ protocol: /^https?$/, error: 'must be an http(s) URL' }).optional(),
  EMAIL_DELIVERY_API_KEY: nonEmpty.optional(),
  EMAIL_DELIVERY_API_URL: baseUrl.default('https://api.resend.com'),
  EMAIL_DELIVERY_FROM: z
    .string()
    .trim()
    .regex(MAIL_ADDRESS, { error: 'must be an e-mail address such as news@example.com' })
    .optional(),
  EMAIL_DELIVERY_LIST_ID_NEWSLETTER: z
    .string()
    .trim()
    .regex(/^[A-Za-z0-9_.-]{1,128}$/, { error: 'must be 1 to 128 letters, digits, ".", "_" or "-"' })
    .optional(),
});

/**
 * The secrets Plinth's operator chooses, which must be PRODUCTION_SECRET_LENGTH characters or more
 * in production: whoever holds what one signs (a signed link, a webhook delivery) can guess at it
 * offline. The others are 32 bytes or more everywhere (the JWT keys, STORAGE_URL_SIGNING_SECRET,
 * the 64-hex-digit keys), are EXTERNAL_WEBHOOK_<PROVIDER>_SECRET (checked where they are read, by scheme), or
 * are issued by someone else in their own format (provider API keys, Stripe's whsec_ webhook
 * secret, the SMS gateway's token, identity providers' client secrets, the SMTP password).
 */
const OPERATOR_SECRETS = ['GQL_GRAPHQL_ADMIN_SECRET', 'ADMIN_KEY', 'PLINTH_METRICS_TOKEN', 'BACKUP_PROVIDER_WEBHOOK_SECRET'] as const;
const PRODUCTION_SECRET_LENGTH = 32;

/** Variables whose values are never repeated in a message. */
const SECRET_NAME = /SECRET|TOKEN|PASSWORD|KEY/;

export interface Config {
  env: 'development' | 'production' | 'test';
  host: string;
  port: number;
  logLevel: string;
  /** `auto`: pretty in a terminal in development, JSON otherwise. */
  logFormat: 'auto' | 'pretty' | 'json';
  database: {
    /** Unset: the embedded PostgreSQL under `dataDir` is used. */
    url: string | undefined;
    poolSize: number;
    dataDir: string;
    embeddedPort: number;
  };
  graphql: {
    /** Unset only in development, where start-up generates one (see dev-secrets.ts). */
    adminSecret: string | undefined;
    jwtSecret: JwtSecretConfig | undefined;
    unauthorizedRole: string;
    devMode: boolean;
    introspection: boolean;
    maxDepth: number;
    maxComplexity: number;
    maxTokens: number;
    maxDocumentBytes: number;
    maxAliases: number;
    maxRootFields: number;
    documentCacheBytes: number;
    bodyLimit: number;
    wsInitTimeoutMs: number;
    /** What one user (else one client address) may hold at once on this instance's graphql-ws endpoint. */
    wsLimits: WebSocketLimits;
    corsOrigins: string[] | '*';
    /** Queries and mutations run as graphql-jit compiled them (graphql-js for what it cannot compile). */
    compiledExecution: { enabled: boolean; cacheEntries: number };
    /** graphql-ws subscribers that share document, variables and session share each event's execution and message. */
    subscriptionMultiplexing: boolean;
  };
  /** PLINTH_PUBLIC_URL: where users reach this server; every link Plinth sends is under it or `auth.serverUrl`. */
  publicUrl: string;
  auth: {
    passwordMinLength: number;
    passwordMaxLength: number;
    /** argon2id's cost for new hashes; sign-in rehashes a password whose hash was made at another. */
    passwordHash: PasswordHashSettings;
    /** AUTH_SERVER_URL, the spec's `{auth_url}`. */
    serverUrl: string;
    /** How long an invitation link (bulkCreateUsers with send_invitations) stays valid. */
    invitationTtlSeconds: number;
    /** AUTH_JWT_SECRET; unset: the engine's GQL_GRAPHQL_JWT_SECRET signs (one secret for both sides). */
    jwtSecret: { type?: 'HS256' | 'HS384' | 'HS512'; key: string; claims_namespace?: string } | undefined;
    accessTokenExpiresInSeconds: number;
    refreshTokenExpiresInMinutes: number;
    /** A rotated refresh token presented again within this many seconds is a client's retry, not a theft. */
    refreshTokenReuseGraceSeconds: number;
    /** A change of password or address needs a session signed in this recently (0: any live session). */
    recentSignInSeconds: number;
    emailVerifiedRequired: boolean;
    signupDisabled: boolean;
    hibp: { enabled: boolean; apiUrl: string; timeoutMs: number };
    anonymousUsersEnabled: boolean;
    gravatar: { enabled: boolean; default: string; rating: string };
    /** AUTH_CLIENT_URL: the app; the default redirect target. */
    clientUrl: string;
    /** AUTH_CLIENT_URL and AUTH_ALLOWED_REDIRECT_URLS: where redirectTo may point. */
    allowedRedirectUrls: string[];
    passwordlessEmailEnabled: boolean;
    defaultRole: string;
    allowedRoles: string[];
    customClaimsWebhook: { url: string; timeoutMs: number } | undefined;
    /** AUTH_PORT: the auth routes also listen here, on 127.0.0.1 (spec 2 §1.4). */
    port: number | undefined;
    /** Lifetime of each kind of single-use ticket, in seconds. */
    ticketTtlSeconds: { verifyEmail: number; passwordReset: number; emailChange: number; passwordless: number; mfa: number };
    /** How often each process deletes expired refresh tokens and tickets. */
    cleanupIntervalSeconds: number;
    rateLimits: Record<'global' | 'bruteForce' | 'signups' | 'email' | 'mfa' | 'sms' | 'smsAddress', { points: number; durationSeconds: number }>;
    mfa: MfaSettings;
    /** AUTH_PROVIDER_<NAME>_*: the enabled external identity providers. */
    providers: Partial<Record<OAuthProviderName, OAuthProviderSettings>>;
    /** How long a sign-in with a provider may take between leaving and coming back. */
    providerStateTtlSeconds: number;
  };
  actions: {
    /** The most users one bulkCreateUsers call may create; a larger batch creates none. */
    bulkCreateMaxUsers: number;
  };
  /** Error tracking (spec 2 §2.5, §8). */
  errors: ErrorTrackingConfig;
  /** How often the counts of served requests (SLO good and bad events) are written. */
  requestOutcomesFlushMs: number;
  mail: {
    /** Unset without SMTP_HOST: mail is written to .eml files outside production, refused in it. */
    smtp: SmtpSettings | undefined;
    from: { address: string; name: string };
    /** Templates here replace the built-in ones of the same name. */
    templatesDir: string;
    templateCacheSize: number;
    retryLimit: number;
    retryDelaySeconds: number;
    /** EMAIL_DELIVERY_API_KEY set: mail goes to an HTTP delivery API with Resend's shape instead of SMTP. */
    api: { url: string; key: string } | undefined;
  };
  /** uploadAndProcessFile and generateReport. */
  files: {
    /** FILES_MAX_BYTES: the largest file one upload may carry (decoded). */
    maxBytes: number;
    /**
     * The body limit of a request carrying an upload (the GraphQL mutation or its action route):
     * the file in base64 plus room for the rest of the request. Every other request keeps
     * GQL_GRAPHQL_BODY_LIMIT.
     */
    uploadBodyLimit: number;
    /** FILES_ALLOWED_TYPES: the media types an upload may declare, lower-case. */
    allowedTypes: string[];
    /** How long a signed file link works. */
    urlTtlSeconds: number;
    /** How long a signed report result link works. */
    reportUrlTtlSeconds: number;
  };
  storage: {
    /** postgres: in the database, so every instance serves every file; local: a folder of this machine. */
    driver: 'postgres' | 'local';
    localDir: string;
    /** Key of signed links: STORAGE_URL_SIGNING_SECRET (required in production); unset outside production, one is derived from the admin secret. */
    signingSecret: string | undefined;
  };
  /** `CS_<N>` declarations; `actionsRoute` is the route of the built-in one (template `plinth`). */
  customServices: CustomService[];
  actionsRoute: string;
  shutdownTimeoutMs: number;
  /** How often the process checks whether it went quiet, to give memory back then (platform/idle-collection.ts); 0: never. */
  idleCollectionMs: number;
  /** PLINTH_STARTUP_COLLECTION: the full collections of the first quiet spell after start-up, when idleCollectionMs is 0. */
  startUpCollection: boolean;
  metrics: MetricsAccess;
  /** TRUST_PROXY, for Fastify's trustProxy and the WebSocket upgrade (platform/client-address.ts). */
  trustProxy: TrustProxy;
  /** HTTP_REQUEST_TIMEOUT_SECONDS in milliseconds: the time a caller has to send a whole request, headers and body (0: no bound). */
  requestTimeoutMs: number;
  /** REQUEST_MAX_JSON_DEPTH: how deep objects and arrays may nest in a REST body or GraphQL variables (HTTP and WebSocket). */
  requestMaxJsonDepth: number;
  rateLimit: {
    /** memory: each process counts alone; postgres: processes on one database share the counts. */
    store: 'memory' | 'postgres';
    registration: { points: number; durationSeconds: number };
    /**
     * RATE_LIMIT_ENGINE_*: each limit's count of an engine's address, for the calls it makes with
     * the admin secret naming neither the user (X-Gql-User-Id) nor the user's address (X-Gql-Client-Address).
     */
    engine: { points: number; durationSeconds: number };
    /** Quotas per user (else client address) and window: uploadAndProcessFile, generateReport, checkouts and processPayment. */
    uploads: { points: number; durationSeconds: number };
    reports: { points: number; durationSeconds: number };
    checkouts: { points: number; durationSeconds: number };
  };
  outboundHttp: {
    connectTimeoutMs: number;
    timeoutMs: number;
    maxResponseBytes: number;
    maxConnectionsPerOrigin: number;
  };
  /** `api` serves requests, `worker` runs the job workers; a process may be both. */
  processRoles: ProcessRole[];
  jobs: JobsConfig;
  /** Event triggers, scheduled events and inbound webhooks (the events module). */
  events: EventsConfig;
  /** PLINTH_PROJECT_NAME: names the project in the API reference. */
  projectName: string;
  /** PLINTH_PLUGINS_DIR: one folder per installed plugin, each with its plugin.json. */
  pluginsDir: string;
  /** PLINTH_SERVICES_DIR: one folder per custom service (CS_<N>), named as the service. */
  servicesDir: string;
  /** The action engine: calls to user-declared actions' handlers, and the custom services `plinth start` runs. */
  actionEngine: {
    /** Seconds a handler may take when its action sets no timeout. */
    handlerTimeoutSeconds: number;
    /** The longest wait before a crashed custom service is started again (the delay doubles from 250 ms). */
    serviceRestartMaxDelayMs: number;
    /** Spec 1 §8's reference limiter, for Plinth's own handler routes and the scaffolded services: per user. */
    handlerRateLimit: { points: number; durationSeconds: number };
  };
  /** What `plinth build` writes: the API reference files and the proxy's serving block. */
  build: {
    /** PLINTH_DIST_DIR: openapi.json and scalar.html, served by the proxy and by `plinth start`. */
    distDir: string;
    /** PLINTH_PROXY_CONF_DIR: the proxy's hand-managed configuration folder, where api-docs.conf goes. */
    proxyConfDir: string;
  };
  /** The API reference (spec 1 §2.7). */
  /** Payments, the provider switch and its webhooks (spec 1 §2.2, spec 3 §2.1). */
  payments: PaymentsConfig;
  apiDocs: {
    /** false: no /api-docs, no page, no GraphiQL, no serving block. */
    enabled: boolean;
    /** Path of the reference page. */
    path: string;
    title: string;
    theme: ApiDocsTheme;
    /** The value of the variable API_DOCS_AUTH_ENV_VAR names (a JWT), pre-filled as the bearer token. */
    bearerToken: string | undefined;
    /** Whether the spec documents GraphQL, and at which path. */
    graphql: { enabled: boolean; endpoint: string };
    /** API_DOCS_HIDE_ENDPOINTS: paths equal to or under one of these prefixes are left out of the spec. */
    hiddenPrefixes: string[];
  };
  /** The newsletter (spec 3 §1.2, §2.2–2.4): double opt-in, the welcome series, the bi-weekly issue. */
  newsletter: NewsletterConfig;
}

export interface WebSocketLimits {
  connectionsPerUser: number;
  subscriptionsPerConnection: number;
  subscriptionsPerUser: number;
}

export interface NewsletterConfig {
  /** Outside production start-up generates missing ones (dev-secrets.ts); in production the newsletter is off without them. */
  confirmSecret: string | undefined;
  unsubscribeSecret: string | undefined;
  /** How long a confirmation link is valid (48 hours). */
  confirmTtlSeconds: number;
  /** Fresh confirmation links one pending address may be sent before subscribing again stays silent. */
  confirmResendLimit: number;
  /** Subscribe attempts per client address and window. */
  subscribeRateLimit: { points: number; durationSeconds: number };
  /** The length of a day in the newsletter's schedules (series, clean-up, cadence); tests shorten it. */
  daySeconds: number;
  /** Days after confirmation of W2, W3, W4 and W5. */
  seriesDays: number[];
  /** Unverified rows whose link expired are deleted once they are this many days old. */
  cleanupAfterDays: number;
  /** Days between two scheduled issues. */
  issueIntervalDays: number;
  /** Set: the next issue is sent every issueIntervalDays with the variables of this file. Unset: no schedule. */
  issueScheduleVarsFile: string | undefined;
  /** How often a worker looks for scheduled work that is due (clean-up, the issue schedule). */
  schedulerIntervalSeconds: number;
  /** Recipients one issue-send job claims at once, and how many of them are sent at once. */
  sendBatchSize: number;
  sendConcurrency: number;
  /** EMAIL_DELIVERY_FROM: the sender of newsletter mail (default AUTH_EMAIL_FROM). */
  from: { address: string; name: string };
  /** EMAIL_DELIVERY_LIST_ID_NEWSLETTER: the list at the delivery service, named in each newsletter mail. */
  listId: string | undefined;
  /** T3-license-alert goes this many (newsletter) days before a license renews. */
  licenseAlertDays: number;
  /** The button of T3: where a license holder manages it (default PLINTH_PUBLIC_URL/account/licenses). */
  licenseManageUrl: string;
}

export interface PaymentsConfig {
  /** PAYMENT_PROVIDER: the selection stored when none is stored yet; the stored one wins after. */
  initialProvider: PaymentProviderName;
  /** BILLING_PROVIDER: an alias shown in health output only. */
  billingProviderAlias: PaymentProviderName | undefined;
  /** ADMIN_KEY (X-Admin-Key of /admin/payment-provider); unset: those endpoints refuse every key. */
  adminKey: string | undefined;
  /** The largest amount processPayment takes, in minor units. */
  maxAmount: number;
  /** One provider call, whole; and how often a call lost on the network is retried (same idempotency key). */
  providerTimeoutMs: number;
  providerMaxRetries: number;
  /** How old a primary webhook's signed timestamp may be (replays). */
  webhookToleranceSeconds: number;
  /** Instances one license may be activated on. */
  licenseActivationLimit: number;
  /** Where the hosted checkout sends the customer back. */
  checkoutSuccessUrl: string;
  checkoutCancelUrl: string;
  primary: {
    /** PRIMARY_PROVIDER_API_URL; unset: the provider's public address (the SDK's default). */
    apiUrl: string | undefined;
    apiKey: string | undefined;
    webhookSecret: string | undefined;
    /** Price id by product (lower case). */
    priceIds: Record<string, string>;
  };
  backup: {
    apiUrl: string;
    apiKey: string | undefined;
    storeId: string | undefined;
    webhookSecret: string | undefined;
    /** Variant id by product (lower case). */
    variantIds: Record<string, string>;
  };
}

export interface ErrorTrackingConfig {
  /** Events one DSN key may send per minute (ERRORS_INGEST_RATE_LIMIT_PER_MINUTE). */
  ingestPerMinute: number;
  /** Management calls (REST and /api/graphql) one secret key may make per minute. */
  apiPerMinute: number;
  /** The largest ingestion body, as received and once decompressed. */
  maxEventBytes: number;
  /** The most events written in one transaction. */
  ingestMaxBatch: number;
  /** Events received longer ago than this are removed; errors keep their counts. */
  eventRetentionDays: number;
  /** How often alerts (SLO burn rates, error spikes) are evaluated and old events removed. */
  maintenanceIntervalSeconds: number;
  /** A project receiving this many events within the spike window opens an incident. */
  spikeThreshold: number;
  spikeWindowMinutes: number;
  /** How long a status page answer is reused. */
  statusPageCacheSeconds: number;
}

/** Second factors of the auth service. */
export interface MfaSettings {
  /** AUTH_MFA_TOTP_ENABLED: users may enrol an authenticator app. */
  totpEnabled: boolean;
  /** AUTH_MFA_TOTP_ISSUER: the name the authenticator app shows. */
  totpIssuer: string;
  /** AUTH_ENCRYPTION_KEY (64 hex digits): encrypts TOTP secrets at rest. Generated under the data folder outside production. */
  encryptionKey: string | undefined;
  /** AUTH_MFA_REQUIRED_ROLES: roles a session carries only once the user has a second factor on. */
  requiredRoles: string[];
  /** Wrong codes one sign-in ticket (or one SMS code) allows before it is void. */
  maxAttemptsPerTicket: number;
  /** AUTH_MFA_SMS_ENABLED: codes by SMS through the gateway (set whenever SMS is on). */
  sms: { enabled: boolean; gateway: SmsGatewaySettings | undefined; codeTtlSeconds: number };
}

/** AUTH_SMS_PROVIDER=twilio: its Messages API. */
export interface SmsGatewaySettings {
  provider: 'twilio';
  accountSid: string;
  authToken: string;
  messagingServiceId: string;
  apiUrl: string;
}

export interface SmtpSettings {
  host: string;
  port: number;
  /** Both or neither. */
  user: string | undefined;
  password: string | undefined;
  /** starttls: plain connection upgraded, refused when the server cannot; tls: TLS from the start; none: no encryption. */
  secure: 'starttls' | 'tls' | 'none';
  connectionTimeoutMs: number;
  greetingTimeoutMs: number;
  socketTimeoutMs: number;
  poolSize: number;
}

export interface JobsConfig {
  /** JOBS_DEFAULT_<SETTING>: what a queue gets unless its module or JOBS_<QUEUE>_<SETTING> says otherwise. */
  defaults: QueueSettings;
  /** JOBS_<QUEUE>_<SETTING>, by the queue's variable name (queueVariableName); these win over the module's. */
  queues: Record<string, Partial<QueueSettings>>;
  /** How often an idle worker looks for due jobs (retries, delayed jobs) it was not woken for. */
  pollIntervalSeconds: number;
  /** How often expired jobs (a crashed or stuck worker's) are failed and so retried. */
  maintenanceIntervalSeconds: number;
  /** At shutdown, how long running jobs may finish before they are released to other workers. */
  shutdownGraceSeconds: number;
}

export interface EventsConfig {
  /** Deliveries in flight in one process, all triggers together. */
  concurrency: number;
  /** Deliveries in flight in one process for one trigger (or cron trigger), so a slow webhook cannot take every slot. */
  triggerConcurrency: number;
  /** A claimed event whose process died is taken over this long after its webhook timeout. */
  leaseMarginSeconds: number;
  /** How often due retries and abandoned events are looked for besides the NOTIFY wake-ups. */
  pollIntervalMs: number;
  /** The length of one second of `interval_sec` and Retry-After (1000; tests shorten it). */
  retrySecondMs: number;
  /** Delivered and dead events (and their invocation logs) older than this are deleted; 0 keeps them. */
  cleanupAfterHours: number;
  cleanupIntervalSeconds: number;
  /** The time zone cron schedules are read in. */
  cronTimeZone: string;
  /** How many upcoming events of each cron trigger are kept generated. */
  cronAhead: number;
  /** A scheduled event more than this late (after downtime) is marked dead instead of fired. */
  missedToleranceSeconds: number;
  /** EXTERNAL_WEBHOOK_<PROVIDER>_*: the providers whose signed webhooks are received. */
  externalProviders: Record<string, ExternalProvider>;
  /** A delivery seen (by its provider's delivery id or its exact body) within this many hours is a duplicate. */
  externalDedupWindowHours: number;
}

/**
 * How a provider signs its webhooks: `hmac-sha256` is the hex HMAC of the body in a configurable
 * header (GitHub's `X-Hub-Signature-256`); the others are the providers' documented schemes, the
 * timestamped ones (stripe, slack, standard-webhooks) checked against a tolerance.
 */
export const EXTERNAL_WEBHOOK_SCHEMES = ['hmac-sha256', 'stripe', 'slack', 'shopify', 'standard-webhooks'] as const;
export type ExternalWebhookScheme = (typeof EXTERNAL_WEBHOOK_SCHEMES)[number];
/** The schemes whose signature covers a timestamp. */
export const TIMESTAMPED_SCHEMES: readonly ExternalWebhookScheme[] = ['stripe', 'slack', 'standard-webhooks'];

export interface ExternalProvider {
  scheme: ExternalWebhookScheme;
  /** The signing secret (standard-webhooks: the key's bytes, decoded from `whsec_<base64>`). */
  secret: string | Buffer;
  /** hmac-sha256: the header carrying the signature (x-hub-signature-256 by default). */
  signatureHeader: string;
  /** hmac-sha256: what comes before the hex digest in that header (sha256= by default). */
  signaturePrefix: string;
  /** hmac-sha256: the header carrying the provider's delivery id (none unless set; x-github-delivery for github). */
  deliveryHeader: string | undefined;
  /** Timestamped schemes: how far the signed timestamp may be from now, in seconds. */
  toleranceSeconds: number;
}

export class ConfigError extends Error {
  constructor(readonly problems: string[]) {
    super(`Invalid configuration:\n${problems.map((problem) => `  - ${problem}`).join('\n')}`);
    this.name = 'ConfigError';
  }
}

/** Reads and validates the configuration; throws ConfigError naming every bad variable. */
export function loadConfig(env: NodeJS.ProcessEnv = process.env): Config {
  // Empty strings count as unset, as in most .env tooling.
  const present = Object.fromEntries(Object.entries(env).filter(([, value]) => value !== ''));
  const parsed = environmentSchema.safeParse(present);
  const problems: string[] = [];
  if (!parsed.success) {
    for (const issue of parsed.error.issues) {
      const variable = String(issue.path[0]);
      const shown = SECRET_NAME.test(variable) ? '' : ` (got ${JSON.stringify(present[variable] ?? '')})`;
      problems.push(`${issue.path.join('.')} ${issue.message}${shown}`);
    }
  }
  const services = customServicesFromEnv(present);
  problems.push(...services.problems);
  const queues = queueSettingsFromEnv(present, problems);
  const products = productIdsFromEnv(present, problems);
  const externalProviders = externalProvidersFromEnv(present, problems, present.NODE_ENV === 'production' ? PRODUCTION_SECRET_LENGTH : 8);
  const oauthProviders = oauthProvidersFromEnv(present, problems);
  if (!parsed.success || problems.length > 0) throw new ConfigError(problems);

  const values = parsed.data;
  if (values.NODE_ENV === 'production') {
    if (!values.GQL_GRAPHQL_ADMIN_SECRET) problems.push('GQL_GRAPHQL_ADMIN_SECRET is required when NODE_ENV=production');
    if (!values.GQL_GRAPHQL_JWT_SECRET) problems.push('GQL_GRAPHQL_JWT_SECRET is required when NODE_ENV=production');
    if (!values.STORAGE_URL_SIGNING_SECRET) {
      problems.push('STORAGE_URL_SIGNING_SECRET is required when NODE_ENV=production (the key of signed file and report links)');
    }
    for (const variable of OPERATOR_SECRETS) {
      const value = values[variable];
      // The value is a secret: the message names the variable only.
      if (value !== undefined && value.length < PRODUCTION_SECRET_LENGTH) {
        problems.push(`${variable} must be at least ${PRODUCTION_SECRET_LENGTH} characters when NODE_ENV=production (openssl rand -hex 32 makes one)`);
      }
    }
  }
  if (values.PLINTH_METRICS === 'token' && !values.PLINTH_METRICS_TOKEN) {
    problems.push('PLINTH_METRICS_TOKEN is required when PLINTH_METRICS=token');
  }
  if (values.AUTH_PASSWORD_MAX_LENGTH < values.AUTH_PASSWORD_MIN_LENGTH) {
    problems.push('AUTH_PASSWORD_MAX_LENGTH must not be below AUTH_PASSWORD_MIN_LENGTH');
  }
  const minimumHashMemory = owaspMinimumMemoryKib(values.AUTH_PASSWORD_HASH_ITERATIONS);
  if (values.AUTH_PASSWORD_HASH_MEMORY_KIB < minimumHashMemory) {
    problems.push(
      `AUTH_PASSWORD_HASH_MEMORY_KIB must be at least ${minimumHashMemory} with AUTH_PASSWORD_HASH_ITERATIONS=${values.AUTH_PASSWORD_HASH_ITERATIONS} (OWASP's minimum for argon2id)`,
    );
  }
  if (
    values.AUTH_ACCESS_TOKEN_EXPIRES_IN !== undefined &&
    values.AUTH_TOKEN_EXPIRY_SECONDS !== undefined &&
    values.AUTH_ACCESS_TOKEN_EXPIRES_IN !== values.AUTH_TOKEN_EXPIRY_SECONDS
  ) {
    problems.push('AUTH_ACCESS_TOKEN_EXPIRES_IN and AUTH_TOKEN_EXPIRY_SECONDS (its alias) must not differ; set one');
  }
  // A sign-up may ask for any role of the list, and admin passes every permission check.
  if (values.AUTH_ALLOWED_ROLES.includes(ADMIN_ROLE)) {
    problems.push(`AUTH_ALLOWED_ROLES must not contain ${ADMIN_ROLE}: any sign-up could ask for it; grant it with plinth auth user role add`);
  }
  if (!values.AUTH_ALLOWED_ROLES.includes(values.AUTH_DEFAULT_ROLE)) {
    problems.push(`AUTH_DEFAULT_ROLE (${values.AUTH_DEFAULT_ROLE}) must be one of AUTH_ALLOWED_ROLES`);
  }
  if (values.NODE_ENV === 'production' && values.AUTH_MFA_TOTP_ENABLED && !values.AUTH_ENCRYPTION_KEY) {
    problems.push('AUTH_ENCRYPTION_KEY is required when AUTH_MFA_TOTP_ENABLED=true and NODE_ENV=production (it encrypts the TOTP secrets)');
  }
  if (values.AUTH_MFA_REQUIRED_ROLES.length > 0 && !values.AUTH_MFA_TOTP_ENABLED && !values.AUTH_MFA_SMS_ENABLED) {
    problems.push('AUTH_MFA_REQUIRED_ROLES needs a second factor users can enrol: set AUTH_MFA_TOTP_ENABLED=true');
  }
  if (values.AUTH_MFA_SMS_ENABLED) {
    if (!values.AUTH_SMS_PROVIDER) problems.push('AUTH_SMS_PROVIDER is required when AUTH_MFA_SMS_ENABLED=true (twilio)');
    for (const variable of ['AUTH_SMS_GATEWAY_ACCOUNT_SID', 'AUTH_SMS_GATEWAY_AUTH_TOKEN', 'AUTH_SMS_GATEWAY_MESSAGING_SERVICE_ID'] as const) {
      if (!values[variable]) problems.push(`${variable} is required when AUTH_MFA_SMS_ENABLED=true`);
    }
  }
  if ((values.SMTP_USER === undefined) !== (values.SMTP_PASSWORD === undefined)) {
    problems.push('SMTP_USER and SMTP_PASSWORD must be set together');
  }
  if (values.JOBS_SHUTDOWN_GRACE_SECONDS * 1000 >= values.PLINTH_SHUTDOWN_TIMEOUT_MS) {
    problems.push('JOBS_SHUTDOWN_GRACE_SECONDS must be below PLINTH_SHUTDOWN_TIMEOUT_MS (which bounds the whole shutdown)');
  }
  const tokenVariable = values.API_DOCS_AUTH_ENV_VAR;
  const bearerToken = tokenVariable === undefined ? undefined : present[tokenVariable]?.trim();
  if (tokenVariable !== undefined && !bearerToken) {
    problems.push(`API_DOCS_AUTH_ENV_VAR names ${tokenVariable}, which is not set`);
  } else if (tokenVariable !== undefined && !/^[\w-]+\.[\w-]+\.[\w-]*$/.test(bearerToken!)) {
    // The value is a credential: the message names the variable only.
    problems.push(`${tokenVariable} (named by API_DOCS_AUTH_ENV_VAR) must be a JWT`);
  }
  if (problems.length > 0) throw new ConfigError(problems);

  const publicUrl = values.PLINTH_PUBLIC_URL ?? `http://localhost:${values.PORT}`;
  const builtIn = services.services.find((service) => service.template === 'plinth');
  return {
    env: values.NODE_ENV,
    host: values.HOST,
    port: values.PORT,
    logLevel: values.LOG_LEVEL,
    logFormat: values.LOG_FORMAT,
    database: {
      url: values.DATABASE_URL,
      poolSize: values.DATABASE_POOL_SIZE,
      dataDir: path.resolve(values.PLINTH_DATA_DIR),
      embeddedPort: values.PLINTH_EMBEDDED_PG_PORT,
    },
    graphql: {
      adminSecret: values.GQL_GRAPHQL_ADMIN_SECRET,
      jwtSecret: values.GQL_GRAPHQL_JWT_SECRET,
      unauthorizedRole: values.GQL_GRAPHQL_UNAUTHORIZED_ROLE,
      devMode: values.GQL_GRAPHQL_DEV_MODE,
      introspection: values.GQL_GRAPHQL_INTROSPECTION,
      maxDepth: values.GQL_GRAPHQL_MAX_DEPTH,
      maxComplexity: values.GQL_GRAPHQL_MAX_COMPLEXITY,
      maxTokens: values.GQL_GRAPHQL_MAX_TOKENS,
      maxDocumentBytes: values.GQL_GRAPHQL_MAX_DOCUMENT_BYTES,
      maxAliases: values.GQL_GRAPHQL_MAX_ALIASES,
      maxRootFields: values.GQL_GRAPHQL_MAX_ROOT_FIELDS,
      documentCacheBytes: values.GQL_GRAPHQL_DOCUMENT_CACHE_BYTES,
      bodyLimit: values.GQL_GRAPHQL_BODY_LIMIT,
      wsInitTimeoutMs: values.GQL_GRAPHQL_WS_INIT_TIMEOUT_MS,
      wsLimits: {
        connectionsPerUser: values.GQL_GRAPHQL_WS_MAX_CONNECTIONS_PER_USER,
        subscriptionsPerConnection: values.GQL_GRAPHQL_WS_MAX_SUBSCRIPTIONS_PER_CONNECTION,
        subscriptionsPerUser: values.GQL_GRAPHQL_WS_MAX_SUBSCRIPTIONS_PER_USER,
      },
      corsOrigins: values.GQL_GRAPHQL_CORS_DOMAIN,
      compiledExecution: { enabled: values.GQL_GRAPHQL_COMPILED_EXECUTION, cacheEntries: values.GQL_GRAPHQL_COMPILED_CACHE_ENTRIES },
      subscriptionMultiplexing: values.GQL_GRAPHQL_SUBSCRIPTION_MULTIPLEXING,
    },
    publicUrl,
    auth: {
      passwordMinLength: values.AUTH_PASSWORD_MIN_LENGTH,
      passwordMaxLength: values.AUTH_PASSWORD_MAX_LENGTH,
      passwordHash: {
        memoryKib: values.AUTH_PASSWORD_HASH_MEMORY_KIB,
        iterations: values.AUTH_PASSWORD_HASH_ITERATIONS,
        parallelism: values.AUTH_PASSWORD_HASH_PARALLELISM,
      },
      serverUrl: values.AUTH_SERVER_URL ?? `${publicUrl}/auth`,
      invitationTtlSeconds: values.AUTH_INVITATION_TTL_SECONDS,
      jwtSecret: values.AUTH_JWT_SECRET,
      accessTokenExpiresInSeconds: values.AUTH_ACCESS_TOKEN_EXPIRES_IN ?? values.AUTH_TOKEN_EXPIRY_SECONDS ?? 900,
      refreshTokenExpiresInMinutes: values.AUTH_REFRESH_TOKEN_EXPIRES_IN,
      refreshTokenReuseGraceSeconds: values.AUTH_REFRESH_TOKEN_REUSE_GRACE_SECONDS,
      recentSignInSeconds: values.AUTH_RECENT_SIGN_IN_SECONDS,
      emailVerifiedRequired: values.AUTH_EMAIL_SIGNIN_EMAIL_VERIFIED_REQUIRED,
      signupDisabled: values.AUTH_DISABLE_SIGNUP,
      hibp: { enabled: values.AUTH_PASSWORD_HIBP_ENABLED, apiUrl: values.AUTH_PASSWORD_HIBP_API_URL, timeoutMs: values.AUTH_PASSWORD_HIBP_TIMEOUT_MS },
      anonymousUsersEnabled: values.AUTH_ANONYMOUS_USERS_ENABLED,
      gravatar: { enabled: values.AUTH_GRAVATAR_ENABLED, default: values.AUTH_GRAVATAR_DEFAULT, rating: values.AUTH_GRAVATAR_RATING },
      clientUrl: values.AUTH_CLIENT_URL ?? publicUrl,
      allowedRedirectUrls: [values.AUTH_CLIENT_URL ?? publicUrl, ...(values.AUTH_ALLOWED_REDIRECT_URLS ?? [])],
      passwordlessEmailEnabled: values.AUTH_EMAIL_PASSWORDLESS_EMAIL_ENABLED,
      defaultRole: values.AUTH_DEFAULT_ROLE,
      allowedRoles: values.AUTH_ALLOWED_ROLES,
      customClaimsWebhook: values.AUTH_CUSTOM_CLAIMS_WEBHOOK
        ? { url: values.AUTH_CUSTOM_CLAIMS_WEBHOOK, timeoutMs: values.AUTH_CUSTOM_CLAIMS_WEBHOOK_TIMEOUT_MS }
        : undefined,
      port: values.AUTH_PORT,
      ticketTtlSeconds: {
        verifyEmail: values.AUTH_TICKET_VERIFY_EMAIL_TTL_SECONDS,
        passwordReset: values.AUTH_TICKET_PASSWORD_RESET_TTL_SECONDS,
        emailChange: values.AUTH_TICKET_EMAIL_CHANGE_TTL_SECONDS,
        passwordless: values.AUTH_TICKET_PASSWORDLESS_TTL_SECONDS,
        mfa: values.AUTH_TICKET_MFA_TTL_SECONDS,
      },
      cleanupIntervalSeconds: values.AUTH_CLEANUP_INTERVAL_SECONDS,
      rateLimits: {
        global: { points: values.AUTH_RATE_LIMIT_GLOBAL_BURST, durationSeconds: values.AUTH_RATE_LIMIT_GLOBAL_INTERVAL_SECONDS },
        bruteForce: { points: values.AUTH_RATE_LIMIT_BRUTE_FORCE_BURST, durationSeconds: values.AUTH_RATE_LIMIT_BRUTE_FORCE_INTERVAL_SECONDS },
        signups: { points: values.AUTH_RATE_LIMIT_SIGNUPS_BURST, durationSeconds: values.AUTH_RATE_LIMIT_SIGNUPS_INTERVAL_SECONDS },
        email: { points: values.AUTH_RATE_LIMIT_EMAIL_BURST, durationSeconds: values.AUTH_RATE_LIMIT_EMAIL_INTERVAL_SECONDS },
        mfa: { points: values.AUTH_RATE_LIMIT_MFA_BURST, durationSeconds: values.AUTH_RATE_LIMIT_MFA_INTERVAL_SECONDS },
        sms: { points: values.AUTH_RATE_LIMIT_SMS_BURST, durationSeconds: values.AUTH_RATE_LIMIT_SMS_INTERVAL_SECONDS },
        smsAddress: { points: values.AUTH_RATE_LIMIT_SMS_ADDRESS_BURST, durationSeconds: values.AUTH_RATE_LIMIT_SMS_INTERVAL_SECONDS },
      },
      mfa: {
        totpEnabled: values.AUTH_MFA_TOTP_ENABLED,
        totpIssuer: values.AUTH_MFA_TOTP_ISSUER,
        encryptionKey: values.AUTH_ENCRYPTION_KEY?.toLowerCase(),
        requiredRoles: values.AUTH_MFA_REQUIRED_ROLES,
        maxAttemptsPerTicket: values.AUTH_MFA_MAX_ATTEMPTS_PER_TICKET,
        sms: {
          enabled: values.AUTH_MFA_SMS_ENABLED,
          gateway:
            values.AUTH_SMS_PROVIDER && values.AUTH_SMS_GATEWAY_ACCOUNT_SID && values.AUTH_SMS_GATEWAY_AUTH_TOKEN && values.AUTH_SMS_GATEWAY_MESSAGING_SERVICE_ID
              ? {
                  provider: values.AUTH_SMS_PROVIDER,
                  accountSid: values.AUTH_SMS_GATEWAY_ACCOUNT_SID,
                  authToken: values.AUTH_SMS_GATEWAY_AUTH_TOKEN,
                  messagingServiceId: values.AUTH_SMS_GATEWAY_MESSAGING_SERVICE_ID,
                  apiUrl: values.AUTH_SMS_GATEWAY_API_URL,
                }
              : undefined,
          codeTtlSeconds: values.AUTH_SMS_CODE_TTL_SECONDS,
        },
      },
      providers: oauthProviders,
      providerStateTtlSeconds: values.AUTH_PROVIDER_STATE_TTL_SECONDS,
    },
    actions: { bulkCreateMaxUsers: values.ACTIONS_BULK_CREATE_MAX_USERS },
    errors: {
      ingestPerMinute: values.ERRORS_INGEST_RATE_LIMIT_PER_MINUTE,
      apiPerMinute: values.ERRORS_API_RATE_LIMIT_PER_MINUTE,
      maxEventBytes: values.ERRORS_MAX_EVENT_BYTES,
      ingestMaxBatch: values.ERRORS_INGEST_MAX_BATCH,
      eventRetentionDays: values.ERRORS_EVENT_RETENTION_DAYS,
      maintenanceIntervalSeconds: values.ERRORS_MAINTENANCE_INTERVAL_SECONDS,
      spikeThreshold: values.ERRORS_SPIKE_THRESHOLD,
      spikeWindowMinutes: values.ERRORS_SPIKE_WINDOW_MINUTES,
      statusPageCacheSeconds: values.ERRORS_STATUS_PAGE_CACHE_SECONDS,
    },
    requestOutcomesFlushMs: values.PLINTH_REQUEST_OUTCOMES_FLUSH_MS,
    mail: {
      smtp: values.SMTP_HOST
        ? {
            host: values.SMTP_HOST,
            port: values.SMTP_PORT,
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
      api: values.EMAIL_DELIVERY_API_KEY ? { url: values.EMAIL_DELIVERY_API_URL, key: values.EMAIL_DELIVERY_API_KEY } : undefined,
    },
    files: {
      maxBytes: values.FILES_MAX_BYTES,
      uploadBodyLimit: 4 * Math.ceil(values.FILES_MAX_BYTES / 3) + UPLOAD_ENVELOPE_BYTES,
      allowedTypes: values.FILES_ALLOWED_TYPES,
      urlTtlSeconds: values.FILES_URL_TTL_SECONDS,
      reportUrlTtlSeconds: values.REPORTS_URL_TTL_SECONDS,
    },
    storage: {
      driver: values.STORAGE_DRIVER,
      localDir: path.resolve(values.STORAGE_LOCAL_DIR ?? path.join(values.PLINTH_DATA_DIR, 'storage')),
      signingSecret: values.STORAGE_URL_SIGNING_SECRET,
    },
    customServices: services.services,
    actionsRoute: builtIn?.route ?? '/actions',
    shutdownTimeoutMs: values.PLINTH_SHUTDOWN_TIMEOUT_MS,
    idleCollectionMs: values.PLINTH_IDLE_COLLECTION_MS,
    startUpCollection: values.PLINTH_STARTUP_COLLECTION,
    metrics:
      values.PLINTH_METRICS === 'token' ? { mode: 'token', token: values.PLINTH_METRICS_TOKEN! } : { mode: values.PLINTH_METRICS },
    trustProxy: values.TRUST_PROXY,
    requestTimeoutMs: values.HTTP_REQUEST_TIMEOUT_SECONDS * 1000,
    requestMaxJsonDepth: values.REQUEST_MAX_JSON_DEPTH,
    rateLimit: {
      store: values.RATE_LIMIT_STORE,
      registration: {
        points: values.RATE_LIMIT_REGISTRATION_POINTS,
        durationSeconds: values.RATE_LIMIT_REGISTRATION_DURATION_SECONDS,
      },
      engine: { points: values.RATE_LIMIT_ENGINE_POINTS, durationSeconds: values.RATE_LIMIT_ENGINE_DURATION_SECONDS },
      uploads: { points: values.RATE_LIMIT_UPLOADS_POINTS, durationSeconds: values.RATE_LIMIT_UPLOADS_DURATION_SECONDS },
      reports: { points: values.RATE_LIMIT_REPORTS_POINTS, durationSeconds: values.RATE_LIMIT_REPORTS_DURATION_SECONDS },
      checkouts: { points: values.RATE_LIMIT_CHECKOUTS_POINTS, durationSeconds: values.RATE_LIMIT_CHECKOUTS_DURATION_SECONDS },
    },
    outboundHttp: {
      connectTimeoutMs: values.OUTBOUND_HTTP_CONNECT_TIMEOUT_MS,
      timeoutMs: values.OUTBOUND_HTTP_TIMEOUT_MS,
      maxResponseBytes: values.OUTBOUND_HTTP_MAX_RESPONSE_BYTES,
      maxConnectionsPerOrigin: values.OUTBOUND_HTTP_MAX_CONNECTIONS_PER_ORIGIN,
    },
    processRoles: values.PLINTH_PROCESS_ROLES,
    jobs: {
      defaults: {
        concurrency: values.JOBS_DEFAULT_CONCURRENCY,
        retryLimit: values.JOBS_DEFAULT_RETRY_LIMIT,
        retryDelaySeconds: values.JOBS_DEFAULT_RETRY_DELAY_SECONDS,
        retryBackoff: values.JOBS_DEFAULT_RETRY_BACKOFF,
        timeoutSeconds: values.JOBS_DEFAULT_TIMEOUT_SECONDS,
      },
      queues,
      pollIntervalSeconds: values.JOBS_POLL_INTERVAL_SECONDS,
      maintenanceIntervalSeconds: values.JOBS_MAINTENANCE_INTERVAL_SECONDS,
      shutdownGraceSeconds: values.JOBS_SHUTDOWN_GRACE_SECONDS,
    },
    events: {
      concurrency: values.EVENTS_CONCURRENCY,
      triggerConcurrency: values.EVENTS_TRIGGER_CONCURRENCY,
      leaseMarginSeconds: values.EVENTS_LEASE_MARGIN_SECONDS,
      pollIntervalMs: values.EVENTS_POLL_INTERVAL_MS,
      retrySecondMs: values.EVENTS_RETRY_SECOND_MS,
      cleanupAfterHours: values.EVENTS_CLEANUP_AFTER_HOURS,
      cleanupIntervalSeconds: values.EVENTS_CLEANUP_INTERVAL_SECONDS,
      cronTimeZone: values.EVENTS_CRON_TIME_ZONE,
      cronAhead: values.EVENTS_CRON_AHEAD,
      missedToleranceSeconds: values.EVENTS_MISSED_TOLERANCE_SECONDS,
      externalProviders,
      externalDedupWindowHours: values.EXTERNAL_WEBHOOK_DEDUP_WINDOW_HOURS,
    },
    projectName: values.PLINTH_PROJECT_NAME,
    pluginsDir: path.resolve(values.PLINTH_PLUGINS_DIR),
    servicesDir: path.resolve(values.PLINTH_SERVICES_DIR),
    actionEngine: {
      handlerTimeoutSeconds: values.ACTIONS_HANDLER_TIMEOUT_SECONDS,
      serviceRestartMaxDelayMs: values.ACTIONS_SERVICE_RESTART_MAX_DELAY_MS,
      handlerRateLimit: {
        points: values.RATE_LIMIT_ACTION_HANDLERS_POINTS,
        durationSeconds: values.RATE_LIMIT_ACTION_HANDLERS_DURATION_SECONDS,
      },
    },
    build: {
      distDir: path.resolve(values.PLINTH_DIST_DIR),
      proxyConfDir: path.resolve(values.PLINTH_PROXY_CONF_DIR),
    },
    payments: {
      initialProvider: values.PAYMENT_PROVIDER,
      billingProviderAlias: values.BILLING_PROVIDER,
      adminKey: values.ADMIN_KEY,
      maxAmount: values.PAYMENTS_MAX_AMOUNT,
      providerTimeoutMs: values.PAYMENTS_PROVIDER_TIMEOUT_MS,
      providerMaxRetries: values.PAYMENTS_PROVIDER_MAX_RETRIES,
      webhookToleranceSeconds: values.PAYMENTS_WEBHOOK_TOLERANCE_SECONDS,
      licenseActivationLimit: values.PAYMENTS_LICENSE_ACTIVATION_LIMIT,
      checkoutSuccessUrl: values.BILLING_CHECKOUT_SUCCESS_URL ?? `${publicUrl}/billing/success`,
      checkoutCancelUrl: values.BILLING_CHECKOUT_CANCEL_URL ?? `${publicUrl}/billing/cancel`,
      primary: {
        apiUrl: values.PRIMARY_PROVIDER_API_URL,
        apiKey: values.PRIMARY_PROVIDER_API_KEY,
        webhookSecret: values.PRIMARY_PROVIDER_WEBHOOK_SECRET,
        priceIds: products.PRIMARY_PROVIDER_PRICE_ID,
      },
      backup: {
        apiUrl: values.BACKUP_PROVIDER_API_URL,
        apiKey: values.BACKUP_PROVIDER_API_KEY,
        storeId: values.BACKUP_PROVIDER_STORE_ID,
        webhookSecret: values.BACKUP_PROVIDER_WEBHOOK_SECRET,
        variantIds: products.BACKUP_PROVIDER_VARIANT_ID,
      },
    },
    apiDocs: {
      enabled: values.API_DOCS_ENABLED,
      path: values.API_DOCS_PATH,
      title: values.API_DOCS_TITLE ?? `${values.PLINTH_PROJECT_NAME} API`,
      theme: values.API_DOCS_THEME,
      bearerToken,
      graphql: { enabled: values.API_DOCS_GRAPHQL_ENABLED, endpoint: values.API_DOCS_GRAPHQL_ENDPOINT },
      hiddenPrefixes: values.API_DOCS_HIDE_ENDPOINTS ?? [],
    },
    newsletter: {
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
      issueScheduleVarsFile: values.NEWSLETTER_ISSUE_SCHEDULE_VARS_FILE && path.resolve(values.NEWSLETTER_ISSUE_SCHEDULE_VARS_FILE),
      schedulerIntervalSeconds: values.NEWSLETTER_SCHEDULER_INTERVAL_SECONDS,
      sendBatchSize: values.NEWSLETTER_SEND_BATCH_SIZE,
      sendConcurrency: values.NEWSLETTER_SEND_CONCURRENCY,
      from: { address: values.EMAIL_DELIVERY_FROM ?? values.AUTH_EMAIL_FROM, name: values.AUTH_EMAIL_FROM_NAME },
      listId: values.EMAIL_DELIVERY_LIST_ID_NEWSLETTER,
      licenseAlertDays: values.NEWSLETTER_LICENSE_ALERT_DAYS,
      licenseManageUrl: values.NEWSLETTER_LICENSE_MANAGE_URL ?? `${publicUrl}/account/licenses`,
    },
  };
}

/** JOBS_<QUEUE>_<SETTING> variables (JOBS_DEFAULT_* aside), validated, by queue variable name. */
function queueSettingsFromEnv(env: NodeJS.ProcessEnv, problems: string[]): Record<string, Partial<QueueSettings>> {
  const queues: Record<string, Partial<QueueSettings>> = {};
  for (const [variable, value] of Object.entries(env)) {
    const match = QUEUE_VARIABLE.exec(variable);
    if (!match || match[1] === 'DEFAULT' || value === undefined) continue;
    const setting = QUEUE_SETTING_KEYS.find((key) => QUEUE_SETTINGS[key].variable === match[2])!;
    const parsed = QUEUE_SETTINGS[setting].schema.safeParse(value);
    if (!parsed.success) {
      problems.push(`${variable} ${parsed.error.issues[0].message} (got ${JSON.stringify(value)})`);
      continue;
    }
    queues[match[1]] = { ...queues[match[1]], [setting]: parsed.data };
  }
  return queues;
}

/** The provider ids of each product (PRIMARY_PROVIDER_PRICE_ID_PRO gives primary's price of `pro`). */
function productIdsFromEnv(
  env: NodeJS.ProcessEnv,
  problems: string[],
): Record<'PRIMARY_PROVIDER_PRICE_ID' | 'BACKUP_PROVIDER_VARIANT_ID', Record<string, string>> {
  const found = { PRIMARY_PROVIDER_PRICE_ID: {} as Record<string, string>, BACKUP_PROVIDER_VARIANT_ID: {} as Record<string, string> };
  for (const [variable, value] of Object.entries(env)) {
    const match = PRODUCT_VARIABLE.exec(variable);
    if (!match || value === undefined) continue;
    const id = value.trim();
    const valid = match[1] === 'BACKUP_PROVIDER_VARIANT_ID' ? /^\d+$/.test(id) : /^[A-Za-z0-9_]{1,255}$/.test(id);
    if (!valid) {
      const shape = match[1] === 'BACKUP_PROVIDER_VARIANT_ID' ? 'a numeric variant id' : 'a price id such as price_1Pz';
      problems.push(`${variable} must be ${shape} (got ${JSON.stringify(value)})`);
      continue;
    }
    found[match[1] as keyof typeof found][match[2].toLowerCase()] = id;
  }
  return found;
}

const EXTERNAL_WEBHOOK_VARIABLE = /^EXTERNAL_WEBHOOK_([A-Z0-9_]+?)_(SECRET|SIGNATURE_HEADER|SIGNATURE_PREFIX|DELIVERY_HEADER|SCHEME|TOLERANCE_SECONDS)$/;
const HEADER_NAME = /^[A-Za-z0-9!#$%&'*+.^_`|~-]+$/;
/** The settings only the hmac-sha256 scheme reads (the others' headers are the providers' own). */
const HMAC_SCHEME_SETTINGS = ['SIGNATURE_HEADER', 'SIGNATURE_PREFIX', 'DELIVERY_HEADER'] as const;
/**
 * The longest tolerance: at most the shortest dedup window (1 hour), so a replay inside the
 * tolerance always meets the first delivery's dedup record.
 */
const MAX_TOLERANCE_SECONDS = 3600;

/**
 * EXTERNAL_WEBHOOK_<PROVIDER>_SECRET (required per provider; with the hmac-sha256 scheme, whose
 * secret the operator makes up in GitHub's form, 32 characters or more in production), _SCHEME,
 * _TOLERANCE_SECONDS, and for the hmac-sha256 scheme _SIGNATURE_HEADER, _SIGNATURE_PREFIX and
 * _DELIVERY_HEADER, by provider name in lower case with dashes (`GIT_HUB` -> `git-hub`).
 */
function externalProvidersFromEnv(env: NodeJS.ProcessEnv, problems: string[], minimumSecretLength: number): Record<string, ExternalProvider> {
  const settings: Record<string, Record<string, string>> = {};
  for (const [variable, value] of Object.entries(env)) {
    const match = EXTERNAL_WEBHOOK_VARIABLE.exec(variable);
    if (!match || value === undefined) continue;
    (settings[match[1]] ??= {})[match[2]] = value;
  }
  const providers: Record<string, ExternalProvider> = {};
  for (const [upper, values] of Object.entries(settings)) {
    const name = upper.toLowerCase().replace(/_/g, '-');
    const prefix = `EXTERNAL_WEBHOOK_${upper}`;
    const before = problems.length;
    const scheme = (values.SCHEME ?? 'hmac-sha256').trim().toLowerCase() as ExternalWebhookScheme;
    if (!EXTERNAL_WEBHOOK_SCHEMES.includes(scheme)) {
      problems.push(`${prefix}_SCHEME must be one of ${EXTERNAL_WEBHOOK_SCHEMES.join(', ')} (got ${JSON.stringify(values.SCHEME)})`);
      continue;
    }
    // The other schemes' secrets are issued by their providers, in their own formats.
    const minimumLength = scheme === 'hmac-sha256' ? minimumSecretLength : 8;
    if (!values.SECRET || values.SECRET.length < minimumLength) {
      problems.push(`${prefix}_SECRET must be set to the provider's signing secret (${minimumLength} characters or more)`);
      continue;
    }
    let secret: string | Buffer = values.SECRET;
    if (scheme === 'standard-webhooks') {
      // Standard Webhooks' secrets are `whsec_` and the key in base64; the key's bytes sign.
      const encoded = secret.replace(/^whsec_/, '');
      secret = Buffer.from(encoded, 'base64');
      if (!/^[A-Za-z0-9+/]+={0,2}$/.test(encoded) || secret.length < 16) problems.push(`${prefix}_SECRET must be the provider's whsec_<base64> secret (a key of 16 bytes or more)`);
    }
    for (const key of HMAC_SCHEME_SETTINGS) {
      if (values[key] === undefined) continue;
      if (scheme !== 'hmac-sha256') problems.push(`${prefix}_${key} applies to the hmac-sha256 scheme only; the ${scheme} scheme reads the provider's own headers`);
      else if (key !== 'SIGNATURE_PREFIX' && !HEADER_NAME.test(values[key])) problems.push(`${prefix}_${key} must be an HTTP header name (got ${JSON.stringify(values[key])})`);
    }
    let toleranceSeconds = 300;
    if (values.TOLERANCE_SECONDS !== undefined) {
      toleranceSeconds = Number(values.TOLERANCE_SECONDS);
      if (!TIMESTAMPED_SCHEMES.includes(scheme)) {
        problems.push(`${prefix}_TOLERANCE_SECONDS applies to schemes that sign a timestamp (${TIMESTAMPED_SCHEMES.join(', ')}); ${scheme} signs none`);
      } else if (!/^\d+$/.test(values.TOLERANCE_SECONDS.trim()) || toleranceSeconds < 1 || toleranceSeconds > MAX_TOLERANCE_SECONDS) {
        problems.push(`${prefix}_TOLERANCE_SECONDS must be a whole number of seconds from 1 to ${MAX_TOLERANCE_SECONDS} (got ${JSON.stringify(values.TOLERANCE_SECONDS)})`);
      }
    }
    if (problems.length > before) continue;
    providers[name] = {
      scheme,
      secret,
      signatureHeader: (values.SIGNATURE_HEADER ?? 'x-hub-signature-256').toLowerCase(),
      signaturePrefix: values.SIGNATURE_PREFIX ?? 'sha256=',
      deliveryHeader: (values.DELIVERY_HEADER ?? (name === 'github' && scheme === 'hmac-sha256' ? 'x-github-delivery' : undefined))?.toLowerCase(),
      toleranceSeconds,
    };
  }
  return providers;
}
