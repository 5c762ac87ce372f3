import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { createTestDatabase, onAdmin, testDatabaseOn, type TestDatabase } from '../support/database';

/**
 * The server the backup tests fall back to when the run's server is newer than the pg_dump on
 * PATH (pg_dump refuses a newer server): the machine's PostgreSQL by default.
 */
const FALLBACK_ADMIN_URL = process.env.PLINTH_TEST_BACKUP_ADMIN_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';

/** The major version of a pg_dump program (on PATH by default); 0 when there is none. */
export function pgDumpMajor(program = 'pg_dump'): number {
  try {
    const output = execFileSync(program, ['--version'], { encoding: 'utf8' });
    return Number(/\(PostgreSQL\)\s+(\d+)/.exec(output)?.[1] ?? 0);
  } catch {
    return 0;
  }
}

export async function serverMajor(url: string): Promise<number> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    const { rows } = await client.query<{ server_version_num: string }>('SHOW server_version_num');
    return Math.floor(Number(rows[0].server_version_num) / 10_000);
  } finally {
    await client.end();
  }
}

/**
 * A database of this test file's own that the pg_dump on PATH can dump: a copy of the run's
 * template when the run's server is not newer than pg_dump, otherwise an empty one on the
 * fallback server (the test server migrates it as it starts). Restores happen in it only.
 */
export async function backupCapableDatabase(): Promise<TestDatabase> {
  const runServer = process.env.PLINTH_TEST_ADMIN_URL!;
  if ((await serverMajor(runServer)) <= pgDumpMajor()) return createTestDatabase();
  const name = `plinth_test_backup_${randomBytes(6).toString('hex')}`;
  await onAdmin(`CREATE DATABASE ${name}`, FALLBACK_ADMIN_URL);
  return testDatabaseOn(name, FALLBACK_ADMIN_URL);
}
