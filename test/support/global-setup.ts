import { randomBytes } from 'node:crypto';
import net from 'node:net';
import path from 'node:path';
import pino from 'pino';
import { createDataSource, runMigrations } from '../../src/db/data-source';
import { startEmbeddedPostgres, type EmbeddedDatabase } from '../../src/db/embedded';
import { databaseUrl, onAdmin } from './database';

declare global {
  var plinthTestPostgres: EmbeddedDatabase | undefined;
}

/**
 * Tests use DATABASE_URL when it is set (any PostgreSQL where the user may create databases);
 * otherwise one embedded PostgreSQL for the whole run, under .data-test/. Each test file then
 * creates its own database (test/support/database.ts), a copy of the template migrated here.
 */
export default async function globalSetup(): Promise<void> {
  if (process.env.DATABASE_URL) {
    process.env.PLINTH_TEST_ADMIN_URL = process.env.DATABASE_URL;
  } else {
    const embedded = await startEmbeddedPostgres({
      dataDir: path.resolve(__dirname, '..', '..', '..', '.data-test'),
      port: await freePort(),
      database: 'postgres',
      logger: pino({ level: 'warn' }),
      // Several jest workers, each test file with one to three servers (each a pool, the job queue's
      // pool and listeners), some spawning processes: PostgreSQL's default of 100 is too few.
      maxConnections: 400,
    });
    globalThis.plinthTestPostgres = embedded;
    process.env.PLINTH_TEST_ADMIN_URL = embedded.url;
    // The test cluster's data is thrown away: no waiting for the disk at each commit, database
    // creation and drop (no test stops PostgreSQL itself; a stopped server still flushes its data).
    for (const setting of ['fsync = off', 'synchronous_commit = off', 'full_page_writes = off']) await onAdmin(`ALTER SYSTEM SET ${setting}`);
    await onAdmin('SELECT pg_reload_conf()');
  }
  process.env.PLINTH_TEST_TEMPLATE_DATABASE = await createMigratedTemplate();
}

/** A database with every migration applied, which test databases are copied from; dropped by the teardown. */
async function createMigratedTemplate(): Promise<string> {
  const name = `plinth_test_template_${randomBytes(6).toString('hex')}`;
  await onAdmin(`CREATE DATABASE ${name}`);
  // Two connections: the migration lock holds one while the migrations run on the other.
  const dataSource = createDataSource(databaseUrl(name), 2);
  await dataSource.initialize();
  try {
    await runMigrations(dataSource);
  } finally {
    await dataSource.destroy();
  }
  return name;
}

export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as net.AddressInfo;
      server.close(() => resolve(port));
    });
  });
}
