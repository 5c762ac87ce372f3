import pg from 'pg';
import { loadConfig } from '../src/config';
import { startServer } from '../src/main';
import { createLogger } from '../src/platform/logger';
import { User } from '../src/modules/users/user.entity';
import { prepareDatabase } from './database';
import { positiveInteger } from './settings';

/**
 * bulkCreateUsers against the real server (in this process, over HTTP, on PostgreSQL): the time
 * of one call creating BENCH_USERS users (1000) and the statements it sent to the database,
 * without and with invitations, against a baseline of the same users inserted one statement
 * each, as registerUser does (without its argon2 hash, which would swamp the comparison).
 *
 *   npm run bench:bulk
 *
 * Statements are counted by wrapping pg's Client#query, which every connection in the process
 * (TypeORM's pool, pg-boss's) goes through. The process runs the API role only, so no job worker
 * polls during the measurement; the count may still include the odd background statement
 * (a rate-limit or pub/sub cleanup timer).
 */

const ADMIN_SECRET = 'bench-admin-secret-0123456789';
let statements = 0;
const query = pg.Client.prototype.query;
pg.Client.prototype.query = function (this: pg.Client, ...args: unknown[]) {
  statements += 1;
  return (query as (...a: unknown[]) => unknown).apply(this, args);
} as typeof query;

async function measure<T>(run: () => Promise<T>): Promise<{ ms: number; statements: number; result: T }> {
  const before = statements;
  const start = performance.now();
  const result = await run();
  return { ms: performance.now() - start, statements: statements - before, result };
}

async function main(): Promise<void> {
  const count = positiveInteger('BENCH_USERS', 1000);
  const databaseUrl = await prepareDatabase();
  const config = loadConfig({
    ...process.env,
    NODE_ENV: 'development',
    PORT: '0',
    HOST: '127.0.0.1',
    LOG_LEVEL: 'warn',
    DATABASE_URL: databaseUrl,
    GQL_GRAPHQL_ADMIN_SECRET: ADMIN_SECRET,
    PLINTH_PROCESS_ROLES: 'api',
    ACTIONS_BULK_CREATE_MAX_USERS: String(Math.max(count, 1000)),
  });
  const server = await startServer(config, createLogger(config));
  const run = Date.now().toString(36);
  const users = (label: string) =>
    Array.from({ length: count }, (_, index) => ({ email: `bench-${run}-${label}-${index}@example.com`, name: `Bench ${index}`, company: 'Bench' }));

  const bulk = (label: string, sendInvitations: boolean) =>
    measure(async () => {
      const response = await fetch(`${server.url}/v1/graphql`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-gql-admin-secret': ADMIN_SECRET },
        body: JSON.stringify({
          query: 'mutation ($input: BulkCreateUsersInput!) { bulkCreateUsers(input: $input) { success created_count failed_count } }',
          variables: { input: { users: users(label), send_invitations: sendInvitations } },
        }),
      });
      const body = (await response.json()) as { data?: { bulkCreateUsers: { created_count: number } }; errors?: unknown };
      if (body.data?.bulkCreateUsers.created_count !== count) throw new Error(`bulkCreateUsers did not create ${count} users: ${JSON.stringify(body)}`);
    });

  try {
    const repository = server.dataSource.getRepository(User);
    const baseline = await measure(async () => {
      for (const user of users('single')) await repository.insert({ ...user, email: user.email.toLowerCase(), passwordHash: 'not-a-hash' });
    });
    const plain = await bulk('bulk', false);
    const invited = await bulk('invited', true);

    const line = (name: string, result: { ms: number; statements: number }) =>
      `${name.padEnd(46)} ${result.ms.toFixed(0).padStart(7)} ms ${String(result.statements).padStart(7)} statements`;
    process.stdout.write(
      [
        `${count} users, PostgreSQL at ${new URL(databaseUrl).host}`,
        line('baseline: one INSERT per user, sequential', baseline),
        line('bulkCreateUsers over HTTP', plain),
        line('bulkCreateUsers over HTTP, send_invitations', invited),
        `bulkCreateUsers is ${(baseline.ms / plain.ms).toFixed(1)}x the baseline's speed (target: under 2000 ms)`,
        '',
      ].join('\n'),
    );
  } finally {
    await server.dataSource.query('DELETE FROM users WHERE email LIKE $1', [`bench-${run}-%`]);
    await server.dataSource.query("DELETE FROM pgboss.job WHERE name = 'mail' AND data->>'to' LIKE $1", [`bench-${run}-%`]).catch(() => undefined);
    await server.close();
  }
}

if (require.main === module) {
  main().catch((error: unknown) => {
    process.stderr.write(`${error instanceof Error ? error.message : String(error)}\n`);
    process.exit(1);
  });
}
