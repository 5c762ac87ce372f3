import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import type { Logger } from 'pino';
import type { DataSource } from 'typeorm';
import { Refusal } from '../../common/refusal';
import type { Config, DeployEnvironment } from '../../config';
import { one, rows } from '../../db/sql';

/** How often a running deployment's row is touched (and its output saved). */
const HEARTBEAT_MS = 2_000;
/** A running row not touched for this long belongs to a process that died: it is interrupted. */
const STALE_MS = 30_000;
/** After the timeout's SIGTERM, the command's process group gets this long before SIGKILL. */
const KILL_GRACE_MS = 10_000;
/** The output kept per run: its last lines up to this many characters. */
const MAX_OUTPUT_CHARS = 512 * 1024;

export type DeployStatus = 'running' | 'succeeded' | 'failed' | 'timed-out' | 'interrupted';

export interface DeployRun {
  id: number;
  environment: string;
  command: string;
  status: DeployStatus;
  exitCode: number | null;
  signal: string | null;
  startedBy: string;
  startedAt: string;
  endedAt: string | null;
  durationMs: number | null;
}

export interface OutputLine {
  seq: number;
  stream: 'stdout' | 'stderr' | 'plinth';
  text: string;
}

interface RunRow {
  id: string;
  environment: string;
  command: string;
  status: DeployStatus;
  exit_code: number | null;
  signal: string | null;
  started_by: string;
  started_at: Date;
  ended_at: Date | null;
  heartbeat_at: Date;
  host: string;
  pid: number;
  output?: [OutputLine['stream'], string][];
}

const COLUMNS = 'id, environment, command, status, exit_code, signal, started_by, started_at, ended_at, heartbeat_at, host, pid';

const runOf = (row: RunRow): DeployRun => ({
  id: Number(row.id),
  environment: row.environment,
  command: row.command,
  status: row.status,
  exitCode: row.exit_code,
  signal: row.signal,
  startedBy: row.started_by,
  startedAt: row.started_at.toISOString(),
  endedAt: row.ended_at?.toISOString() ?? null,
  durationMs: row.ended_at ? row.ended_at.getTime() - row.started_at.getTime() : null,
});

/** A run of this process: its child, its output, and who follows it. */
interface LiveRun {
  id: number;
  child: ChildProcess;
  lines: OutputLine[];
  chars: number;
  seq: number;
  partial: { stdout: string; stderr: string };
  followers: Set<(line: OutputLine | null) => void>;
  timedOut: boolean;
  interrupted: boolean;
  done: Promise<void>;
}

function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/**
 * The deployments of the admin API (spec 3 §4.3): POST /api/deploy/{staging,production} runs the
 * command PLATFORM_DEPLOY_<ENVIRONMENT>_COMMAND configures, one at a time across every instance
 * (a partial unique index), streams its output and records each run in admin_deploy_runs, so the
 * history survives a restart; a run whose process died shows as interrupted.
 */
export class AdminDeploys {
  private live: LiveRun | undefined;
  /** Starts between their row's INSERT and their launch: a running row of this process is theirs then, not a dead run. */
  private starting = 0;
  private closing = false;

  constructor(
    private readonly settings: Config['deploy'],
    private readonly dataSource: DataSource,
    private readonly logger: Logger,
  ) {}

  environments(): { environment: DeployEnvironment; configured: boolean; command: string | null; workingDirectory: string; timeoutSeconds: number }[] {
    return (Object.keys(this.settings.commands) as DeployEnvironment[]).map((environment) => ({
      environment,
      configured: this.settings.commands[environment] !== undefined,
      command: this.settings.commands[environment] ?? null,
      workingDirectory: this.settings.workingDirectory,
      timeoutSeconds: this.settings.timeoutMs / 1000,
    }));
  }

  async list(filter: { environment?: string; limit: number }): Promise<DeployRun[]> {
    await this.markInterrupted();
    const found = await rows<RunRow>(
      this.dataSource,
      `SELECT ${COLUMNS} FROM admin_deploy_runs WHERE ($1::text IS NULL OR environment = $1) ORDER BY started_at DESC, id DESC LIMIT $2`,
      [filter.environment ?? null, filter.limit],
    );
    return found.map(runOf);
  }

  async get(id: number): Promise<DeployRun & { output: string; lines: OutputLine[] }> {
    await this.markInterrupted();
    const row = await one<RunRow>(this.dataSource, `SELECT ${COLUMNS}, output FROM admin_deploy_runs WHERE id = $1`, [id]);
    if (!row) throw new Refusal('UNKNOWN_RUN', `There is no deployment run ${id}: see GET /api/deploy/runs`, 404);
    const live = this.live?.id === id ? this.live : undefined;
    const lines = live ? live.lines : this.storedLines(row.output ?? []);
    return { ...runOf(row), lines, output: lines.map((line) => `${line.text}\n`).join('') };
  }

  /** Starts `environment`'s command; refused when it is not configured or a deployment runs already. */
  async start(environment: DeployEnvironment, startedBy: string): Promise<DeployRun> {
    const command = this.settings.commands[environment];
    if (command === undefined) {
      const variable = `PLATFORM_DEPLOY_${environment.toUpperCase()}_COMMAND`;
      throw new Refusal('DEPLOY_NOT_CONFIGURED', `No ${environment} deployment is configured: set ${variable}`, 409);
    }
    if (this.closing) throw new Refusal('SHUTTING_DOWN', 'The server is shutting down', 503);
    await this.markInterrupted();
    let row: RunRow | undefined;
    this.starting += 1;
    try {
      row = await one<RunRow>(
        this.dataSource,
        `INSERT INTO admin_deploy_runs (environment, command, started_by, host, pid) VALUES ($1, $2, $3, $4, $5) RETURNING ${COLUMNS}`,
        [environment, command, startedBy, os.hostname(), process.pid],
      );
    } catch (error) {
      if ((error as { code?: string }).code !== '23505') throw error;
      const running = await one<RunRow>(this.dataSource, `SELECT ${COLUMNS} FROM admin_deploy_runs WHERE status = 'running'`);
      throw new Refusal(
        'DEPLOY_RUNNING',
        running ? `Deployment run ${running.id} (${running.environment}) is still running: wait for it to end` : 'A deployment is still running',
        409,
      );
    } finally {
      this.starting -= 1;
    }
    const run = runOf(row!);
    this.launch(run.id, environment, command);
    this.logger.info({ run: run.id, environment, startedBy }, 'deployment started');
    return run;
  }

  /**
   * Follows a run's output: `listener` gets every line so far (after `after`), then each new
   * line, then null when the run ends. Answers the run's state, and an unfollow function (for
   * a run of another process or one that ended, the stored output, then null at once).
   */
  async follow(id: number, after: number, listener: (line: OutputLine | null) => void): Promise<() => void> {
    const run = await this.get(id);
    const live = this.live?.id === id ? this.live : undefined;
    if (!live) {
      for (const line of run.lines) if (line.seq > after) listener(line);
      listener(null);
      return () => undefined;
    }
    for (const line of live.lines) if (line.seq > after) listener(line);
    live.followers.add(listener);
    return () => live.followers.delete(listener);
  }

  /** At shutdown: the running command is stopped and its run recorded as interrupted. */
  async close(): Promise<void> {
    this.closing = true;
    const live = this.live;
    if (!live) return;
    live.interrupted = true;
    this.signal(live, 'SIGTERM');
    const forced = setTimeout(() => this.signal(live, 'SIGKILL'), 3_000);
    await live.done;
    clearTimeout(forced);
  }

  /** Running rows of processes that are gone (this host's dead pids, or silent for STALE_MS) become interrupted. */
  private async markInterrupted(): Promise<void> {
    const running = await rows<RunRow>(this.dataSource, `SELECT ${COLUMNS} FROM admin_deploy_runs WHERE status = 'running'`);
    const host = os.hostname();
    for (const row of running) {
      const id = Number(row.id);
      if (this.live?.id === id) continue;
      const ours = row.host === host && row.pid === process.pid;
      if (ours && this.starting > 0) continue;
      const dead = row.host === host && !processAlive(row.pid);
      const silent = Date.now() - row.heartbeat_at.getTime() > STALE_MS;
      if (!ours && !dead && !silent) continue;
      await this.dataSource.query(
        `UPDATE admin_deploy_runs SET status = 'interrupted', ended_at = heartbeat_at,
           output = output || jsonb_build_array(jsonb_build_array('plinth', $2::text)) WHERE id = $1 AND status = 'running'`,
        [id, `[plinth] interrupted: the server running it (pid ${row.pid} on ${row.host}) stopped before the command ended`],
      );
      this.logger.warn({ run: id }, 'deployment run interrupted by the end of its server process');
    }
  }

  private launch(id: number, environment: DeployEnvironment, command: string): void {
    let resolveDone!: () => void;
    const done = new Promise<void>((resolve) => (resolveDone = resolve));
    const cwd = this.settings.workingDirectory;
    const child = spawn('/bin/sh', ['-c', command], {
      cwd: fs.existsSync(cwd) ? cwd : undefined,
      env: { ...process.env, PLINTH_DEPLOY_ENVIRONMENT: environment, PLINTH_DEPLOY_RUN_ID: String(id) },
      stdio: ['ignore', 'pipe', 'pipe'],
      // A process group of its own: the timeout stops the command and everything it started.
      detached: true,
    });
    const live: LiveRun = {
      id,
      child,
      lines: [],
      chars: 0,
      seq: 0,
      partial: { stdout: '', stderr: '' },
      followers: new Set(),
      timedOut: false,
      interrupted: false,
      done,
    };
    this.live = live;
    if (!fs.existsSync(cwd)) this.push(live, 'plinth', `[plinth] ${cwd} does not exist: running in ${process.cwd()}`);
    for (const stream of ['stdout', 'stderr'] as const) {
      child[stream]!.setEncoding('utf8');
      child[stream]!.on('data', (chunk: string) => {
        const text = live.partial[stream] + chunk;
        const parts = text.split(/\r?\n/);
        live.partial[stream] = parts.pop() ?? '';
        for (const part of parts) this.push(live, stream, part);
      });
    }
    const heartbeat = setInterval(() => {
      this.dataSource
        .query(`UPDATE admin_deploy_runs SET heartbeat_at = now(), output = $2 WHERE id = $1 AND status = 'running'`, [id, this.outputOf(live)])
        .catch((error: unknown) => this.logger.warn({ err: error, run: id }, 'could not record a deployment heartbeat'));
    }, HEARTBEAT_MS);
    const timeout = setTimeout(() => {
      live.timedOut = true;
      this.push(live, 'plinth', `[plinth] still running after ${this.settings.timeoutMs / 1000} s (PLATFORM_DEPLOY_TIMEOUT_SECONDS): stopped`);
      this.signal(live, 'SIGTERM');
      setTimeout(() => this.signal(live, 'SIGKILL'), KILL_GRACE_MS).unref();
    }, this.settings.timeoutMs);
    let spawnError: Error | undefined;
    child.on('error', (error) => {
      spawnError = error;
    });
    child.on('close', (code, signal) => {
      clearInterval(heartbeat);
      clearTimeout(timeout);
      for (const stream of ['stdout', 'stderr'] as const) if (live.partial[stream]) this.push(live, stream, live.partial[stream]);
      if (spawnError) this.push(live, 'plinth', `[plinth] the command could not be started: ${spawnError.message}`);
      const status: DeployStatus = live.interrupted ? 'interrupted' : live.timedOut ? 'timed-out' : code === 0 ? 'succeeded' : 'failed';
      if (live.interrupted) this.push(live, 'plinth', '[plinth] interrupted: the server shut down');
      this.push(live, 'plinth', `[plinth] ${status}${code === null ? '' : ` (exit code ${code})`}${signal ? ` (signal ${signal})` : ''}`);
      this.dataSource
        .query(`UPDATE admin_deploy_runs SET status = $2, exit_code = $3, signal = $4, ended_at = now(), heartbeat_at = now(), output = $5 WHERE id = $1`, [
          id,
          status,
          code,
          signal,
          this.outputOf(live),
        ])
        .catch((error: unknown) => this.logger.error({ err: error, run: id }, 'could not record the end of a deployment'))
        .finally(() => {
          if (this.live === live) this.live = undefined;
          for (const follower of live.followers) follower(null);
          live.followers.clear();
          this.logger.info({ run: id, environment, status, exitCode: code }, 'deployment ended');
          resolveDone();
        });
    });
  }

  private push(live: LiveRun, stream: OutputLine['stream'], text: string): void {
    live.seq += 1;
    const line = { seq: live.seq, stream, text };
    live.lines.push(line);
    live.chars += text.length + 1;
    while (live.chars > MAX_OUTPUT_CHARS && live.lines.length > 1) live.chars -= live.lines.shift()!.text.length + 1;
    for (const follower of live.followers) follower(line);
  }

  /** The output as stored: [stream, text] pairs, as JSON. */
  private outputOf(live: LiveRun): string {
    return JSON.stringify(live.lines.map((line) => [line.stream, line.text]));
  }

  private storedLines(output: [OutputLine['stream'], string][]): OutputLine[] {
    return output.map(([stream, text], index) => ({ seq: index + 1, stream, text }));
  }

  private signal(live: LiveRun, signal: NodeJS.Signals): void {
    if (live.child.pid === undefined || live.child.exitCode !== null || live.child.signalCode !== null) return;
    try {
      process.kill(-live.child.pid, signal);
    } catch {
      // The group ended already.
    }
  }
}
