import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { DEFAULT_DATABASE_URL, ensureDatabase } from './database';
import { positiveInteger } from './settings';

/**
 * A benchmark of this build and of another (BENCH_OTHER_BUILD, the dist folder of another
 * checkout, e.g. the parent commit's), turn about in one run, so that a change of the machine's
 * load falls on both: for the benchmarks without a target of their own for another build (the
 * GraphQL bench has one, plinth-other).
 *
 *   BENCH_OTHER_BUILD=../base/dist node dist/bench/builds.js auth errors
 *
 * Each build runs its own copy of the benchmark on a database of its own (the other's name ends in
 * _other), since each migrates the database to its own schema. BENCH_BUILD_ROUNDS (2) turns each;
 * the order alternates between rounds. Every output is printed in full, under the build's name.
 */

const BENCHES = new Set([
  'auth',
  'errors',
  'events',
  'jobs',
  'mail',
  'payments',
  'report',
  'subscriptions',
  'totp',
  'actions',
  'bulk-users',
  'newsletter',
  'apidocs',
  'tables',
]);

function databaseOf(build: 'this' | 'other'): string {
  const url = new URL(process.env.BENCH_DATABASE_URL || process.env.DATABASE_URL || DEFAULT_DATABASE_URL);
  if (build === 'other') url.pathname = `${url.pathname}_other`;
  return url.toString();
}

function runBench(dist: string, bench: string, databaseUrl: string): Promise<{ output: string; code: number | null }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [path.join(dist, 'bench', `${bench}.js`)], {
      env: { ...process.env, BENCH_DATABASE_URL: databaseUrl, BENCH_OTHER_BUILD: '' },
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    let output = '';
    child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString('utf8')));
    child.once('error', reject);
    child.once('exit', (code) => resolve({ output, code }));
  });
}

async function main(): Promise<number> {
  const otherBuild = process.env.BENCH_OTHER_BUILD;
  if (!otherBuild) throw new Error('BENCH_OTHER_BUILD must name the dist folder of the other build');
  const other = path.resolve(otherBuild);
  const mine = path.resolve(__dirname, '..');
  const benches = process.argv.slice(2);
  if (benches.length === 0) throw new Error(`name the benchmarks to run: ${[...BENCHES].join(', ')}`);
  for (const bench of benches) {
    if (!BENCHES.has(bench)) throw new Error(`unknown benchmark "${bench}" (one of ${[...BENCHES].join(', ')})`);
    if (!fs.existsSync(path.join(other, 'bench', `${bench}.js`))) throw new Error(`${other} has no bench/${bench}.js`);
  }
  const rounds = positiveInteger('BENCH_BUILD_ROUNDS', 2);
  let failed = 0;
  for (const bench of benches) {
    for (let round = 1; round <= rounds; round += 1) {
      const order = round % 2 === 1 ? (['this', 'other'] as const) : (['other', 'this'] as const);
      for (const build of order) {
        const { output, code } = await runBench(build === 'this' ? mine : other, bench, await ensureDatabase(databaseOf(build)));
        process.stdout.write(
          `\n== ${bench}, round ${round}, ${build === 'this' ? `this build (${mine})` : `other build (${other})`}${code === 0 ? '' : `, exited ${code}`}\n${output}`,
        );
        if (code !== 0) failed += 1;
      }
    }
  }
  return failed === 0 ? 0 : 1;
}

main().then(
  (code) => process.exit(code),
  (error: unknown) => {
    process.stderr.write(`${error instanceof Error ? error.message : String(error)}\n`);
    process.exit(1);
  },
);
