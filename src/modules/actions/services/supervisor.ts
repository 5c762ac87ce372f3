import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import type { CustomService } from '../../../config';
import type { ChildServiceControl } from '../../../platform/child-services';
import { RUNNABLE_TEMPLATES } from './scaffold';

export type ServiceState = 'not-scaffolded' | 'not-runnable' | 'starting' | 'running' | 'restarting' | 'stopped' | 'failed';

export interface SupervisorSettings {
  servicesDir: string;
  /** The environment each service gets (Plinth's own: the admin secret, the limiter's settings, webhook secrets). */
  env: Record<string, string | undefined>;
  /** The longest wait before a crashed service is started again; the wait doubles from 250 ms. */
  maxRestartDelayMs: number;
  /** Where the services' output goes, each line prefixed with `[<name>] `. */
  write(line: string): void;
}

const FIRST_RESTART_DELAY_MS = 250;
/** A run this long counts as healthy: the next crash starts again from the first delay. */
const HEALTHY_RUN_MS = 30_000;
const STOP_GRACE_MS = 5_000;

/** The folder of Plinth's own packages: a scaffold run here finds express or fastify there before it has its own. */
function plinthNodeModules(): string {
  return path.dirname(path.dirname(require.resolve('fastify')));
}

/** The TypeScript compiler, from the service's own packages or Plinth's; undefined when neither has it. */
function typescript(folder: string): typeof import('typescript') | undefined {
  for (const base of [folder, __dirname]) {
    try {
      return require(require.resolve('typescript', { paths: [base] })) as typeof import('typescript');
    } catch {
      // Not there: try the next place.
    }
  }
  return undefined;
}

function filesUnder(folder: string, extension: string): string[] {
  if (!fs.existsSync(folder)) return [];
  return fs
    .readdirSync(folder, { recursive: true, encoding: 'utf8' })
    .filter((file) => file.endsWith(extension))
    .map((file) => path.join(folder, file));
}

/**
 * Compiles a Node service's `src/*.ts` to `dist/*.js` (each file on its own, without type
 * checking: `npm run build` in the service does that) when a source is newer than its output.
 */
export function compileService(folder: string): void {
  const sources = filesUnder(path.join(folder, 'src'), '.ts').filter((file) => !file.endsWith('.d.ts'));
  const outputOf = (file: string) => path.join(folder, 'dist', path.relative(path.join(folder, 'src'), file).replace(/\.ts$/, '.js'));
  const stale = sources.filter((file) => !fs.existsSync(outputOf(file)) || fs.statSync(outputOf(file)).mtimeMs < fs.statSync(file).mtimeMs);
  if (stale.length === 0) return;
  const ts = typescript(folder);
  if (!ts) throw new Error(`${folder} needs compiling and no TypeScript compiler is installed: run npm install && npm run build in it`);
  for (const file of stale) {
    const output = ts.transpileModule(fs.readFileSync(file, 'utf8'), {
      fileName: file,
      compilerOptions: {
        target: ts.ScriptTarget.ES2022,
        module: ts.ModuleKind.CommonJS,
        esModuleInterop: true,
        experimentalDecorators: true,
        emitDecoratorMetadata: true,
      },
    });
    fs.mkdirSync(path.dirname(outputOf(file)), { recursive: true });
    fs.writeFileSync(outputOf(file), output.outputText);
  }
}

interface Supervised {
  service: CustomService;
  state: ServiceState;
  child?: ChildProcess;
  restarts: number;
  timer?: NodeJS.Timeout;
  /** Stopped by hand (the admin API): not started again when it exits. */
  held: boolean;
}

/**
 * Runs the declared Node services beside the server (`plinth start`): compiles each, starts it
 * with node, prefixes its output with its name, starts it again with a doubling delay when it
 * exits, and stops them all on shutdown.
 */
export class ServiceSupervisor implements ChildServiceControl {
  private readonly supervised: Supervised[];
  private stopping = false;

  constructor(
    services: readonly CustomService[],
    private readonly settings: SupervisorSettings,
  ) {
    this.supervised = services
      .filter((service) => RUNNABLE_TEMPLATES.has(service.template))
      .map((service) => ({ service, state: 'stopped' as ServiceState, restarts: 0, held: false }));
  }

  /** Each service's state and pid, for logs and tests. */
  states(): { name: string; state: ServiceState; pid?: number; restarts: number }[] {
    return this.supervised.map(({ service, state, child, restarts }) => ({ name: service.name, state, pid: child?.pid, restarts }));
  }

  /** Starts every service but those stopped by hand meanwhile (stopService before start). */
  start(): void {
    for (const entry of this.supervised) if (!entry.held) this.startEntry(entry);
  }

  private startEntry(entry: Supervised): void {
    const folder = path.join(this.settings.servicesDir, entry.service.name);
    if (!fs.existsSync(path.join(folder, 'src', 'server.ts')) && !fs.existsSync(path.join(folder, 'dist', 'server.js'))) {
      entry.state = 'not-scaffolded';
      this.settings.write(`[${entry.service.name}] ${folder} has no service: run plinth build`);
      return;
    }
    this.run(entry, folder);
  }

  /** Stops one service and keeps it stopped until startService (the admin API's stop). */
  async stopService(name: string): Promise<void> {
    const entry = this.entry(name);
    entry.held = true;
    clearTimeout(entry.timer);
    await this.end(entry);
    entry.state = 'stopped';
    this.settings.write(`[${name}] stopped by the admin API`);
  }

  /** Starts one service again (the admin API's start) unless it runs or is being started. */
  startService(name: string): void {
    const entry = this.entry(name);
    entry.held = false;
    entry.restarts = 0;
    if (entry.child || this.stopping) return;
    clearTimeout(entry.timer);
    this.startEntry(entry);
  }

  private entry(name: string): Supervised {
    const entry = this.supervised.find((each) => each.service.name === name);
    if (!entry) throw new Error(`plinth start runs no service ${name}`);
    return entry;
  }

  /** Ends the service's process, if it has one (SIGTERM, then SIGKILL after the grace period). */
  private async end(entry: Supervised): Promise<void> {
    const child = entry.child;
    if (!child || child.exitCode !== null || child.signalCode !== null) return;
    const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
    child.kill('SIGTERM');
    const killer = setTimeout(() => child.kill('SIGKILL'), STOP_GRACE_MS);
    await exited;
    clearTimeout(killer);
  }

  private run(entry: Supervised, folder: string): void {
    const name = entry.service.name;
    try {
      compileService(folder);
    } catch (error) {
      entry.state = 'failed';
      this.settings.write(`[${name}] ${(error as Error).message}`);
      return;
    }
    const nodePath = [path.join(folder, 'node_modules'), plinthNodeModules(), this.settings.env.NODE_PATH].filter(Boolean).join(path.delimiter);
    const child = spawn(process.execPath, [path.join(folder, 'dist', 'server.js')], {
      cwd: folder,
      env: {
        ...this.settings.env,
        NODE_PATH: nodePath,
        PORT: String(entry.service.port),
        HOST: entry.service.host ?? '0.0.0.0',
        SERVICE_ROUTE: entry.service.route,
      } as NodeJS.ProcessEnv,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    entry.child = child;
    entry.state = 'starting';
    this.settings.write(`[${name}] started (pid ${child.pid}): node dist/server.js on port ${entry.service.port}`);
    const startedAt = Date.now();
    const prefix = (stream: NodeJS.ReadableStream) => {
      let pending = '';
      stream.on('data', (chunk: Buffer) => {
        pending += chunk.toString('utf8');
        const lines = pending.split('\n');
        pending = lines.pop() ?? '';
        for (const line of lines) {
          if (entry.state === 'starting') entry.state = 'running';
          this.settings.write(`[${name}] ${line}`);
        }
      });
    };
    prefix(child.stdout!);
    prefix(child.stderr!);
    child.on('error', (error) => this.settings.write(`[${name}] could not start: ${error.message}`));
    child.on('exit', (code, signal) => {
      if (entry.child === child) entry.child = undefined;
      if (this.stopping || entry.held) {
        entry.state = 'stopped';
        return;
      }
      if (Date.now() - startedAt > HEALTHY_RUN_MS) entry.restarts = 0;
      const delay = Math.min(FIRST_RESTART_DELAY_MS * 2 ** entry.restarts, this.settings.maxRestartDelayMs);
      entry.restarts += 1;
      entry.state = 'restarting';
      this.settings.write(`[${name}] exited (${signal ?? `code ${code}`}); starting it again in ${delay} ms`);
      entry.timer = setTimeout(() => this.run(entry, folder), delay);
    });
  }

  /** Stops every service (SIGTERM, then SIGKILL after a grace period) and starts none again. */
  async stop(): Promise<void> {
    this.stopping = true;
    await Promise.all(
      this.supervised.map(async (entry) => {
        clearTimeout(entry.timer);
        await this.end(entry);
        entry.state = 'stopped';
      }),
    );
  }
}

/** Whether something accepts connections at host:port (what `plinth services list` reports as running). */
export function listening(host: string, port: number, timeoutMs = 1_000): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = net.connect({ host, port });
    const done = (result: boolean) => {
      socket.destroy();
      resolve(result);
    };
    socket.setTimeout(timeoutMs, () => done(false));
    socket.once('connect', () => done(true));
    socket.once('error', () => done(false));
  });
}
