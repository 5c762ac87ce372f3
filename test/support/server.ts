import { loadConfig } from '../../src/config';
import type { DestinationStream } from 'pino';
import { startServer, type RunningServer } from '../../src/main';
import { createLogger } from '../../src/platform/logger';
import { MODULES } from '../../src/modules';
import type { AnyModule } from '../../src/platform/module';
import { createTestDatabase, type TestDatabase } from './database';

export const ADMIN_SECRET = 'test-admin-secret-a1b2c3d4e5f6a7b8c9d0';
export const JWT_KEY = 'test-jwt-signing-key-of-at-least-32-bytes!';
export const CLAIMS_NAMESPACE = 'https://plinth.dev/jwt/claims';
export const JWT_SECRET = JSON.stringify({ type: 'HS256', key: JWT_KEY, claims_namespace: CLAIMS_NAMESPACE });
export const STORAGE_URL_SIGNING_SECRET = 'test-storage-url-signing-secret-0123456789';
/** What a test server needs besides testEnvironment to run as in production (the key of signed links). */
export const PRODUCTION = { NODE_ENV: 'production', STORAGE_URL_SIGNING_SECRET };
/**
 * argon2id's cost in test servers: the cheapest OWASP accepts (7 MiB, 5 passes), a small fraction
 * of the default's time (64 MiB, 2 passes), and the suite hashes thousands of passwords
 * (docs/decisions.md, "A fast, steady test suite"). The default and the rehash to the configured
 * cost have tests.
 */
export const TEST_PASSWORD_HASH = { AUTH_PASSWORD_HASH_MEMORY_KIB: '7168', AUTH_PASSWORD_HASH_ITERATIONS: '5' };

/** The environment a test server runs with, on the given database. */
export function testEnvironment(databaseUrl: string, overrides: Record<string, string> = {}): Record<string, string> {
  return {
    NODE_ENV: 'test',
    HOST: '127.0.0.1',
    PORT: '0',
    LOG_LEVEL: process.env.TEST_LOG_LEVEL ?? 'silent',
    DATABASE_URL: databaseUrl,
    GQL_GRAPHQL_ADMIN_SECRET: ADMIN_SECRET,
    GQL_GRAPHQL_JWT_SECRET: JWT_SECRET,
    // Tests register many users from one address; the registration limit has tests of its own,
    // and so has the sign-up limit, which registerUser takes too (test/users/sign-up-policy.test.ts).
    RATE_LIMIT_REGISTRATION_POINTS: '1000000',
    AUTH_RATE_LIMIT_SIGNUPS_BURST: '1000000',
    // Likewise the handler routes' limiter (spec 1 §8); test/actions/handler-routes.test.ts tests it.
    RATE_LIMIT_ACTION_HANDLERS_POINTS: '1000000',
    ...TEST_PASSWORD_HASH,
    // The suite runs with compiled execution on (the default) and, in a second run, off.
    GQL_GRAPHQL_COMPILED_EXECUTION: compiledExecutionEnabled() ? 'true' : 'false',
    // A full collection of a Jest worker's heap (its servers and every test's objects) would pause
    // the tests' timings on a loaded machine; test/startup-memory.test.ts tests it.
    PLINTH_STARTUP_COLLECTION: 'false',
    ...overrides,
  };
}

/** GQL_GRAPHQL_COMPILED_EXECUTION of the test run (true unless it says false), for servers built without loadConfig. */
export function compiledExecutionEnabled(): boolean {
  return !['false', '0', 'no'].includes(process.env.GQL_GRAPHQL_COMPILED_EXECUTION ?? 'true');
}

export interface TestServer {
  url: string;
  graphqlUrl: string;
  wsUrl: string;
  server: RunningServer;
  database: TestDatabase;
  close(): Promise<void>;
}

/**
 * The real server, in this process, on a random port and a database of its own (or `database`);
 * `modules` are added to the product's (a job queue for the tests).
 */
export async function startTestServer(
  overrides: Record<string, string> = {},
  options: { database?: TestDatabase; logTo?: DestinationStream; modules?: AnyModule[] } = {},
): Promise<TestServer> {
  const { database } = options;
  const db = database ?? (await createTestDatabase());
  const config = loadConfig(testEnvironment(db.url, overrides));
  const server = await startServer(config, createLogger(config, options.logTo), [...MODULES, ...(options.modules ?? [])]);
  return {
    url: server.url,
    graphqlUrl: `${server.url}/v1/graphql`,
    wsUrl: `${server.url.replace(/^http/, 'ws')}/v1/graphql/subscriptions`,
    server,
    database: db,
    async close() {
      const unfinished = await server.close();
      if (!database) await db.drop();
      // A step that hangs is a bug to see, not a delay to live with (PLINTH_SHUTDOWN_TIMEOUT_MS bounds it).
      if (unfinished.length > 0) throw new Error(`shutdown steps did not finish in time: ${unfinished.join(', ')}`);
    },
  };
}
