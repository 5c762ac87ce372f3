// Type-graphql's decorators need the metadata polyfill before any resolver class is loaded.
import 'reflect-metadata';
import { randomUUID } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { DEFAULT_DATABASE_URL, prepareDatabase } from './database';
import { forkServer, runServerRole, type ServerProcess } from './servers';
import {
  ADMIN_SECRET,
  ERROR_PAGE_QUERY,
  ERROR_PAGE_SIZE,
  OTHER_BUILD_TARGET,
  QUERIES,
  SEEDED_ERRORS,
  SESSION_QUERY,
  signUserToken,
  TARGET_LABELS,
  TARGETS,
  type QueryName,
  type Target,
} from './shared';
import { positiveInteger } from './settings';
import { median } from './statistics';

/**
 * GraphQL throughput benchmark: the full Plinth stack against (a) a bare graphql-js server on
 * node:http as graphql-js documents it (graphql() per request: parse, validate, execute),
 * (b) stock Apollo Server 5 on Express 5, (c) the fastest Node GraphQL server we know, Fastify 5
 * with mercurius and graphql-jit (`jit: 1`), and, as a ceiling without a target, (a') the bare
 * server with documents parsed and validated once (as Apollo caches them); all on the same
 * schema and the same JWT session resolution. Two queries: the session of a user's token (the
 * request envelope), and a page of 50 grouped errors with their project, frames and stack trace
 * over real rows (seeded through Plinth's ingestion route, read by every server from the same
 * database with the same services and DataLoaders), as the administrator. Besides
 * req/s, latency and server CPU per request, it prints each server's resident memory right after
 * start, BENCH_QUIET seconds after the start-ups without requests (start quiet: what a server that
 * started and served nothing keeps), after the warm-up (idle), BENCH_QUIET seconds after the
 * warm-up without requests (quiet: what a server that served a burst keeps) and the most seen
 * under load.
 *
 *   npm run bench                         # all five, 3 s warm-up + 10 s each
 *   BENCH_DURATION=5 BENCH_ROUNDS=3 npm run bench
 *
 * Environment: BENCH_DURATION (s, 10), BENCH_WARMUP (s, 3), BENCH_QUIET (s, 16), BENCH_CONNECTIONS (10),
 * BENCH_ROUNDS (1; the medians of the rounds are reported), BENCH_SLICES (5: the turns a round's BENCH_DURATION is
 * measured in, server after server, see runTurns),
 * BENCH_TARGETS (comma list of plinth,graphql-js,apollo-express,graphql-js-cached,mercurius-jit; plinth seeds the
 * errors, so the errors query needs it), BENCH_QUERIES (comma list of session,errors), BENCH_LOG_LEVEL (Plinth's
 * LOG_LEVEL, warn), BENCH_CPU_PROF (comma list of targets to run under --cpu-prof), BENCH_OTHER_BUILD (the dist folder
 * of another build of Plinth, e.g. a copy of the parent commit's, served as target plinth-other: a change measured in one run),
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

/** Targets of the comparison on requests per second: full / (b), full / (a), full / (c); (a') has none. */
const RATIO_TARGETS = [
  { name: 'full/(b)', baseline: 'apollo-express', minimum: 1.2 },
  { name: 'full/(a)', baseline: 'graphql-js', minimum: 0.6 },
  { name: "full/(a')", baseline: 'graphql-js-cached', minimum: null, note: 'no target (ceiling)' },
  { name: 'full/(c)', baseline: 'mercurius-jit', minimum: 0.9 },
  { name: 'full/(o)', baseline: 'plinth-other', minimum: null, note: 'no target (this build / the other)' },
] as const satisfies readonly { name: string; baseline: Target; minimum: number | null; note?: string }[];

interface BenchSettings {
  durationSeconds: number;
  warmupSeconds: number;
  quietSeconds: number;
  connections: number;
  rounds: number;
  /** Slices a round's measurement of each query takes turns in, server after server. */
  slices: number;
  targets: Target[];
  queries: QueryName[];
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
  /** The server's resident memory right after it started (before any request). */
  startRssBytes: number;
  /** The resident memory BENCH_QUIET seconds after every server had started, before any load (the first round's runs only). */
  startQuietRssBytes?: number;
  /** The server's resident memory before the run (idle, after the warm-up when one came before) and the most seen during it. */
  idleRssBytes: number;
  loadedRssBytes: number;
  /** The resident memory BENCH_QUIET seconds after the warm-up, before this run (the first round's runs only). */
  quietRssBytes?: number;
  responses: number;
  durationSeconds: number;
}

function nameList<T extends string>(name: string, known: readonly T[], fallback: readonly T[]): T[] {
  const text = process.env[name];
  if (text === undefined || text.trim() === '') return [...fallback];
  const names = text.split(',').map((item) => item.trim());
  const unknown = names.filter((item) => !(known as readonly string[]).includes(item));
  if (unknown.length > 0) throw new Error(`${name}: unknown name(s) ${unknown.join(', ')}; use ${known.join(', ')}`);
  return names as T[];
}

function readSettings(): BenchSettings {
  return {
    durationSeconds: positiveInteger('BENCH_DURATION', 10),
    warmupSeconds: positiveInteger('BENCH_WARMUP', 3),
    quietSeconds: positiveInteger('BENCH_QUIET', 16),
    connections: positiveInteger('BENCH_CONNECTIONS', 10),
    rounds: positiveInteger('BENCH_ROUNDS', 1),
    slices: positiveInteger('BENCH_SLICES', 5),
    targets: nameList('BENCH_TARGETS', TARGETS, process.env.BENCH_OTHER_BUILD ? TARGETS : TARGETS.filter((target) => target !== OTHER_BUILD_TARGET)),
    queries: nameList('BENCH_QUERIES', QUERIES, QUERIES),
    logLevel: process.env.BENCH_LOG_LEVEL || 'warn',
    profiled: nameList('BENCH_CPU_PROF', TARGETS, []),
  };
}

/** Forks this script as `serve <target>` and waits until the server listens. */
function startServerProcess(target: Target, settings: BenchSettings, databaseUrl: string): Promise<ServerProcess> {
  const profileArgs = settings.profiled.includes(target)
    ? ['--cpu-prof', `--cpu-prof-dir=${path.join(RESULTS_DIR, 'profiles')}`, `--cpu-prof-name=${target}-${Date.now()}.cpuprofile`]
    : [];
  const otherBuild = process.env.BENCH_OTHER_BUILD;
  if (target === OTHER_BUILD_TARGET && !otherBuild) throw new Error('plinth-other needs BENCH_OTHER_BUILD (a dist folder)');
  const [script, served] = target === OTHER_BUILD_TARGET ? [path.resolve(otherBuild!, 'bench', 'graphql.js'), 'plinth'] : [__filename, target];
  return forkServer(script, target, {
    served,
    execArgv: profileArgs,
    env: { ...process.env, NODE_ENV: 'production', BENCH_DATABASE_URL: databaseUrl, BENCH_LOG_LEVEL: settings.logLevel },
    logFile: path.join(RESULTS_DIR, `${target}.log`),
  });
}

/** One measured request: what is sent, and how to tell a right answer (null) from a wrong one (why). */
interface BenchRequest {
  query: QueryName;
  headers: Record<string, string>;
  body: string;
  check(answer: unknown): string | null;
}

const JSON_HEADERS = { 'content-type': 'application/json', accept: 'application/json' };

function sessionRequest(token: string, userId: string): BenchRequest {
  return {
    query: 'session',
    headers: { ...JSON_HEADERS, authorization: `Bearer ${token}` },
    body: JSON.stringify({ query: SESSION_QUERY }),
    check: (answer) => {
      const session = (answer as { data?: { session?: { role?: unknown; user_id?: unknown } } }).data?.session;
      return session?.role === 'user' && session.user_id === userId ? null : 'not the token’s session';
    },
  };
}

interface ErrorPageAnswer {
  errors?: unknown[];
  data?: { errors?: { edges: { node: { project?: { id: number }; frames: unknown[]; stackTrace: string | null } }[]; pageInfo: { hasNextPage: boolean } } };
}

function errorPageRequest(projectId: number): BenchRequest {
  return {
    query: 'errors',
    headers: { ...JSON_HEADERS, 'x-gql-admin-secret': ADMIN_SECRET },
    body: JSON.stringify({ query: ERROR_PAGE_QUERY, variables: { project: projectId }, operationName: 'ErrorPage' }),
    check: (answer) => {
      const page = (answer as ErrorPageAnswer).data?.errors;
      if ((answer as ErrorPageAnswer).errors || !page) return 'errors in the answer';
      if (page.edges.length !== ERROR_PAGE_SIZE || !page.pageInfo.hasNextPage) return `${page.edges.length} errors, not a full page`;
      const complete = page.edges.every(({ node }) => node.project?.id === projectId && node.frames.length === 3 && node.stackTrace);
      return complete ? null : 'an error without its project, frames or stack trace';
    },
  };
}

/** One request by hand: the server must answer 200 and rightly before it is measured. */
async function verifyAnswer(server: ServerProcess, request: BenchRequest): Promise<void> {
  const response = await fetch(server.url, { method: 'POST', headers: request.headers, body: request.body });
  const text = await response.text();
  let answer: unknown;
  try {
    answer = JSON.parse(text);
  } catch {
    answer = undefined;
  }
  const wrong = response.status !== 200 || answer === undefined ? `HTTP ${response.status}` : request.check(answer);
  if (wrong !== null) {
    throw new Error(`${server.target} answered the ${request.query} query wrongly (${wrong}): ${text.slice(0, 500)}`);
  }
}

/**
 * Real rows for the errors query, through Plinth's own API: a project, a DSN key, and
 * SEEDED_ERRORS events of distinct types (so as many grouped errors), each with three frames.
 * The database keeps earlier runs' projects; the query names this run's.
 */
async function seedErrors(plinth: ServerProcess): Promise<number> {
  const admin = async <T>(query: string, variables: Record<string, unknown>): Promise<T> => {
    const response = await fetch(plinth.url, {
      method: 'POST',
      headers: { ...JSON_HEADERS, 'x-gql-admin-secret': ADMIN_SECRET },
      body: JSON.stringify({ query, variables }),
    });
    const answer = (await response.json()) as { data?: T; errors?: unknown };
    if (!answer.data || answer.errors) throw new Error(`seeding failed: ${JSON.stringify(answer).slice(0, 500)}`);
    return answer.data;
  };
  const slug = `bench-${Date.now()}`;
  const { createErrorProject: project } = await admin<{ createErrorProject: { id: number } }>(
    'mutation ($input: CreateErrorProjectInput!) { createErrorProject(input: $input) { id } }',
    { input: { name: slug, slug, service: 'checkout' } },
  );
  const { createErrorToken: token } = await admin<{ createErrorToken: { token: string } }>(
    'mutation ($input: CreateErrorTokenInput!) { createErrorToken(input: $input) { token } }',
    { input: { project: String(project.id), kind: 'DSN', name: 'bench' } },
  );
  const eventsUrl = new URL('/api/errors/events', plinth.url).toString();
  for (let kind = 0; kind < SEEDED_ERRORS; kind++) {
    const type = `BenchError${kind}`;
    const response = await fetch(eventsUrl, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${token.token}` },
      body: JSON.stringify({
        level: 'error',
        release: '1.0.0',
        environment: 'production',
        message: `${type}: card ${kind} declined`,
        exception: {
          values: [
            {
              type,
              value: `card ${kind} declined`,
              stacktrace: {
                frames: [
                  { filename: '/app/node_modules/express/lib/router.js', function: 'handle', lineno: 10, colno: 3, source: 'next()' },
                  { filename: '/app/src/server.js', function: 'route', lineno: 40, colno: 5, source: 'handler(req)' },
                  { filename: `/app/src/checkout-${kind}.js`, function: 'charge', lineno: 12 + kind, colno: 9, source: 'card.charge()' },
                ],
              },
            },
          ],
        },
      }),
    });
    if (response.status !== 200) throw new Error(`seeding failed: event ${kind} got HTTP ${response.status}: ${await response.text()}`);
  }
  return project.id;
}

/** The value below which `fraction` of the sorted samples fall (nearest rank). */
function percentile(sorted: Float64Array, fraction: number): number {
  if (sorted.length === 0) return Number.NaN;
  return sorted[Math.min(sorted.length - 1, Math.ceil(fraction * sorted.length) - 1)];
}

/** One stretch of load on one server, before its figures are merged with the server's other slices. */
interface Slice {
  responses: number;
  durationSeconds: number;
  /** Every response's latency (ms). */
  latencies: number[];
  cpuMicros: number;
  idleRssBytes: number;
  loadedRssBytes: number;
}

/**
 * Measures `request` on every server for `durationSeconds` each, in `slices` turns: each turn
 * gives each server an equal share of the time, the order shifting by one server every turn. On
 * a machine whose speed moves by tens of percent within a minute, one server's ten seconds after
 * another's would compare two machines; taking turns every two seconds puts both under the same
 * conditions.
 */
async function runTurns(servers: ServerProcess[], request: BenchRequest, settings: BenchSettings): Promise<Map<Target, LoadResult>> {
  const slices = new Map<Target, Slice[]>(servers.map((server) => [server.target, []]));
  const sliceSeconds = settings.durationSeconds / settings.slices;
  for (let turn = 0; turn < settings.slices; turn++) {
    for (let index = 0; index < servers.length; index++) {
      const server = servers[(index + turn) % servers.length];
      slices.get(server.target)!.push(await runSlice(server, request, settings.connections, sliceSeconds));
    }
  }
  return new Map(servers.map((server) => [server.target, mergeSlices(server, slices.get(server.target)!)]));
}

function mergeSlices(server: ServerProcess, slices: Slice[]): LoadResult {
  const responses = slices.reduce((sum, slice) => sum + slice.responses, 0);
  const durationSeconds = slices.reduce((sum, slice) => sum + slice.durationSeconds, 0);
  const sorted = Float64Array.from(slices.flatMap((slice) => slice.latencies)).sort();
  return {
    requestsPerSecond: responses / durationSeconds,
    p50Ms: percentile(sorted, 0.5),
    p99Ms: percentile(sorted, 0.99),
    meanMs: sorted.reduce((sum, value) => sum + value, 0) / sorted.length,
    serverCpuMicrosPerRequest: slices.reduce((sum, slice) => sum + slice.cpuMicros, 0) / responses,
    startRssBytes: server.startRssBytes,
    idleRssBytes: slices[0].idleRssBytes,
    loadedRssBytes: Math.max(...slices.map((slice) => slice.loadedRssBytes)),
    responses,
    durationSeconds,
  };
}

/** Load on one server for `durationSeconds`, with its CPU time and resident memory. */
async function runSlice(server: ServerProcess, request: BenchRequest, connections: number, durationSeconds: number): Promise<Slice> {
  const before = await server.usage();
  let loadedRssBytes = before.rssBytes;
  // Sampled while the load runs (the server answers between requests, so this is under load).
  const sampler = setInterval(() => {
    void server.usage().then(({ rssBytes }) => (loadedRssBytes = Math.max(loadedRssBytes, rssBytes)));
  }, RSS_SAMPLE_INTERVAL_MS);
  const result = await runAutocannon(server, request, connections, durationSeconds).finally(() => clearInterval(sampler));
  const after = await server.usage();
  return { ...result, cpuMicros: after.micros - before.micros, idleRssBytes: before.rssBytes, loadedRssBytes: Math.max(loadedRssBytes, after.rssBytes) };
}

/**
 * Runs autocannon against the server. Latencies are taken from the per-response event
 * (fractional ms) because autocannon's own histogram rounds to whole milliseconds, too coarse
 * for a query answered in about one.
 */
function runAutocannon(
  server: ServerProcess,
  request: BenchRequest,
  connections: number,
  durationSeconds: number,
): Promise<Pick<Slice, 'responses' | 'durationSeconds' | 'latencies'>> {
  // Required here, in the parent only: a server process (this script as `serve`) should not hold it.
  const autocannon = require('autocannon') as typeof import('autocannon');
  const latencies: number[] = [];
  return new Promise((resolve, reject) => {
    const instance = autocannon(
      {
        url: server.url,
        method: 'POST',
        headers: request.headers,
        body: request.body,
        connections,
        pipelining: 1,
        duration: durationSeconds,
      },
      (error, result) => {
        if (error) return reject(error);
        if (result.non2xx !== 0 || result.errors !== 0 || result.timeouts !== 0 || result['2xx'] === 0) {
          return reject(
            new Error(
              `${server.target} (${request.query}): ${result.non2xx} non-2xx, ${result.errors} errors, ${result.timeouts} timeouts ` +
                `(${result['2xx']} 2xx); the measurement is not valid`,
            ),
          );
        }
        // Completed 2xx over the measured time (autocannon's per-second average drops partial seconds).
        resolve({ responses: result['2xx'], durationSeconds: result.duration, latencies });
      },
    );
    instance.on('response', (_client, _statusCode, _bytes, responseTime) => {
      latencies.push(responseTime);
    });
  });
}

function summarise(runs: LoadResult[]): LoadResult {
  return {
    requestsPerSecond: median(runs.map((run) => run.requestsPerSecond)),
    p50Ms: median(runs.map((run) => run.p50Ms)),
    p99Ms: median(runs.map((run) => run.p99Ms)),
    meanMs: median(runs.map((run) => run.meanMs)),
    serverCpuMicrosPerRequest: median(runs.map((run) => run.serverCpuMicrosPerRequest)),
    startRssBytes: runs[0].startRssBytes,
    startQuietRssBytes: runs[0].startQuietRssBytes,
    idleRssBytes: median(runs.map((run) => run.idleRssBytes)),
    loadedRssBytes: Math.max(...runs.map((run) => run.loadedRssBytes)),
    quietRssBytes: runs[0].quietRssBytes,
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
  /** What a ratio without a target shows. */
  note: string | undefined;
  met: boolean;
}

function ratios(runs: Map<Target, LoadResult[]>, rounds: number): RatioReport[] {
  const full = runs.get('plinth');
  if (!full) return [];
  return RATIO_TARGETS.flatMap((target) => {
    const { name, baseline, minimum } = target;
    const note = 'note' in target ? target.note : undefined;
    const base = runs.get(baseline);
    if (!base) return [];
    const perRound = Array.from({ length: rounds }, (_, round) => full[round].requestsPerSecond / base[round].requestsPerSecond);
    const value = median(perRound);
    const byServerCpu = median(Array.from({ length: rounds }, (_, round) => base[round].serverCpuMicrosPerRequest / full[round].serverCpuMicrosPerRequest));
    return [{ name, value, perRound, byServerCpu, minimum, note, met: minimum === null || value >= minimum }];
  });
}

function printReport(query: QueryName, summaries: Map<Target, LoadResult>, ratioReports: RatioReport[], settings: BenchSettings): void {
  const fixed = (value: number, digits: number) => value.toFixed(digits);
  const rows = [...summaries].map(([target, result]) => [
    TARGET_LABELS[target],
    fixed(result.requestsPerSecond, 0),
    fixed(result.p50Ms, 2),
    fixed(result.p99Ms, 2),
    fixed(result.serverCpuMicrosPerRequest, 0),
    fixed(result.startRssBytes / MIB, 0),
    result.startQuietRssBytes === undefined ? '-' : fixed(result.startQuietRssBytes / MIB, 0),
    fixed(result.idleRssBytes / MIB, 0),
    result.quietRssBytes === undefined ? '-' : fixed(result.quietRssBytes / MIB, 0),
    fixed(result.loadedRssBytes / MIB, 0),
  ]);
  const header = [
    'server',
    'req/s',
    'p50 ms',
    'p99 ms',
    'server CPU µs/req',
    'RSS start MiB',
    'RSS start quiet MiB',
    'RSS idle MiB',
    'RSS quiet MiB',
    'RSS load MiB',
  ];
  const widths = header.map((title, column) => Math.max(title.length, ...rows.map((row) => row[column].length)));
  const line = (cells: string[]) => cells.map((cell, column) => (column === 0 ? cell.padEnd(widths[0]) : cell.padStart(widths[column]))).join('   ');
  const rule = '-'.repeat(line(header).length);

  console.log(
    `\nquery "${query}": ${settings.connections} connections, pipelining 1, ${settings.warmupSeconds} s warm-up, ` +
      `${settings.durationSeconds} s measured in ${settings.slices} turns x ${settings.rounds} round(s)${settings.rounds > 1 ? ' (medians)' : ''}`,
  );
  console.log([rule, line(header), rule, ...rows.map(line), rule].join('\n'));
  for (const ratio of ratioReports) {
    const rounds = ratio.perRound.length > 1 ? `  rounds: ${ratio.perRound.map((value) => value.toFixed(2)).join(', ')}` : '';
    console.log(
      `${ratio.name.padEnd(9)} ${ratio.value.toFixed(2)}x   ` +
        (ratio.minimum === null ? (ratio.note ?? 'no target').padEnd(26) : `target >= ${ratio.minimum.toFixed(2)}x   ${ratio.met ? 'MET   ' : 'MISSED'}`) +
        `   (by server CPU per request: ${ratio.byServerCpu.toFixed(2)}x)${rounds}`,
    );
  }
}

async function runBenchmark(): Promise<void> {
  const settings = readSettings();
  if (settings.queries.includes('errors') && !settings.targets.includes('plinth')) {
    throw new Error('the errors query needs plinth among BENCH_TARGETS: its rows are seeded through Plinth');
  }
  fs.mkdirSync(RESULTS_DIR, { recursive: true });
  const databaseUrl = settings.targets.includes('plinth') ? await prepareDatabase() : DEFAULT_DATABASE_URL;
  const userId = randomUUID();
  // Valid for the whole run: warm-up, rounds and start-ups included, with a wide margin.
  const runSeconds = settings.rounds * settings.targets.length * settings.queries.length * (settings.durationSeconds + 120);
  const token = signUserToken(userId, 3600 + runSeconds);
  const loadAverageBefore = os.loadavg();

  // Plinth first: it migrates the database and seeds the errors the other servers read.
  const targets = [...settings.targets].sort((a, b) => Number(b === 'plinth') - Number(a === 'plinth'));
  const servers: ServerProcess[] = [];
  const requests: BenchRequest[] = [];
  const runs = new Map<QueryName, Map<Target, LoadResult[]>>(settings.queries.map((query) => [query, new Map(targets.map((target) => [target, []]))]));
  try {
    for (const target of targets) {
      process.stderr.write(`starting ${target}...\n`);
      const server = await startServerProcess(target, settings, databaseUrl);
      servers.push(server);
      if (target === 'plinth') {
        if (settings.queries.includes('session')) requests.push(sessionRequest(token, userId));
        if (settings.queries.includes('errors')) requests.push(errorPageRequest(await seedErrors(server)));
      }
      for (const request of requests) await verifyAnswer(server, request);
    }
    process.stderr.write(`all quiet for ${settings.quietSeconds} s after the start-ups...\n`);
    await new Promise((resolve) => setTimeout(resolve, settings.quietSeconds * 1000));
    const startQuietRss = new Map<Target, number>();
    for (const server of servers) startQuietRss.set(server.target, (await server.usage()).rssBytes);
    const quietRss = new Map<string, number>();
    for (const server of servers) {
      for (const request of requests) {
        process.stderr.write(`warming up ${server.target} on ${request.query} (${settings.warmupSeconds} s)...\n`);
        await runSlice(server, request, settings.connections, settings.warmupSeconds);
        process.stderr.write(`${server.target} quiet for ${settings.quietSeconds} s...\n`);
        await new Promise((resolve) => setTimeout(resolve, settings.quietSeconds * 1000));
        quietRss.set(`${server.target} ${request.query}`, (await server.usage()).rssBytes);
      }
    }
    for (let round = 0; round < settings.rounds; round++) {
      for (const request of requests) {
        process.stderr.write(
          `measuring ${request.query}, round ${round + 1}/${settings.rounds}: ${settings.durationSeconds} s per server in ${settings.slices} turns...\n`,
        );
        for (const [target, run] of await runTurns(servers, request, settings)) {
          const first = round === 0 ? { quietRssBytes: quietRss.get(`${target} ${request.query}`), startQuietRssBytes: startQuietRss.get(target) } : {};
          runs
            .get(request.query)!
            .get(target)!
            .push({ ...run, ...first });
        }
      }
    }
  } finally {
    await Promise.all(servers.map((server) => server.stop()));
  }

  const report = {
    finishedAt: new Date().toISOString(),
    queries: Object.fromEntries(requests.map((request) => [request.query, JSON.parse(request.body) as unknown])),
    settings: { ...settings, pipelining: 1 },
    machine: {
      node: process.version,
      cpus: os.cpus().length,
      loadAverageBefore,
      loadAverageAfter: os.loadavg(),
    },
    results: {} as Record<string, unknown>,
  };
  for (const [query, byTarget] of runs) {
    const summaries = new Map([...byTarget].map(([target, results]) => [target, summarise(results)]));
    const ratioReports = ratios(byTarget, settings.rounds);
    printReport(query, summaries, ratioReports, settings);
    report.results[query] = {
      servers: Object.fromEntries([...summaries].map(([target, summary]) => [target, { ...summary, rounds: byTarget.get(target) }])),
      ratios: ratioReports,
    };
  }
  console.log(
    `\nload average before ${loadAverageBefore.map((value) => value.toFixed(2)).join(' ')}, after ${report.machine.loadAverageAfter.map((value) => value.toFixed(2)).join(' ')}`,
  );
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
