import { randomUUID } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { metadataRequest } from '../support/metadata';
import { PaymentsDocument, ProcessPaymentDocument, type PaymentInput } from '../generated/graphql';
import { graphql } from '../support/graphql';
import { startPrimaryProvider, type PrimaryProviderServer } from '../support/primary-provider';
import { ADMIN_SECRET, startTestServer, type TestServer } from '../support/server';
import { bearer, signToken } from '../support/tokens';
import { startWebhookReceiver } from '../support/webhook-receiver';
import { ADMIN_KEY, BACKUP_SETTINGS, createUser, paymentSettings } from './support';

let provider: PrimaryProviderServer;
let server: TestServer;
let alice: string;
let bob: string;
let aliceToken: Record<string, string>;
const adminToken = bearer(signToken({ roles: ['admin'] }));

beforeAll(async () => {
  provider = await startPrimaryProvider();
  server = await startTestServer(paymentSettings(provider, { ...BACKUP_SETTINGS, PAYMENTS_PROVIDER_TIMEOUT_MS: '400', PAYMENTS_MAX_AMOUNT: '1000000' }));
  alice = await createUser(server.database, 'alice@example.com');
  bob = await createUser(server.database, 'bob@example.com');
  aliceToken = bearer(signToken({ userId: alice }));
});
afterAll(async () => {
  await server?.close();
  await provider?.close();
});

const input = (overrides: Partial<PaymentInput> = {}): PaymentInput => ({
  amount: 2500,
  currency: 'usd',
  payment_method_id: 'pm_card_visa',
  customer_id: alice,
  ...overrides,
});

async function pay(overrides: Partial<PaymentInput> = {}, headers: Record<string, string> = aliceToken) {
  const response = await graphql(server.graphqlUrl, ProcessPaymentDocument, { input: input(overrides) }, headers);
  expect(response.body.errors).toBeUndefined();
  return response.body.data!.processPayment;
}

interface Envelope {
  success: boolean;
  message: string;
  status?: string;
  payment_intent_id?: string | null;
  client_secret?: string | null;
  receipt_url?: string | null;
  error_code?: string;
  errors?: { field: string; code: string }[];
}

/** POSTs to the handler route as the engine does, as `userId` with role user. */
async function callAction(body: Record<string, unknown>, userId = alice, extraHeaders: Record<string, string> = {}) {
  const response = await fetch(`${server.url}/actions/process-payment`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-gql-admin-secret': ADMIN_SECRET, 'x-gql-role': 'user', 'x-gql-user-id': userId, ...extraHeaders },
    body: JSON.stringify({ action: { name: 'processPayment' }, input: { input: body }, session_variables: {} }),
  });
  return { status: response.status, body: (await response.json()) as Envelope };
}

async function paymentRows(where = 'true', parameters: unknown[] = []) {
  return server.database.query<Record<string, unknown>>(`SELECT * FROM payments WHERE ${where} ORDER BY created_at`, parameters);
}

describe('processPayment: status mapping', () => {
  it('SUCCEEDED: answers the intent id and receipt, and records the payment', async () => {
    const result = await pay({ description: 'Order 42' });
    expect(result).toMatchObject({ success: true, status: 'SUCCEEDED', client_secret: null, errors: null });
    expect(result.payment_intent_id).toMatch(/^pi_/);
    expect(result.receipt_url).toMatch(/^https:\/\/pay\.stripe\.com\/receipts\//);
    const [row] = await paymentRows('provider_payment_id = $1', [result.payment_intent_id]);
    expect(row).toMatchObject({
      provider: 'primary',
      customer_user_id: alice,
      amount: '2500',
      currency: 'USD',
      status: 'SUCCEEDED',
      description: 'Order 42',
      receipt_url: result.receipt_url,
    });
    expect(row.created_at).toBeInstanceOf(Date);
    // What the provider was asked: a confirmed intent for the amount, in lower-case currency, keyed.
    const sent = provider.requests.at(-1)!;
    expect(sent.params).toMatchObject({ amount: '2500', currency: 'usd', payment_method: 'pm_card_visa', confirm: 'true' });
    expect(sent.params['metadata[plinth_payment_id]']).toBe(row.id);
    expect(sent.idempotencyKey).toBeTruthy();
  });

  it('REQUIRES_ACTION: success=false with the client secret in the handler envelope', async () => {
    const { status, body } = await callAction(input({ payment_method_id: 'pm_card_authenticationRequired' }));
    expect(status).toBe(200);
    expect(body).toMatchObject({ success: false, status: 'REQUIRES_ACTION', error_code: 'REQUIRES_ACTION', receipt_url: null });
    expect(body.client_secret).toMatch(/^pi_.+_secret_/);
    const [row] = await paymentRows('provider_payment_id = $1', [body.payment_intent_id]);
    expect(row.status).toBe('REQUIRES_ACTION');
  });

  it('PROCESSING: accepted, the outcome to follow', async () => {
    const result = await pay({ payment_method_id: 'pm_processing' });
    expect(result).toMatchObject({ success: true, status: 'PROCESSING' });
  });

  it('a declined card is success=false, FAILED, CARD_DECLINED, recorded with the intent', async () => {
    const { body } = await callAction(input({ payment_method_id: 'pm_card_chargeDeclined' }));
    expect(body).toMatchObject({ success: false, status: 'FAILED', error_code: 'CARD_DECLINED' });
    expect(body.message).toMatch(/declined/);
    expect(body.payment_intent_id).toMatch(/^pi_/);
    const [row] = await paymentRows('provider_payment_id = $1', [body.payment_intent_id]);
    expect(row).toMatchObject({ status: 'FAILED', failure_code: 'CARD_DECLINED' });
  });

  it('an unknown payment method is success=false INVALID_PAYMENT_METHOD', async () => {
    const { body } = await callAction(input({ payment_method_id: 'pm_nonexistent' }));
    expect(body).toMatchObject({ success: false, status: 'FAILED', error_code: 'INVALID_PAYMENT_METHOD' });
  });

  it('a provider failing with 500 is success=false with an unknown outcome, never an exception', async () => {
    const { status, body } = await callAction(input({ payment_method_id: 'pm_server_error' }));
    expect(status).toBe(200);
    expect(body).toMatchObject({ success: false, status: 'PROCESSING', error_code: 'PROVIDER_ERROR' });
  });
});

describe('processPayment: idempotency', () => {
  it('a retried call with the same Idempotency-Key charges once and answers the same payment', async () => {
    const key = randomUUID();
    const charges = provider.charges();
    const first = await pay({ amount: 1234 }, { ...aliceToken, 'idempotency-key': key });
    const second = await pay({ amount: 1234 }, { ...aliceToken, 'idempotency-key': key });
    const third = await callAction(input({ amount: 1234 }), alice, { 'idempotency-key': key });
    expect(first.success).toBe(true);
    expect(second).toEqual(first);
    expect(third.body.payment_intent_id).toBe(first.payment_intent_id);
    expect(provider.charges()).toBe(charges + 1);
    expect(await paymentRows('amount = 1234')).toHaveLength(1);
  });

  it('calls without a key are separate payments', async () => {
    const charges = provider.charges();
    const first = await pay({ amount: 777 });
    const second = await pay({ amount: 777 });
    expect(first.payment_intent_id).not.toBe(second.payment_intent_id);
    expect(provider.charges()).toBe(charges + 2);
  });

  it('the same key for a different payment is refused and charges nothing', async () => {
    const key = randomUUID();
    await pay({ amount: 500 }, { ...aliceToken, 'idempotency-key': key });
    const charges = provider.charges();
    const requests = provider.requests.length;
    const reused = await pay({ amount: 501 }, { ...aliceToken, 'idempotency-key': key });
    expect(reused).toMatchObject({ success: false, status: 'FAILED' });
    expect(reused.errors).toEqual([expect.objectContaining({ field: 'idempotency_key', code: 'ALREADY_EXISTS' })]);
    expect(provider.charges()).toBe(charges);
    expect(provider.requests.length).toBe(requests);
  });

  it('keys are per customer: the same key for two customers makes two payments', async () => {
    const key = randomUUID();
    const forAlice = await pay({ amount: 300 }, { ...adminToken, 'idempotency-key': key });
    const forBob = await pay({ amount: 300, customer_id: bob }, { ...adminToken, 'idempotency-key': key });
    expect(forAlice.payment_intent_id).not.toBe(forBob.payment_intent_id);
  });

  it('a malformed key is a field error', async () => {
    const result = await pay({}, { ...aliceToken, 'idempotency-key': 'x'.repeat(201) });
    expect(result.errors).toEqual([expect.objectContaining({ field: 'idempotency_key', code: 'INVALID_FORMAT' })]);
  });
});

describe('processPayment: an unreachable or slow provider', () => {
  it('a timeout is success=false PROVIDER_TIMEOUT, and a retry with the key charges once', async () => {
    provider.slowMs = 1000;
    const key = randomUUID();
    const charges = provider.charges();
    const started = Date.now();
    const first = await pay({ amount: 4321, payment_method_id: 'pm_slow' }, { ...aliceToken, 'idempotency-key': key });
    expect(Date.now() - started).toBeLessThan(1000);
    expect(first).toMatchObject({ success: false, status: 'PROCESSING', payment_intent_id: null });
    expect(first.message).toMatch(/did not answer in time/);
    const [row] = await paymentRows('amount = 4321');
    expect(row).toMatchObject({ status: 'PROCESSING', failure_code: 'PROVIDER_TIMEOUT', provider_payment_id: null });

    // The provider finished the first call after all; the retry gets its answer, not a new charge.
    await new Promise((resolve) => setTimeout(resolve, 800));
    const retry = await pay({ amount: 4321, payment_method_id: 'pm_slow' }, { ...aliceToken, 'idempotency-key': key });
    expect(retry).toMatchObject({ success: true, status: 'PROCESSING' });
    expect(retry.payment_intent_id).toMatch(/^pi_/);
    expect(provider.charges()).toBe(charges + 1);
    expect(await paymentRows('amount = 4321')).toEqual([expect.objectContaining({ provider_payment_id: retry.payment_intent_id, failure_code: null })]);
  });

  it('a provider that refuses connections is success=false PROVIDER_UNAVAILABLE, recorded as FAILED', async () => {
    // A port that was just free: nothing listens there.
    const probe = http.createServer();
    await new Promise<void>((resolve) => probe.listen(0, '127.0.0.1', resolve));
    const { port } = probe.address() as AddressInfo;
    await new Promise<void>((resolve) => probe.close(() => resolve()));
    const key = randomUUID();
    const paid = await pay({ amount: 998 }, { ...aliceToken, 'idempotency-key': key });
    const down = await startTestServer(paymentSettings({ url: `http://127.0.0.1:${port}`, apiKey: provider.apiKey }), { database: server.database });
    try {
      // A retry of a payment that is final is answered from the record, provider or not.
      const retried = await graphql(down.graphqlUrl, ProcessPaymentDocument, { input: input({ amount: 998 }) }, { ...aliceToken, 'idempotency-key': key });
      expect(retried.body.data!.processPayment).toEqual(paid);

      const response = await graphql(down.graphqlUrl, ProcessPaymentDocument, { input: input({ amount: 999 }) }, aliceToken);
      expect(response.body.data!.processPayment).toMatchObject({ success: false, status: 'FAILED', payment_intent_id: null });
      expect(response.body.data!.processPayment.message).toMatch(/could not be reached/);
      expect(await paymentRows('amount = 999')).toEqual([expect.objectContaining({ status: 'FAILED', failure_code: 'PROVIDER_UNAVAILABLE' })]);
    } finally {
      await down.close();
    }
  });
});

describe('processPayment: refused input changes nothing', () => {
  it.each([
    ['amount zero', { amount: 0 }, 'amount', 'INVALID_FORMAT'],
    ['amount negative', { amount: -5 }, 'amount', 'INVALID_FORMAT'],
    ['amount above PAYMENTS_MAX_AMOUNT', { amount: 1_000_001 }, 'amount', 'INVALID_FORMAT'],
    ['currency not ISO 4217', { currency: 'usdollar' }, 'currency', 'INVALID_FORMAT'],
    ['currency unknown', { currency: 'ABC' }, 'currency', 'INVALID_FORMAT'],
    ['payment method blank', { payment_method_id: '  ' }, 'payment_method_id', 'REQUIRED_FIELD'],
    ['payment method with odd characters', { payment_method_id: 'pm/../x' }, 'payment_method_id', 'INVALID_FORMAT'],
    ['customer not a UUID', { customer_id: 'alice' }, 'customer_id', 'INVALID_FORMAT'],
    ['description too long', { description: 'x'.repeat(1001) }, 'description', 'INVALID_LENGTH'],
    ['description with a NUL', { description: 'a\u0000b' }, 'description', 'INVALID_FORMAT'],
  ])('%s', async (_case, overrides, field, code) => {
    const requests = provider.requests.length;
    const before = (await paymentRows()).length;
    const { status, body } = await callAction({ ...input(), ...overrides });
    expect(status).toBe(200);
    expect(body).toMatchObject({ success: false, error_code: 'VALIDATION_ERROR', status: 'FAILED' });
    expect(body.errors).toEqual([expect.objectContaining({ field, code })]);
    expect(provider.requests.length).toBe(requests);
    expect((await paymentRows()).length).toBe(before);
  });

  it('fields of the wrong JSON type are field errors, not a crash', async () => {
    const { body } = await callAction({ amount: '12', currency: 5, payment_method_id: ['x'], customer_id: {} });
    expect(body.errors!.map((error) => error.field)).toEqual(['amount', 'currency', 'payment_method_id', 'customer_id']);
  });

  it('an amount with a fraction is refused (minor units are whole)', async () => {
    const { body } = await callAction({ ...input(), amount: 12.5 });
    expect(body.errors).toEqual([expect.objectContaining({ field: 'amount', code: 'INVALID_FORMAT' })]);
  });

  it('a user may not charge another user', async () => {
    const requests = provider.requests.length;
    const result = await pay({ customer_id: bob });
    expect(result).toMatchObject({ success: false, status: 'FAILED' });
    expect(result.errors).toEqual([expect.objectContaining({ field: 'customer_id', code: 'FORBIDDEN' })]);
    expect(provider.requests.length).toBe(requests);
  });

  it('an admin may charge anyone, but not a user that does not exist', async () => {
    expect((await pay({ customer_id: bob }, adminToken)).success).toBe(true);
    const requests = provider.requests.length;
    const before = (await paymentRows()).length;
    const missing = await pay({ customer_id: randomUUID() }, adminToken);
    expect(missing.errors).toEqual([expect.objectContaining({ field: 'customer_id', code: 'NOT_FOUND' })]);
    expect(provider.requests.length).toBe(requests);
    expect((await paymentRows()).length).toBe(before);
  });

  it('the anonymous role may not call it', async () => {
    const response = await graphql(server.graphqlUrl, ProcessPaymentDocument, { input: input() });
    expect(response.body.errors?.[0].extensions?.code).toBe('FORBIDDEN');
  });
});

describe('payments query', () => {
  it("shows a user their own payments and an admin everyone's", async () => {
    const own = await graphql(server.graphqlUrl, PaymentsDocument, { first: 100 }, bearer(signToken({ userId: bob })));
    expect(own.body.data!.payments.length).toBeGreaterThan(0);
    expect(own.body.data!.payments.every((payment) => payment.customer_id === bob)).toBe(true);
    const all = await graphql(server.graphqlUrl, PaymentsDocument, { first: 100 }, adminToken);
    expect(new Set(all.body.data!.payments.map((payment) => payment.customer_id))).toEqual(new Set([alice, bob]));
    const filtered = await graphql(server.graphqlUrl, PaymentsDocument, { customer_id: bob, first: 100 }, adminToken);
    expect(filtered.body.data!.payments).toEqual(own.body.data!.payments);
  });

  it('a user cannot read another customer through customer_id', async () => {
    const response = await graphql(server.graphqlUrl, PaymentsDocument, { customer_id: alice }, bearer(signToken({ userId: bob })));
    expect(response.body.data!.payments.every((payment) => payment.customer_id === bob)).toBe(true);
  });

  it('refuses a page size out of range', async () => {
    const response = await graphql(server.graphqlUrl, PaymentsDocument, { first: 0 }, adminToken);
    expect(response.body.errors?.[0].extensions?.code).toBe('BAD_USER_INPUT');
  });
});

describe('processPayment while the backup provider is active', () => {
  it('is refused as unsupported (the backup provider sells through its checkout only), recorded, and charges nothing', async () => {
    const switchTo = (to: string) =>
      fetch(`${server.url}/admin/payment-provider`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-admin-key': ADMIN_KEY },
        body: JSON.stringify({ provider: to }),
      });
    expect((await switchTo('backup')).status).toBe(200);
    try {
      const requests = provider.requests.length;
      const { body } = await callAction(input({ amount: 6060 }));
      expect(body).toMatchObject({ success: false, status: 'FAILED', error_code: 'PROVIDER_UNSUPPORTED', payment_intent_id: null });
      expect(body.message).toMatch(/checkout/);
      expect(provider.requests.length).toBe(requests);
      expect(await paymentRows('amount = 6060')).toEqual([
        expect.objectContaining({ provider: 'backup', status: 'FAILED', failure_code: 'PROVIDER_UNSUPPORTED' }),
      ]);
    } finally {
      expect((await switchTo('primary')).status).toBe(200);
    }
  });
});

describe('processPayment: the session variables its write carries', () => {
  it("records each payment's own caller on its row change (an event trigger on payments), alternating callers, sequential and concurrent", async () => {
    const receiver = await startWebhookReceiver();
    const created = await metadataRequest(server.url, {
      type: 'pg_create_event_trigger',
      args: { name: 'payment_rows', table: 'payments', webhook: `${receiver.url}/payment_rows`, insert: { columns: '*' } },
    });
    expect(created.status).toBe(200);
    try {
      // The read before the provider call sets the caller's variables on its connection; each
      // write must carry its own caller's, whichever connection it gets and whoever used it last.
      const callers = [alice, bob, alice, alice, bob];
      for (const userId of callers) expect((await callAction(input({ customer_id: userId, amount: 7070 }), userId)).body.success).toBe(true);
      const together = [bob, alice, bob, alice, bob, alice];
      const answers = await Promise.all(together.map((userId) => callAction(input({ customer_id: userId, amount: 7171 }), userId)));
      expect(answers.every((answer) => answer.body.success)).toBe(true);
      const captured = await server.database.query<{ caller: string; customer: string; amount: string }>(
        `SELECT payload->'session_variables'->>'x-gql-user-id' AS caller, payload->'data'->'new'->>'customer_user_id' AS customer,
                payload->'data'->'new'->>'amount' AS amount
         FROM event_log WHERE trigger_name = 'payment_rows' ORDER BY seq`,
      );
      expect(captured.filter((row) => row.amount === '7070').map((row) => row.caller)).toEqual(callers);
      expect(captured.filter((row) => row.amount === '7171')).toHaveLength(together.length);
      expect(captured.every((row) => row.caller === row.customer)).toBe(true);
    } finally {
      expect((await metadataRequest(server.url, { type: 'pg_delete_event_trigger', args: { name: 'payment_rows' } })).status).toBe(200);
      await receiver.close();
    }
  });
});
