import 'reflect-metadata';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import pino from 'pino';
import { documentationApp } from '../src/apidocs/build';
import { loadConfig } from '../src/config';
import { STORAGE_URL_SIGNING_SECRET } from './shared';
import { median } from './statistics';

/**
 * How long the API reference of the whole project takes to generate: the OpenAPI document (every
 * module's routes through @fastify/swagger, the GraphQL endpoints and operations from the schema)
 * and the page around it, on an app whose routes are registered (as `plinth start` and
 * `plinth build` have them). The budget is 200 ms; the ratio printed is against it. Also shown:
 * registering the routes without a database, and `plinth build` end to end in a process of its
 * own (Node start-up, the schema, the OpenAPI validation and the writes included).
 *
 *   npm run bench:apidocs
 *   BENCH_ROUNDS=50 npm run bench:apidocs
 */

const BUDGET_MS = 200;
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 20);

async function timed<T>(work: () => Promise<T>): Promise<[T, number]> {
  const start = performance.now();
  const result = await work();
  return [result, performance.now() - start];
}

async function main(): Promise<void> {
  const folder = fs.mkdtempSync(path.join(os.tmpdir(), 'plinth-bench-apidocs-'));
  try {
    const config = loadConfig({
      NODE_ENV: 'production',
      GQL_GRAPHQL_ADMIN_SECRET: 'bench-admin-secret-0123456789abcdef',
      GQL_GRAPHQL_JWT_SECRET: JSON.stringify({ type: 'HS256', key: 'k'.repeat(32) }),
      STORAGE_URL_SIGNING_SECRET,
      PLINTH_DIST_DIR: folder,
    });
    const [app, registering] = await timed(() => documentationApp(config, pino({ level: 'silent' })));
    const [first, firstMs] = await timed(() => app.apiReference.generate());
    const rounds: number[] = [];
    for (let round = 0; round < ROUNDS; round++) rounds.push((await timed(() => app.apiReference.generate()))[1]);
    await app.close();

    const cli = path.join(__dirname, '..', 'src', 'cli', 'main.js');
    const buildStart = performance.now();
    execFileSync(process.execPath, [cli, 'build'], {
      cwd: folder,
      env: { PATH: process.env.PATH, PLINTH_DIST_DIR: folder, PLINTH_PROXY_CONF_DIR: folder },
      stdio: 'ignore',
    });
    const buildMs = performance.now() - buildStart;

    const paths = Object.keys(first.document.paths as object).length;
    console.log(
      `API reference benchmark: ${paths} paths, spec ${Buffer.byteLength(first.spec)} bytes, page ${Buffer.byteLength(first.page)} bytes, node ${process.version}, ${os.cpus().length} CPUs\n`,
    );
    console.log(`routes registered without a database (documentation app)   ${registering.toFixed(1).padStart(7)} ms`);
    console.log(`spec and page generated, first time                         ${firstMs.toFixed(1).padStart(7)} ms`);
    console.log(`spec and page generated, median of ${String(ROUNDS).padEnd(3)} later times           ${median(rounds).toFixed(1).padStart(7)} ms`);
    console.log(`plinth build, its own process end to end                    ${buildMs.toFixed(1).padStart(7)} ms`);
    console.log(`\nratio first generation / ${BUDGET_MS} ms budget: ${(firstMs / BUDGET_MS).toFixed(2)}`);
  } finally {
    fs.rmSync(folder, { recursive: true, force: true });
  }
}

main().catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});
