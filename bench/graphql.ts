// Type-graphql's decorators need the metadata polyfill before any resolver class is loaded.
import 'reflect-metadata';
import { randomUUID } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { DEFAULT_DATABASE_URL, prepareDatabase } from './database';
import { forkServer, type ServerProcess } from './processes';
import { runServerRole } from './servers';
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
import { reportRuns, runSlice, runTurns, verifyAnswer, type BenchRequest, type LoadResult, type LoadSettings, type RatioTarget } from './load';
import { nameList, positiveInteger } from './settings';

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

/** Targets of the comparison on requests per second: full / (b), full / (a), full / (c); (a') has none. */
const RATIO_TARGETS = [
  { name: 'full/(b)', baseline: 'apollo-express', minimum: 1.2 },
  { name: 'full/(a)', baseline: 'graphql-js', minimum: 0.6 },
  { name: "full/(a')", baseline: 'graphql-js-cached', minimum: null, note: 'no target (ceiling)' },
  { name: 'full/(c)', baseline: 'mercurius-jit', minimum: 0.9 },
  { name: 'full/(o)', baseline: 'plinth-other', minimum: null, note: 'no target (this build / the other)' },
] as const satisfies readonly RatioTarget<Target>[];

interface BenchSettings extends LoadSettings {
  quietSeconds: number;
  targets: Target[];
  queries: QueryName[];
  logLevel: string;
  profiled: Target[];
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
function startServerProcess(target: Target, settings: BenchSettings, databaseUrl: string): Promise<ServerProcess<Target>> {
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

const JSON_HEADERS = { 'content-type': 'application/json', accept: 'application/json' };

/** A measured request of one of this benchmark's queries. */
type QueryRequest = BenchRequest & { query: QueryName };

function sessionRequest(token: string, userId: string): QueryRequest {
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

function errorPageRequest(projectId: number): QueryRequest {
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

/**
 * Real rows for the errors query, through Plinth's own API: a project, a DSN key, and
 * SEEDED_ERRORS events of distinct types (so as many grouped errors), each with three frames.
 * The database keeps earlier runs' projects; the query names this run's.
 */
async function seedErrors(plinth: ServerProcess<Target>): Promise<number> {
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
  const servers: ServerProcess<Target>[] = [];
  const requests: QueryRequest[] = [];
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

  reportRuns({
    runs,
    subject: 'plinth',
    labels: TARGET_LABELS,
    ratioTargets: RATIO_TARGETS,
    settings,
    loadAverageBefore,
    recorded: {
      queries: Object.fromEntries(requests.map((request) => [request.query, JSON.parse(request.body) as unknown])),
      settings: { ...settings, pipelining: 1 },
    },
    file: RESULTS_FILE,
  });
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
