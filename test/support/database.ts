import { randomBytes } from 'node:crypto';
import pg from 'pg';

export interface TestDatabase {
  name: string;
  url: string;
  /** Runs one statement on the test database (its own short-lived connection). */
  query<T = Record<string, unknown>>(sql: string, parameters?: unknown[]): Promise<T[]>;
  drop(): Promise<void>;
}

function adminUrl(): string {
  const url = process.env.PLINTH_TEST_ADMIN_URL;
  if (!url) throw new Error('PLINTH_TEST_ADMIN_URL is unset: run the tests through jest (its global setup sets it)');
  return url;
}

export async function onAdmin(sql: string, url = adminUrl()): Promise<void> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    await client.query(sql);
  } finally {
    await client.end();
  }
}

/** The URL of `name` on the server of `admin`. */
export function databaseUrl(name: string, admin = adminUrl()): string {
  const url = new URL(admin);
  url.pathname = `/${name}`;
  return url.toString();
}

/**
 * A new database on the test server; every test file gets its own. It is a copy of the run's
 * migrated template (global setup migrates it once: copying is a fraction of running every
 * migration), or, with `empty`, a database with no tables, for the tests of migrating one.
 */
export async function createTestDatabase(options: { empty?: boolean } = {}): Promise<TestDatabase> {
  const name = `plinth_test_${randomBytes(6).toString('hex')}`;
  const template = options.empty ? undefined : process.env.PLINTH_TEST_TEMPLATE_DATABASE;
  await onAdmin(template ? `CREATE DATABASE ${name} TEMPLATE ${template}` : `CREATE DATABASE ${name}`);
  return testDatabaseOn(name);
}

/** The test database `name` on the server of `admin` (created by the caller). */
export function testDatabaseOn(name: string, admin = adminUrl()): TestDatabase {
  const url = databaseUrl(name, admin);
  return {
    name,
    url,
    async query<T>(sql: string, parameters: unknown[] = []) {
      const client = new pg.Client({ connectionString: url });
      await client.connect();
      try {
        return (await client.query(sql, parameters)).rows as T[];
      } finally {
        await client.end();
      }
    },
    drop: () => onAdmin(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`, admin),
  };
}
