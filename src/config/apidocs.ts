import path from 'node:path';
import { z } from 'zod';
import type { Area } from './area';
import type { Environment } from './environment';
import { boolean, nonEmpty, oneLine, urlPath } from './validators';

/** API_DOCS_THEME (spec 1 §2.7): default follows the system's light or dark mode; moon and purple are dark; solarized is light. */
export const API_DOCS_THEMES = ['default', 'moon', 'purple', 'solarized'] as const;
export type ApiDocsTheme = (typeof API_DOCS_THEMES)[number];

/** Paths the server itself answers; the reference page cannot take one of them. */
const RESERVED_PATHS = ['/api-docs', '/healthz', '/readyz', '/metrics', '/v1/graphql'];

// The API reference (spec 1 §2.7) and what `plinth build` writes.
export const apidocsVariables = {
  API_DOCS_ENABLED: boolean.default(true).describe('`false` removes `/api-docs`, the reference page, GraphiQL and the serving block'),
  API_DOCS_PATH: urlPath
    .refine((value) => !RESERVED_PATHS.some((reserved) => value === reserved || value.startsWith(`${reserved}/`)), {
      error: `must not be one of the server's own paths (${RESERVED_PATHS.join(', ')})`,
    })
    .default('/docs')
    .describe('where the reference page is'),
  API_DOCS_TITLE: oneLine.optional().meta({ description: "the reference page's title", unset: '`<PLINTH_PROJECT_NAME> API`' }),
  API_DOCS_THEME: z
    .enum(API_DOCS_THEMES, { error: `must be one of ${API_DOCS_THEMES.join(', ')}` })
    .default('default')
    .describe('`default` (light or dark as the system is), `moon` (dark, low contrast), `purple` (dark, purple accent), `solarized` (light)'),
  API_DOCS_AUTH_ENV_VAR: z
    .string()
    .trim()
    .regex(/^[A-Za-z_][A-Za-z0-9_]*$/, { error: 'must be the name of an environment variable, such as DOCS_ANON_JWT' })
    .optional()
    .meta({
      description: 'the name of a variable holding a JWT (an anonymous one, say) that the page and GraphiQL pre-fill as the bearer token; read at build time',
      unset: 'none',
    }),
  API_DOCS_GRAPHQL_ENABLED: boolean.default(true).describe('whether the spec documents GraphQL (the endpoints and every operation)'),
  API_DOCS_GRAPHQL_ENDPOINT: urlPath.default('/v1/graphql').describe('the GraphQL path the spec documents'),
  API_DOCS_HIDE_ENDPOINTS: z
    .string()
    .transform((value) => value.split(',').map((prefix) => prefix.trim()))
    .refine((prefixes) => prefixes.every((prefix) => /^\/[A-Za-z0-9._~\-/{}:]*$/.test(prefix)), {
      error: 'must be a comma-separated list of path prefixes, each starting with /, such as /admin,/internal',
    })
    // A prefix names a path and everything under it, with or without its trailing slash.
    .transform((prefixes) => prefixes.map((prefix) => (prefix.length > 1 ? prefix.replace(/\/+$/, '') : prefix)))
    .optional()
    .meta({ description: 'comma-separated path prefixes left out of the spec (`/admin` hides `/admin` and `/admin/...`)', unset: 'none' }),
  PLINTH_PLUGINS_DIR: nonEmpty
    .default('plugins')
    .describe('one folder per installed plugin, each with its `plugin.json` manifest (`name`, `rest_routes`), documented in the spec'),
  PLINTH_DIST_DIR: nonEmpty
    .default('.nself/dist')
    .describe('where `plinth build` writes `openapi.json` and `scalar.html` (served by `plinth start` when there)'),
  PLINTH_PROXY_CONF_DIR: nonEmpty
    .default('nginx/conf.d')
    .describe("the proxy's hand-managed configuration folder, where `plinth build` writes `api-docs.conf`"),
};

export const apidocs = {
  name: 'apidocs',
  title: 'API reference and build',
  variables: apidocsVariables,
  problems: (values: Environment, env: Record<string, string>) => {
    const variable = values.API_DOCS_AUTH_ENV_VAR;
    if (variable === undefined) return [];
    const token = env[variable]?.trim();
    if (!token) return [`API_DOCS_AUTH_ENV_VAR names ${variable}, which is not set`];
    // The value is a credential: the message names the variable only.
    return /^[\w-]+\.[\w-]+\.[\w-]*$/.test(token) ? [] : [`${variable} (named by API_DOCS_AUTH_ENV_VAR) must be a JWT`];
  },
  settings: (values: Environment, _found: unknown, env: Record<string, string>) => ({
    apiDocs: {
      /** false: no /api-docs, no page, no GraphiQL, no serving block. */
      enabled: values.API_DOCS_ENABLED,
      path: values.API_DOCS_PATH,
      title: values.API_DOCS_TITLE ?? `${values.PLINTH_PROJECT_NAME} API`,
      theme: values.API_DOCS_THEME,
      /** The value of the variable API_DOCS_AUTH_ENV_VAR names (a JWT), pre-filled as the bearer token. */
      bearerToken: values.API_DOCS_AUTH_ENV_VAR === undefined ? undefined : env[values.API_DOCS_AUTH_ENV_VAR]?.trim(),
      graphql: { enabled: values.API_DOCS_GRAPHQL_ENABLED, endpoint: values.API_DOCS_GRAPHQL_ENDPOINT },
      /** Paths equal to or under one of these prefixes are left out of the spec. */
      hiddenPrefixes: values.API_DOCS_HIDE_ENDPOINTS ?? [],
    },
    pluginsDir: path.resolve(values.PLINTH_PLUGINS_DIR),
    /** What `plinth build` writes: the API reference files and the proxy's serving block. */
    build: {
      distDir: path.resolve(values.PLINTH_DIST_DIR),
      proxyConfDir: path.resolve(values.PLINTH_PROXY_CONF_DIR),
    },
  }),
} satisfies Area;
