import jwt from 'jsonwebtoken';
import { loadConfig, type Config } from '../src/config';
import type { SessionSettings } from '../src/platform/session';

/** What both sides of the benchmark agree on: targets, the query, the credentials, the messages. */

export const TARGETS = ['plinth', 'graphql-js', 'apollo-express', 'graphql-js-cached', 'mercurius-jit', 'plinth-other'] as const;
export type Target = (typeof TARGETS)[number];
/** Plinth as another build compiled it (BENCH_OTHER_BUILD, a dist folder): a change measured against its parent in one run. */
export const OTHER_BUILD_TARGET = 'plinth-other';

export const TARGET_LABELS: Record<Target, string> = {
  plinth: 'Plinth (full stack)',
  'graphql-js': '(a) graphql-js graphql() on node:http',
  'apollo-express': '(b) Apollo Server 5 on Express 5',
  'graphql-js-cached': "(a') as (a), documents cached",
  'mercurius-jit': '(c) mercurius + graphql-jit on Fastify 5',
  'plinth-other': '(o) Plinth from BENCH_OTHER_BUILD',
};

export const GRAPHQL_PATH = '/v1/graphql';

/**
 * The queries measured: the request envelope around one tiny field (a user's session), and a
 * realistic read of a page of 50 grouped errors with nested objects and lists over real rows
 * (each error's project and its latest event's frames, through the per-request DataLoaders, and
 * the stack trace printed from them), as the administrator.
 */
export const QUERIES = ['session', 'errors'] as const;
export type QueryName = (typeof QUERIES)[number];

export const SESSION_QUERY = '{ session { role user_id } }';
export const ERROR_PAGE_QUERY = `query ErrorPage($project: Int) {
  errors(filter: { project: $project }, first: 50) {
    edges {
      cursor
      node {
        id message type severity status occurrenceCount firstSeen lastSeen release service
        project { id name slug service }
        frames { filename function module lineno colno inApp source }
        stackTrace
      }
    }
    pageInfo { hasNextPage endCursor }
  }
}`;
/** Errors seeded for the page (more than one page, so hasNextPage is true). */
export const SEEDED_ERRORS = 60;
export const ERROR_PAGE_SIZE = 50;

// Benchmark-only credentials; every server is given the same ones.
export const ADMIN_SECRET = 'bench-admin-secret-0123456789abcdef';
const JWT_KEY = 'bench-jwt-signing-key-of-at-least-32-bytes!';
/** The key of signed links, which production requires. */
export const STORAGE_URL_SIGNING_SECRET = 'bench-storage-url-signing-secret-0123456789';
const CLAIMS_NAMESPACE = 'https://plinth.dev/jwt/claims';

/** The environment each server's configuration is loaded from (loadConfig in src/config). */
export function serverEnvironment(logLevel: string, databaseUrl?: string): Record<string, string> {
  return {
    NODE_ENV: 'production',
    HOST: '127.0.0.1',
    PORT: '0',
    LOG_LEVEL: logLevel,
    ...(databaseUrl ? { DATABASE_URL: databaseUrl } : {}),
    GQL_GRAPHQL_ADMIN_SECRET: ADMIN_SECRET,
    GQL_GRAPHQL_JWT_SECRET: JSON.stringify({ type: 'HS256', key: JWT_KEY, claims_namespace: CLAIMS_NAMESPACE }),
    STORAGE_URL_SIGNING_SECRET: STORAGE_URL_SIGNING_SECRET,
    // GQL_GRAPHQL_COMPILED_EXECUTION=false npm run bench: Plinth without compiled execution, to see what it gains.
    ...(process.env.GQL_GRAPHQL_COMPILED_EXECUTION ? { GQL_GRAPHQL_COMPILED_EXECUTION: process.env.GQL_GRAPHQL_COMPILED_EXECUTION } : {}),
    // bench/subscriptions.ts runs Plinth with subscription multiplexing off, then on.
    // PLINTH_IDLE_COLLECTION_MS=5000 npm run bench: Plinth with its idle collections (off by default), to see what they give back.
    ...(process.env.PLINTH_IDLE_COLLECTION_MS ? { PLINTH_IDLE_COLLECTION_MS: process.env.PLINTH_IDLE_COLLECTION_MS } : {}),
    // bench/subscriptions.ts turns the start-up collection off: its two collections would fall in the idle window it subtracts.
    ...(process.env.PLINTH_STARTUP_COLLECTION ? { PLINTH_STARTUP_COLLECTION: process.env.PLINTH_STARTUP_COLLECTION } : {}),
    ...(process.env.GQL_GRAPHQL_SUBSCRIPTION_MULTIPLEXING ? { GQL_GRAPHQL_SUBSCRIPTION_MULTIPLEXING: process.env.GQL_GRAPHQL_SUBSCRIPTION_MULTIPLEXING } : {}),
    // bench/live-queries.ts runs Plinth with one cohort per refetch statement (the naive refetch), then as it ships.
    ...Object.fromEntries(
      ['GQL_GRAPHQL_LIVE_QUERIES_BATCH_SIZE', 'GQL_GRAPHQL_LIVE_QUERIES_FALLBACK_INTERVAL_MS']
        .filter((name) => process.env[name])
        .map((name) => [name, process.env[name]!]),
    ),
  };
}

/**
 * A baseline's configuration, by the same path as Plinth's (loadConfig of the same environment),
 * so JWT checks are identical: the database, the configuration and the session settings.
 */
export function baselineConfig(logLevel: string): { databaseUrl: string; config: Config; sessionSettings: SessionSettings } {
  const databaseUrl = process.env.BENCH_DATABASE_URL;
  if (!databaseUrl) throw new Error('BENCH_DATABASE_URL is not set for the baseline server');
  const config = loadConfig(serverEnvironment(logLevel, databaseUrl));
  const { adminSecret, jwtSecret, unauthorizedRole } = config.graphql;
  return { databaseUrl, config, sessionSettings: { adminSecret: adminSecret!, jwtSecret: jwtSecret!, unauthorizedRole } };
}

/** The auth service's per-address limits lifted, for benchmarks that send every request from one address. */
export const AUTH_LIMITS_LIFTED: Record<string, string> = {
  AUTH_RATE_LIMIT_GLOBAL_BURST: '1000000',
  AUTH_RATE_LIMIT_BRUTE_FORCE_BURST: '1000000',
  AUTH_RATE_LIMIT_SIGNUPS_BURST: '1000000',
  AUTH_RATE_LIMIT_MFA_BURST: '1000000',
  AUTH_RATE_LIMIT_EMAIL_BURST: '1000000',
};

/** An access token with the claims the auth service issues (as test/support/tokens.ts signs them). */
export function signUserToken(userId: string, lifetimeSeconds: number): string {
  const now = Math.floor(Date.now() / 1000);
  return jwt.sign(
    {
      sub: userId,
      iat: now,
      exp: now + lifetimeSeconds,
      [CLAIMS_NAMESPACE]: {
        'x-gql-allowed-roles': ['user'],
        'x-gql-default-role': 'user',
        'x-gql-user-id': userId,
        'x-gql-source-account-id': 'primary',
      },
    },
    JWT_KEY,
    { algorithm: 'HS256' },
  );
}

/** Parent → child: close the server and exit, or report the CPU time used so far. */
export type ParentMessage = { type: 'stop' } | { type: 'cpu-usage' };

/** Child → parent: the server listens at `url` (the GraphQL endpoint). */
export interface ReadyMessage {
  type: 'ready';
  url: string;
}

/** Child → parent: the server could not start. */
export interface FailedMessage {
  type: 'failed';
  error: string;
}

/** Child → parent: user + system CPU time of the server process so far, in microseconds, and its resident memory now. */
export interface CpuUsageMessage {
  type: 'cpu-usage';
  micros: number;
  rssBytes: number;
  /** V8's heap (total, as allocated from the system), to tell it apart from native memory in the resident figure. */
  heapBytes?: number;
}

export type ChildMessage = ReadyMessage | FailedMessage | CpuUsageMessage;
