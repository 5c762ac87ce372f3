import { z } from 'zod';
import type { Area } from './area';
import type { Environment } from './environment';
import { jwtSecretSchema } from './jwt-secret';
import { boolean, integer, nonEmpty, productionSecretProblem } from './validators';

export const graphqlVariables = {
  GQL_GRAPHQL_ADMIN_SECRET: nonEmpty.optional().meta({
    description: 'the admin secret (`X-Gql-Admin-Secret`); required with `NODE_ENV=production`, 32+ characters there',
    unset: 'generated in development',
  }),
  GQL_GRAPHQL_JWT_SECRET: jwtSecretSchema.optional().meta({
    description:
      'the key user tokens are verified with: `{"type":"HS256","key":"<32+ bytes>","claims_namespace":"https://plinth.dev/jwt/claims"}` (HS*, RS*, ES*, PS*); required in production',
    unset: 'generated in development',
  }),
  GQL_GRAPHQL_UNAUTHORIZED_ROLE: nonEmpty.default('anonymous').describe('role of requests without credentials'),
  GQL_GRAPHQL_DEV_MODE: boolean.default(false).describe('adds internal error details under `extensions.internal`'),
  GQL_GRAPHQL_INTROSPECTION: boolean
    .default(true)
    .describe('answers `__schema` and `__type` (GraphiQL and code generators need it); `false` for an API whose schema is private'),
  GQL_GRAPHQL_MAX_DEPTH: integer(1, 1000).default(15).describe('deepest selection an operation may have (introspection is exempt)'),
  GQL_GRAPHQL_MAX_COMPLEXITY: integer(1, 1_000_000).default(1000).describe('highest cost an operation may have (introspection is exempt)'),
  GQL_GRAPHQL_MAX_TOKENS: integer(100, 1_000_000).default(2000).describe('most tokens in a query document, counted while parsing'),
  GQL_GRAPHQL_MAX_DOCUMENT_BYTES: integer(1024, 100 * 1024 * 1024)
    .default(100 * 1024)
    .describe('largest query document, checked before parsing'),
  GQL_GRAPHQL_MAX_ALIASES: integer(0, 100_000).default(100).describe('most aliases in one operation'),
  GQL_GRAPHQL_MAX_ROOT_FIELDS: integer(1, 100_000).default(50).describe('most root fields in one operation'),
  GQL_GRAPHQL_DOCUMENT_CACHE_BYTES: integer(0, 1024 * 1024 * 1024)
    .default(16 * 1024 * 1024)
    .describe('memory for parsed documents kept for repeated queries (0: none)'),
  GQL_GRAPHQL_BODY_LIMIT: integer(1024, 1024 * 1024 * 1024)
    .default(1024 * 1024)
    .describe('largest request body, in bytes (but uploads: see `FILES_MAX_BYTES`)'),
  GQL_GRAPHQL_WS_INIT_TIMEOUT_MS: integer(100, 600_000).default(3000).describe('how long a graphql-ws connection may take to send its `connection_init`'),
  // What one user (else one client address) may hold at once on this instance; the admin role is not limited.
  GQL_GRAPHQL_WS_MAX_CONNECTIONS_PER_USER: integer(1, 1_000_000)
    .default(20)
    .describe(
      'graphql-ws connections one user (else one client address) may hold at once on an instance; the next is closed with 4429; the admin role is not limited',
    ),
  GQL_GRAPHQL_WS_MAX_SUBSCRIPTIONS_PER_CONNECTION: integer(1, 1_000_000)
    .default(100)
    .describe('subscriptions live at once on one graphql-ws connection; past it the subscription gets an `error` with `QUOTA_EXCEEDED`'),
  GQL_GRAPHQL_WS_MAX_SUBSCRIPTIONS_PER_USER: integer(1, 1_000_000)
    .default(200)
    .describe('subscriptions live at once for one user across its connections on an instance; past it the subscription gets an `error` with `QUOTA_EXCEEDED`'),
  GQL_GRAPHQL_WS_MAX_LIVE_QUERIES_PER_CONNECTION: integer(1, 1_000_000)
    .default(50)
    .describe(
      "live queries (the generated API's query root fields as subscriptions) live at once on one graphql-ws connection, the admin's too; past it the subscription gets an `error` with `QUOTA_EXCEEDED`",
    ),
  GQL_GRAPHQL_LIVE_QUERIES_FALLBACK_INTERVAL_MS: integer(0, 3_600_000)
    .default(10_000)
    .describe(
      'how often every live query is refetched besides the refetches that committed changes to the tables it reads trigger, for changes those miss (a view, a table it reads through a permission `_exists`); 0: never',
    ),
  GQL_GRAPHQL_LIVE_QUERIES_BATCH_SIZE: integer(1, 100_000)
    .default(1000)
    .describe('most cohorts of a live query (subscribers with other variables or session values) refetched by one statement'),
  GQL_GRAPHQL_CORS_DOMAIN: z
    .string()
    .trim()
    .default('*')
    .transform((value) => (value === '*' ? ('*' as const) : value.split(',').map((origin) => origin.trim())))
    .refine((value) => value === '*' || value.every((origin) => /^https?:\/\/[^\s/]+$/.test(origin)), {
      error: 'must be * or a comma-separated list of origins such as https://app.example.com',
    })
    .describe('allowed browser origins, comma-separated'),
  // Compiled execution: one graphql-jit function per document and operation, kept in a bounded cache.
  GQL_GRAPHQL_COMPILED_EXECUTION: boolean
    .default(true)
    .describe(
      'run queries and mutations as graphql-jit compiles them from their second run on (the first goes through graphql-js), and answer a query Apollo has accepted before without its request pipeline (`false`: Apollo and graphql-js run every operation)',
    ),
  GQL_GRAPHQL_COMPILED_CACHE_BYTES: integer(1024 * 1024, 1024 * 1024 * 1024)
    .default(16 * 1024 * 1024)
    .describe(
      'heap bytes of compiled operations (and their documents) kept for repeated queries, per executor, least recently used going first, counted from the code graphql-jit generates (a typical operation of 20 fields takes about 0.5 MiB); an operation whose compiled form would take more than a quarter of it runs through graphql-js',
    ),
  // A count of entries bounds no memory (a short hostile text can compile to huge code): refused,
  // so that a deployment still setting it learns of its replacement.
  GQL_GRAPHQL_COMPILED_CACHE_ENTRIES: z
    .never({ error: 'is replaced by GQL_GRAPHQL_COMPILED_CACHE_BYTES (heap bytes, default 16777216)' })
    .optional()
    .describe('replaced by `GQL_GRAPHQL_COMPILED_CACHE_BYTES`; setting it stops start-up'),
  GQL_GRAPHQL_SUBSCRIPTION_MULTIPLEXING: boolean
    .default(true)
    .describe(
      "graphql-ws subscribers with the same document, variables and session share one execution and one serialised message per event (`false`: each subscriber's own)",
    ),
  GQL_GRAPHQL_STREAMING_QUERIES_REFETCH_INTERVAL_MS: integer(10, 60_000)
    .default(1000)
    .describe(
      "how often a streaming subscription (`<table>_stream`) reads the rows after its cursor, in milliseconds; a full batch is followed at once by the next (Hasura's `HASURA_GRAPHQL_STREAMING_QUERIES_MULTIPLEXED_REFETCH_INTERVAL`)",
    ),
};

export const graphql = {
  name: 'graphql',
  title: 'GraphQL',
  variables: graphqlVariables,
  problems: (values: Environment) => [
    ...(values.NODE_ENV === 'production' && !values.GQL_GRAPHQL_ADMIN_SECRET ? ['GQL_GRAPHQL_ADMIN_SECRET is required when NODE_ENV=production'] : []),
    ...(values.NODE_ENV === 'production' && !values.GQL_GRAPHQL_JWT_SECRET ? ['GQL_GRAPHQL_JWT_SECRET is required when NODE_ENV=production'] : []),
    ...productionSecretProblem('GQL_GRAPHQL_ADMIN_SECRET', values.GQL_GRAPHQL_ADMIN_SECRET, values.NODE_ENV),
  ],
  settings: (values: Environment) => ({
    graphql: {
      /** Unset only in development, where start-up generates one (see dev-secrets.ts). */
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
        liveQueriesPerConnection: values.GQL_GRAPHQL_WS_MAX_LIVE_QUERIES_PER_CONNECTION,
      },
      liveQueries: {
        fallbackIntervalMs: values.GQL_GRAPHQL_LIVE_QUERIES_FALLBACK_INTERVAL_MS,
        batchSize: values.GQL_GRAPHQL_LIVE_QUERIES_BATCH_SIZE,
      },
      corsOrigins: values.GQL_GRAPHQL_CORS_DOMAIN,
      compiledExecution: { enabled: values.GQL_GRAPHQL_COMPILED_EXECUTION, cacheBytes: values.GQL_GRAPHQL_COMPILED_CACHE_BYTES },
      subscriptionMultiplexing: values.GQL_GRAPHQL_SUBSCRIPTION_MULTIPLEXING,
      streamingRefetchIntervalMs: values.GQL_GRAPHQL_STREAMING_QUERIES_REFETCH_INTERVAL_MS,
    },
  }),
} satisfies Area;
