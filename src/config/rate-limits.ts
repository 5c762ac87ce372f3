import { z } from 'zod';
import type { Area } from './area';
import type { Environment } from './environment';
import { integer } from './validators';

const quota = (what: string) =>
  `${what} per user (else client address) and window; past it \`RATE_LIMITED\` with \`retryAfter\`, or 429 with \`Retry-After\`; the admin role is not counted`;
const window = (variable: string) => integer(1, 86_400).default(3600).describe(`the window, in seconds, of \`${variable}\``);

export const rateLimitsVariables = {
  RATE_LIMIT_STORE: z
    .enum(['memory', 'postgres'], { error: 'must be memory or postgres' })
    .default('memory')
    .describe('`memory`: each process counts alone; `postgres` shares rate limits between instances on one database'),
  RATE_LIMIT_REGISTRATION_POINTS: integer(1, 1_000_000)
    .default(5)
    .describe('registrations per caller (user id, else client address) and window; registerUser also takes a point of `AUTH_RATE_LIMIT_SIGNUPS_*` per address'),
  RATE_LIMIT_REGISTRATION_DURATION_SECONDS: integer(1, 86_400).default(60).describe('the window, in seconds, of `RATE_LIMIT_REGISTRATION_POINTS`'),
  // What each limit allows an engine's address for callers it names neither by user nor by address (docs/decisions.md).
  RATE_LIMIT_ENGINE_POINTS: integer(1, 100_000_000)
    .default(1_000)
    .describe(
      "the engine budget: what each limit allows an engine's address for calls with the admin secret that name neither the user (`X-Gql-User-Id`) nor the user's address (`X-Gql-Client-Address`, believed only with the admin secret)",
    ),
  RATE_LIMIT_ENGINE_DURATION_SECONDS: integer(1, 86_400).default(60).describe('the window, in seconds, of `RATE_LIMIT_ENGINE_POINTS`'),
  // Quotas per user (else client address) and window on what callers create; the admin role is not limited.
  RATE_LIMIT_UPLOADS_POINTS: integer(1, 1_000_000).default(100).describe(quota('uploads (`uploadAndProcessFile`, GraphQL and handler route together)')),
  RATE_LIMIT_UPLOADS_DURATION_SECONDS: window('RATE_LIMIT_UPLOADS_POINTS'),
  RATE_LIMIT_REPORTS_POINTS: integer(1, 1_000_000).default(20).describe(quota('`generateReport` requests')),
  RATE_LIMIT_REPORTS_DURATION_SECONDS: window('RATE_LIMIT_REPORTS_POINTS'),
  RATE_LIMIT_CHECKOUTS_POINTS: integer(1, 1_000_000).default(60).describe(quota('`POST /billing/checkout` and `processPayment` calls together')),
  RATE_LIMIT_CHECKOUTS_DURATION_SECONDS: window('RATE_LIMIT_CHECKOUTS_POINTS'),
};

export const rateLimits = {
  name: 'rate-limits',
  title: 'Rate limits and quotas',
  variables: rateLimitsVariables,
  settings: (values: Environment) => ({
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
  }),
} satisfies Area;
