import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import type { Logger } from 'pino';
import type { DataSource } from 'typeorm';
import { Refusal } from '../../common/refusal';
import { LOCK_KEYS } from '../../db/lock-keys';
import { one, rows } from '../../db/sql';
import { candidateFolders, connectionOf, embeddedBinFolder, findPgTools, runTool, type PgTools, type ToolRun } from './admin-pg-tools.service';

/** A backup as listed: its file in the backups folder and what its manifest recorded. */
export interface Backup {
  file: string;
  sizeBytes: number;
  /** The SHA-256 recorded when it was taken (hex); null for a file with no manifest (not taken here). */
  sha256: string | null;
  createdAt: string;
  /** Taken by a restore, just before it changed the database. */
  safety: boolean;
  serverVersion: string | null;
  pgDumpVersion: string | null;
}

export interface RestoreResult {
  restored: Backup;
  safetyBackup: Backup;
  durationMs: number;
  /** Tables left as they were (the dashboard's sessions and lock-out state). */
  keptTables: string[];
  /** What this process (and the others) loaded from the database at start-up may be older than the restored data. */
  restartRecommended: boolean;
}

export interface BackupSettings {
  backupsDir: string;
  /** PLATFORM_ADMIN_PG_BIN_DIR. */
  pgBinDir: string | undefined;
  timeoutMs: number;
  /** The database is the embedded PostgreSQL (its package's programs are looked at first). */
  embedded: boolean;
}

/** A backup's file name: what Plinth writes, and nothing that leaves the folder. */
const BACKUP_NAME = '^[A-Za-z0-9][A-Za-z0-9_.-]{0,150}\\.dump$';
const BACKUP_NAME_PATTERN = new RegExp(BACKUP_NAME);
const MANIFEST_SUFFIX = '.json';
/**
 * The dashboard's own tables: a restore leaves them as they are, so that it logs nobody in again
 * who logged out after the backup, lifts no lock-out, and keeps the operator's session.
 */
const KEPT_TABLES = ['admin_sessions', 'admin_login_state'];
/** Their entries in `pg_restore --list` (table, data, constraints, index): `<id>; <oid> <oid> <TYPE> public <name> ...`. */
const KEPT_ENTRY = new RegExp(`^\\d+; \\d+ \\d+ [A-Z ]+ public (${[...KEPT_TABLES, 'admin_sessions_last_seen_at'].join('|')}) `);

/**
 * The database's backups (pg_dump's custom format) in the backups folder, each with a manifest
 * beside it (`<file>.json`: size, SHA-256, when) and restores of them (pg_restore), one backup or
 * restore at a time across every instance (an advisory lock).
 */
export class DatabaseBackups {
  private tools: Promise<PgTools> | undefined;

  constructor(
    private readonly dataSource: DataSource,
    private readonly settings: BackupSettings,
    private readonly logger: Logger,
  ) {}

  async list(): Promise<Backup[]> {
    let names: string[];
    try {
      names = await fs.promises.readdir(this.settings.backupsDir);
    } catch {
      return [];
    }
    const backups = await Promise.all(names.filter((name) => BACKUP_NAME_PATTERN.test(name)).map((name) => this.describe(name)));
    return backups
      .filter((backup): backup is Backup => backup !== undefined)
      .sort((a, b) => b.createdAt.localeCompare(a.createdAt) || b.file.localeCompare(a.file));
  }

  /** Takes a backup now (409 while another backup or restore runs). */
  create(): Promise<Backup> {
    return this.exclusively(() => this.dump(false));
  }

  /**
   * Restores `file` after checking its SHA-256 against its manifest's (and `sha256` when given),
   * taking a safety backup first; in one transaction, so a failure changes nothing.
   */
  restore(file: string, sha256?: string): Promise<RestoreResult> {
    const backupPath = this.pathOf(file);
    if (!fs.existsSync(backupPath)) return Promise.reject(new Refusal('BACKUP_NOT_FOUND', `There is no backup ${file}`, 404, { field: 'file' }));
    return this.exclusively(async () => {
      const started = Date.now();
      const backup = await this.describe(file);
      if (!backup) throw new Refusal('BACKUP_NOT_FOUND', `There is no backup ${file}`, 404, { field: 'file' });
      if (!backup.sha256)
        throw new Refusal('BACKUP_CHECKSUM_UNKNOWN', `${file} has no recorded SHA-256 (no ${file}${MANIFEST_SUFFIX}): it is not restored`, 409, {
          field: 'file',
        });
      const actual = await sha256Of(backupPath);
      if (!sameHex(actual, backup.sha256)) {
        throw new Refusal('BACKUP_CHECKSUM_MISMATCH', `${file} does not match its recorded SHA-256: it changed since it was taken, and is not restored`, 409, {
          field: 'file',
        });
      }
      if (sha256 !== undefined && !sameHex(actual, sha256.toLowerCase())) {
        throw new Refusal('BACKUP_CHECKSUM_MISMATCH', `${file} does not have the SHA-256 given: it is not restored`, 409, { field: 'sha256' });
      }
      const tools = await this.pgTools();
      const { env, dbname } = this.connection();
      const toc = await runTool(tools.pgRestore, ['--list', backupPath], env, this.settings.timeoutMs, true);
      if (toc.code !== 0) throw failure('RESTORE_FAILED', `${path.basename(tools.pgRestore)} cannot read ${file}`, toc);
      const safetyBackup = await this.dump(true);
      const work = path.join(this.settings.backupsDir, `.restore-${randomBytes(6).toString('hex')}`);
      const [listFile, preFile, scriptFile] = ['list', 'pre.sql', 'sql'].map((suffix) => `${work}.${suffix}`);
      try {
        await fs.promises.writeFile(listFile, keepingTables(toc.stdout), { mode: 0o600 });
        await fs.promises.writeFile(preFile, await this.partitionedDrops(toc.stdout), { mode: 0o600 });
        // The restore as SQL (pg_restore's --clean drops first), run by psql in one transaction after
        // our drops of partitioned tables: pg_restore's own drops of their partitions' inherited
        // constraints fail (PostgreSQL refuses them), while dropping the partitioned table takes them along.
        const script = await runTool(
          tools.pgRestore,
          ['--clean', '--if-exists', '--no-owner', `--use-list=${listFile}`, `--file=${scriptFile}`, backupPath],
          {},
          this.settings.timeoutMs,
        );
        if (script.code !== 0) throw failure('RESTORE_FAILED', `${path.basename(tools.pgRestore)} cannot read ${file}; nothing changed`, script);
        const run = await runTool(
          tools.psql,
          ['--no-psqlrc', '--quiet', '--set=ON_ERROR_STOP=1', '--single-transaction', `--dbname=${dbname}`, `--file=${preFile}`, `--file=${scriptFile}`],
          env,
          this.settings.timeoutMs,
        );
        if (run.code !== 0)
          throw failure('RESTORE_FAILED', `Restoring ${file} failed and changed nothing (a safety backup ${safetyBackup.file} was taken)`, run);
      } finally {
        await Promise.all([listFile, preFile, scriptFile].map((each) => fs.promises.rm(each, { force: true })));
      }
      this.logger.warn({ file, safetyBackup: safetyBackup.file }, 'database restored from a backup');
      return { restored: backup, safetyBackup, durationMs: Date.now() - started, keptTables: KEPT_TABLES, restartRecommended: true };
    });
  }

  /** DROP TABLE ... CASCADE of each partitioned table of the backup that the database has now. */
  private async partitionedDrops(toc: string): Promise<string> {
    const tables = [...toc.matchAll(/^\d+; \d+ \d+ TABLE (\S+) (\S+) /gm)].map((match) => `${match[1]}.${match[2]}`);
    const partitioned = await rows<{ name: string }>(
      this.dataSource,
      `SELECT format('%I.%I', n.nspname, c.relname) AS name FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
        WHERE c.relkind = 'p' AND NOT c.relispartition AND n.nspname || '.' || c.relname = ANY($1::text[])`,
      [tables],
    );
    return partitioned.map(({ name }) => `DROP TABLE IF EXISTS ${name} CASCADE;\n`).join('');
  }

  /** The path of a backup in the folder; 400 for a name that is not one (a path, `..`, another suffix). */
  private pathOf(file: string): string {
    if (!BACKUP_NAME_PATTERN.test(file) || file.includes('..')) {
      throw new Refusal(
        'INVALID_BACKUP_NAME',
        'file must be the name of a backup in the backups folder (letters, digits, ".", "_", "-", ending in .dump)',
        400,
        {
          field: 'file',
        },
      );
    }
    return path.join(this.settings.backupsDir, file);
  }

  private async describe(file: string): Promise<Backup | undefined> {
    const backupPath = this.pathOf(file);
    let stat: fs.Stats;
    try {
      stat = await fs.promises.stat(backupPath);
    } catch {
      return undefined;
    }
    if (!stat.isFile()) return undefined;
    let manifest: Partial<Backup> = {};
    try {
      manifest = JSON.parse(await fs.promises.readFile(`${backupPath}${MANIFEST_SUFFIX}`, 'utf8')) as Partial<Backup>;
    } catch {
      // a file not taken here: listed, not restorable
    }
    return {
      file,
      sizeBytes: stat.size,
      sha256: typeof manifest.sha256 === 'string' ? manifest.sha256 : null,
      createdAt: typeof manifest.createdAt === 'string' ? manifest.createdAt : stat.mtime.toISOString(),
      safety: manifest.safety === true,
      serverVersion: typeof manifest.serverVersion === 'string' ? manifest.serverVersion : null,
      pgDumpVersion: typeof manifest.pgDumpVersion === 'string' ? manifest.pgDumpVersion : null,
    };
  }

  private async dump(safety: boolean): Promise<Backup> {
    const tools = await this.pgTools();
    await fs.promises.mkdir(this.settings.backupsDir, { recursive: true, mode: 0o700 });
    const createdAt = new Date();
    const file = `plinth-${createdAt.toISOString().replace(/[-:]/g, '').replace('T', '-').replace('.', '-').replace('Z', '')}${safety ? '-safety' : ''}.dump`;
    const backupPath = this.pathOf(file);
    const partial = `${backupPath}.partial`;
    const { env, dbname } = this.connection();
    const run = await runTool(tools.pgDump, ['--format=custom', `--file=${partial}`, `--dbname=${dbname}`], env, this.settings.timeoutMs);
    if (run.code !== 0) {
      await fs.promises.rm(partial, { force: true });
      throw failure('BACKUP_FAILED', 'pg_dump failed', run);
    }
    const { server_version: serverVersion } = (await one<{ server_version: string }>(this.dataSource, 'SHOW server_version'))!;
    const backup: Backup = {
      file,
      sizeBytes: (await fs.promises.stat(partial)).size,
      sha256: await sha256Of(partial),
      createdAt: createdAt.toISOString(),
      safety,
      serverVersion,
      pgDumpVersion: tools.version,
    };
    await fs.promises.writeFile(`${backupPath}${MANIFEST_SUFFIX}`, `${JSON.stringify(backup, null, 2)}\n`, { mode: 0o600 });
    await fs.promises.rename(partial, backupPath);
    this.logger.info({ file, sizeBytes: backup.sizeBytes, safety }, 'database backup taken');
    return backup;
  }

  /** Runs `work` holding the backups' advisory lock; 409 BACKUP_BUSY when another backup or restore holds it. */
  private async exclusively<T>(work: () => Promise<T>): Promise<T> {
    const runner = this.dataSource.createQueryRunner();
    await runner.connect();
    try {
      const [{ locked }] = (await runner.query('SELECT pg_try_advisory_lock($1) AS locked', [LOCK_KEYS.databaseBackups])) as [{ locked: boolean }];
      if (!locked) throw new Refusal('BACKUP_BUSY', 'A backup or restore of the database is running: try again when it has finished', 409);
      try {
        return await work();
      } finally {
        await runner.query('SELECT pg_advisory_unlock($1)', [LOCK_KEYS.databaseBackups]).catch(() => undefined);
      }
    } finally {
      await runner.release();
    }
  }

  private connection(): { env: Record<string, string>; dbname: string } {
    return connectionOf((this.dataSource.options as unknown as { url: string }).url);
  }

  private pgTools(): Promise<PgTools> {
    this.tools ??= (async () => {
      const { server_version_num: number } = (await one<{ server_version_num: string }>(this.dataSource, 'SHOW server_version_num'))!;
      const embedded = this.settings.embedded ? await embeddedBinFolder() : undefined;
      return findPgTools(candidateFolders(this.settings.pgBinDir, embedded), Math.floor(Number(number) / 10_000));
    })();
    // A refusal is not kept: tools installed later are found at the next request.
    return this.tools.catch((error: unknown) => {
      this.tools = undefined;
      throw error;
    });
  }
}

/** The table of contents of `pg_restore --list` without the entries of the dashboard's own tables. */
function keepingTables(toc: string): string {
  return toc
    .split('\n')
    .filter((line) => !KEPT_ENTRY.test(line))
    .join('\n');
}

function failure(code: string, message: string, run: ToolRun): Refusal {
  const detail = run.timedOut ? 'stopped after PLATFORM_ADMIN_BACKUP_TIMEOUT_SECONDS' : run.stderr.trim().split('\n').slice(-3).join(' ');
  return new Refusal(code, `${message}: ${detail}`, 503);
}

async function sha256Of(file: string): Promise<string> {
  const hash = createHash('sha256');
  for await (const chunk of fs.createReadStream(file)) hash.update(chunk as Buffer);
  return hash.digest('hex');
}

function sameHex(a: string, b: string): boolean {
  const left = Buffer.from(a, 'utf8');
  const right = Buffer.from(b, 'utf8');
  return left.length === right.length && timingSafeEqual(left, right);
}
