import { fork } from 'node:child_process';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import pg from 'pg';
import pino from 'pino';
import { SMTPServer } from 'smtp-server';
import { loadConfig } from '../src/config';
import { startServer } from '../src/main';
import { createMailDelivery, type MailMessage } from '../src/platform/mail/mailer';
import { positiveInteger } from './settings';
import { STORAGE_URL_SIGNING_SECRET } from './shared';

/**
 * The bi-weekly issue to N subscribers (10,000) through a local SMTP receiver, in recipients per
 * second, against a baseline measured in the same run:
 *
 *   Plinth: the admin mutation sendNewsletterIssue, then the `newsletter-issue` workers: batches
 *   claimed with SKIP LOCKED, each subscriber's status read, N1 rendered per recipient with its
 *   unsubscribe link and headers, pooled SMTP, one recorded row per recipient. Timed from the
 *   mutation to the issue's `sent`.
 *   (a) the same mails (same template, variables, headers, sender) rendered and sent through the
 *   same SMTP pool from a loop with the same number in flight: no database, no queue, no records.
 *   The ratio is the cost of making the send resumable and stoppable.
 *
 *   npm run bench:newsletter
 *   BENCH_SUBSCRIBERS=20000 npm run bench:newsletter
 *
 * Environment: BENCH_SUBSCRIBERS (10000), BENCH_POOL_SIZE (SMTP_POOL_SIZE, 5),
 * NEWSLETTER_SEND_BATCH_SIZE / NEWSLETTER_SEND_CONCURRENCY as the server reads them (200 / 20),
 * BENCH_DATABASE_URL (a server where the database plinth_bench_newsletter may be created; it is
 * dropped and created again each run). The SMTP receiver (smtp-server, no auth, no TLS, discards
 * and counts what it reads) runs in a child process.
 */

function runReceiver(): void {
  let count = 0;
  const server = new SMTPServer({
    authOptional: true,
    disabledCommands: ['STARTTLS', 'AUTH'],
    logger: false,
    onData(stream, _session, callback) {
      stream.on('data', () => undefined);
      stream.on('end', () => {
        count++;
        callback();
      });
    },
  });
  server.listen(0, '127.0.0.1', () => process.send!({ port: (server.server.address() as AddressInfo).port }));
  process.on('message', () => process.send!({ count }));
  process.on('disconnect', () => server.close(() => process.exit(0)));
}

interface Receiver {
  port: number;
  count(): Promise<number>;
  stop(): void;
}

function startReceiver(): Promise<Receiver> {
  const child = fork(__filename, ['receiver'], { stdio: 'inherit' });
  return new Promise((resolve, reject) => {
    child.once('error', reject);
    child.once('message', (message: { port: number }) =>
      resolve({
        port: message.port,
        count: () => new Promise((answer) => (child.once('message', (reply: { count: number }) => answer(reply.count)), child.send('count'))),
        stop: () => child.disconnect(),
      }),
    );
  });
}

async function freshDatabase(): Promise<string> {
  const base = new URL(process.env.BENCH_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres');
  base.pathname = '/postgres';
  const admin = new pg.Client({ connectionString: base.toString() });
  await admin.connect();
  await admin.query('DROP DATABASE IF EXISTS plinth_bench_newsletter WITH (FORCE)');
  await admin.query('CREATE DATABASE plinth_bench_newsletter');
  await admin.end();
  base.pathname = '/plinth_bench_newsletter';
  return base.toString();
}

const VARIABLES = {
  HEADLINE: 'Faster jobs, one-click unsubscribe',
  RELEASE_HEADLINE: 'Plinth 1.4 is out',
  RELEASE_SUMMARY: 'Workers claim jobs in batches, and every newsletter mail carries a one-click unsubscribe.',
  CLI_SNIPPET: 'npm install plinth@1.4.0\nplinth migrate && plinth start',
  CHANGELOG_URL: 'https://example.com/changelog/1.4',
  COMMUNITY_SHOWCASE: 'Lea built a recipe-sharing app in a weekend.',
  DOCS_URL: 'https://example.com/docs/jobs',
  DOCS_TITLE: 'Background jobs in depth',
  DOCS_TEASER: 'Retries, timeouts and what happens when a worker dies mid-job.',
  ROADMAP_TEASER: 'Next: scheduled reports.',
};
const ADMIN_SECRET = 'bench-admin-secret-0123456789abcdef';

async function runBenchmark(): Promise<void> {
  const subscribers = positiveInteger('BENCH_SUBSCRIBERS', 10_000);
  const poolSize = positiveInteger('BENCH_POOL_SIZE', 5);
  const receiver = await startReceiver();
  const databaseUrl = await freshDatabase();
  const config = loadConfig({
    NODE_ENV: 'production',
    HOST: '127.0.0.1',
    PORT: '0',
    LOG_LEVEL: 'warn',
    DATABASE_URL: databaseUrl,
    GQL_GRAPHQL_ADMIN_SECRET: ADMIN_SECRET,
    GQL_GRAPHQL_JWT_SECRET: JSON.stringify({ type: 'HS256', key: 'bench-jwt-signing-key-of-at-least-32-bytes!' }),
    STORAGE_URL_SIGNING_SECRET,
    SMTP_HOST: '127.0.0.1',
    SMTP_PORT: String(receiver.port),
    SMTP_SECURE: 'none',
    SMTP_POOL_SIZE: String(poolSize),
    NEWSLETTER_CONFIRM_SECRET: 'c0'.repeat(32),
    NEWSLETTER_UNSUBSCRIBE_SECRET: 'a5'.repeat(32),
    ...Object.fromEntries(
      ['NEWSLETTER_SEND_BATCH_SIZE', 'NEWSLETTER_SEND_CONCURRENCY'].flatMap((name) => (process.env[name] ? [[name, process.env[name]!]] : [])),
    ),
  });
  const server = await startServer(config, pino({ level: 'warn' }));
  const database = new pg.Client({ connectionString: databaseUrl });
  await database.connect();
  try {
    await database.query(
      `INSERT INTO newsletter_subscribers (email, name, is_verified, status, subscribed_at, verification_expires_at)
       SELECT 'reader' || g || '@example.com', 'Reader ' || g, true, 'active', now(), now() FROM generate_series(1, $1::int) g`,
      [subscribers],
    );
    await database.query('VACUUM ANALYZE newsletter_subscribers');
    const { newsletter } = config;
    console.log(
      `newsletter benchmark: issue N1 to ${subscribers} subscribers, batches of ${newsletter.sendBatchSize}, ${newsletter.sendConcurrency} sends at once per batch, ` +
        `${config.jobs.defaults.concurrency} batches at once, ${poolSize} pooled SMTP connections, node ${process.version}, ${os.cpus().length} CPUs, load ${os.loadavg()[0].toFixed(1)}`,
    );

    // Plinth: the admin mutation, then the workers, until the issue is sent.
    const started = process.hrtime.bigint();
    const response = await fetch(`${server.url}/v1/graphql`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-gql-admin-secret': ADMIN_SECRET },
      body: JSON.stringify({
        query: 'mutation($v: JSONObject!) { sendNewsletterIssue(issueNumber: 1, variables: $v) { recipients } }',
        variables: { v: VARIABLES },
      }),
    });
    const answer = (await response.json()) as { data?: { sendNewsletterIssue: { recipients: number } }; errors?: unknown };
    if (answer.data?.sendNewsletterIssue.recipients !== subscribers) throw new Error(`the mutation answered ${JSON.stringify(answer)}`);
    for (;;) {
      const { rows } = await database.query('SELECT status FROM newsletter_issues WHERE issue_number = 1');
      if (rows[0].status === 'sent') break;
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    const plinthSeconds = Number(process.hrtime.bigint() - started) / 1e9;
    const { rows: outcome } = await database.query('SELECT status, count(*)::int AS count FROM newsletter_issue_recipients GROUP BY status');
    const received = await receiver.count();
    if (received !== subscribers || outcome.length !== 1 || outcome[0].count !== subscribers) {
      throw new Error(`expected ${subscribers} mails sent and recorded, got ${received} received and ${JSON.stringify(outcome)}`);
    }

    // (a) the same mails from a loop, on the same SMTP pool settings.
    const delivery = createMailDelivery(config, pino({ level: 'warn' }));
    const { rows: readers } = await database.query<{ id: string; email: string; name: string }>('SELECT id, email, name FROM newsletter_subscribers');
    const message = (reader: { id: string; email: string; name: string }): MailMessage => {
      const unsubscribe = `${config.publicUrl}/newsletter/unsubscribe?email=${encodeURIComponent(reader.email)}&token=${'0'.repeat(64)}`;
      return {
        to: reader.email,
        template: 'N1-biweekly',
        from: newsletter.from,
        variables: { ...VARIABLES, ISSUE_NUMBER: 1, name: reader.name, email: reader.email, unsubscribe_url: unsubscribe },
        headers: { 'List-Unsubscribe': `<${unsubscribe}>`, 'List-Unsubscribe-Post': 'List-Unsubscribe=One-Click' },
        idempotencyKey: `bench/${reader.id}`,
      };
    };
    const inFlight = newsletter.sendConcurrency * config.jobs.defaults.concurrency;
    const baselineStart = process.hrtime.bigint();
    let next = 0;
    await Promise.all(
      Array.from({ length: inFlight }, async () => {
        while (next < readers.length) await delivery.deliver(message(readers[next++]));
      }),
    );
    const baselineSeconds = Number(process.hrtime.bigint() - baselineStart) / 1e9;
    delivery.close();

    const plinthRate = subscribers / plinthSeconds;
    const baselineRate = subscribers / baselineSeconds;
    console.log(
      `Plinth issue send (mutation to 'sent', recorded per recipient) ${plinthRate.toFixed(0).padStart(6)} recipients/s  (${plinthSeconds.toFixed(1)} s)`,
    );
    console.log(
      `(a) the same mails from a loop, no database             ${baselineRate.toFixed(0).padStart(6)} recipients/s  (${baselineSeconds.toFixed(1)} s)`,
    );
    console.log(`\nratio Plinth / (a): ${(plinthRate / baselineRate).toFixed(2)}   (the cost of claims, status checks and records)`);
  } finally {
    await database.end();
    await server.close();
    receiver.stop();
  }
}

(process.argv[2] === 'receiver' ? Promise.resolve(runReceiver()) : runBenchmark()).catch((error: unknown) => {
  console.error(`bench failed: ${error instanceof Error ? error.message : String(error)}`);
  process.exit(1);
});
