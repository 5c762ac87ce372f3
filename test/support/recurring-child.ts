import { setTimeout as sleep } from 'node:timers/promises';
import pg from 'pg';
import pino from 'pino';
import { RecurringWork } from '../../src/platform/recurring';

/**
 * A child process for the recurring-task tests: a scheduler with one task, RECURRING_TEST_TASK
 * (every RECURRING_TEST_EVERY_MS, first due at once), whose run records itself in recurring_runs
 * (this process's id as `instance`), prints "running" and then takes RECURRING_TEST_RUN_MS: a
 * run to kill.
 */
async function main(): Promise<void> {
  const url = process.env.RECURRING_TEST_URL!;
  const record = new pg.Client({ connectionString: url });
  await record.connect();
  const work = new RecurringWork(
    [
      {
        name: process.env.RECURRING_TEST_TASK!,
        schedule: { everyMs: Number(process.env.RECURRING_TEST_EVERY_MS) },
        firstRunInMs: async () => 0,
        run: async (signal) => {
          await record.query('INSERT INTO recurring_runs (task, instance) VALUES ($1, $2)', [process.env.RECURRING_TEST_TASK, `pid:${process.pid}`]);
          process.stdout.write('running\n');
          await sleep(Number(process.env.RECURRING_TEST_RUN_MS), undefined, { signal });
        },
      },
    ],
    { url, logger: pino({ level: 'silent' }), shutdown: new AbortController().signal },
  );
  await work.start();
}

main().catch((error: unknown) => {
  process.stderr.write(`recurring-child: ${error instanceof Error ? error.message : String(error)}\n`);
  process.exit(1);
});
