import { randomBytes } from 'node:crypto';
import { generate } from 'otplib';
import { loadConfig } from '../src/config';
import { startServer } from '../src/main';
import { createLogger } from '../src/platform/logger';
import { prepareDatabase } from './database';
import { positiveInteger } from './settings';
import { AUTH_LIMITS_LIFTED } from './shared';

/**
 * Sign-in with TOTP per second (POST /auth/signin/email-password answering a ticket, then POST
 * /auth/signin/mfa/totp with a current code) against password sign-in of users without a second
 * factor (the baseline), in the same server, BENCH_TOTP_CONCURRENCY (4) at once. A code works
 * once per user, so each of BENCH_TOTP_USERS (100) enrolled users signs in once; the TOTP step
 * alone (tickets taken beforehand) is measured on a second code of each user.
 *
 *   npm run bench:totp
 */

const PASSWORD = 'benchmark password 0123';

async function main(): Promise<void> {
  const users = positiveInteger('BENCH_TOTP_USERS', 100);
  const concurrency = positiveInteger('BENCH_TOTP_CONCURRENCY', 4);
  const databaseUrl = await prepareDatabase();
  const config = loadConfig({
    ...process.env,
    NODE_ENV: 'development',
    PORT: '0',
    HOST: '127.0.0.1',
    LOG_LEVEL: 'warn',
    DATABASE_URL: databaseUrl,
    GQL_GRAPHQL_ADMIN_SECRET: 'bench-admin-secret-0123456789',
    PLINTH_PROCESS_ROLES: 'api',
    AUTH_EMAIL_SIGNIN_EMAIL_VERIFIED_REQUIRED: 'false',
    AUTH_GRAVATAR_ENABLED: 'false',
    AUTH_MFA_TOTP_ENABLED: 'true',
    AUTH_ENCRYPTION_KEY: randomBytes(32).toString('hex'),
    ...AUTH_LIMITS_LIFTED,
  });
  const server = await startServer(config, createLogger(config));
  const post = async <T>(path: string, body: unknown, token?: string): Promise<T> => {
    const response = await fetch(`${server.url}/auth${path}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...(token ? { authorization: `Bearer ${token}` } : {}) },
      body: JSON.stringify(body),
    });
    const text = await response.text();
    if (response.status !== 200) throw new Error(`${path} answered ${response.status}: ${text}`);
    return JSON.parse(text) as T;
  };
  const epoch = () => Math.floor(Date.now() / 1000);
  try {
    const run = randomBytes(4).toString('hex');
    const plain: string[] = [];
    const enrolled: { email: string; secret: string }[] = [];
    for (let index = 0; index < users; index += 1) {
      const email = `bench-totp-${run}-${index}@example.com`;
      const { session } = await post<{ session: { accessToken: string } }>('/signup/email-password', { email, password: PASSWORD });
      const { totpSecret } = await post<{ totpSecret: string }>('/mfa/totp/generate', {}, session.accessToken);
      await post('/mfa/totp/activate', { code: await generate({ secret: totpSecret, epoch: epoch() - 30 }) }, session.accessToken);
      enrolled.push({ email, secret: totpSecret });
      const other = `bench-plain-${run}-${index}@example.com`;
      await post('/signup/email-password', { email: other, password: PASSWORD });
      plain.push(other);
    }

    const rate = async <T>(items: T[], step: (item: T) => Promise<void>) => {
      const queue = [...items];
      const start = performance.now();
      await Promise.all(
        Array.from({ length: concurrency }, async () => {
          for (let item = queue.shift(); item !== undefined; item = queue.shift()) await step(item);
        }),
      );
      return items.length / ((performance.now() - start) / 1000);
    };
    const baseline = await rate(plain, async (email) => {
      await post('/signin/email-password', { email, password: PASSWORD });
    });
    const withTotp = await rate(enrolled, async ({ email, secret }) => {
      const { mfa } = await post<{ mfa: { ticket: string } }>('/signin/email-password', { email, password: PASSWORD });
      await post('/signin/mfa/totp', { ticket: mfa.ticket, otp: await generate({ secret, epoch: epoch() }) });
    });
    const tickets = [];
    for (const user of enrolled)
      tickets.push({
        ...user,
        ticket: (await post<{ mfa: { ticket: string } }>('/signin/email-password', { email: user.email, password: PASSWORD })).mfa.ticket,
      });
    const totpStep = await rate(tickets, async ({ ticket, secret }) => {
      await post('/signin/mfa/totp', { ticket, otp: await generate({ secret, epoch: epoch() + 30 }) });
    });

    console.log(`sign-in, ${users} users, ${concurrency} at once:`);
    console.log(`  password only (baseline):    ${baseline.toFixed(1)}/s`);
    console.log(`  password + TOTP:             ${withTotp.toFixed(1)}/s  (${(withTotp / baseline).toFixed(2)}x the baseline)`);
    console.log(`  the TOTP step alone:         ${totpStep.toFixed(1)}/s  (${(totpStep / baseline).toFixed(2)}x the baseline)`);
  } finally {
    await server.close();
  }
}

void main().catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});
