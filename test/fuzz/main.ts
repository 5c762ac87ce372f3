import 'reflect-metadata';
import { Command, InvalidArgumentError } from 'commander';
import globalSetup from '../support/global-setup';
import globalTeardown from '../support/global-teardown';
import { describeReport, fuzz } from './fuzzer';
import { startFuzzTarget } from './target';

const whole = (value: string) => {
  if (!/^\d+$/.test(value)) throw new InvalidArgumentError('must be a whole number');
  return Number(value);
};

/** `npm run fuzz -- --seconds N --seed S [--path P]`: the fuzz test, as long as you like. */
const options = new Command()
  .name('fuzz')
  .option('--seconds <n>', 'how long to run', whole, 60)
  .option('--seed <n>', 'seed of the random cases (printed; the same seed replays the same cases)', whole, Date.now() % 2 ** 31)
  .option('--path <path>', "fast-check's path of a failing case, to replay only it")
  .option('--cases <n>', 'stop after this many cases if --seconds has not passed (the same seed: the same requests on a slow or busy machine)', whole)
  .option('--settle-seconds <n>', 'how long to watch the idle server give memory back after the run (the value at the end is checked)', whole, 60)
  .option('--heap-snapshots <dir>', "write the server's heap snapshots (warmed up, right after, settled) to this folder")
  .parse()
  .opts<{ seconds: number; seed: number; path?: string; cases?: number; settleSeconds: number; heapSnapshots?: string }>();

async function main(): Promise<number> {
  // The test set-up: DATABASE_URL when set, otherwise an embedded PostgreSQL under .data-test/.
  await globalSetup();
  try {
    const { target, stop } = await startFuzzTarget();
    try {
      process.stdout.write(`fuzzing ${target.url} for ${options.seconds} s with seed ${options.seed}\n`);
      const report = await fuzz(target, options);
      process.stdout.write(`${describeReport(report)}\n`);
      return report.failure ? 1 : 0;
    } finally {
      await stop();
    }
  } finally {
    await globalTeardown();
  }
}

main().then(
  (code) => process.exit(code),
  (error: unknown) => {
    process.stderr.write(`fuzz: ${error instanceof Error ? error.message : String(error)}\n`);
    process.exit(1);
  },
);
