import path from 'node:path';
import type { Area } from './area';
import type { Environment, PatternSettings } from './environment';
import { integer, nonEmpty } from './validators';

// The action engine (user-declared actions and the custom services that handle them) and Plinth's own actions.
export const actionsVariables = {
  ACTIONS_HANDLER_TIMEOUT_SECONDS: integer(1, 3600)
    .default(30)
    .describe("how long a user-declared action's handler may take when the action sets no `timeout`"),
  ACTIONS_SERVICE_RESTART_MAX_DELAY_MS: integer(100, 600_000)
    .default(30_000)
    .describe('the longest wait before `plinth start` starts a crashed custom service again (doubling from 250 ms)'),
  RATE_LIMIT_ACTION_HANDLERS_POINTS: integer(1, 1_000_000)
    .default(5)
    .describe("calls per user (else address) and window on Plinth's own handler routes and in the scaffolded services (spec 1 §8's reference limiter)"),
  RATE_LIMIT_ACTION_HANDLERS_DURATION_SECONDS: integer(1, 86_400).default(60).describe('the window, in seconds, of `RATE_LIMIT_ACTION_HANDLERS_POINTS`'),
  ACTIONS_BULK_CREATE_MAX_USERS: integer(1, 100_000).default(1000).describe('most users one bulkCreateUsers call may create; a larger batch creates none'),
  PLINTH_SERVICES_DIR: nonEmpty
    .default('services')
    .describe('one folder per custom service (`CS_<N>`), named as the service; its `openapi.json` is documented in the API reference'),
};

export const actions = {
  name: 'actions',
  title: 'Actions and custom services',
  variables: actionsVariables,
  patterns: [
    {
      variable: 'CS_<N>',
      default: 'none',
      description:
        'custom services `<name>:<template>:<port>:<route>` (templates `express-ts`, `fastify-ts`, `nest-ts`, `fastapi`, `gin`, or `plinth`); the one with template `plinth` sets the action route prefix (default `/actions`)',
    },
    {
      variable: 'CS_<N>_HOST',
      default: "the service's name",
      description: 'the host Plinth calls the service at, and the address `plinth start` runs it on (`127.0.0.1` for local runs)',
    },
  ],
  settings: (values: Environment, found: PatternSettings) => ({
    actions: { bulkCreateMaxUsers: values.ACTIONS_BULK_CREATE_MAX_USERS },
    /** `CS_<N>` declarations; `actionsRoute` is the route of the built-in one (template `plinth`). */
    customServices: found.customServices,
    actionsRoute: found.customServices.find((service) => service.template === 'plinth')?.route ?? '/actions',
    servicesDir: path.resolve(values.PLINTH_SERVICES_DIR),
    actionEngine: {
      handlerTimeoutSeconds: values.ACTIONS_HANDLER_TIMEOUT_SECONDS,
      serviceRestartMaxDelayMs: values.ACTIONS_SERVICE_RESTART_MAX_DELAY_MS,
      handlerRateLimit: {
        points: values.RATE_LIMIT_ACTION_HANDLERS_POINTS,
        durationSeconds: values.RATE_LIMIT_ACTION_HANDLERS_DURATION_SECONDS,
      },
    },
  }),
} satisfies Area;
