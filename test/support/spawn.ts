import { spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import { createTestDatabase, type TestDatabase } from './database';
import { testEnvironment } from './server';

export const CLI = path.join(__dirname, '..', '..', 'src', 'cli', 'main.js');
/** The real server with the recorder module's job queue added (job-server.ts). */
export const JOB_SERVER = path.join(__dirname, 'job-server.js');

export interface SpawnedServer {
  url: string;
  child: ChildProcess;
  /** Everything the process wrote so far. */
  output(): string;
  /** Resolves with the exit code and signal. */
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

/** The environment of a child process: only what it needs from ours, plus `env`. */
export function childEnvironment(env: Record<string, string>): NodeJS.ProcessEnv {
  const { PATH, HOME, LANG, TMPDIR } = process.env;
  return Object.fromEntries(Object.entries({ PATH, HOME, LANG, TMPDIR, ...env }).filter(([, value]) => value !== undefined)) as NodeJS.ProcessEnv;
}

/** Runs a `plinth` command to its end. */
export function runCli(args: string[], env: Record<string, string>, cwd?: string): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [CLI, ...args], { env: childEnvironment(env), cwd, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk) => (stdout += chunk));
    child.stderr.on('data', (chunk) => (stderr += chunk));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, stdout, stderr }));
  });
}

/**
 * Starts `plinth start` (or another script that starts the server) as a separate process and
 * waits until it logs that it is ready (so it always logs at level info, whatever `env` says).
 * With `processGroup`, the child leads a process group of its own, so `process.kill(-pid, signal)`
 * signals it and its children as Ctrl-C would.
 */
export function spawnServer(
  env: Record<string, string>,
  timeoutMs = 45_000,
  options: { processGroup?: boolean; args?: string[] } = {},
): Promise<SpawnedServer> {
  const child = spawn(process.execPath, options.args ?? [CLI, 'start'], {
    env: childEnvironment({ ...env, LOG_LEVEL: 'info' }),
    stdio: ['ignore', 'pipe', 'pipe'],
    // A group of its own, as a terminal gives `npm start`: Ctrl-C signals the whole group.
    detached: options.processGroup ?? false,
  });
  let output = '';
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.on('exit', (code, signal) => resolve({ code, signal })),
  );
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`plinth did not become ready within ${timeoutMs} ms:\n${output}`));
    }, timeoutMs);
    child.stderr.on('data', (chunk) => (output += chunk));
    child.stdout.on('data', (chunk: Buffer) => {
      output += chunk;
      for (const line of chunk.toString().split('\n')) {
        if (!line.includes('Plinth is ready')) continue;
        clearTimeout(timer);
        const url = (JSON.parse(line) as { url: string }).url;
        resolve({ url, child, output: () => output, exited });
      }
    });
    void exited.then(({ code, signal }) => {
      clearTimeout(timer);
      reject(new Error(`plinth exited (code ${code}, signal ${signal}) before it was ready:\n${output}`));
    });
  });
}

/** `plinth start` in a process of its own on a new test database; `stop` ends the process and drops the database. */
export async function spawnServerOnNewDatabase(): Promise<{ server: SpawnedServer; database: TestDatabase; stop(): Promise<void> }> {
  const database = await createTestDatabase();
  const server = await spawnServer(testEnvironment(database.url));
  return {
    server,
    database,
    async stop() {
      server.child.kill('SIGTERM');
      await server.exited;
      await database.drop();
    },
  };
}
