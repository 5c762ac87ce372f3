import path from 'node:path';
import { z } from 'zod';
import type { QueueSettings } from '../platform/jobs';
import { jwtSecretSchema, type JwtSecretConfig } from './jwt-secret';
import { customServicesFromEnv, type CustomService } from './custom-services';

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

  AUTH_PASSWORD_MIN_LENGTH: integer(1, 1024).default(8),
  AUTH_PASSWORD_MAX_LENGTH: integer(8, 4096).default(256),

  PLINTH_SHUTDOWN_TIMEOUT_MS: integer(0, 600_000).default(10_000),
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
});

export interface Config {
  env: 'development' | 'production' | 'test';
  host: string;
  port: number;
  logLevel: string;
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
    bodyLimit: number;
    wsInitTimeoutMs: number;
    corsOrigins: string[] | '*';
  };
  auth: {
    passwordMinLength: number;
    passwordMaxLength: number;
  };
  /** `CS_<N>` declarations; `actionsRoute` is the route of the built-in one (template `plinth`). */
  customServices: CustomService[];
  actionsRoute: string;
  shutdownTimeoutMs: number;
  /** `api` serves requests, `worker` runs the job workers; a process may be both. */
  processRoles: ProcessRole[];
  jobs: JobsConfig;
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
      const shown = variable.includes('SECRET') ? '' : ` (got ${JSON.stringify(present[variable] ?? '')})`;
      problems.push(`${issue.path.join('.')} ${issue.message}${shown}`);
    }
  }
  const services = customServicesFromEnv(present);
  problems.push(...services.problems);
  const queues = queueSettingsFromEnv(present, problems);
  if (!parsed.success || problems.length > 0) throw new ConfigError(problems);

  const values = parsed.data;
  if (values.NODE_ENV === 'production') {
    if (!values.GQL_GRAPHQL_ADMIN_SECRET) problems.push('GQL_GRAPHQL_ADMIN_SECRET is required when NODE_ENV=production');
    if (!values.GQL_GRAPHQL_JWT_SECRET) problems.push('GQL_GRAPHQL_JWT_SECRET is required when NODE_ENV=production');
  }
  if (values.AUTH_PASSWORD_MAX_LENGTH < values.AUTH_PASSWORD_MIN_LENGTH) {
    problems.push('AUTH_PASSWORD_MAX_LENGTH must not be below AUTH_PASSWORD_MIN_LENGTH');
  }
  if (values.JOBS_SHUTDOWN_GRACE_SECONDS * 1000 >= values.PLINTH_SHUTDOWN_TIMEOUT_MS) {
    problems.push('JOBS_SHUTDOWN_GRACE_SECONDS must be below PLINTH_SHUTDOWN_TIMEOUT_MS (which bounds the whole shutdown)');
  }
  if (problems.length > 0) throw new ConfigError(problems);

  const builtIn = services.services.find((service) => service.template === 'plinth');
  return {
    env: values.NODE_ENV,
    host: values.HOST,
    port: values.PORT,
    logLevel: values.LOG_LEVEL,
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
      bodyLimit: values.GQL_GRAPHQL_BODY_LIMIT,
      wsInitTimeoutMs: values.GQL_GRAPHQL_WS_INIT_TIMEOUT_MS,
      corsOrigins: values.GQL_GRAPHQL_CORS_DOMAIN,
    },
    auth: {
      passwordMinLength: values.AUTH_PASSWORD_MIN_LENGTH,
      passwordMaxLength: values.AUTH_PASSWORD_MAX_LENGTH,
    },
    customServices: services.services,
    actionsRoute: builtIn?.route ?? '/actions',
    shutdownTimeoutMs: values.PLINTH_SHUTDOWN_TIMEOUT_MS,
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
