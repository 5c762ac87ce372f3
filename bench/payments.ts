import { randomUUID } from 'node:crypto';
import Stripe from 'stripe';
import { loadConfig } from '../src/config';
import { createLogger, startServer } from '../src/main';
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
 * directly to the provider server. Reference: one durable commit on the same database, which
 * recording the payment needs at least (it is the fsync of PostgreSQL's WAL). Measured: processPayment over HTTP, as GraphQL and as the
 * engine's handler route: session, validation, the payment row, the provider switch read, the
 * provider call, the result stored and published. Calls are sequential and interleaved (baseline,
 * GraphQL, handler, baseline...), so a change in the machine's load falls on all three alike.
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
    // The handler routes' reference limiter (5 calls per minute per user) would stop the run.
    RATE_LIMIT_ACTION_HANDLERS_POINTS: '1000000',
  });
  const server = await startServer(config, createLogger(config));
  const run = Date.now().toString(36);
  const [user] = (await server.dataSource.query('INSERT INTO users (email, name) VALUES ($1, $2) RETURNING id', [`bench-${run}@example.com`, 'Bench'])) as { id: string }[];
  // The switch is stored: a previous run may have left backup selected.
  await server.dataSource.query("UPDATE payment_provider_state SET provider = 'primary'");
  const target = new URL(provider.url);
  const stripe = new Stripe(provider.apiKey, { host: target.hostname, port: Number(target.port), protocol: 'http', maxNetworkRetries: 0, telemetry: false });
  const input = { amount: 2500, currency: 'usd', payment_method_id: 'pm_card_visa', customer_id: user.id };

  const sides = {
    // The durable commit a recorded payment needs at least, alone on the same database (it changes nothing).
    'reference: one durable commit (an UPDATE)': async () => {
      await server.dataSource.query("UPDATE payment_provider_state SET updated_at = updated_at WHERE id AND provider = 'primary'");
    },
    'baseline: the SDK call to the provider': async () => {
      const intent = await stripe.paymentIntents.create(
        {
          amount: 2500,
          currency: 'usd',
          payment_method: 'pm_card_visa',
          confirm: true,
          automatic_payment_methods: { enabled: true, allow_redirects: 'never' },
          metadata: { plinth_payment_id: randomUUID(), plinth_customer_id: user.id },
          expand: ['latest_charge'],
        },
        { idempotencyKey: randomUUID() },
      );
      if (intent.status !== 'succeeded') throw new Error('the baseline call did not succeed');
    },
    'processPayment over GraphQL': async () => {
      const response = await fetch(`${server.url}/v1/graphql`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-gql-admin-secret': ADMIN_SECRET, 'x-gql-role': 'user', 'x-gql-user-id': user.id, 'idempotency-key': randomUUID() },
        body: JSON.stringify({ query: 'mutation ($input: PaymentInput!) { processPayment(input: $input) { success status payment_intent_id } }', variables: { input } }),
      });
      const body = (await response.json()) as { data?: { processPayment: { success: boolean } } };
      if (!body.data?.processPayment.success) throw new Error(`processPayment failed: ${JSON.stringify(body)}`);
    },
    'processPayment at /actions/process-payment': async () => {
      const response = await fetch(`${server.url}/actions/process-payment`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-gql-admin-secret': ADMIN_SECRET, 'x-gql-role': 'user', 'x-gql-user-id': user.id, 'idempotency-key': randomUUID() },
        body: JSON.stringify({ action: { name: 'processPayment' }, input: { input } }),
      });
      const body = (await response.json()) as { success: boolean };
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
    const p50 = (name: keyof typeof sides) => percentile([...times[name]].sort((a, b) => a - b), 50);
    const lines = names.map((name) => {
      const sorted = [...times[name]].sort((a, b) => a - b);
      const [a, b, c] = [50, 90, 99].map((p) => percentile(sorted, p).toFixed(2).padStart(7));
      return `${name.padEnd(44)} p50 ${a} ms   p90 ${b} ms   p99 ${c} ms`;
    });
    const [commit, baseline] = [p50(names[0]), p50(names[1])];
    process.stdout.write(
      [
        `${calls} sequential calls per side (after 50 warm-up rounds), PostgreSQL at ${new URL(databaseUrl).host}`,
        ...lines,
        ...names
          .slice(2)
          .map(
            (name) =>
              `${name}: adds ${(p50(name) - baseline).toFixed(2)} ms at p50 over the provider call (${(p50(name) / baseline).toFixed(2)}x; ` +
              `target: under 3 ms), of which ${commit.toFixed(2)} ms is the one durable commit`,
          ),
        '',
      ].join('\n'),
    );
  } finally {
    await server.dataSource.query('DELETE FROM payments WHERE customer_user_id = $1', [user.id]);
    await server.dataSource.query('DELETE FROM users WHERE id = $1', [user.id]);
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
