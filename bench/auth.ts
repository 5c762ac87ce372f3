import { fork, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { verify } from '@node-rs/argon2';
import { Agent, request } from 'undici';
import { hashPassword } from '../src/common/passwords';
import { loadConfig } from '../src/config';
import { createLogger, startServer } from '../src/main';
import { prepareDatabase } from './database';
import { positiveInteger } from './settings';

/**
 * The auth service under load, the server in a child process (this file, role `server`):
 *
 * - token refresh per second (POST /auth/token, each of BENCH_AUTH_SESSIONS chains presenting the
 *   token the previous refresh gave), against the cheapest authenticated request of the same
 *   server (GraphQL `{ session { role } }` with a bearer token) as the baseline;
 * - sign-in per second (POST /auth/signin/email-password) against argon2id verifications per
 *   second of the same hash in the server's process (the hash alone), which gives the share of
 *   sign-in spent in argon2 and what sign-in costs beyond it: at BENCH_AUTH_SIGNIN_CONCURRENCY (4)
 *   at once, and one at a time (latency, where the other requests' CPU does not count).
 *
 *   npm run bench:auth      (BENCH_SECONDS per measure, 5; BENCH_AUTH_SESSIONS, 32)
 */

const PASSWORD = 'benchmark password 0123';
const ADMIN_SECRET = 'bench-admin-secret-0123456789';

interface Measure {
  count: number;
  seconds: number;
  perSecond: number;
}

async function runServer(): Promise<void> {
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
    AUTH_RATE_LIMIT_GLOBAL_BURST: '1000000',
    AUTH_RATE_LIMIT_BRUTE_FORCE_BURST: '1000000',
    AUTH_RATE_LIMIT_SIGNUPS_BURST: '1000000',
  });
  const server = await startServer(config, createLogger(config));
  const hash = await hashPassword(PASSWORD);
  process.on('message', async (message: { type: string; seconds: number; concurrency: number }) => {
    if (message.type === 'stop') return void server.close().finally(() => process.exit(0));
    // argon2id verifications of one hash, `concurrency` at a time, in this process (its thread pool).
    const result = await during(message.seconds, message.concurrency, async () => {
      if (!(await verify(hash, PASSWORD))) throw new Error('argon2 verify failed');
    });
    process.send!({ type: 'argon2', result });
  });
  process.send!({ type: 'ready', url: server.url });
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

async function main(): Promise<void> {
  const seconds = positiveInteger('BENCH_SECONDS', 5);
  const sessions = positiveInteger('BENCH_AUTH_SESSIONS', 32);
  const signInConcurrency = positiveInteger('BENCH_AUTH_SIGNIN_CONCURRENCY', 4);
  const databaseUrl = await prepareDatabase();
  const child: ChildProcess = fork(__filename, ['server'], { env: { ...process.env, DATABASE_URL: databaseUrl }, stdio: 'inherit' });
  const url = await new Promise<string>((resolve, reject) => {
    child.once('message', (message: { url: string }) => resolve(message.url));
    child.once('exit', (code) => reject(new Error(`the server exited (${code})`)));
  });
  const agent = new Agent({ connections: Math.max(sessions, signInConcurrency) });
  const post = async <T>(path: string, body: unknown, headers: Record<string, string> = {}): Promise<T> => {
    const response = await request(`${url}${path}`, {
      method: 'POST',
      dispatcher: agent,
      headers: { 'content-type': 'application/json', ...headers },
      body: JSON.stringify(body),
    });
    const text = await response.body.text();
    if (response.statusCode !== 200) throw new Error(`${path} answered ${response.statusCode}: ${text}`);
    return JSON.parse(text) as T;
  };

  try {
    const run = randomBytes(4).toString('hex');
    const email = `bench-${run}@example.com`;
    type Session = { accessToken: string; refreshToken: string };
    const first = await post<{ session: Session }>('/auth/signup/email-password', { email, password: PASSWORD });
    const tokens: string[] = [];
    for (let index = 0; index < sessions; index += 1) {
      tokens.push((await post<{ session: Session }>('/auth/signin/email-password', { email, password: PASSWORD })).session.refreshToken);
    }

    const baseline = await during(seconds, sessions, async () => {
      const body = await post<{ data?: unknown }>('/v1/graphql', { query: '{ session { role } }' }, { authorization: `Bearer ${first.session.accessToken}` });
      if (!body.data) throw new Error('the session query failed');
    });
    const refresh = await during(seconds, sessions, async (loop) => {
      tokens[loop] = (await post<Session>('/auth/token', { refreshToken: tokens[loop] })).refreshToken;
    });
    const signInOnce = () => post('/auth/signin/email-password', { email, password: PASSWORD }).then(() => undefined);
    const argon2In = (concurrency: number) => {
      child.send({ type: 'argon2', seconds, concurrency });
      return new Promise<Measure>((resolve) => child.once('message', (message: { result: Measure }) => resolve(message.result)));
    };
    const signIn = await during(seconds, signInConcurrency, signInOnce);
    const argon2 = await argon2In(signInConcurrency);
    // One at a time: what a sign-in costs beyond its hash, without the CPU the other requests take.
    const signInSerial = await during(seconds, 1, signInOnce);
    const argon2Serial = await argon2In(1);

    const line = (name: string, measure: Measure) => `${name.padEnd(58)} ${measure.perSecond.toFixed(0).padStart(7)} /s  (${measure.count} in ${measure.seconds.toFixed(1)} s)`;
    process.stdout.write(
      [
        `auth service, ${seconds} s per measure, ${sessions} refresh chains, ${signInConcurrency} sign-ins at a time`,
        line('baseline: GraphQL { session { role } } with a bearer token', baseline),
        line('POST /auth/token (rotation: one statement + JWT)', refresh),
        `  refresh / baseline: ${(refresh.perSecond / baseline.perSecond).toFixed(2)}   (target: 2000/s or more)`,
        line('argon2id verify alone (server process, same concurrency)', argon2),
        line('POST /auth/signin/email-password', signIn),
        `  throughput: argon2 share of sign-in ${((signIn.perSecond / argon2.perSecond) * 100).toFixed(1)}%, ` +
          `sign-in costs ${((argon2.perSecond / signIn.perSecond - 1) * 100).toFixed(1)}% beyond the hash (target: under 10%)`,
        line('argon2id verify alone, one at a time', argon2Serial),
        line('POST /auth/signin/email-password, one at a time', signInSerial),
        `  latency: ${(1000 / signInSerial.perSecond).toFixed(1)} ms a sign-in, ${(1000 / argon2Serial.perSecond).toFixed(1)} ms its hash: ` +
          `argon2 share ${((signInSerial.perSecond / argon2Serial.perSecond) * 100).toFixed(1)}%, ` +
          `${((argon2Serial.perSecond / signInSerial.perSecond - 1) * 100).toFixed(1)}% beyond the hash`,
      ].join('\n') + '\n',
    );
  } finally {
    await agent.close();
    child.send({ type: 'stop' });
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
