import { z } from 'zod';
import type { Area } from './area';
import type { Environment } from './environment';
import { integer, productionSecretProblem } from './validators';

/** Who may read GET /metrics (PLINTH_METRICS). */
export type MetricsAccess = { mode: 'off' } | { mode: 'loopback' } | { mode: 'token'; token: string };

export const observabilityVariables = {
  LOG_LEVEL: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info').describe('pino log level'),
  LOG_FORMAT: z
    .enum(['auto', 'pretty', 'json'], { error: 'must be auto, pretty or json' })
    .default('auto')
    .describe('`auto` is pretty at a terminal in development and JSON otherwise (`pretty`, `json` force one)'),
  PLINTH_METRICS: z
    .enum(['loopback', 'token', 'off'], { error: 'must be loopback, token or off' })
    .default('loopback')
    .describe(
      '`GET /metrics` (Prometheus): `loopback` answers loopback clients only, `token` asks for `Authorization: Bearer <PLINTH_METRICS_TOKEN>`, `off` removes it',
    ),
  PLINTH_METRICS_TOKEN: z
    .string()
    .min(16, { error: 'must be at least 16 characters' })
    .optional()
    .describe('the bearer token of `/metrics` with `PLINTH_METRICS=token` (16+ characters, 32+ in production)'),
  PLINTH_REQUEST_OUTCOMES_FLUSH_MS: integer(10, 600_000)
    .default(5000)
    .describe('how often the counts of served requests (SLO good and bad events) are written'),
};

export const observability = {
  name: 'observability',
  title: 'Logs and metrics',
  variables: observabilityVariables,
  problems: (values: Environment) => [
    ...productionSecretProblem('PLINTH_METRICS_TOKEN', values.PLINTH_METRICS_TOKEN, values.NODE_ENV),
    ...(values.PLINTH_METRICS === 'token' && !values.PLINTH_METRICS_TOKEN ? ['PLINTH_METRICS_TOKEN is required when PLINTH_METRICS=token'] : []),
  ],
  settings: (values: Environment) => ({
    logLevel: values.LOG_LEVEL,
    /** `auto`: pretty in a terminal in development, JSON otherwise. */
    logFormat: values.LOG_FORMAT,
    metrics: (values.PLINTH_METRICS === 'token' ? { mode: 'token', token: values.PLINTH_METRICS_TOKEN! } : { mode: values.PLINTH_METRICS }) as MetricsAccess,
    requestOutcomesFlushMs: values.PLINTH_REQUEST_OUTCOMES_FLUSH_MS,
  }),
} satisfies Area;
