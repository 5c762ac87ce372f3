import net from 'node:net';
import path from 'node:path';
import pino from 'pino';
import { startEmbeddedPostgres, type EmbeddedDatabase } from '../../src/db/embedded';

declare global {
  var plinthTestPostgres: EmbeddedDatabase | undefined;
}

/**
 * Tests use DATABASE_URL when it is set (any PostgreSQL where the user may create databases);
 * otherwise one embedded PostgreSQL for the whole run, under .data-test/. Each test file then
 * creates its own database (test/support/database.ts).
 */
export default async function globalSetup(): Promise<void> {
  if (process.env.DATABASE_URL) {
    process.env.PLINTH_TEST_ADMIN_URL = process.env.DATABASE_URL;
    return;
  }
  const embedded = await startEmbeddedPostgres({
    dataDir: path.resolve(__dirname, '..', '..', '..', '.data-test'),
    port: await freePort(),
    database: 'postgres',
    logger: pino({ level: 'warn' }),
    // Two jest workers, each test file with one to three servers (each a pool, the job queue's
    // pool and listeners), some spawning processes: PostgreSQL's default of 100 is too few.
    maxConnections: 400,
  });
  globalThis.plinthTestPostgres = embedded;
  process.env.PLINTH_TEST_ADMIN_URL = embedded.url;
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
