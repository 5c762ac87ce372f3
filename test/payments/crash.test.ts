import { startPrimaryProvider, type PrimaryProviderServer } from '../support/primary-provider';
import { ADMIN_SECRET, startTestServer, testEnvironment, type TestServer } from '../support/server';
import { spawnServer, type SpawnedServer } from '../support/spawn';
import { createUser, paymentSettings, postPrimary, primaryEvent } from './support';

let provider: PrimaryProviderServer;
let server: TestServer;
let crashing: SpawnedServer | undefined;
let alice: string;

beforeAll(async () => {
  provider = await startPrimaryProvider();
  server = await startTestServer(paymentSettings(provider));
  alice = await createUser(server.database, 'alice@example.com');
});
afterAll(async () => {
  crashing?.child.kill('SIGKILL');
  await server?.close();
  await provider?.close();
});

const pay = (base: string, key: string) =>
  fetch(`${base}/actions/process-payment`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-gql-admin-secret': ADMIN_SECRET, 'x-gql-role': 'user', 'x-gql-user-id': alice, 'idempotency-key': key },
    body: JSON.stringify({
      action: { name: 'processPayment' },
      input: { input: { amount: 7007, currency: 'usd', payment_method_id: 'pm_slow', customer_id: alice } },
    }),
  });

describe('a server killed during the provider call', () => {
  it('loses nothing: the webhook records the payment, and the retry answers it without charging again', async () => {
    provider.slowMs = 1500;
    crashing = await spawnServer(testEnvironment(server.database.url, paymentSettings(provider)));
    const key = 'crash-test-key-1';
    const charges = provider.charges();
    const call = pay(crashing.url, key).catch((error: unknown) => error);
    // Killed once the provider has the request, before the answer comes back.
    const deadline = Date.now() + 10_000;
    while (!provider.requests.some((request) => request.idempotencyKey === `${alice}:${key}`)) {
      if (Date.now() > deadline) throw new Error('the provider never received the call');
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    crashing.child.kill('SIGKILL');
    await crashing.exited;
    // The client never gets an answer (jest's sandbox makes instanceof unreliable for fetch's TypeError).
    expect(String(await call)).toMatch(/fetch failed|terminated|socket/i);
    expect(await server.database.query('SELECT 1 FROM payments WHERE amount = 7007')).toHaveLength(0);

    // The provider finishes the payment and tells us, as Stripe does, with the metadata we sent.
    await new Promise((resolve) => setTimeout(resolve, provider.slowMs));
    const intent = [...provider.intents.values()].find((candidate) => candidate.amount === 7007)!;
    const delivered = await postPrimary(server.url, primaryEvent('payment_intent.succeeded', { ...intent, status: 'succeeded' }));
    expect(delivered.status).toBe(200);
    const [row] = await server.database.query<Record<string, unknown>>('SELECT * FROM payments WHERE amount = 7007');
    expect(row).toMatchObject({ provider_payment_id: intent.id, customer_user_id: alice, status: 'SUCCEEDED', idempotency_key: `${alice}:${key}` });

    // The client, which never got its answer, retries with its key on another instance.
    const retry = (await (await pay(server.url, key)).json()) as { payment_intent_id: string; status: string; success: boolean };
    expect(retry).toMatchObject({ success: true, payment_intent_id: intent.id, status: 'SUCCEEDED' });
    expect(provider.charges()).toBe(charges + 1);
    expect(await server.database.query('SELECT 1 FROM payments WHERE amount = 7007')).toHaveLength(1);
  });
});
