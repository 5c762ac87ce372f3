import { execFileSync, fork, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { Algorithm, hash as argon2Hash, verify } from '@node-rs/argon2';
import pg from 'pg';
import { Agent, type Dispatcher } from 'undici';
import { PasswordHasher } from '../src/common/passwords';
import { loadConfig } from '../src/config';
import { startServer } from '../src/main';
import { createLogger } from '../src/platform/logger';
import { startBareSignIn } from './bare-signin';
import { prepareDatabase } from './database';
import { positiveInteger } from './settings';
import { medianIndex } from './statistics';
import { AUTH_LIMITS_LIFTED } from './shared';

/**
 * The auth service under load, the server in a child process (this file, role `server`), the
 * client (undici's dispatch, keep-alive) in this one:
 *
 * - token refresh per second (POST /auth/token, each of BENCH_AUTH_SESSIONS chains presenting the
 *   token the previous refresh gave), against the cheapest authenticated request of the same
 *   server (GraphQL `{ session { role } }` with a bearer token) as the baseline;
 * - sign-in per second (POST /auth/signin/email-password) against argon2id verifications per
 *   second of the same hash in the server's process (the hash alone), which gives the share of
 *   sign-in spent in argon2 and what sign-in costs beyond it: at BENCH_AUTH_SIGNIN_CONCURRENCY (4)
 *   at once, and one at a time (latency, where the other requests' CPU does not count); and against
 *   the floor, a bare Fastify + pg server doing the same statements, hash and token in the same
 *   process (bench/bare-signin.ts), which tells Plinth's own cost from what any server pays here.
 *
 * Each measure and its baseline alternate for BENCH_ROUNDS rounds (3), so that a change of the
 * machine's load falls on both; the median round counts, and every round's figure is printed.
 *
 * Every measure also gives the CPU time per operation of the server process (its thread pool,
 * where argon2 runs, included), of the PostgreSQL backends of its pool (read from /proc when the
 * database is local) and of the client: figures that hardly move with the machine's load, where
 * requests per second do. The limits of AUTH_RATE_LIMIT_* are lifted for the run.
 *
 *   npm run bench:auth      (BENCH_SECONDS per measure, 5; BENCH_WARMUP, 1; BENCH_AUTH_SESSIONS, 32)
 *
 * Before sign-in is measured, BENCH_AUTH_SIGNIN_WARMUP (3000) sign-ins with a cheap hash make its
 * code hot (warmUpSignIn). BENCH_AUTH_ONLY=refresh or signin runs that part alone;
 * BENCH_CPU_PROF=1 writes the server's V8 profile to bench/results/profiles (node
 * dist/bench/cpu-profile.js reads it).
 */

const PASSWORD = 'benchmark password 0123';
const ADMIN_SECRET = 'bench-admin-secret-0123456789';
const PROFILES_DIR = path.join(__dirname, '..', '..', 'bench', 'results', 'profiles');
const BACKEND_NAME_PREFIX = 'plinth-bench-auth-';

interface Measure {
  count: number;
  seconds: number;
  perSecond: number;
}

/**
 * CPU time so far, in microseconds: the server process, its main thread (JavaScript; null when not
 * readable), the threads of its libuv thread pool (where argon2 runs; null when they could not be
 * told apart), and its pool's PostgreSQL backends by pid (null when not readable). What the
 * process spends beyond the two thread kinds is V8's own threads: garbage collection and
 * optimising compilation.
 */
interface ServerUsage {
  serverMicros: number;
  mainThreadMicros: number | null;
  threadPoolMicros: number | null;
  postgresMicros: Record<number, number> | null;
}

/** A measure with the CPU time each operation took, in milliseconds. */
interface Costed extends Measure {
  serverMs: number;
  mainThreadMs: number | null;
  threadPoolMs: number | null;
  postgresMs: number | null;
  clientMs: number;
}

type ParentMessage = { type: 'stop' } | { type: 'usage' } | { type: 'argon2'; seconds: number; concurrency: number };
type ChildMessage = { type: 'ready'; url: string; bareUrl: string; hashCost: string } | ({ type: 'usage' } & ServerUsage) | { type: 'argon2'; result: Measure };

const CLOCK_TICKS_PER_SECOND = (() => {
  try {
    return Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim()) || 100;
  } catch {
    return 100;
  }
})();

/**
 * CPU time of a local process (or of one thread: `<pid>/task/<tid>`), in microseconds: from
 * /proc/.../schedstat, in nanoseconds, else /proc/.../stat (user + system, fields 14 and 15), whose
 * clock ticks (10 ms) are as coarse as a tenth of a millisecond a sign-in over a measure.
 */
function processMicros(pid: number | string): number | null {
  try {
    return Number(fs.readFileSync(`/proc/${pid}/schedstat`, 'utf8').split(' ')[0]) / 1000;
  } catch {
    // Kernels without scheduler statistics.
  }
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return ((Number(fields[11]) + Number(fields[12])) * 1_000_000) / CLOCK_TICKS_PER_SECOND;
  } catch {
    return null;
  }
}

/**
 * The thread ids of this process's libuv thread pool: libuv starts its threads on the first work
 * queued to it, so they are the threads that appear across a first asynchronous file-system call.
 * Called first thing, before anything else could have used the pool (empty if something had).
 */
async function threadPoolThreads(): Promise<string[]> {
  const threads = () => new Set(fs.readdirSync('/proc/self/task'));
  const before = threads();
  await fs.promises.stat(__filename);
  return [...threads()].filter((thread) => !before.has(thread));
}

async function runServer(): Promise<void> {
  const poolThreads = await threadPoolThreads().catch(() => []);
  const config = loadConfig({
    ...process.env,
    NODE_ENV: 'development',
    PORT: '0',
    HOST: '127.0.0.1',
    LOG_LEVEL: 'warn',
    GQL_GRAPHQL_ADMIN_SECRET: ADMIN_SECRET,
    PLINTH_PROCESS_ROLES: 'api',
    AUTH_EMAIL_SIGNIN_EMAIL_VERIFIED_REQUIRED: 'false',
    AUTH_GRAVATAR_ENABLED: 'false',
    // The CPU at rest, measured right after start, is taken off every measure: the start-up's two full
    // collections would fall in it and count as the rest's.
    PLINTH_STARTUP_COLLECTION: 'false',
    ...AUTH_LIMITS_LIFTED,
  });
  const server = await startServer(config, createLogger(config));
  // Its pool's backends carry the same application name, so their PostgreSQL CPU is counted too.
  const bare = await startBareSignIn(process.env.DATABASE_URL!, randomBytes(32).toString('hex'), config.database.poolSize);
  const hash = await new PasswordHasher(config.auth.passwordHash).hash(PASSWORD);
  // Finds the pool's backends (by the application name the parent gave) on a connection of its own.
  const monitorUrl = new URL(process.env.DATABASE_URL!);
  const backendName = monitorUrl.searchParams.get('application_name');
  monitorUrl.searchParams.set('application_name', 'plinth-bench-monitor');
  const monitor = new pg.Client({ connectionString: monitorUrl.toString() });
  await monitor.connect();
  const threadPoolMicros = (): number | null => {
    if (poolThreads.length === 0) return null;
    let total = 0;
    for (const thread of poolThreads) {
      const micros = processMicros(`${process.pid}/task/${thread}`);
      if (micros === null) return null;
      total += micros;
    }
    return total;
  };
  const usage = async (): Promise<ServerUsage> => {
    const { user, system } = process.cpuUsage();
    const server = { serverMicros: user + system, mainThreadMicros: processMicros(`${process.pid}/task/${process.pid}`), threadPoolMicros: threadPoolMicros() };
    const { rows } = await monitor.query<{ pid: number }>('SELECT pid FROM pg_stat_activity WHERE application_name = $1', [backendName]);
    const postgresMicros: Record<number, number> = {};
    for (const { pid } of rows) {
      const micros = processMicros(pid);
      if (micros === null) return { ...server, postgresMicros: null };
      postgresMicros[pid] = micros;
    }
    return { ...server, postgresMicros };
  };
  const send = (message: ChildMessage) => process.send!(message);
  const answer = async (message: ParentMessage): Promise<void> => {
    if (message.type === 'stop') {
      // The process ends whether or not everything closed.
      void Promise.all([server.close(), bare.close(), monitor.end()]).finally(() => process.exit(0));
      return;
    }
    if (message.type === 'usage') {
      send({ type: 'usage', ...(await usage()) });
      return;
    }
    // argon2id verifications of one hash, `concurrency` at a time, in this process (its thread pool).
    const result = await during(message.seconds, message.concurrency, async () => {
      if (!(await verify(hash, PASSWORD))) throw new Error('argon2 verify failed');
    });
    send({ type: 'argon2', result });
  };
  process.on('message', (message: ParentMessage) => {
    answer(message).catch((error: unknown) => {
      console.error(error);
      process.exit(1);
    });
  });
  const { memoryKib, iterations, parallelism } = config.auth.passwordHash;
  send({ type: 'ready', url: server.url, bareUrl: bare.url, hashCost: `argon2id ${memoryKib} KiB, ${iterations} passes, ${parallelism} lane(s)` });
}

/** Runs `step` in `concurrency` loops for `seconds`; counts the steps done. */
async function during(seconds: number, concurrency: number, step: (loop: number) => Promise<void>): Promise<Measure> {
  const end = performance.now() + seconds * 1000;
  const start = performance.now();
  let count = 0;
  await Promise.all(
    Array.from({ length: concurrency }, async (_, loop) => {
      while (performance.now() < end) {
        await step(loop);
        count += 1;
      }
    }),
  );
  const elapsed = (performance.now() - start) / 1000;
  return { count, seconds: elapsed, perSecond: count / elapsed };
}

/**
 * One POST through undici's dispatch, the answer's body collected as text. The client shares the
 * server's two cores: undici's request(), with its body stream and promise chain, would take a
 * good share of the CPU that server and PostgreSQL spend on a refresh.
 */
function dispatchPost(
  agent: Dispatcher,
  origin: string,
  path: string,
  body: string,
  headers: Record<string, string>,
): Promise<{ statusCode: number; text: string }> {
  return new Promise((resolve, reject) => {
    let statusCode = 0;
    const chunks: Buffer[] = [];
    agent.dispatch(
      { origin, path, method: 'POST', headers, body },
      {
        // The handler form undici's Client takes as it is (the newer form goes through an adapter).
        onConnect: () => undefined,
        onHeaders: (status) => {
          statusCode = status;
          return true;
        },
        onData: (chunk) => {
          chunks.push(chunk);
          return true;
        },
        onComplete: () => resolve({ statusCode, text: Buffer.concat(chunks).toString() }),
        onError: reject,
      },
    );
  });
}

/** Asks the server child one question and waits for the answer of that type. */
function ask<T extends ChildMessage['type']>(child: ChildProcess, message: ParentMessage & { type: T }): Promise<Extract<ChildMessage, { type: T }>> {
  return new Promise((resolve) => {
    const listener = (answer: ChildMessage) => {
      if (answer.type !== message.type) return;
      child.off('message', listener);
      resolve(answer as Extract<ChildMessage, { type: T }>);
    };
    child.on('message', listener);
    child.send(message);
  });
}

/** The PostgreSQL CPU time between two readings, over the backends seen in the second (a backend started in between counts whole). */
function postgresMicrosBetween(before: ServerUsage, after: ServerUsage): number | null {
  if (!before.postgresMicros || !after.postgresMicros) return null;
  let total = 0;
  for (const [pid, micros] of Object.entries(after.postgresMicros)) total += micros - (before.postgresMicros[Number(pid)] ?? 0);
  return total;
}

/**
 * Signs in `count` times, `concurrency` at a time, with accounts whose stored hash is argon2id at
 * its lowest cost. V8 optimises a function only after thousands of calls and compiles it on
 * threads of the server's process, so at the few dozen sign-ins a second the real hash allows, a
 * warm-up of seconds would leave sign-in's code unoptimised through every round: slower, and its
 * compilations counted beyond the hash. The same code with a cheap hash gets there in seconds; the
 * measured sign-ins use accounts with the real hash.
 */
async function warmUpSignIn(databaseUrl: string, emails: string[], count: number, signIn: (email: string) => Promise<void>): Promise<void> {
  const cheapHash = await argon2Hash(PASSWORD, { algorithm: Algorithm.Argon2id, memoryCost: 8, timeCost: 1 });
  const database = new pg.Client({ connectionString: databaseUrl });
  await database.connect();
  try {
    await database.query('UPDATE users SET password_hash = $1 WHERE email = ANY($2)', [cheapHash, emails]);
  } finally {
    await database.end();
  }
  let started = 0;
  await Promise.all(
    emails.map(async (email) => {
      while (started < count) {
        started += 1;
        await signIn(email);
      }
    }),
  );
}

async function main(): Promise<void> {
  const seconds = positiveInteger('BENCH_SECONDS', 5);
  const warmup = positiveInteger('BENCH_WARMUP', 1);
  const rounds = positiveInteger('BENCH_ROUNDS', 3);
  const sessions = positiveInteger('BENCH_AUTH_SESSIONS', 32);
  const signInConcurrency = positiveInteger('BENCH_AUTH_SIGNIN_CONCURRENCY', 4);
  const signInWarmup = positiveInteger('BENCH_AUTH_SIGNIN_WARMUP', 3000);
  const only = process.env.BENCH_AUTH_ONLY || undefined;
  if (only !== undefined && only !== 'refresh' && only !== 'signin') throw new Error('BENCH_AUTH_ONLY must be refresh or signin');
  const databaseUrl = await prepareDatabase();
  const execArgv = process.env.BENCH_CPU_PROF
    ? ['--cpu-prof', `--cpu-prof-dir=${PROFILES_DIR}`, `--cpu-prof-name=auth-${only ?? 'all'}-${Date.now()}.cpuprofile`]
    : [];
  // The server's connections get a name of their own, so that their PostgreSQL CPU time is told
  // apart from other processes' on the same database (pg lets the URL's name win).
  const serverUrl = new URL(databaseUrl);
  serverUrl.searchParams.set('application_name', `${BACKEND_NAME_PREFIX}${process.pid}`);
  const child: ChildProcess = fork(__filename, ['server'], { execArgv, env: { ...process.env, DATABASE_URL: serverUrl.toString() }, stdio: 'inherit' });
  type Ready = Extract<ChildMessage, { type: 'ready' }>;
  const { url, bareUrl, hashCost } = await new Promise<Ready>((resolve, reject) => {
    child.once('message', (message: Ready) => resolve(message));
    child.once('exit', (code) => reject(new Error(`the server exited (${code})`)));
  });
  const agent = new Agent({ connections: Math.max(sessions, signInConcurrency) });
  const post = async <T>(path: string, body: unknown, headers: Record<string, string> = {}, base = url): Promise<T> => {
    const response = await dispatchPost(agent, base, path, JSON.stringify(body), { 'content-type': 'application/json', ...headers });
    if (response.statusCode !== 200) throw new Error(`${path} answered ${response.statusCode}: ${response.text}`);
    return JSON.parse(response.text) as T;
  };

  // The server's CPU time at rest (timers, metrics, its database connections), per second: taken
  // off every measure, where it would weigh most on the slow ones (sign-in one at a time).
  const restStart = await ask(child, { type: 'usage' });
  await new Promise((resolve) => setTimeout(resolve, seconds * 1000));
  const restEnd = await ask(child, { type: 'usage' });
  const rest = { server: (restEnd.serverMicros - restStart.serverMicros) / seconds, postgres: (postgresMicrosBetween(restStart, restEnd) ?? 0) / seconds };
  /** The CPU time of a measure between two readings, less the rest's, per operation in milliseconds. */
  const perOperation = (measure: Measure, before: ServerUsage, after: ServerUsage) => {
    const postgres = postgresMicrosBetween(before, after);
    return {
      serverMs: (after.serverMicros - before.serverMicros - rest.server * measure.seconds) / 1000 / measure.count,
      // The rest's CPU is the main thread's (timers, metrics).
      mainThreadMs:
        before.mainThreadMicros === null || after.mainThreadMicros === null
          ? null
          : (after.mainThreadMicros - before.mainThreadMicros - rest.server * measure.seconds) / 1000 / measure.count,
      // At rest the pool does nothing: no share of the rest is taken off.
      threadPoolMs:
        before.threadPoolMicros === null || after.threadPoolMicros === null ? null : (after.threadPoolMicros - before.threadPoolMicros) / 1000 / measure.count,
      postgresMs: postgres === null ? null : (postgres - rest.postgres * measure.seconds) / 1000 / measure.count,
    };
  };
  /** `step` for BENCH_WARMUP seconds (not counted), then for BENCH_SECONDS with the CPU time it took. */
  const costed = async (concurrency: number, step: (loop: number) => Promise<void>): Promise<Costed> => {
    await during(warmup, concurrency, step);
    const before = await ask(child, { type: 'usage' });
    const clientBefore = process.cpuUsage();
    const measure = await during(seconds, concurrency, step);
    const client = process.cpuUsage(clientBefore);
    const after = await ask(child, { type: 'usage' });
    return { ...measure, ...perOperation(measure, before, after), clientMs: (client.user + client.system) / 1000 / measure.count };
  };
  /** argon2id verifications in the server's process, with the server's CPU time per verification. */
  const argon2In = async (concurrency: number): Promise<Costed> => {
    const before = await ask(child, { type: 'usage' });
    const { result } = await ask(child, { type: 'argon2', seconds, concurrency });
    const after = await ask(child, { type: 'usage' });
    const { serverMs, mainThreadMs, threadPoolMs } = perOperation(result, before, after);
    return { ...result, serverMs, mainThreadMs, threadPoolMs, postgresMs: 0, clientMs: 0 };
  };

  const lines: string[] = [
    `auth service, ${seconds} s per measure, ${sessions} refresh chains, ${signInConcurrency} sign-ins at a time, ${rounds} rounds; passwords: ${hashCost}`,
    `at rest: server ${(rest.server / 1000).toFixed(1)} ms CPU a second, PostgreSQL ${(rest.postgres / 1000).toFixed(1)} ms (taken off the CPU figures below)`,
  ];
  const cpu = (measure: Costed) =>
    `server ${measure.serverMs.toFixed(3)} ms` +
    (measure.postgresMs === null ? '' : ` + PostgreSQL ${measure.postgresMs.toFixed(3)} ms`) +
    (measure.clientMs > 0 ? `, client ${measure.clientMs.toFixed(3)} ms` : '');
  const line = (name: string, measure: Costed) =>
    `${name.padEnd(58)} ${measure.perSecond.toFixed(0).padStart(7)} /s  (${measure.count} in ${measure.seconds.toFixed(1)} s; CPU per operation: ${cpu(measure)})`;
  const cpuOf = (measure: Costed) => measure.serverMs + (measure.postgresMs ?? 0);
  try {
    // One account per refresh chain and per sign-in loop, as many clients are: one shared account
    // would make its row a hot spot (the foreign key's row locks of every new refresh token, the
    // last_seen of every sign-in) that real traffic does not have.
    const run = randomBytes(4).toString('hex');
    const accounts = Math.max(sessions, signInConcurrency);
    const emails = Array.from({ length: accounts }, (_, index) => `bench-${run}-${index}@example.com`);
    type Session = { accessToken: string; refreshToken: string };
    const tokens: string[] = [];
    for (const email of emails)
      tokens.push((await post<{ session: Session }>('/auth/signup/email-password', { email, password: PASSWORD })).session.refreshToken);
    const first = await post<{ session: Session }>('/auth/signin/email-password', { email: emails[0], password: PASSWORD });

    if (only !== 'signin') {
      // Alternating with the baseline, so that a change of the machine's load falls on both.
      const measured: { baseline: Costed; refresh: Costed }[] = [];
      for (let round = 0; round < rounds; round += 1) {
        const baseline = await costed(sessions, async () => {
          const body = await post<{ data?: unknown }>(
            '/v1/graphql',
            { query: '{ session { role } }' },
            { authorization: `Bearer ${first.session.accessToken}` },
          );
          if (!body.data) throw new Error('the session query failed');
        });
        const refresh = await costed(sessions, async (loop) => {
          tokens[loop] = (await post<Session>('/auth/token', { refreshToken: tokens[loop] })).refreshToken;
        });
        measured.push({ baseline, refresh });
      }
      const { baseline, refresh } = measured[medianIndex(measured.map((round) => round.refresh.perSecond))];
      lines.push(
        line('baseline: GraphQL { session { role } } with a bearer token', baseline),
        line('POST /auth/token (rotation: batched statement + JWT)', refresh),
        `  refresh / baseline: ${(refresh.perSecond / baseline.perSecond).toFixed(2)}, ` +
          `by server + PostgreSQL CPU per request ${(cpuOf(baseline) / cpuOf(refresh)).toFixed(2)}   (target: 2000/s or more)`,
        `  the median round of ${rounds} (refresh /s: ${measured.map((round) => round.refresh.perSecond.toFixed(0)).join(', ')})`,
      );
    }

    if (only !== 'refresh') {
      const signIn = (email: string) => post('/auth/signin/email-password', { email, password: PASSWORD }).then(() => undefined);
      const warmUpEmails = Array.from({ length: signInConcurrency }, (_, index) => `bench-${run}-warm-up-${index}@example.com`);
      for (const email of warmUpEmails) await post('/auth/signup/email-password', { email, password: PASSWORD });
      const bareSignIn = (email: string) => post('/signin', { email, password: PASSWORD }, {}, bareUrl).then(() => undefined);
      await warmUpSignIn(databaseUrl, warmUpEmails, signInWarmup, signIn);
      await warmUpSignIn(databaseUrl, warmUpEmails, signInWarmup, bareSignIn);
      const signInOnce = (loop: number) => signIn(emails[loop]);
      const bareSignInOnce = (loop: number) => bareSignIn(emails[loop]);
      type Pair = { signIn: Costed; bare: Costed; argon2: Costed };
      const alternate = async (concurrency: number) => {
        const pairs: Pair[] = [];
        for (let round = 0; round < rounds; round += 1) {
          pairs.push({ signIn: await costed(concurrency, signInOnce), bare: await costed(concurrency, bareSignInOnce), argon2: await argon2In(concurrency) });
        }
        // The round of the median throughput ratio, so that its lines and its ratio agree.
        const ratio = (pair: Pair) => pair.argon2.perSecond / pair.signIn.perSecond;
        const chosen = pairs[medianIndex(pairs.map(ratio))];
        return { ...chosen, pairs, all: pairs.map((pair) => `${((ratio(pair) - 1) * 100).toFixed(1)}%`).join(', ') };
      };
      /** Every round's figure, the chosen round's among them. */
      const eachRound = (pairs: Pair[], percent: (pair: Pair) => number | null) =>
        `(rounds: ${pairs.map((pair) => percent(pair)?.toFixed(1) ?? '-').join('%, ')}%)`;
      const percentByCpu = (pair: Pair) => (cpuOf(pair.signIn) / pair.argon2.serverMs - 1) * 100;
      /** What a sign-in costs beyond its hash on the thread pool, in milliseconds. */
      const aroundHash = (measure: Costed) => (measure.threadPoolMs === null ? null : cpuOf(measure) - measure.threadPoolMs);
      const percentBeyond = (measure: Costed) => (measure.threadPoolMs === null ? null : (aroundHash(measure)! / measure.threadPoolMs) * 100);
      const percentInPlace = (pair: Pair) => percentBeyond(pair.signIn);
      const barePercentInPlace = (pair: Pair) => percentBeyond(pair.bare);
      // The floor: what the least a server can do around the same hash costs, in the same round.
      const againstFloor = ({ bare, pairs }: Pair & { pairs: Pair[] }) =>
        bare.threadPoolMs === null
          ? '(thread pool not told apart: no floor figure)'
          : `the floor (bench/bare-signin.ts) in place: the hash ${bare.threadPoolMs.toFixed(2)} ms, the rest ${aroundHash(bare)!.toFixed(2)} ms ` +
            `(server ${(bare.serverMs - bare.threadPoolMs).toFixed(2)} + PostgreSQL ${(bare.postgresMs ?? 0).toFixed(2)}): ` +
            `${percentBeyond(bare)!.toFixed(1)}% beyond the hash ${eachRound(pairs, barePercentInPlace)}; ` +
            `Plinth's rest / the floor's ${eachRound(pairs, (pair) => (aroundHash(pair.bare) ? (aroundHash(pair.signIn)! / aroundHash(pair.bare)!) * 100 : null))}`;
      const beyondByCpu = (pair: Pair & { pairs: Pair[] }) =>
        `by server + PostgreSQL CPU: ${cpuOf(pair.signIn).toFixed(2)} ms a sign-in, ${pair.argon2.serverMs.toFixed(2)} ms its hash, ` +
        `${percentByCpu(pair).toFixed(1)}% beyond the hash ${eachRound(pair.pairs, percentByCpu)}`;
      // The hash as it runs inside sign-in (the thread pool does nothing else there), against the
      // rest of the server's and PostgreSQL's work for the request: the hash alone, back to back,
      // costs less than the same hash between requests (its memory and caches are warm).
      const beyondInPlace = ({ signIn, argon2, pairs }: Pair & { pairs: Pair[] }) => {
        if (signIn.threadPoolMs === null || argon2.threadPoolMs === null) return '(thread pool not told apart: no in-place figure)';
        const beyondPool = signIn.serverMs - signIn.threadPoolMs;
        const threads =
          signIn.mainThreadMs === null ? '' : ` (main thread ${signIn.mainThreadMs.toFixed(2)}, V8's threads ${(beyondPool - signIn.mainThreadMs).toFixed(2)})`;
        return (
          `in place: the hash ${signIn.threadPoolMs.toFixed(2)} ms on the thread pool within sign-in (alone: ${argon2.threadPoolMs.toFixed(2)} ms), ` +
          `the rest of the request ${aroundHash(signIn)!.toFixed(2)} ms (server ${beyondPool.toFixed(2)}${threads} + PostgreSQL ${(signIn.postgresMs ?? 0).toFixed(2)}): ` +
          `${percentBeyond(signIn)!.toFixed(1)}% beyond the hash ${eachRound(pairs, percentInPlace)}`
        );
      };
      const parallel = await alternate(signInConcurrency);
      // One at a time: what a sign-in costs beyond its hash, without the CPU the other requests take.
      const serial = await alternate(1);
      lines.push(
        line('argon2id verify alone (server process, same concurrency)', parallel.argon2),
        line('POST /auth/signin/email-password', parallel.signIn),
        `  throughput: argon2 share of sign-in ${((parallel.signIn.perSecond / parallel.argon2.perSecond) * 100).toFixed(1)}%, ` +
          `sign-in costs ${((parallel.argon2.perSecond / parallel.signIn.perSecond - 1) * 100).toFixed(1)}% beyond the hash ` +
          `(rounds: ${parallel.all}) (target: under 10%)`,
        `  ${beyondByCpu(parallel)}`,
        `  ${beyondInPlace(parallel)}`,
        line('floor: bare Fastify + pg sign-in (same statements, hash, token)', parallel.bare),
        `  ${againstFloor(parallel)}`,
        line('argon2id verify alone, one at a time', serial.argon2),
        line('POST /auth/signin/email-password, one at a time', serial.signIn),
        `  latency: ${(1000 / serial.signIn.perSecond).toFixed(1)} ms a sign-in, ${(1000 / serial.argon2.perSecond).toFixed(1)} ms its hash: ` +
          `argon2 share ${((serial.signIn.perSecond / serial.argon2.perSecond) * 100).toFixed(1)}%, ` +
          `${((serial.argon2.perSecond / serial.signIn.perSecond - 1) * 100).toFixed(1)}% beyond the hash (rounds: ${serial.all})`,
        `  ${beyondByCpu(serial)}`,
        `  ${beyondInPlace(serial)}`,
        line('floor: bare Fastify + pg sign-in, one at a time', serial.bare),
        `  ${againstFloor(serial)}`,
      );
    }
    process.stdout.write(`${lines.join('\n')}\n`);
  } finally {
    await agent.close();
    child.send({ type: 'stop' } satisfies ParentMessage);
  }
}

if (process.argv[2] === 'server') {
  void runServer();
} else {
  main().catch((error: unknown) => {
    process.stderr.write(`${error instanceof Error ? error.stack : String(error)}\n`);
    process.exit(1);
  });
}
