import net from 'node:net';
import path from 'node:path';
import { z } from 'zod';
import type { QueueSettings } from '../platform/jobs';
import { jwtSecretSchema, type JwtSecretConfig } from './jwt-secret';
import { customServicesFromEnv, type CustomService } from './custom-services';
import type { MetricsAccess } from '../platform/metrics';
import { MAIL_ADDRESS } from '../common/mail-address';

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

/** Paths the server itself answers; the reference page cannot take one of them. */
const RESERVED_PATHS = ['/api-docs', '/healthz', '/readyz', '/metrics', '/v1/graphql'];

const oneLine = nonEmpty.refine((value) => !/[\r\n]/.test(value), { error: 'must be one line' });

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
  GQL_GRAPHQL_CORS_DOMAIN: z
    .string()
    .trim()
    .default('*')
    .transform((value) => (value === '*' ? ('*' as const) : value.split(',').map((origin) => origin.trim())))
    .refine((value) => value === '*' || value.every((origin) => /^https?:\/\/[^\s/]+$/.test(origin)), {
      error: 'must be * or a comma-separated list of origins such as https://app.example.com',
    }),

  PLINTH_PUBLIC_URL: baseUrl.optional(),
  AUTH_SERVER_URL: baseUrl.optional(),

  AUTH_PASSWORD_MIN_LENGTH: integer(1, 1024).default(8),
  AUTH_PASSWORD_MAX_LENGTH: integer(8, 4096).default(256),
  AUTH_INVITATION_TTL_SECONDS: integer(60, 365 * 86_400).default(7 * 86_400),
  ACTIONS_BULK_CREATE_MAX_USERS: integer(1, 100_000).default(1000),

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

  LOG_FORMAT: z.enum(['auto', 'pretty', 'json'], { error: 'must be auto, pretty or json' }).default('auto'),
  PLINTH_METRICS: z.enum(['loopback', 'token', 'off'], { error: 'must be loopback, token or off' }).default('loopback'),
  PLINTH_METRICS_TOKEN: z.string().min(16, { error: 'must be at least 16 characters' }).optional(),
  TRUST_PROXY: trustProxy.default(false),
  RATE_LIMIT_STORE: z.enum(['memory', 'postgres'], { error: 'must be memory or postgres' }).default('memory'),
  RATE_LIMIT_REGISTRATION_POINTS: integer(1, 1_000_000).default(5),
  RATE_LIMIT_REGISTRATION_DURATION_SECONDS: integer(1, 86_400).default(60),
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

  PLINTH_PROJECT_NAME: oneLine.default('Plinth'),
  PLINTH_PLUGINS_DIR: nonEmpty.default('plugins'),
  PLINTH_SERVICES_DIR: nonEmpty.default('services'),
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
  API_DOCS_HIDE_ENDPOINTS: z
    .string()
    .transform((value) => value.split(',').map((prefix) => prefix.trim()))
    .refine((prefixes) => prefixes.every((prefix) => /^\/[A-Za-z0-9._~\-/{}:]*$/.test(prefix)), {
      error: 'must be a comma-separated list of path prefixes, each starting with /, such as /admin,/internal',
    })
    // A prefix names a path and everything under it, with or without its trailing slash.
    .transform((prefixes) => prefixes.map((prefix) => (prefix.length > 1 ? prefix.replace(/\/+$/, '') : prefix)))
    .optional(),
});

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
    corsOrigins: string[] | '*';
  };
  /** PLINTH_PUBLIC_URL: where users reach this server; every link Plinth sends is under it or `auth.serverUrl`. */
  publicUrl: string;
  auth: {
    passwordMinLength: number;
    passwordMaxLength: number;
    /** AUTH_SERVER_URL, the spec's `{auth_url}`. */
    serverUrl: string;
    /** How long an invitation link (bulkCreateUsers with send_invitations) stays valid. */
    invitationTtlSeconds: number;
  };
  actions: {
    /** The most users one bulkCreateUsers call may create; a larger batch creates none. */
    bulkCreateMaxUsers: number;
  };
  mail: {
    /** Unset without SMTP_HOST: mail is written to .eml files outside production, refused in it. */
    smtp: SmtpSettings | undefined;
    from: { address: string; name: string };
    /** Templates here replace the built-in ones of the same name. */
    templatesDir: string;
    templateCacheSize: number;
    retryLimit: number;
    retryDelaySeconds: number;
  };
  /** `CS_<N>` declarations; `actionsRoute` is the route of the built-in one (template `plinth`). */
  customServices: CustomService[];
  actionsRoute: string;
  shutdownTimeoutMs: number;
  metrics: MetricsAccess;
  /** TRUST_PROXY, for Fastify's trustProxy and the WebSocket upgrade (platform/client-address.ts). */
  trustProxy: TrustProxy;
  rateLimit: {
    /** memory: each process counts alone; postgres: processes on one database share the counts. */
    store: 'memory' | 'postgres';
    registration: { points: number; durationSeconds: number };
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
  /** What `plinth build` writes: the API reference files and the proxy's serving block. */
  build: {
    /** PLINTH_DIST_DIR: openapi.json and scalar.html, served by the proxy and by `plinth start`. */
    distDir: string;
    /** PLINTH_PROXY_CONF_DIR: the proxy's hand-managed configuration folder, where api-docs.conf goes. */
    proxyConfDir: string;
  };
  /** The API reference (spec 1 §2.7). */
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
}

export interface ExternalProvider {
  secret: string;
  /** The header carrying the signature (x-hub-signature-256 by default). */
  signatureHeader: string;
  /** What comes before the hex digest in that header (sha256= by default). */
  signaturePrefix: string;
  /** The header carrying the provider's delivery id, for deduplication (none unless set; x-github-delivery for github). */
  deliveryHeader: string | undefined;
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
  const externalProviders = externalProvidersFromEnv(present, problems);
  if (!parsed.success || problems.length > 0) throw new ConfigError(problems);

  const values = parsed.data;
  if (values.NODE_ENV === 'production') {
    if (!values.GQL_GRAPHQL_ADMIN_SECRET) problems.push('GQL_GRAPHQL_ADMIN_SECRET is required when NODE_ENV=production');
    if (!values.GQL_GRAPHQL_JWT_SECRET) problems.push('GQL_GRAPHQL_JWT_SECRET is required when NODE_ENV=production');
  }
  if (values.PLINTH_METRICS === 'token' && !values.PLINTH_METRICS_TOKEN) {
    problems.push('PLINTH_METRICS_TOKEN is required when PLINTH_METRICS=token');
  }
  if (values.AUTH_PASSWORD_MAX_LENGTH < values.AUTH_PASSWORD_MIN_LENGTH) {
    problems.push('AUTH_PASSWORD_MAX_LENGTH must not be below AUTH_PASSWORD_MIN_LENGTH');
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
      corsOrigins: values.GQL_GRAPHQL_CORS_DOMAIN,
    },
    publicUrl,
    auth: {
      passwordMinLength: values.AUTH_PASSWORD_MIN_LENGTH,
      passwordMaxLength: values.AUTH_PASSWORD_MAX_LENGTH,
      serverUrl: values.AUTH_SERVER_URL ?? `${publicUrl}/auth`,
      invitationTtlSeconds: values.AUTH_INVITATION_TTL_SECONDS,
    },
    actions: { bulkCreateMaxUsers: values.ACTIONS_BULK_CREATE_MAX_USERS },
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
    },
    customServices: services.services,
    actionsRoute: builtIn?.route ?? '/actions',
    shutdownTimeoutMs: values.PLINTH_SHUTDOWN_TIMEOUT_MS,
    metrics:
      values.PLINTH_METRICS === 'token' ? { mode: 'token', token: values.PLINTH_METRICS_TOKEN! } : { mode: values.PLINTH_METRICS },
    trustProxy: values.TRUST_PROXY,
    rateLimit: {
      store: values.RATE_LIMIT_STORE,
      registration: {
        points: values.RATE_LIMIT_REGISTRATION_POINTS,
        durationSeconds: values.RATE_LIMIT_REGISTRATION_DURATION_SECONDS,
      },
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
    },
    projectName: values.PLINTH_PROJECT_NAME,
    pluginsDir: path.resolve(values.PLINTH_PLUGINS_DIR),
    servicesDir: path.resolve(values.PLINTH_SERVICES_DIR),
    build: {
      distDir: path.resolve(values.PLINTH_DIST_DIR),
      proxyConfDir: path.resolve(values.PLINTH_PROXY_CONF_DIR),
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

const EXTERNAL_WEBHOOK_VARIABLE = /^EXTERNAL_WEBHOOK_([A-Z0-9_]+?)_(SECRET|SIGNATURE_HEADER|SIGNATURE_PREFIX|DELIVERY_HEADER)$/;
const HEADER_NAME = /^[A-Za-z0-9!#$%&'*+.^_`|~-]+$/;

/**
 * EXTERNAL_WEBHOOK_<PROVIDER>_SECRET (required per provider), _SIGNATURE_HEADER, _SIGNATURE_PREFIX
 * and _DELIVERY_HEADER, by provider name in lower case with dashes (`GIT_HUB` -> `git-hub`).
 */
function externalProvidersFromEnv(env: NodeJS.ProcessEnv, problems: string[]): Record<string, ExternalProvider> {
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
    if (!values.SECRET || values.SECRET.length < 8) {
      problems.push(`${prefix}_SECRET must be set to the provider's signing secret (8 characters or more)`);
      continue;
    }
    for (const key of ['SIGNATURE_HEADER', 'DELIVERY_HEADER'] as const) {
      if (values[key] !== undefined && !HEADER_NAME.test(values[key])) problems.push(`${prefix}_${key} must be an HTTP header name (got ${JSON.stringify(values[key])})`);
    }
    providers[name] = {
      secret: values.SECRET,
      signatureHeader: (values.SIGNATURE_HEADER ?? 'x-hub-signature-256').toLowerCase(),
      signaturePrefix: values.SIGNATURE_PREFIX ?? 'sha256=',
      deliveryHeader: (values.DELIVERY_HEADER ?? (name === 'github' ? 'x-github-delivery' : undefined))?.toLowerCase(),
    };
  }
  return providers;
}
