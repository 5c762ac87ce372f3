import { hostname } from 'node:os';
import { setTimeout as sleep } from 'node:timers/promises';
import { Cron } from 'croner';
import pg from 'pg';
import type { Logger } from 'pino';
import { LOCK_KEYS } from '../db/lock-keys';
import { reportDatabaseTrouble } from './pg-listener';

/** When a recurring task falls due: every so many milliseconds, or at the times of a cron expression. */
export type RecurringSchedule = { everyMs: number } | { cron: string; timeZone?: string };

/** Work done on a schedule by exactly one process of all those sharing the database. */
export interface RecurringTask {
  /** Unique among the tasks of its module (the module's name is put before it). */
  name: string;
  schedule: RecurringSchedule;
  /**
   * In how many milliseconds the first run falls due, the first time a database sees the task
   * (default: one interval, or the cron expression's next time).
   */
  firstRunInMs?: () => Promise<number>;
  /**
   * How often each process looks whether the task is due; a run then starts up to this late.
   * By default a process wakes at the due time, and looks at least every interval (at most a
   * minute) for a run moved earlier by hand or left unfinished by a process that died.
   */
  checkEveryMs?: number;
  /**
   * One run. `signal` aborts when the process shuts down or loses the task's lock: a run that then
   * stops with an error counts as not done, and another process takes it at once.
   */
  run(signal: AbortSignal): Promise<unknown>;
}

/** Five- or six-field cron expressions (seconds first), read in UTC unless the task names a time zone. */
function cronOf(schedule: { cron: string; timeZone?: string }): Cron {
  return new Cron(schedule.cron, { timezone: schedule.timeZone ?? 'UTC', paused: true });
}

const MINUTE_MS = 60_000;
/** The longest delay a timer takes (about 24.8 days); a longer wait is looked at again then. */
const LONGEST_TIMER_MS = 2 ** 31 - 1;
/** After a failed look at a task (the database unreachable, say), the next comes after this, doubling up to the last. */
const FIRST_RETRY_MS = 250;
const LAST_RETRY_MS = 10_000;

interface DeclaredTask extends RecurringTask {
  /** The schedule as stored: a change of schedule is seen at start-up. */
  scheduleText: string;
  checkEveryMs: number;
  /** Whether the process wakes at the due time, or only looks every checkEveryMs. */
  wakesWhenDue: boolean;
  cron: Cron | undefined;
}

interface RunningTask {
  controller: AbortController;
  client: pg.Client;
}

export interface RecurringWorkOptions {
  /** Connection string: the tasks' locks are held on a connection of this scheduler's own. */
  url: string;
  logger: Logger;
  /** Aborted when the process starts shutting down: a lost connection is then expected. */
  shutdown: AbortSignal;
  /** Pauses and resumes this process's runs (the admin API's `scheduler`); none: never paused. */
  pause?: RecurringPause;
}

/**
 * Pauses this process's recurring tasks and resumes them (the admin API's `scheduler`). While
 * paused the process starts no run (a due task is left for another process, or for this one once
 * resumed); `pause()` resolves when the runs in progress have finished. It exists before the tasks
 * do (a pause standing for every instance is applied at start-up, before they start).
 */
export class RecurringPause {
  private pausedNow = false;
  private readonly waiters = new Set<() => void>();
  private inProgress: () => Promise<void> = async () => undefined;

  get paused(): boolean {
    return this.pausedNow;
  }

  /** Stops starting runs; resolves once the runs in progress have finished. */
  async pause(): Promise<void> {
    this.pausedNow = true;
    await this.inProgress();
  }

  resume(): void {
    this.pausedNow = false;
    for (const wake of this.waiters) wake();
    this.waiters.clear();
  }

  /** Resolves at once when not paused, else when resumed or when `signal` aborts. */
  whileResumed(signal: AbortSignal): Promise<void> {
    if (!this.pausedNow || signal.aborted) return Promise.resolve();
    return new Promise((resolve) => {
      const done = () => {
        signal.removeEventListener('abort', done);
        this.waiters.delete(done);
        resolve();
      };
      this.waiters.add(done);
      signal.addEventListener('abort', done, { once: true });
    });
  }

  /** The recurring work tells how to wait for its runs in progress. */
  attach(inProgress: () => Promise<void>): void {
    this.inProgress = inProgress;
  }
}

/**
 * Runs recurring tasks so that each due time is run once by one process, whatever the number of
 * processes and whatever happens to them. Each task is a row of `recurring_tasks` holding the
 * time its next run falls due. A process whose task is due takes the task's advisory lock on its
 * own connection, checks again under the lock that the run is still due, runs it, moves the due
 * time on, and only then lets go of the lock. The lock lives as long as the connection: a process
 * killed in the middle of a run drops it, the due time has not moved, and the next process to
 * look runs the task again.
 */
export class RecurringWork {
  private readonly tasks: DeclaredTask[];
  private readonly owner = `${hostname()}:${process.pid}`;
  private readonly stopping = new AbortController();
  private readonly running = new Set<RunningTask>();
  /** Called when a run ends: what waits for the runs in progress (a pause) looks again. */
  private readonly runEnded = new Set<() => void>();
  private loops: Promise<void>[] = [];
  private client: pg.Client | undefined;
  private connecting: Promise<pg.Client> | undefined;
  private statements: Promise<unknown> = Promise.resolve();

  constructor(
    tasks: readonly RecurringTask[],
    private readonly options: RecurringWorkOptions,
  ) {
    this.tasks = tasks.map(declared);
    const names = this.tasks.map((task) => task.name);
    const twice = names.find((name, index) => names.indexOf(name) !== index);
    if (twice) throw new Error(`the recurring task ${twice} is declared twice`);
    options.pause?.attach(() => this.runsFinished());
  }

  /** Resolves once no run is in progress. */
  private async runsFinished(): Promise<void> {
    while (this.running.size > 0) await new Promise<void>((resolve) => this.runEnded.add(resolve));
  }

  /** Stores the tasks' schedules (the first due times of new tasks) and starts looking at them. */
  async start(): Promise<void> {
    if (this.tasks.length === 0) return;
    const client = await this.connection();
    for (const task of this.tasks) await this.declare(client, task);
    this.loops = this.tasks.map((task) => this.loop(task));
  }

  /** Stops looking, aborts the runs in progress and waits for them, then lets go of the locks. */
  async stop(): Promise<void> {
    this.stopping.abort();
    for (const { controller } of this.running) controller.abort(new Error('the process is shutting down'));
    await Promise.all(this.loops);
    const client = this.client;
    this.client = undefined;
    await client?.end().catch(() => undefined);
  }

  private async declare(client: pg.Client, task: DeclaredTask): Promise<void> {
    const firstInMs = task.firstRunInMs ? Math.max(0, await task.firstRunInMs()) : 'everyMs' in task.schedule ? task.schedule.everyMs : null;
    const firstAt = firstInMs === null ? task.cron!.nextRun() : null;
    // A changed schedule applies from now on: the pending run keeps its time unless the new
    // schedule has one sooner. A row carried over without a schedule keeps its due time.
    await this.query(
      client,
      `INSERT INTO recurring_tasks (name, schedule, next_run_at) VALUES ($1, $2, coalesce($4::timestamptz, now() + make_interval(secs => $3::float8 / 1000)))
       ON CONFLICT (name) DO UPDATE SET schedule = EXCLUDED.schedule,
         next_run_at = CASE WHEN recurring_tasks.schedule IS NULL THEN recurring_tasks.next_run_at ELSE least(recurring_tasks.next_run_at, EXCLUDED.next_run_at) END
       WHERE recurring_tasks.schedule IS DISTINCT FROM EXCLUDED.schedule`,
      [task.name, task.scheduleText, firstInMs, firstAt],
    );
  }

  private async loop(task: DeclaredTask): Promise<void> {
    let failures = 0;
    while (!this.stopping.signal.aborted) {
      await this.options.pause?.whileResumed(this.stopping.signal);
      if (this.stopping.signal.aborted) break;
      let waitMs: number;
      try {
        waitMs = await this.attempt(task);
        failures = 0;
      } catch (error) {
        if (failures === 0)
          reportDatabaseTrouble(this.options.logger, this.options.shutdown, error, 'warn', `could not look at the recurring task ${task.name}; trying again`);
        waitMs = Math.min(task.checkEveryMs, FIRST_RETRY_MS * 2 ** failures, LAST_RETRY_MS);
        failures += 1;
      }
      await sleep(Math.min(waitMs, LONGEST_TIMER_MS), undefined, { signal: this.stopping.signal, ref: false }).catch(() => undefined);
    }
  }

  /** Runs the task if it is due and no other process is running it; answers when to look again (ms). */
  private async attempt(task: DeclaredTask): Promise<number> {
    const client = await this.connection();
    const [state] = (
      await this.query<{ id: number; due_in_ms: number; locked: boolean | null }>(
        client,
        `SELECT id, greatest(0, ceil(extract(epoch FROM next_run_at - now()) * 1000))::float8 AS due_in_ms,
           CASE WHEN next_run_at <= now() THEN pg_try_advisory_lock($2, id) END AS locked
         FROM recurring_tasks WHERE name = $1`,
        [task.name, LOCK_KEYS.recurringTasks],
      )
    ).rows;
    if (!state) {
      // Deleted by hand: declared again, as at start-up.
      await this.declare(client, task);
      return 0;
    }
    if (state.locked === null) return task.wakesWhenDue ? Math.min(state.due_in_ms, task.checkEveryMs) : task.checkEveryMs;
    if (!state.locked) return task.checkEveryMs;
    try {
      if (this.stopping.signal.aborted) return 0;
      // Under the lock, again: the process that held it may have moved the due time on meanwhile.
      const [claimed] = (
        await this.query<{ due: Date; now_ms: number }>(
          client,
          `UPDATE recurring_tasks SET started_at = now(), run_by = $2 WHERE name = $1 AND next_run_at <= now()
           RETURNING next_run_at AS due, (extract(epoch FROM now()) * 1000)::float8 AS now_ms`,
          [task.name, this.owner],
        )
      ).rows;
      if (!claimed) return 0;
      const offsetMs = claimed.now_ms - Date.now();
      const error = await this.run(task, client);
      // Not done: the lock is gone with its connection (another process may run it now), or the
      // run stopped when told to. The due time stays, for whichever process looks next.
      if (error === INTERRUPTED || this.client !== client) return task.checkEveryMs;
      if (task.cron) {
        // After the time just run, so that clocks a little apart never run one time twice.
        const next = task.cron.nextRun(new Date(Math.max(Date.now() + offsetMs, claimed.due.getTime()))) ?? 'infinity';
        await this.query(client, 'UPDATE recurring_tasks SET next_run_at = $2, finished_at = now(), last_error = $3 WHERE name = $1', [
          task.name,
          next,
          errorText(error),
        ]);
      } else {
        // One interval after the run started, or after it ended when it took longer: runs never pile up.
        await this.query(
          client,
          `UPDATE recurring_tasks SET finished_at = now(), last_error = $3,
             next_run_at = CASE WHEN started_at + make_interval(secs => $2::float8 / 1000) > now() THEN started_at ELSE now() END + make_interval(secs => $2::float8 / 1000)
           WHERE name = $1`,
          [task.name, (task.schedule as { everyMs: number }).everyMs, errorText(error)],
        );
      }
      return 0;
    } finally {
      if (this.client === client) await this.query(client, 'SELECT pg_advisory_unlock($1, $2)', [LOCK_KEYS.recurringTasks, state.id]);
    }
  }

  /** Runs the task once; resolves with its error (logged), INTERRUPTED, or undefined when it succeeded. */
  private async run(task: DeclaredTask, client: pg.Client): Promise<unknown> {
    // Paused since the task was claimed: not run, and due still (checked with the add, so a pause waits for every run it let start).
    if (this.options.pause?.paused) return INTERRUPTED;
    const running: RunningTask = { controller: new AbortController(), client };
    this.running.add(running);
    try {
      await task.run(running.controller.signal);
      return undefined;
    } catch (error) {
      if (running.controller.signal.aborted) return INTERRUPTED;
      reportDatabaseTrouble(this.options.logger, this.options.shutdown, error, 'error', `the recurring task ${task.name} failed; it runs again when next due`);
      return error ?? new Error('failed');
    } finally {
      this.running.delete(running);
      for (const wake of this.runEnded) wake();
      this.runEnded.clear();
    }
  }

  /** One statement at a time on the connection, whichever task's loop asks. */
  private query<Row extends pg.QueryResultRow = pg.QueryResultRow>(client: pg.Client, sql: string, parameters: unknown[]): Promise<pg.QueryResult<Row>> {
    const result = this.statements.then(() => client.query<Row>(sql, parameters));
    this.statements = result.catch(() => undefined);
    return result;
  }

  private connection(): Promise<pg.Client> {
    if (this.client) return Promise.resolve(this.client);
    this.connecting ??= (async () => {
      const client = new pg.Client({ connectionString: this.options.url, application_name: 'plinth-recurring' });
      client.on('error', (error) => this.connectionLost(client, error));
      client.on('end', () => this.connectionLost(client));
      try {
        await client.connect();
      } catch (error) {
        await client.end().catch(() => undefined);
        throw error;
      }
      if (this.stopping.signal.aborted) {
        await client.end().catch(() => undefined);
        throw new Error('the recurring tasks have stopped');
      }
      this.client = client;
      return client;
    })().finally(() => (this.connecting = undefined));
    return this.connecting;
  }

  /** The locks went with the connection: runs in progress are told to stop, another process may take them. */
  private connectionLost(client: pg.Client, error?: Error): void {
    if (this.client !== client) return;
    this.client = undefined;
    client.end().catch(() => undefined);
    if (error) reportDatabaseTrouble(this.options.logger, this.options.shutdown, error, 'warn', 'the connection of the recurring tasks was lost');
    for (const running of this.running) {
      if (running.client === client) running.controller.abort(new Error('the recurring task lost its lock'));
    }
  }
}

const INTERRUPTED = Symbol('interrupted');

function errorText(error: unknown): string | null {
  if (error === undefined) return null;
  return (error instanceof Error ? error.message : String(error)).slice(0, 1000);
}

function declared(task: RecurringTask): DeclaredTask {
  const { schedule } = task;
  if (task.checkEveryMs !== undefined && (!Number.isInteger(task.checkEveryMs) || task.checkEveryMs < 1)) {
    throw new Error(`the recurring task ${task.name}: checkEveryMs must be a whole number from 1`);
  }
  if ('everyMs' in schedule) {
    if (!Number.isInteger(schedule.everyMs) || schedule.everyMs < 1) throw new Error(`the recurring task ${task.name}: everyMs must be a whole number from 1`);
    return {
      ...task,
      scheduleText: `every ${schedule.everyMs} ms`,
      checkEveryMs: task.checkEveryMs ?? Math.min(schedule.everyMs, MINUTE_MS),
      wakesWhenDue: task.checkEveryMs === undefined,
      cron: undefined,
    };
  }
  let cron: Cron;
  try {
    cron = cronOf(schedule);
  } catch (error) {
    throw new Error(`the recurring task ${task.name}: the cron expression ${JSON.stringify(schedule.cron)} is not valid (${(error as Error).message})`);
  }
  if (!cron.nextRun()) throw new Error(`the recurring task ${task.name}: the cron expression ${JSON.stringify(schedule.cron)} never fires`);
  return {
    ...task,
    scheduleText: `cron ${schedule.cron} ${schedule.timeZone ?? 'UTC'}`,
    checkEveryMs: task.checkEveryMs ?? MINUTE_MS,
    wakesWhenDue: task.checkEveryMs === undefined,
    cron,
  };
}
