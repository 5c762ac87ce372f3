/**
 * How callers prove who they are, as OpenAPI security schemes. A route names the ones it accepts
 * in its schema (`security: requires('adminSecret')`), so the API reference shows each route
 * with its own credentials.
 */
export const SECURITY_SCHEMES = {
  bearerAuth: {
    type: 'http',
    scheme: 'bearer',
    bearerFormat: 'JWT',
    description: 'An access token of the auth service: `Authorization: Bearer <JWT>`.',
  },
  adminSecret: {
    type: 'apiKey',
    in: 'header',
    name: 'X-Gql-Admin-Secret',
    description: 'The admin secret (`GQL_GRAPHQL_ADMIN_SECRET`); with `X-Gql-Role` and `X-Gql-User-Id` it acts as any role and user.',
  },
  adminKey: {
    type: 'apiKey',
    in: 'header',
    name: 'X-Admin-Key',
    description: 'The admin key of the billing administration endpoints.',
  },
  dsnKey: {
    type: 'http',
    scheme: 'bearer',
    bearerFormat: '<prefix>_<id>_<secret>',
    description: 'An error-tracking DSN key: authorises event ingestion.',
  },
  secretKey: {
    type: 'http',
    scheme: 'bearer',
    bearerFormat: '<prefix>_<id>_<secret>',
    description: 'An error-tracking secret key: authorises the management API.',
  },
  metricsToken: {
    type: 'http',
    scheme: 'bearer',
    description: 'The token of `/metrics` (`PLINTH_METRICS_TOKEN`, with `PLINTH_METRICS=token`).',
  },
} as const;

export type SecuritySchemeName = keyof typeof SECURITY_SCHEMES;

/** A route's `security`: any one of the named schemes will do. */
export function requires(...schemes: SecuritySchemeName[]): Record<string, string[]>[] {
  return schemes.map((scheme) => ({ [scheme]: [] }));
}
