import { createHash } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { LOCK_KEYS } from '../../src/db/lock-keys';
import { connectionOf } from '../../src/modules/admin/admin-pg-tools.service';
import type { TestDatabase } from '../support/database';
import { metadataRequest } from '../support/metadata';
import { backupCapableDatabase } from './database-support';
import { AdminClient, startAdminServer, type AdminTestServer } from './support';

interface Backup {
  file: string;
  sizeBytes: number;
  sha256: string | null;
  createdAt: string;
  safety: boolean;
}

let database: TestDatabase;
let server: AdminTestServer;
let admin: AdminClient;
let backupsDir: string;

/** Every route of the database area, with a body that would be accepted. */
const ROUTES: { method: string; route: string; body?: unknown }[] = [
  { method: 'GET', route: '/api/database/backups' },
  { method: 'POST', route: '/api/database/backups' },
  { method: 'POST', route: '/api/database/backups/restore', body: { file: 'plinth-20260101-000000-000.dump' } },
  { method: 'GET', route: '/api/database/migrations' },
  { method: 'POST', route: '/api/database/migrations/run' },
  { method: 'GET', route: '/api/database/schema' },
];

const fileSha256 = (file: string) => createHash('sha256').update(fs.readFileSync(file)).digest('hex');
const labels = async () => (await database.query<{ label: string }>('SELECT label FROM admin_db_rows ORDER BY id')).map((row) => row.label);
const backups = async () => (await admin.request<{ backups: Backup[] }>('GET', '/api/database/backups')).body.backups;

async function takeBackup(): Promise<Backup> {
  const answer = await admin.request<Backup>('POST', '/api/database/backups');
  expect(answer.status).toBe(201);
  return answer.body;
}

beforeAll(async () => {
  database = await backupCapableDatabase();
  backupsDir = fs.mkdtempSync(path.join(os.tmpdir(), 'plinth-backups-'));
  server = await startAdminServer({ PLATFORM_ADMIN_BACKUPS_DIR: backupsDir }, { database });
  admin = new AdminClient(server.adminUrl);
  expect((await admin.login()).status).toBe(200);
  await database.query('CREATE TABLE admin_db_rows (id integer PRIMARY KEY, label text NOT NULL DEFAULT $$none$$)');
  await database.query('CREATE INDEX admin_db_rows_label ON admin_db_rows (label)');
  await database.query("INSERT INTO admin_db_rows VALUES (1, 'one'), (2, 'two'), (3, 'three')");
}, 60_000);
afterAll(async () => {
  await server?.close();
  await database?.drop();
  fs.rmSync(backupsDir, { recursive: true, force: true });
});

describe('the database area of the admin API', () => {
  it('answers 401 on every route without a session', async () => {
    const anonymous = new AdminClient(server.adminUrl);
    for (const { method, route, body } of ROUTES) {
      const answer = await anonymous.request(method, route, body);
      expect({ route, status: answer.status, code: answer.body.error_code }).toEqual({ route, status: 401, code: 'UNAUTHENTICATED' });
    }
  });

  it('refuses every change without the CSRF token, taking no backup', async () => {
    for (const { method, route, body } of ROUTES.filter((entry) => entry.method === 'POST')) {
      const answer = await admin.request(method, route, body, { 'x-csrf-token': '' });
      expect({ route, status: answer.status, code: answer.body.error_code }).toEqual({ route, status: 403, code: 'CSRF_TOKEN_INVALID' });
    }
    expect(await backups()).toEqual([]);
    expect(fs.readdirSync(backupsDir)).toEqual([]);
  });

  it('shows the schema: tables by schema, columns, indexes, primary keys, row estimates, and which are tracked', async () => {
    const schemaOf = async () => (await admin.request<{ tables: any[] }>('GET', '/api/database/schema')).body.tables;
    let tables = await schemaOf();
    expect(tables.some((table) => ['pg_catalog', 'information_schema'].includes(table.schema) || table.schema.startsWith('pg_toast'))).toBe(false);
    expect(tables.find((table) => table.schema === 'public' && table.name === 'plinth_migrations')).toBeDefined();
    let rows = tables.find((table) => table.schema === 'public' && table.name === 'admin_db_rows');
    expect(rows).toMatchObject({
      kind: 'table',
      primaryKey: ['id'],
      tracked: false,
      columns: [
        { name: 'id', type: 'integer', nullable: false, default: null },
        { name: 'label', type: 'text', nullable: false, default: "'none'::text" },
      ],
    });
    expect(rows.indexes).toEqual(
      expect.arrayContaining([
        { name: 'admin_db_rows_pkey', definition: expect.stringContaining('UNIQUE INDEX admin_db_rows_pkey'), unique: true, primary: true },
        { name: 'admin_db_rows_label', definition: expect.stringContaining('(label)'), unique: false, primary: false },
      ]),
    );
    // Never analysed: PostgreSQL has no estimate (reltuples -1), shown as null; after ANALYZE, the count.
    expect(rows.rowEstimate).toBeNull();
    await database.query('ANALYZE admin_db_rows');
    expect((await metadataRequest(server.url, { type: 'pg_track_table', args: { table: 'admin_db_rows' } })).status).toBe(200);
    tables = await schemaOf();
    rows = tables.find((table) => table.schema === 'public' && table.name === 'admin_db_rows');
    expect(rows).toMatchObject({ rowEstimate: 3, tracked: true });
    expect(tables.find((table) => table.name === 'plinth_migrations').tracked).toBe(false);
  });

  it('lists the migrations, and runs the pending ones under the migration lock', async () => {
    type Migrations = { migrations: { name: string; status: string; appliedAt: string | null; unknownToThisVersion: boolean }[] };
    const before = (await admin.request<Migrations>('GET', '/api/database/migrations')).body.migrations;
    const known = server.server.dataSource.migrations.length;
    expect(before).toHaveLength(known);
    expect(before.every((migration) => migration.status === 'applied' && !migration.unknownToThisVersion)).toBe(true);
    expect(before.map((migration) => migration.name)).toContain('CreateUsers1763700000000');

    // Nothing pending: nothing runs.
    const idle = await admin.request<{ ran: string[] }>('POST', '/api/database/migrations/run');
    expect(idle.status).toBe(200);
    expect(idle.body.ran).toEqual([]);

    // The last migration reverted: pending, then run again.
    await server.server.dataSource.undoLastMigration({ transaction: 'each' });
    const last = before[before.length - 1].name;
    const pending = (await admin.request<Migrations>('GET', '/api/database/migrations')).body.migrations;
    expect(pending.find((migration) => migration.name === last)).toMatchObject({ status: 'pending', appliedAt: null });
    const run = await admin.request<{ ran: string[] } & Migrations>('POST', '/api/database/migrations/run');
    expect(run.status).toBe(200);
    expect(run.body.ran).toEqual([last]);
    // Applied now, and recorded so (migrations applied since MigrationAppliedAt have their time).
    const rerun = run.body.migrations.find((migration) => migration.name === last)!;
    expect(Math.abs(Date.parse(rerun.appliedAt!) - Date.now())).toBeLessThan(60_000);
    expect(run.body.migrations.every((migration) => migration.status === 'applied')).toBe(true);

    // A migration applied by another version of Plinth is shown as such.
    await database.query("INSERT INTO plinth_migrations (timestamp, name) VALUES (1999999999999, 'FromTheFuture1999999999999')");
    const unknown = (await admin.request<Migrations>('GET', '/api/database/migrations')).body.migrations;
    expect(unknown[unknown.length - 1]).toMatchObject({ name: 'FromTheFuture1999999999999', status: 'applied', unknownToThisVersion: true });
    await database.query("DELETE FROM plinth_migrations WHERE name = 'FromTheFuture1999999999999'");
  });

  it('takes a backup: a pg_dump custom-format file with its size and SHA-256 recorded beside it', async () => {
    const backup = await takeBackup();
    expect(backup.file).toMatch(/^plinth-\d{8}-\d{6}-\d{3}\.dump$/);
    expect(backup.safety).toBe(false);
    const file = path.join(backupsDir, backup.file);
    expect(fs.readFileSync(file).subarray(0, 5).toString('latin1')).toBe('PGDMP');
    expect(backup.sizeBytes).toBe(fs.statSync(file).size);
    expect(backup.sha256).toBe(fileSha256(file));
    expect(JSON.parse(fs.readFileSync(`${file}.json`, 'utf8'))).toMatchObject({ file: backup.file, sha256: backup.sha256, sizeBytes: backup.sizeBytes });
    expect(await backups()).toContainEqual(expect.objectContaining({ file: backup.file, sha256: backup.sha256, safety: false }));
  });

  it('takes one backup at a time: a second one asked meanwhile is refused with 409', async () => {
    const answers = await Promise.all([admin.request('POST', '/api/database/backups'), admin.request('POST', '/api/database/backups')]);
    expect(answers.map((answer) => answer.status).sort()).toEqual([201, 409]);
    expect(answers.find((answer) => answer.status === 409)!.body.error_code).toBe('BACKUP_BUSY');
  });

  it('refuses a backup or a restore while another instance holds the backups lock, changing nothing', async () => {
    const listed = await backups();
    const other = new pg.Client({ connectionString: database.url });
    await other.connect();
    try {
      await other.query('SELECT pg_advisory_lock($1)', [LOCK_KEYS.databaseBackups]);
      const backup = await admin.request('POST', '/api/database/backups');
      const restore = await admin.request('POST', '/api/database/backups/restore', { file: listed[0].file });
      for (const answer of [backup, restore]) expect({ status: answer.status, code: answer.body.error_code }).toEqual({ status: 409, code: 'BACKUP_BUSY' });
      expect(await backups()).toEqual(listed);
    } finally {
      await other.end();
    }
    // Released with the other session: a backup goes ahead.
    await takeBackup();
  });

  it('refuses to restore what is not a backup of the folder, changing nothing', async () => {
    const listed = await backups();
    const bad: [unknown, number, string][] = [
      [{ file: '../x' }, 400, 'INVALID_BACKUP_NAME'],
      [{ file: '../x.dump' }, 400, 'INVALID_BACKUP_NAME'],
      [{ file: 'sub/x.dump' }, 400, 'INVALID_BACKUP_NAME'],
      [{ file: `${backupsDir}/x.dump` }, 400, 'INVALID_BACKUP_NAME'],
      [{ file: 'x.sql' }, 400, 'INVALID_BACKUP_NAME'],
      [{ file: 'x..dump' }, 400, 'INVALID_BACKUP_NAME'],
      [{ file: '' }, 400, 'INVALID_BACKUP_NAME'],
      [{}, 400, 'VALIDATION_ERROR'],
      [{ file: listed[0].file, sha256: 'not-hex' }, 400, 'VALIDATION_ERROR'],
      [{ file: 'plinth-20200101-000000-000.dump' }, 404, 'BACKUP_NOT_FOUND'],
      [{ file: listed[0].file, sha256: 'a'.repeat(64) }, 409, 'BACKUP_CHECKSUM_MISMATCH'],
    ];
    for (const [body, status, code] of bad) {
      const answer = await admin.request('POST', '/api/database/backups/restore', body);
      expect({ body, status: answer.status, code: answer.body.error_code }).toEqual({ body, status, code: expect.stringContaining(code) });
      expect(answer.body).not.toHaveProperty('stack');
    }
    // A dump put in the folder by hand has no recorded checksum: listed, not restored.
    fs.copyFileSync(path.join(backupsDir, listed[0].file), path.join(backupsDir, 'by-hand.dump'));
    expect(await backups()).toContainEqual(expect.objectContaining({ file: 'by-hand.dump', sha256: null }));
    const unknown = await admin.request('POST', '/api/database/backups/restore', { file: 'by-hand.dump' });
    expect({ status: unknown.status, code: unknown.body.error_code }).toEqual({ status: 409, code: 'BACKUP_CHECKSUM_UNKNOWN' });
    fs.rmSync(path.join(backupsDir, 'by-hand.dump'));
    expect(await backups()).toEqual(listed);
  });

  it('refuses a tampered backup: no safety backup, no change to the data', async () => {
    const backup = await takeBackup();
    await database.query("UPDATE admin_db_rows SET label = 'changed after' WHERE id = 1");
    const file = path.join(backupsDir, backup.file);
    const bytes = fs.readFileSync(file);
    bytes[bytes.length - 10] ^= 0xff;
    fs.writeFileSync(file, bytes);
    const listed = await backups();
    const answer = await admin.request('POST', '/api/database/backups/restore', { file: backup.file });
    expect({ status: answer.status, code: answer.body.error_code }).toEqual({ status: 409, code: 'BACKUP_CHECKSUM_MISMATCH' });
    expect(await backups()).toEqual(listed);
    expect(await labels()).toEqual(['changed after', 'two', 'three']);
    await database.query("UPDATE admin_db_rows SET label = 'one' WHERE id = 1");
  });

  it('restores a backup: rows deleted after it come back, after a safety backup of the state it replaced', async () => {
    const backup = await takeBackup();
    await database.query('DELETE FROM admin_db_rows WHERE id IN (2, 3)');
    await database.query("INSERT INTO admin_db_rows VALUES (4, 'four')");
    // A session opened after the backup, and the dashboard's lock-out state, are not rolled back.
    const later = new AdminClient(server.adminUrl);
    expect((await later.login()).status).toBe(200);

    const answer = await admin.request<any>('POST', '/api/database/backups/restore', { file: backup.file, sha256: backup.sha256!.toUpperCase() });
    expect({ status: answer.status, body: answer.status === 200 ? undefined : answer.body }).toEqual({ status: 200 });
    expect(answer.body).toMatchObject({
      restored: { file: backup.file },
      safetyBackup: { safety: true },
      restartRecommended: true,
      keptTables: ['admin_sessions', 'admin_login_state'],
    });
    expect(await labels()).toEqual(['one', 'two', 'three']);
    expect((await later.request('GET', '/api/auth/session')).status).toBe(200);
    expect((await admin.request('GET', '/api/auth/session')).status).toBe(200);
    // The server goes on serving from the restored database.
    expect((await admin.request('GET', '/api/database/migrations')).status).toBe(200);

    // The safety backup holds the state the restore replaced: restoring it brings that back.
    const safety = answer.body.safetyBackup as Backup;
    expect(safety.sha256).toBe(fileSha256(path.join(backupsDir, safety.file)));
    expect((await backups()).find((each) => each.file === safety.file)).toMatchObject({ safety: true });
    const undo = await admin.request('POST', '/api/database/backups/restore', { file: safety.file });
    expect(undo.status).toBe(200);
    expect(await labels()).toEqual(['one', 'four']);
  }, 60_000);
});

describe('the connection given to pg_dump, pg_restore and psql', () => {
  it('keeps the password out of their command line (ps shows it): PGPASSWORD in their environment instead', () => {
    expect(connectionOf('postgres://app:p%40ss%3Aword@db.internal:6543/shop?sslmode=require')).toEqual({
      env: { PGPASSWORD: 'p@ss:word' },
      dbname: 'postgres://app@db.internal:6543/shop?sslmode=require',
    });
    expect(connectionOf('postgresql://app@db.internal/shop?password=secret&application_name=x')).toEqual({
      env: { PGPASSWORD: 'secret' },
      dbname: 'postgresql://app@db.internal/shop?application_name=x',
    });
    expect(connectionOf('postgres://postgres@127.0.0.1:5432/postgres')).toEqual({ env: {}, dbname: 'postgres://postgres@127.0.0.1:5432/postgres' });
  });
});

describe('without pg_dump', () => {
  it('answers 503 PG_TOOLS_MISSING, naming the setting', async () => {
    const empty = fs.mkdtempSync(path.join(os.tmpdir(), 'plinth-no-tools-'));
    const other = await startAdminServer({ PLATFORM_ADMIN_BACKUPS_DIR: backupsDir, PLATFORM_ADMIN_PG_BIN_DIR: empty }, { database });
    try {
      const client = new AdminClient(other.adminUrl);
      expect((await client.login()).status).toBe(200);
      const listed = await backups();
      const answer = await client.request('POST', '/api/database/backups');
      expect({ status: answer.status, code: answer.body.error_code }).toEqual({ status: 503, code: 'PG_TOOLS_MISSING' });
      expect(answer.body.message).toContain('PLATFORM_ADMIN_PG_BIN_DIR');
      const restore = await client.request('POST', '/api/database/backups/restore', { file: listed[0].file });
      expect({ status: restore.status, code: restore.body.error_code }).toEqual({ status: 503, code: 'PG_TOOLS_MISSING' });
      expect(await backups()).toEqual(listed);
    } finally {
      await other.close();
      fs.rmSync(empty, { recursive: true, force: true });
    }
  });
});
