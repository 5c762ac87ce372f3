import { spawn } from 'node:child_process';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { Cron } from 'croner';
import pino from 'pino';
import type { DataSource } from 'typeorm';
import { createDataSource, runMigrations } from '../../src/db/data-source';
import { RecurringWork, type RecurringTask } from '../../src/platform/recurring';
import { createTestDatabase, type TestDatabase } from '../support/database';
import { eventually } from '../support/job-recorder';
import { childEnvironment } from '../support/spawn';

const CHILD = path.join(__dirname, '..', 'support', 'recurring-child.js');

let database: TestDatabase;
let dataSource: DataSource;
const started = new Set<RecurringWork>();

interface Run {
  id: number;
  task: string;
  instance: string;
  started_at: Date;
  ended_at: Date | null;
  aborted: boolean;
}

beforeAll(async () => {
  database = await createTestDatabase();
  dataSource = createDataSource(database.url, 4);
  await dataSource.initialize();
  await runMigrations(dataSource);
  await database.query(`
    CREATE TABLE recurring_runs (
      id int GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
      task text NOT NULL,
      instance text NOT NULL,
      started_at timestamptz NOT NULL DEFAULT clock_timestamp(),
      ended_at timestamptz,
      aborted boolean NOT NULL DEFAULT false
    )`);
});
afterAll(async () => {
  await Promise.all([...started].map((work) => work.stop()));
  await dataSource.destroy();
  await database.drop();
});

/** One process's scheduler (its own connection, as each server process has). */
async function instance(tasks: RecurringTask[]): Promise<RecurringWork> {
  const work = new RecurringWork(tasks, { url: database.url, logger: pino({ level: 'silent' }), shutdown: new AbortController().signal });
  started.add(work);
  await work.start();
  return work;
}

async function stop(work: RecurringWork): Promise<void> {
  await work.stop();
  started.delete(work);
}

/** A task whose runs are recorded in recurring_runs, each taking `takesMs` (cut short when its signal aborts). */
function recorded(name: string, label: string, schedule: RecurringTask['schedule'], takesMs = 0, extra: Partial<RecurringTask> = {}): RecurringTask {
  return {
    name,
    schedule,
    ...extra,
    run: async (signal) => {
      const [{ id }] = (await dataSource.query('INSERT INTO recurring_runs (task, instance) VALUES ($1, $2) RETURNING id', [name, label])) as { id: number }[];
      try {
        if (takesMs > 0) await sleep(takesMs, undefined, { signal });
      } catch (error) {
        await dataSource.query('UPDATE recurring_runs SET aborted = true WHERE id = $1', [id]);
        throw error;
      }
      await dataSource.query('UPDATE recurring_runs SET ended_at = clock_timestamp() WHERE id = $1', [id]);
    },
  };
}

const runsOf = (task: string) => database.query<Run>('SELECT * FROM recurring_runs WHERE task = $1 ORDER BY started_at', [task]);
const taskRow = async (name: string) =>
  (
    await database.query<{ next_run_at: Date; schedule: string; last_error: string | null }>(
      'SELECT next_run_at, schedule, last_error FROM recurring_tasks WHERE name = $1',
      [name],
    )
  )[0];

/** Pairs of runs of one task that were running at the same time. */
function overlaps(runs: Run[]): [Run, Run][] {
  const found: [Run, Run][] = [];
  for (const [index, a] of runs.entries()) {
    for (const b of runs.slice(index + 1)) {
      const aEnd = a.ended_at?.getTime() ?? Infinity;
      const bEnd = b.ended_at?.getTime() ?? Infinity;
      if (a.started_at.getTime() < bEnd && b.started_at.getTime() < aEnd) found.push([a, b]);
    }
  }
  return found;
}

describe('recurring tasks', () => {
  it('two processes on one database run a task once per period, never twice at once', async () => {
    const schedule = { everyMs: 400 };
    const [a, b] = await Promise.all([instance([recorded('every-400', 'a', schedule, 50)]), instance([recorded('every-400', 'b', schedule, 50)])]);
    await sleep(4_300);
    await Promise.all([stop(a), stop(b)]);

    const runs = await runsOf('every-400');
    // The first run is due one interval after the task was first declared: 10 periods in 4.3 s.
    expect(runs.length).toBeGreaterThanOrEqual(8);
    expect(runs.length).toBeLessThanOrEqual(11);
    expect(overlaps(runs)).toEqual([]);
    // One run per period: a second process running the same period would start within a few
    // milliseconds of the first (the recorded start lags the claim by a statement or two).
    const gaps = runs.slice(1).map((run, index) => run.started_at.getTime() - runs[index].started_at.getTime());
    expect(Math.min(...gaps)).toBeGreaterThanOrEqual(300);
    expect(runs.every((run) => run.ended_at !== null)).toBe(true);
  });

  it('starts the next run of a task that takes longer than its interval only once it ended', async () => {
    const schedule = { everyMs: 200 };
    const tasks = (label: string) => [recorded('slow', label, schedule, 700, { firstRunInMs: async () => 0 })];
    const [a, b] = await Promise.all([instance(tasks('a')), instance(tasks('b'))]);
    await sleep(3_000);
    await Promise.all([stop(a), stop(b)]);

    const runs = (await runsOf('slow')).filter((run) => run.ended_at !== null);
    expect(runs.length).toBeGreaterThanOrEqual(2);
    expect(overlaps(await runsOf('slow'))).toEqual([]);
    // A run longer than the interval is followed one interval after its end, not at once.
    for (const [index, run] of runs.slice(1).entries()) expect(run.started_at.getTime() - runs[index].ended_at!.getTime()).toBeGreaterThanOrEqual(180);
  });

  it('lets another process take a run whose process was killed (kill -9) at once, and goes on with the schedule', async () => {
    const env = { RECURRING_TEST_URL: database.url, RECURRING_TEST_TASK: 'killed', RECURRING_TEST_EVERY_MS: '60000', RECURRING_TEST_RUN_MS: '60000' };
    const child = spawn(process.execPath, [CHILD], { env: childEnvironment(env), stdio: ['ignore', 'pipe', 'pipe'] });
    const exited = new Promise<NodeJS.Signals | null>((resolve) => child.on('exit', (_code, signal) => resolve(signal)));
    let output = '';
    child.stderr.on('data', (chunk) => (output += chunk));
    await new Promise<void>((resolve, reject) => {
      child.stdout.on('data', (chunk: Buffer) => chunk.toString().includes('running') && resolve());
      void exited.then(() => reject(new Error(`the child exited before its run: ${output}`)));
    });
    const [childRun] = await runsOf('killed');
    expect(childRun.instance).toBe(`pid:${child.pid}`);

    // This process looks every 200 ms; while the child runs the task, it does not.
    const here = await instance([recorded('killed', 'here', { everyMs: 60_000 }, 0, { checkEveryMs: 200 })]);
    await sleep(800);
    expect(await runsOf('killed')).toHaveLength(1);

    child.kill('SIGKILL');
    expect(await exited).toBe('SIGKILL');
    const killedAt = Date.now();
    const taken = await eventually(async () => (await runsOf('killed')).find((run) => run.instance === 'here' && run.ended_at), 10_000, 'the run taken over');
    expect(taken.started_at.getTime() - killedAt).toBeLessThan(3_000);
    const runs = await runsOf('killed');
    expect(runs.map((run) => [run.instance, run.ended_at === null])).toEqual([
      [`pid:${child.pid}`, true],
      ['here', false],
    ]);
    // The schedule goes on from the run that finished: the next is one interval after it.
    const { next_run_at } = await taskRow('killed');
    expect(Math.abs(next_run_at.getTime() - (taken.started_at.getTime() + 60_000))).toBeLessThan(1_000);
    await stop(here);
  });

  it('runs a cron task at the times of its expression, once each, whatever the processes', async () => {
    // Six fields: every second second (even seconds).
    const schedule = { cron: '*/2 * * * * *' };
    const [a, b] = await Promise.all([instance([recorded('even-seconds', 'a', schedule)]), instance([recorded('even-seconds', 'b', schedule)])]);
    await sleep(5_200);
    await Promise.all([stop(a), stop(b)]);

    const runs = await runsOf('even-seconds');
    expect(runs.length).toBeGreaterThanOrEqual(2);
    expect(runs.length).toBeLessThanOrEqual(3);
    const slots = runs.map((run) => Math.floor(run.started_at.getTime() / 2000));
    expect(new Set(slots).size).toBe(runs.length);
    // Each started in the first part of its even second (not on some other timer's beat).
    for (const run of runs) expect(run.started_at.getTime() % 2000).toBeLessThan(800);
    const { next_run_at, schedule: stored } = await taskRow('even-seconds');
    expect(stored).toBe('cron */2 * * * * * UTC');
    expect(next_run_at.getTime() % 2000).toBe(0);
  });

  it('declares a five-field cron task due at its next time, in UTC unless given a time zone', async () => {
    const work = await instance([
      recorded('nightly', 'a', { cron: '30 3 * * *' }),
      recorded('nightly-paris', 'a', { cron: '30 3 * * *', timeZone: 'Europe/Paris' }),
    ]);
    await stop(work);
    expect((await taskRow('nightly')).next_run_at).toEqual(new Cron('30 3 * * *', { timezone: 'UTC' }).nextRun());
    expect((await taskRow('nightly-paris')).next_run_at).toEqual(new Cron('30 3 * * *', { timezone: 'Europe/Paris' }).nextRun());
    expect((await taskRow('nightly')).next_run_at.getUTCHours()).toBe(3);
  });

  it('refuses a task whose schedule is not valid, naming it', () => {
    const logger = pino({ level: 'silent' });
    const options = { url: database.url, logger, shutdown: new AbortController().signal };
    const run = async () => undefined;
    expect(() => new RecurringWork([{ name: 'bad-cron', schedule: { cron: 'every day' }, run }], options)).toThrow(
      /^the recurring task bad-cron: the cron expression "every day" is not valid/,
    );
    expect(() => new RecurringWork([{ name: 'never', schedule: { cron: '0 0 31 2 *' }, run }], options)).toThrow(
      'the recurring task never: the cron expression "0 0 31 2 *" never fires',
    );
    expect(() => new RecurringWork([{ name: 'zero', schedule: { everyMs: 0 }, run }], options)).toThrow(
      'the recurring task zero: everyMs must be a whole number from 1',
    );
    expect(
      () =>
        new RecurringWork(
          [
            { name: 'twice', schedule: { everyMs: 5 }, run },
            { name: 'twice', schedule: { everyMs: 5 }, run },
          ],
          options,
        ),
    ).toThrow('the recurring task twice is declared twice');
  });

  it('stops at shutdown: no run after, the run in progress told to stop and left due for the next process', async () => {
    const first = await instance([
      recorded('stopping', 'first', { everyMs: 300 }, 0),
      recorded('long', 'first', { everyMs: 60_000 }, 30_000, { firstRunInMs: async () => 0 }),
    ]);
    await eventually(async () => (await runsOf('stopping')).length >= 2 && (await runsOf('long')).length === 1, 10_000, 'runs of both tasks');

    const stopping = Date.now();
    await stop(first);
    expect(Date.now() - stopping).toBeLessThan(2_000);
    const stoppedRuns = (await runsOf('stopping')).length;
    await sleep(1_000);
    expect(await runsOf('stopping')).toHaveLength(stoppedRuns);
    expect(await runsOf('long')).toEqual([expect.objectContaining({ instance: 'first', aborted: true, ended_at: null })]);
    // Not done: still due, so the next process to look takes it at once.
    expect((await taskRow('long')).next_run_at.getTime()).toBeLessThanOrEqual(Date.now());
    // Its connection (and the locks) are gone.
    await eventually(
      async () =>
        (
          await database.query<{ n: number }>(
            "SELECT count(*)::int AS n FROM pg_stat_activity WHERE application_name = 'plinth-recurring' AND datname = current_database()",
          )
        )[0].n === 0,
      5_000,
      'the scheduler connection closing',
    );

    const next = await instance([recorded('long', 'next', { everyMs: 60_000 }, 0, { firstRunInMs: async () => 0 })]);
    await eventually(async () => (await runsOf('long')).some((run) => run.instance === 'next' && run.ended_at), 5_000, 'the next process taking the long task');
    await stop(next);
  });

  it('records a failed run and keeps to the schedule; a shorter interval applies at the next start', async () => {
    let calls = 0;
    const failing: RecurringTask = {
      name: 'failing',
      schedule: { everyMs: 60_000 },
      firstRunInMs: async () => 0,
      run: async () => {
        calls += 1;
        throw new Error('the handler is down');
      },
    };
    const work = await instance([failing]);
    await eventually(async () => (await taskRow('failing')).last_error !== null, 5_000, 'the failed run recorded');
    await stop(work);
    expect(calls).toBe(1);
    const row = await taskRow('failing');
    expect(row.last_error).toBe('the handler is down');
    expect(row.next_run_at.getTime()).toBeGreaterThan(Date.now() + 55_000);

    const shorter = await instance([{ ...failing, firstRunInMs: undefined, schedule: { everyMs: 500 } }]);
    await eventually(async () => calls >= 2, 5_000, 'a run at the shorter interval');
    await stop(shorter);
    expect((await taskRow('failing')).schedule).toBe('every 500 ms');
  });
});
