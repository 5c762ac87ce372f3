import { fork, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import type http from 'node:http';
import type { AddressInfo } from 'node:net';
import { GRAPHQL_PATH, type ChildMessage, type ParentMessage } from './shared';

/**
 * Benchmark servers as child processes: the parent forks a script as `serve <target>` and reads
 * its CPU time and memory; the child serves and answers. Light on purpose: a server process
 * loads only what its target needs.
 */

const SERVER_START_TIMEOUT_MS = 120_000;
const SERVER_STOP_TIMEOUT_MS = 15_000;

/** A server running in a child process (a benchmark script with `serve <target>`), as the parent sees it. */
export interface ServerProcess<Name extends string = string> {
  target: Name;
  url: string;
  /** Resident memory when the server reported ready. */
  startRssBytes: number;
  /** User + system CPU time the server process has used so far, in microseconds, and its resident memory. */
  usage(): Promise<{ micros: number; rssBytes: number; heapBytes?: number }>;
  stop(): Promise<void>;
}

/**
 * Forks `script` as `serve <served>` (the script calls runServerRole; `served` is `target` unless
 * another build's script serves it under its own name) and waits until the server listens. Its
 * stdout (Plinth's pino logs, if the level lets any through) goes to `logFile`, as it would in
 * production.
 */
export function forkServer<Name extends string>(
  script: string,
  target: Name,
  options: { served?: string; execArgv: string[]; env: NodeJS.ProcessEnv; logFile: string },
): Promise<ServerProcess<Name>> {
  const logFd = fs.openSync(options.logFile, 'w');
  const child = fork(script, ['serve', options.served ?? target], { execArgv: options.execArgv, env: options.env, stdio: ['ignore', logFd, 'inherit', 'ipc'] });
  fs.closeSync(logFd);

  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => fail(new Error(`${target} did not start within ${SERVER_START_TIMEOUT_MS} ms`)), SERVER_START_TIMEOUT_MS);
    const onExit = (code: number | null) => fail(new Error(`${target} exited (code ${code}) before it was ready`));
    const onMessage = (message: ChildMessage) => {
      clearTimeout(timer);
      child.off('exit', onExit);
      if (message.type === 'failed') return fail(new Error(`${target} failed to start:\n${message.error}`));
      if (message.type !== 'ready') return fail(new Error(`${target} sent ${message.type} before it was ready`));
      const usage = () => queryUsage(child);
      void usage().then(({ rssBytes }) => resolve({ target, url: message.url, startRssBytes: rssBytes, usage, stop: () => stopChild(child) }));
    };
    function fail(error: Error) {
      clearTimeout(timer);
      child.off('message', onMessage);
      child.kill('SIGKILL');
      reject(error);
    }
    child.once('message', onMessage);
    child.once('exit', onExit);
  });
}

function queryUsage(child: ChildProcess): Promise<{ micros: number; rssBytes: number; heapBytes?: number }> {
  return new Promise((resolve) => {
    const onMessage = (message: ChildMessage) => {
      if (message.type !== 'cpu-usage') return;
      child.off('message', onMessage);
      resolve({ micros: message.micros, rssBytes: message.rssBytes, heapBytes: message.heapBytes });
    };
    child.on('message', onMessage);
    child.send({ type: 'cpu-usage' } satisfies ParentMessage);
  });
}

/** Asks the child to close its server (so a CPU profile gets written); kills it if it hangs. */
function stopChild(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise((resolve) => {
    const timer = setTimeout(() => child.kill('SIGKILL'), SERVER_STOP_TIMEOUT_MS);
    child.once('exit', () => {
      clearTimeout(timer);
      resolve();
    });
    child.send({ type: 'stop' } satisfies ParentMessage);
  });
}

/** A started server: its GraphQL endpoint and how to stop it. */
export interface BenchServer {
  url: string;
  close(): Promise<void>;
}

/**
 * Child-process side: starts one server, reports its URL to the parent, answers CPU-usage
 * queries, and stops on request (or when the parent goes away). Exiting through process.exit
 * lets --cpu-prof write its profile.
 */
export async function serveInChild(start: () => Promise<BenchServer>): Promise<void> {
  const send = (message: ChildMessage) => process.send?.(message);
  let server: BenchServer;
  try {
    server = await start();
  } catch (error) {
    send({ type: 'failed', error: error instanceof Error ? (error.stack ?? error.message) : String(error) });
    process.exit(1);
  }
  let stopping = false;
  const stop = () => {
    if (stopping) return;
    stopping = true;
    // The process ends whether or not the server closed cleanly.
    void server.close().finally(() => process.exit(0));
  };
  process.on('message', (message: ParentMessage) => {
    if (message.type === 'stop') return stop();
    const { user, system } = process.cpuUsage();
    const { rss, heapTotal } = process.memoryUsage();
    send({ type: 'cpu-usage', micros: user + system, rssBytes: rss, heapBytes: heapTotal });
  });
  process.on('disconnect', stop);
  send({ type: 'ready', url: server.url });
}

export function listen(server: http.Server): Promise<BenchServer> {
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as AddressInfo;
      resolve({
        url: `http://127.0.0.1:${port}${GRAPHQL_PATH}`,
        close: () =>
          new Promise<void>((done) => {
            server.close(() => done());
            server.closeAllConnections();
          }),
      });
    });
  });
}

/**
 * A bench file's entry point: `node <file> serve <target>` is a forked server (one of `targets`,
 * started by `start`); without arguments, the parent that runs `run`.
 */
export function benchEntry<Target extends string>(targets: readonly Target[], start: (target: Target) => Promise<BenchServer>, run: () => Promise<void>): void {
  const [role, target] = process.argv.slice(2);
  const main = async (): Promise<void> => {
    if (role !== 'serve') return run();
    if (!(targets as readonly string[]).includes(target)) throw new Error(`unknown server target "${target}"`);
    return serveInChild(() => start(target as Target));
  };
  main().catch((error: unknown) => {
    console.error(`bench failed: ${error instanceof Error ? error.message : String(error)}`);
    process.exit(1);
  });
}
