// Type-graphql's decorators need the metadata polyfill before any resolver class is loaded.
import 'reflect-metadata';
import { randomUUID } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import autocannon from 'autocannon';
import { DEFAULT_DATABASE_URL, prepareDatabase } from './database';
import { forkServer, runServerRole, type ServerProcess } from './servers';
import {
  QUERY,
  signUserToken,
  TARGET_LABELS,
  TARGETS,
  type Target,
} from './shared';
import { positiveInteger } from './settings';

/**
 * GraphQL throughput benchmark: the full Plinth stack against (a) a bare graphql-js server on
 * node:http as graphql-js documents it (graphql() per request: parse, validate, execute),
 * (b) stock Apollo Server 5 on Express 5, (c) the fastest Node GraphQL server we know, Fastify 5
 * with mercurius and graphql-jit (`jit: 1`), and, as a ceiling without a target, (a') the bare
 * server with documents parsed and validated once (as Apollo caches them); all on the same
 * schema and the same JWT session resolution. Besides req/s, latency and server CPU per request,
 * it prints each server's resident memory before a run and the most seen during it.
 *
 *   npm run bench                         # all five, 3 s warm-up + 10 s each
 *   BENCH_DURATION=5 BENCH_ROUNDS=3 npm run bench
 *
 * Environment: BENCH_DURATION (s, 10), BENCH_WARMUP (s, 3), BENCH_CONNECTIONS (10),
 * BENCH_ROUNDS (1; rounds interleave the targets and the medians are reported),
 * BENCH_TARGETS (comma list of plinth,graphql-js,apollo-express,graphql-js-cached,mercurius-jit), BENCH_LOG_LEVEL (Plinth's
 * LOG_LEVEL, warn), BENCH_CPU_PROF (comma list of targets to run under --cpu-prof),
 * BENCH_DATABASE_URL or DATABASE_URL (else postgres://postgres@127.0.0.1:5432/plinth_bench).
 *
 * Each server runs in a child process (this script with `serve <target>`), so autocannon, here
 * in the parent, never shares a server's event loop. All are started first; one at a time is
 * under load while the others idle. Output: the table on stdout, bench/results/graphql-latest.json,
 * server stdout in bench/results/<target>.log, profiles in bench/results/profiles/.
 */

const ROOT = path.resolve(__dirname, '..', '..');
const RESULTS_DIR = path.join(ROOT, 'bench', 'results');
const RESULTS_FILE = path.join(RESULTS_DIR, 'graphql-latest.json');
const RSS_SAMPLE_INTERVAL_MS = 500;
const MIB = 1024 * 1024;

/** Targets of the comparison on requests per second: full / (b), full / (a), full / (c) (issue 16); (a') has none. */
const RATIO_TARGETS = [
  { name: 'full/(b)', baseline: 'apollo-express', minimum: 1.2 },
  { name: 'full/(a)', baseline: 'graphql-js', minimum: 0.6 },
  { name: "full/(a')", baseline: 'graphql-js-cached', minimum: null },
  { name: 'full/(c)', baseline: 'mercurius-jit', minimum: 0.9 },
] as const satisfies readonly { name: string; baseline: Target; minimum: number | null }[];

interface BenchSettings {
  durationSeconds: number;
  warmupSeconds: number;
  connections: number;
  rounds: number;
  targets: Target[];
  logLevel: string;
  profiled: Target[];
}

interface LoadResult {
  requestsPerSecond: number;
  p50Ms: number;
  p99Ms: number;
  meanMs: number;
  /**
   * Server-process CPU time per response. Unlike req/s it hardly depends on what else the
   * machine runs, so it is the steadier figure when the machine is shared.
   */
  serverCpuMicrosPerRequest: number;
  /** The server's resident memory before the run (idle, after the warm-up when one came before) and the most seen during it. */
  idleRssBytes: number;
  loadedRssBytes: number;
  responses: number;
  durationSeconds: number;
}


function targetList(name: string, fallback: readonly Target[]): Target[] {
  const text = process.env[name];
  if (text === undefined || text.trim() === '') return [...fallback];
  const names = text.split(',').map((item) => item.trim());
  const unknown = names.filter((item) => !(TARGETS as readonly string[]).includes(item));
  if (unknown.length > 0) throw new Error(`${name}: unknown target(s) ${unknown.join(', ')}; use ${TARGETS.join(', ')}`);
  return names as Target[];
}

function readSettings(): BenchSettings {
  return {
    durationSeconds: positiveInteger('BENCH_DURATION', 10),
    warmupSeconds: positiveInteger('BENCH_WARMUP', 3),
    connections: positiveInteger('BENCH_CONNECTIONS', 10),
    rounds: positiveInteger('BENCH_ROUNDS', 1),
    targets: targetList('BENCH_TARGETS', TARGETS),
    logLevel: process.env.BENCH_LOG_LEVEL || 'warn',
    profiled: targetList('BENCH_CPU_PROF', []),
  };
}

/** Forks this script as `serve <target>` and waits until the server listens. */
function startServerProcess(target: Target, settings: BenchSettings, databaseUrl: string): Promise<ServerProcess> {
  const profileArgs = settings.profiled.includes(target)
    ? ['--cpu-prof', `--cpu-prof-dir=${path.join(RESULTS_DIR, 'profiles')}`, `--cpu-prof-name=${target}-${Date.now()}.cpuprofile`]
    : [];
  return forkServer(__filename, target, {
    execArgv: profileArgs,
    env: { ...process.env, NODE_ENV: 'production', BENCH_DATABASE_URL: databaseUrl, BENCH_LOG_LEVEL: settings.logLevel },
    logFile: path.join(RESULTS_DIR, `${target}.log`),
  });
}

function requestHeaders(token: string): Record<string, string> {
  return { 'content-type': 'application/json', accept: 'application/json', authorization: `Bearer ${token}` };
}

/** One request by hand: the server must answer 200 with the token's session before it is measured. */
async function verifyAnswer(server: ServerProcess, token: string, userId: string): Promise<void> {
  const response = await fetch(server.url, { method: 'POST', headers: requestHeaders(token), body: JSON.stringify({ query: QUERY }) });
  const text = await response.text();
  let session: { role?: unknown; user_id?: unknown } | undefined;
  try {
    session = (JSON.parse(text) as { data?: { session?: { role?: unknown; user_id?: unknown } } }).data?.session;
  } catch {
    session = undefined;
  }
  if (response.status !== 200 || session?.role !== 'user' || session.user_id !== userId) {
    throw new Error(`${server.target} answered the query wrongly (HTTP ${response.status}): ${text.slice(0, 500)}`);
  }
}

/** The value below which `fraction` of the sorted samples fall (nearest rank). */
function percentile(sorted: Float64Array, fraction: number): number {
  if (sorted.length === 0) return Number.NaN;
  return sorted[Math.min(sorted.length - 1, Math.ceil(fraction * sorted.length) - 1)];
}

/**
 * Runs autocannon against the server. Latencies are taken from the per-response event
 * (fractional ms) because autocannon's own histogram rounds to whole milliseconds, too coarse
 * for a query answered in about one.
 */
async function runLoad(server: ServerProcess, token: string, connections: number, durationSeconds: number): Promise<LoadResult> {
  const before = await server.usage();
  let loadedRssBytes = before.rssBytes;
  // Sampled while the load runs (the server answers between requests, so this is under load).
  const sampler = setInterval(() => {
    void server.usage().then(({ rssBytes }) => (loadedRssBytes = Math.max(loadedRssBytes, rssBytes)));
  }, RSS_SAMPLE_INTERVAL_MS);
  const result = await runAutocannon(server, token, connections, durationSeconds).finally(() => clearInterval(sampler));
  const after = await server.usage();
  return {
    ...result,
    serverCpuMicrosPerRequest: (after.micros - before.micros) / result.responses,
    idleRssBytes: before.rssBytes,
    loadedRssBytes: Math.max(loadedRssBytes, after.rssBytes),
  };
}

function runAutocannon(
  server: ServerProcess,
  token: string,
  connections: number,
  durationSeconds: number,
): Promise<Omit<LoadResult, 'serverCpuMicrosPerRequest' | 'idleRssBytes' | 'loadedRssBytes'>> {
  const latencies: number[] = [];
  return new Promise((resolve, reject) => {
    const instance = autocannon(
      {
        url: server.url,
        method: 'POST',
        headers: requestHeaders(token),
        body: JSON.stringify({ query: QUERY }),
        connections,
        pipelining: 1,
        duration: durationSeconds,
      },
      (error, result) => {
        if (error) return reject(error);
        if (result.non2xx !== 0 || result.errors !== 0 || result.timeouts !== 0 || result['2xx'] === 0) {
          return reject(
            new Error(
              `${server.target}: ${result.non2xx} non-2xx, ${result.errors} errors, ${result.timeouts} timeouts ` +
                `(${result['2xx']} 2xx); the measurement is not valid`,
            ),
          );
        }
        const sorted = Float64Array.from(latencies).sort();
        resolve({
          // Completed 2xx over the measured time (autocannon's per-second average drops partial seconds).
          requestsPerSecond: result['2xx'] / result.duration,
          p50Ms: percentile(sorted, 0.5),
          p99Ms: percentile(sorted, 0.99),
          meanMs: sorted.reduce((sum, value) => sum + value, 0) / sorted.length,
          responses: result['2xx'],
          durationSeconds: result.duration,
        });
      },
    );
    instance.on('response', (_client, _statusCode, _bytes, responseTime) => {
      latencies.push(responseTime);
    });
  });
}

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const middle = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1 ? sorted[middle] : (sorted[middle - 1] + sorted[middle]) / 2;
}

function summarise(runs: LoadResult[]): LoadResult {
  return {
    requestsPerSecond: median(runs.map((run) => run.requestsPerSecond)),
    p50Ms: median(runs.map((run) => run.p50Ms)),
    p99Ms: median(runs.map((run) => run.p99Ms)),
    meanMs: median(runs.map((run) => run.meanMs)),
    serverCpuMicrosPerRequest: median(runs.map((run) => run.serverCpuMicrosPerRequest)),
    idleRssBytes: median(runs.map((run) => run.idleRssBytes)),
    loadedRssBytes: Math.max(...runs.map((run) => run.loadedRssBytes)),
    responses: runs.reduce((sum, run) => sum + run.responses, 0),
    durationSeconds: runs.reduce((sum, run) => sum + run.durationSeconds, 0),
  };
}

interface RatioReport {
  name: string;
  /** Median over rounds of the ratio within each round (rounds pair up under the same load). */
  value: number;
  perRound: number[];
  /** The same ratio from server CPU per request (baseline µs / full µs): throughput if each were CPU-bound. */
  byServerCpu: number;
  /** null: shown for information, no target. */
  minimum: number | null;
  met: boolean;
}

function ratios(runs: Map<Target, LoadResult[]>, rounds: number): RatioReport[] {
  const full = runs.get('plinth');
  if (!full) return [];
  return RATIO_TARGETS.flatMap(({ name, baseline, minimum }) => {
    const base = runs.get(baseline);
    if (!base) return [];
    const perRound = Array.from({ length: rounds }, (_, round) => full[round].requestsPerSecond / base[round].requestsPerSecond);
    const value = median(perRound);
    const byServerCpu = median(
      Array.from({ length: rounds }, (_, round) => base[round].serverCpuMicrosPerRequest / full[round].serverCpuMicrosPerRequest),
    );
    return [{ name, value, perRound, byServerCpu, minimum, met: minimum === null || value >= minimum }];
  });
}

function printReport(summaries: Map<Target, LoadResult>, ratioReports: RatioReport[], settings: BenchSettings): void {
  const fixed = (value: number, digits: number) => value.toFixed(digits);
  const rows = [...summaries].map(([target, result]) => [
    TARGET_LABELS[target],
    fixed(result.requestsPerSecond, 0),
    fixed(result.p50Ms, 2),
    fixed(result.p99Ms, 2),
    fixed(result.serverCpuMicrosPerRequest, 0),
    fixed(result.idleRssBytes / MIB, 0),
    fixed(result.loadedRssBytes / MIB, 0),
  ]);
  const header = ['server', 'req/s', 'p50 ms', 'p99 ms', 'server CPU µs/req', 'RSS idle MiB', 'RSS load MiB'];
  const widths = header.map((title, column) => Math.max(title.length, ...rows.map((row) => row[column].length)));
  const line = (cells: string[]) => cells.map((cell, column) => (column === 0 ? cell.padEnd(widths[0]) : cell.padStart(widths[column]))).join('   ');
  const rule = '-'.repeat(line(header).length);

  console.log(
    `\n${settings.connections} connections, pipelining 1, ${settings.warmupSeconds} s warm-up, ` +
      `${settings.durationSeconds} s measured x ${settings.rounds} round(s)${settings.rounds > 1 ? ' (medians)' : ''}`,
  );
  console.log([rule, line(header), rule, ...rows.map(line), rule].join('\n'));
  for (const ratio of ratioReports) {
    const rounds = ratio.perRound.length > 1 ? `  rounds: ${ratio.perRound.map((value) => value.toFixed(2)).join(', ')}` : '';
    console.log(
      `${ratio.name.padEnd(9)} ${ratio.value.toFixed(2)}x   ` +
        (ratio.minimum === null ? 'no target (ceiling)       ' : `target >= ${ratio.minimum.toFixed(2)}x   ${ratio.met ? 'MET   ' : 'MISSED'}`) +
        `   (by server CPU per request: ${ratio.byServerCpu.toFixed(2)}x)${rounds}`,
    );
  }
}

async function runBenchmark(): Promise<void> {
  const settings = readSettings();
  fs.mkdirSync(RESULTS_DIR, { recursive: true });
  const databaseUrl = settings.targets.includes('plinth') ? await prepareDatabase() : DEFAULT_DATABASE_URL;
  const userId = randomUUID();
  // Valid for the whole run: warm-up, rounds and start-ups included, with a wide margin.
  const token = signUserToken(userId, 3600 + settings.rounds * settings.targets.length * (settings.durationSeconds + 120));
  const loadAverageBefore = os.loadavg();

  const servers: ServerProcess[] = [];
  const runs = new Map<Target, LoadResult[]>(settings.targets.map((target) => [target, []]));
  try {
    for (const target of settings.targets) {
      process.stderr.write(`starting ${target}...\n`);
      const server = await startServerProcess(target, settings, databaseUrl);
      servers.push(server);
      await verifyAnswer(server, token, userId);
    }
    for (let round = 0; round < settings.rounds; round++) {
      for (const server of servers) {
        if (round === 0) {
          process.stderr.write(`warming up ${server.target} (${settings.warmupSeconds} s)...\n`);
          await runLoad(server, token, settings.connections, settings.warmupSeconds);
        }
        process.stderr.write(`measuring ${server.target}, round ${round + 1}/${settings.rounds} (${settings.durationSeconds} s)...\n`);
        runs.get(server.target)!.push(await runLoad(server, token, settings.connections, settings.durationSeconds));
      }
    }
  } finally {
    await Promise.all(servers.map((server) => server.stop()));
  }

  const summaries = new Map([...runs].map(([target, results]) => [target, summarise(results)]));
  const ratioReports = ratios(runs, settings.rounds);
  printReport(summaries, ratioReports, settings);

  const report = {
    finishedAt: new Date().toISOString(),
    query: QUERY,
    settings: { ...settings, pipelining: 1 },
    machine: {
      node: process.version,
      cpus: os.cpus().length,
      loadAverageBefore,
      loadAverageAfter: os.loadavg(),
    },
    results: Object.fromEntries([...summaries].map(([target, summary]) => [target, { ...summary, rounds: runs.get(target) }])),
    ratios: ratioReports,
  };
  fs.writeFileSync(RESULTS_FILE, `${JSON.stringify(report, null, 2)}\n`);
  console.log(`\nresults written to ${path.relative(process.cwd(), RESULTS_FILE) || RESULTS_FILE}`);
}

function main(): Promise<void> {
  const [role, target] = process.argv.slice(2);
  if (role === 'serve') {
    if (!(TARGETS as readonly string[]).includes(target)) throw new Error(`unknown server target "${target}"`);
    return runServerRole(target as Target);
  }
  return runBenchmark();
}

main().catch((error: unknown) => {
  console.error(`bench failed: ${error instanceof Error ? error.message : String(error)}`);
  process.exit(1);
});
