import { randomUUID } from 'node:crypto';
import http from 'node:http';
import { loadavg } from 'node:os';
import pg from 'pg';
import Stripe from 'stripe';
import { loadConfig } from '../src/config';
import { startServer } from '../src/main';
import { createLogger } from '../src/platform/logger';
import { startPrimaryProvider } from '../test/support/primary-provider';
import { prepareDatabase } from './database';
import { positiveInteger } from './settings';

/**
 * processPayment against the local primary provider server: the latency Plinth adds over the
 * provider call itself (target: under 3 ms at p50).
 *
 *   npm run bench:payments        (BENCH_PAYMENTS: calls per side, 500 by default)
 *
 * Baseline: the same Stripe SDK call (a confirmed payment intent, with an idempotency key) made
 * directly to the provider server. Measured: processPayment over HTTP, as GraphQL and as the
 * engine's handler route: session, validation, the read before the call (active provider,
 * customer, an earlier call with the key), the provider call, the row stored. Calls are sequential
 * and interleaved (references, baseline, GraphQL, handler...), so a change in the machine's load
 * falls on all of them alike.
 *
 * Fair both ways: the calls to Plinth go over the transport the SDK uses for the baseline
 * (node:http, a keep-alive agent), not fetch, whose streams cost the client more than Plinth's
 * whole route; and the payments alternate between two customers, so, as in production, a write
 * rarely finds its request's session variables already on its pooled connection (one more round
 * trip; src/db/session-variables.ts). References, on a connection of their own (a statement run
 * through Plinth's pool would change the session variables its connections hold): one round trip
 * (SELECT 1), the floor of the read; one durable commit (the fsync of PostgreSQL's WAL), the floor
 * of the write.
 *
 * Where the time goes: node --cpu-prof --cpu-prof-dir=bench/results/profiles dist/bench/payments.js,
 * then bench/cpu-profile.ts on the profile (client, server and provider share the process).
 */

const ADMIN_SECRET = 'bench-admin-secret-0123456789';
const JWT_KEY = 'bench-jwt-signing-key-of-at-least-32-bytes!';

function percentile(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))];
}

async function main(): Promise<void> {
  const calls = positiveInteger('BENCH_PAYMENTS', 500);
  const provider = await startPrimaryProvider();
  const databaseUrl = await prepareDatabase();
  const config = loadConfig({
    ...process.env,
    NODE_ENV: 'development',
    PORT: '0',
    HOST: '127.0.0.1',
    LOG_LEVEL: 'warn',
    DATABASE_URL: databaseUrl,
    GQL_GRAPHQL_ADMIN_SECRET: ADMIN_SECRET,
    GQL_GRAPHQL_JWT_SECRET: JSON.stringify({ type: 'HS256', key: JWT_KEY }),
    PLINTH_PROCESS_ROLES: 'api',
    PRIMARY_PROVIDER_API_URL: provider.url,
    PRIMARY_PROVIDER_API_KEY: provider.apiKey,
    PRIMARY_PROVIDER_WEBHOOK_SECRET: 'whsec_bench',
    PAYMENT_PROVIDER: 'primary',
    // The handler routes' reference limiter (5 calls per minute per user) would stop the run, as
    // would the checkouts quota (60 an hour per user).
    RATE_LIMIT_ACTION_HANDLERS_POINTS: '1000000',
    RATE_LIMIT_CHECKOUTS_POINTS: '1000000',
  });
  const server = await startServer(config, createLogger(config));
  const run = Date.now().toString(36);
  const customers = (await server.dataSource.query('INSERT INTO users (email, name) VALUES ($1, $3), ($2, $3) RETURNING id', [
    `bench-${run}-a@example.com`,
    `bench-${run}-b@example.com`,
    'Bench',
  ])) as { id: string }[];
  const references = new pg.Client({ connectionString: databaseUrl });
  await references.connect();
  const agent = new http.Agent({ keepAlive: true });
  // The switch is stored: a previous run may have left backup selected.
  await server.dataSource.query("UPDATE payment_provider_state SET provider = 'primary'");
  const target = new URL(provider.url);
  const stripe = new Stripe(provider.apiKey, { host: target.hostname, port: Number(target.port), protocol: 'http', maxNetworkRetries: 0, telemetry: false });
  let turn = 0;
  /** The next customer's payment, and the headers of a call as that customer. */
  const nextPayment = () => {
    const customerId = customers[turn++ % customers.length].id;
    return {
      input: { amount: 2500, currency: 'usd', payment_method_id: 'pm_card_visa', customer_id: customerId },
      headers: { 'x-gql-admin-secret': ADMIN_SECRET, 'x-gql-role': 'user', 'x-gql-user-id': customerId, 'idempotency-key': randomUUID() },
    };
  };
  /** POSTs JSON to Plinth over a kept-alive connection and answers the parsed body. */
  const post = (path: string, headers: Record<string, string>, body: unknown) =>
    new Promise<unknown>((resolve, reject) => {
      const text = JSON.stringify(body);
      const request = http.request(
        `${server.url}${path}`,
        { method: 'POST', agent, headers: { ...headers, 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) } },
        (response) => {
          let answer = '';
          response.setEncoding('utf8');
          response.on('data', (chunk: string) => (answer += chunk));
          response.on('end', () => resolve(JSON.parse(answer)));
          response.on('error', reject);
        },
      );
      request.on('error', reject);
      request.end(text);
    });

  const sides = {
    'reference: one round trip (SELECT 1)': async () => {
      await references.query('SELECT 1');
    },
    // The durable commit a recorded payment needs at least, alone on the same database: a
    // transactional WAL message is flushed at commit like any write, and no table is touched (an
    // UPDATE of the provider switch would leave dead versions of the row processPayment reads).
    'reference: one durable commit': async () => {
      await references.query("SELECT pg_logical_emit_message(true, 'plinth-bench', '')");
    },
    'baseline: the SDK call to the provider': async () => {
      const intent = await stripe.paymentIntents.create(
        {
          amount: 2500,
          currency: 'usd',
          payment_method: 'pm_card_visa',
          confirm: true,
          automatic_payment_methods: { enabled: true, allow_redirects: 'never' },
          metadata: { plinth_payment_id: randomUUID(), plinth_customer_id: customers[0].id, plinth_idempotency_key: randomUUID() },
          expand: ['latest_charge'],
        },
        { idempotencyKey: randomUUID() },
      );
      if (intent.status !== 'succeeded') throw new Error('the baseline call did not succeed');
    },
    'processPayment over GraphQL': async () => {
      const { input, headers } = nextPayment();
      const body = (await post('/v1/graphql', headers, {
        query: 'mutation ($input: PaymentInput!) { processPayment(input: $input) { success status payment_intent_id } }',
        variables: { input },
      })) as { data?: { processPayment: { success: boolean } } };
      if (!body.data?.processPayment.success) throw new Error(`processPayment failed: ${JSON.stringify(body)}`);
    },
    'processPayment at /actions/process-payment': async () => {
      const { input, headers } = nextPayment();
      const body = (await post('/actions/process-payment', headers, { action: { name: 'processPayment' }, input: { input } })) as { success: boolean };
      if (!body.success) throw new Error(`processPayment failed: ${JSON.stringify(body)}`);
    },
  };
  const names = Object.keys(sides) as (keyof typeof sides)[];
  const times = Object.fromEntries(names.map((name) => [name, [] as number[]])) as Record<keyof typeof sides, number[]>;

  try {
    for (let round = 0; round < 50; round += 1) for (const name of names) await sides[name]();
    for (let round = 0; round < calls; round += 1) {
      for (const name of names) {
        const start = performance.now();
        await sides[name]();
        times[name].push(performance.now() - start);
      }
    }
    const at = (name: keyof typeof sides, p: number) =>
      percentile(
        [...times[name]].sort((a, b) => a - b),
        p,
      );
    const lines = names.map((name) => {
      const [a, b, c] = [50, 90, 99].map((p) => at(name, p).toFixed(2).padStart(7));
      return `${name.padEnd(44)} p50 ${a} ms   p90 ${b} ms   p99 ${c} ms`;
    });
    const [roundTrip, commit, baseline] = names.slice(0, 3);
    process.stdout.write(
      [
        `${calls} sequential calls per side (after 50 warm-up rounds), PostgreSQL at ${new URL(databaseUrl).host}, load average ${loadavg()
          .map((load) => load.toFixed(2))
          .join(' ')}`,
        ...lines,
        ...names
          .slice(3)
          .map(
            (name) =>
              `${name}: adds ${(at(name, 50) - at(baseline, 50)).toFixed(2)} ms at p50 over the provider call (${(at(name, 50) / at(baseline, 50)).toFixed(2)}x; ` +
              `target: under 3 ms), ${(at(name, 99) - at(baseline, 99)).toFixed(2)} ms at p99; ` +
              `its floor, one round trip and one commit: ${(at(roundTrip, 50) + at(commit, 50)).toFixed(2)} ms at p50`,
          ),
        '',
      ].join('\n'),
    );
  } finally {
    const ids = customers.map((customer) => customer.id);
    await server.dataSource.query('DELETE FROM payments WHERE customer_user_id = ANY($1)', [ids]);
    await server.dataSource.query('DELETE FROM users WHERE id = ANY($1)', [ids]);
    await references.end();
    agent.destroy();
    await server.close();
    await provider.close();
  }
}

if (require.main === module) {
  main().catch((error: unknown) => {
    process.stderr.write(`${error instanceof Error ? error.message : String(error)}\n`);
    process.exit(1);
  });
}
