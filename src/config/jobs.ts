import { z } from 'zod';
import type { Area } from './area';
import type { Environment, PatternSettings } from './environment';
import { boolean, integer } from './validators';

/**
 * Per-queue settings. Each has a default (JOBS_DEFAULT_<SETTING>); a module's JobDefinition
 * overrides it for its queue, and JOBS_<QUEUE>_<SETTING> overrides both.
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
const QUEUE_VARIABLE = new RegExp(`^JOBS_([A-Z][A-Z0-9_]*)_(${QUEUE_SETTING_KEYS.map((key) => QUEUE_SETTINGS[key].variable).join('|')})$`);

/** The environment-variable form of a queue name: `report-render` -> `REPORT_RENDER`. */
export function queueVariableName(queue: string): string {
  return queue.toUpperCase().replace(/-/g, '_');
}

/** Checks one setting a module declares for a queue, with the rule of its variable; returns the problem. */
export function queueSettingProblem(setting: QueueSetting, value: unknown): string | undefined {
  const result = QUEUE_SETTINGS[setting].schema.safeParse(String(value));
  return result.success ? undefined : result.error.issues[0].message;
}

/** JOBS_<QUEUE>_<SETTING> variables (JOBS_DEFAULT_* aside), validated, by queue variable name. */
export function queueSettingsFromEnv(env: Record<string, string | undefined>, problems: string[]): Record<string, Partial<QueueSettings>> {
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

export const jobsVariables = {
  JOBS_DEFAULT_CONCURRENCY: QUEUE_SETTINGS.concurrency.schema.default(4).describe('jobs of one queue a process runs at once'),
  JOBS_DEFAULT_RETRY_LIMIT: QUEUE_SETTINGS.retryLimit.schema.default(3).describe('retries after a failed attempt (a timeout or a crash is one)'),
  JOBS_DEFAULT_RETRY_DELAY_SECONDS: QUEUE_SETTINGS.retryDelaySeconds.schema.default(2).describe('delay before the first retry'),
  JOBS_DEFAULT_RETRY_BACKOFF: QUEUE_SETTINGS.retryBackoff.schema.default(true).describe('doubling the retry delay at each retry (with jitter)'),
  JOBS_DEFAULT_TIMEOUT_SECONDS: QUEUE_SETTINGS.timeoutSeconds.schema
    .default(30)
    .describe('a job running longer is aborted and fails; after a crash it runs again about this long after it started (the lease)'),
  JOBS_POLL_INTERVAL_SECONDS: integer(1, 3600).default(2).describe('how often idle workers look for due jobs (a send wakes them at once)'),
  JOBS_MAINTENANCE_INTERVAL_SECONDS: integer(1, 3600).default(10).describe('how often jobs of crashed workers are taken back'),
  JOBS_SHUTDOWN_GRACE_SECONDS: integer(0, 600)
    .default(5)
    .describe('at shutdown, how long running jobs may finish before they are released to other workers (below `PLINTH_SHUTDOWN_TIMEOUT_MS`)'),
};

export const jobs = {
  name: 'jobs',
  title: 'Background jobs',
  variables: jobsVariables,
  patterns: [
    {
      variable: 'JOBS_<QUEUE>_<SETTING>',
      default: "the module's, else the default",
      description:
        "one queue's `CONCURRENCY`, `RETRY_LIMIT`, `RETRY_DELAY_SECONDS`, `RETRY_BACKOFF` or `TIMEOUT_SECONDS`; the queue name upper-cased, `-` as `_` (`report-render`: `JOBS_REPORT_RENDER_TIMEOUT_SECONDS`)",
    },
  ],
  problems: (values: Environment) =>
    values.JOBS_SHUTDOWN_GRACE_SECONDS * 1000 >= values.PLINTH_SHUTDOWN_TIMEOUT_MS
      ? ['JOBS_SHUTDOWN_GRACE_SECONDS must be below PLINTH_SHUTDOWN_TIMEOUT_MS (which bounds the whole shutdown)']
      : [],
  settings: (values: Environment, found: PatternSettings) => ({
    jobs: {
      /** What a queue gets unless its module or JOBS_<QUEUE>_<SETTING> says otherwise. */
      defaults: {
        concurrency: values.JOBS_DEFAULT_CONCURRENCY,
        retryLimit: values.JOBS_DEFAULT_RETRY_LIMIT,
        retryDelaySeconds: values.JOBS_DEFAULT_RETRY_DELAY_SECONDS,
        retryBackoff: values.JOBS_DEFAULT_RETRY_BACKOFF,
        timeoutSeconds: values.JOBS_DEFAULT_TIMEOUT_SECONDS,
      },
      /** JOBS_<QUEUE>_<SETTING>, by the queue's variable name (queueVariableName); these win over the module's. */
      queues: found.queues,
      pollIntervalSeconds: values.JOBS_POLL_INTERVAL_SECONDS,
      maintenanceIntervalSeconds: values.JOBS_MAINTENANCE_INTERVAL_SECONDS,
      shutdownGraceSeconds: values.JOBS_SHUTDOWN_GRACE_SECONDS,
    },
  }),
} satisfies Area;
