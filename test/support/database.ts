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

async function onAdmin(sql: string): Promise<void> {
  const client = new pg.Client({ connectionString: adminUrl() });
  await client.connect();
  try {
    await client.query(sql);
  } finally {
    await client.end();
  }
}

/** A new, empty database on the test server; every test file gets its own. */
export async function createTestDatabase(): Promise<TestDatabase> {
  const name = `plinth_test_${randomBytes(6).toString('hex')}`;
  await onAdmin(`CREATE DATABASE ${name}`);
  const url = new URL(adminUrl());
  url.pathname = `/${name}`;
  return {
    name,
    url: url.toString(),
    async query<T>(sql: string, parameters: unknown[] = []) {
      const client = new pg.Client({ connectionString: url.toString() });
      await client.connect();
      try {
        return (await client.query(sql, parameters)).rows as T[];
      } finally {
        await client.end();
      }
    },
    drop: () => onAdmin(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`),
  };
}
