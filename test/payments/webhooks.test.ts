import { randomUUID } from 'node:crypto';
import Stripe from 'stripe';
import { PaymentUpdatedDocument, ProcessPaymentDocument, type PaymentInput } from '../generated/graphql';
import { graphql } from '../support/graphql';
import { startPrimaryProvider, type PrimaryProviderServer } from '../support/primary-provider';
import { startTestServer, type TestServer } from '../support/server';
import { bearer, signToken } from '../support/tokens';
import { subscribe, subscriptionClient } from '../support/ws';
import {
  BACKUP_SETTINGS,
  backupOrder,
  backupSignature,
  createUser,
  paymentSettings,
  postBackup,
  postPrimary,
  primaryEvent,
  primarySignature,
  PRIMARY_WEBHOOK_SECRET,
} from './support';

let provider: PrimaryProviderServer;
let server: TestServer;
let alice: string;

beforeAll(async () => {
  provider = await startPrimaryProvider();
  server = await startTestServer(paymentSettings(provider, BACKUP_SETTINGS));
  alice = await createUser(server.database, 'alice@example.com');
});
afterAll(async () => {
  await server?.close();
  await provider?.close();
});

const storedEvents = async () => Number((await server.database.query<{ count: string }>('SELECT count(*) FROM webhook_events'))[0].count);
const licenseCount = async () => Number((await server.database.query<{ count: string }>('SELECT count(*) FROM licenses'))[0].count);

async function pay(overrides: Partial<PaymentInput>) {
  const input = { amount: 1500, currency: 'eur', payment_method_id: 'pm_processing', customer_id: alice, ...overrides };
  const response = await graphql(server.graphqlUrl, ProcessPaymentDocument, { input }, bearer(signToken({ userId: alice })));
  return response.body.data!.processPayment;
}

const intentEvent = (type: string, intent: Record<string, unknown>) => primaryEvent(type, { object: 'payment_intent', ...intent });
const paymentRow = async (intentId: string) =>
  (
    await server.database.query<{ status: string; failure_code: string | null }>('SELECT status, failure_code FROM payments WHERE provider_payment_id = $1', [
      intentId,
    ])
  )[0];

describe('POST /webhooks/primary: Stripe-Signature', () => {
  const event = () => primaryEvent('customer.created', { id: 'cus_1', object: 'customer' });

  it('accepts the signature the official SDK makes, and agrees with its constructEvent', async () => {
    const body = event();
    const payload = JSON.stringify(body);
    const header = primarySignature(payload);
    expect(new Stripe('sk_test_x').webhooks.constructEvent(payload, header, PRIMARY_WEBHOOK_SECRET).id).toBe(body.id);
    const before = await storedEvents();
    expect(await postPrimary(server.url, body, header)).toEqual({ status: 200, body: { received: true, duplicate: false } });
    expect(await storedEvents()).toBe(before + 1);
  });

  it.each([
    ['missing', () => null],
    ['made with another secret', (payload: string) => primarySignature(payload, { secret: 'whsec_someone_else' })],
    ['over another body', () => primarySignature('{"id":"evt_other"}')],
    ['malformed', () => 't=abc,v1=zz'],
    ['without v1', () => `t=${Math.floor(Date.now() / 1000)}`],
    ['replayed from 10 minutes ago', (payload: string) => primarySignature(payload, { timestamp: Math.floor(Date.now() / 1000) - 600 })],
  ])('refuses a signature %s with 400 and stores nothing', async (_case, sign) => {
    const body = event();
    const before = await storedEvents();
    const answer = await postPrimary(server.url, body, sign(JSON.stringify(body)));
    expect(answer.status).toBe(400);
    expect(answer.body.error_code).toBe('INVALID_SIGNATURE');
    expect(await storedEvents()).toBe(before);
  });

  it('accepts one good v1 among several (a secret being rolled)', async () => {
    const body = event();
    const payload = JSON.stringify(body);
    const good = primarySignature(payload);
    const [t, v1] = good.split(',');
    const answer = await postPrimary(server.url, body, `${t},v1=${'0'.repeat(64)},${v1}`);
    expect(answer.status).toBe(200);
  });

  it('checks the exact bytes: the same JSON re-spaced does not verify', async () => {
    const body = event();
    const header = primarySignature(JSON.stringify(body));
    const response = await fetch(`${server.url}/webhooks/primary`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'stripe-signature': header },
      body: JSON.stringify(body, null, 2),
    });
    expect(response.status).toBe(400);
  });

  it('answers a signed body that is not an event with 400', async () => {
    const answer = await postPrimary(server.url, { hello: 'world' });
    expect(answer).toMatchObject({ status: 400, body: { error_code: 'INVALID_EVENT' } });
  });
});

describe('POST /webhooks/backup: X-Signature', () => {
  it.each([
    ['missing', () => null],
    ['made with another secret', (payload: string) => backupSignature(payload, 'not-the-secret')],
    ['not hex', () => 'sha256=abc'],
  ])('refuses a signature %s with 400 and stores nothing', async (_case, sign) => {
    const body = backupOrder('901', alice);
    const before = await storedEvents();
    const answer = await postBackup(server.url, body, sign(JSON.stringify(body)));
    expect(answer.status).toBe(400);
    expect(await storedEvents()).toBe(before);
    expect(await licenseCount()).toBe(0);
  });

  it('acknowledges event types it does not handle', async () => {
    const answer = await postBackup(server.url, {
      meta: { event_name: 'affiliate_activated', custom_data: {} },
      data: { type: 'affiliates', id: '1', attributes: {} },
    });
    expect(answer).toEqual({ status: 200, body: { received: true, duplicate: false } });
  });
});

describe('exactly once', () => {
  it('a primary event delivered twice is processed once', async () => {
    const body = primaryEvent('checkout.session.completed', {
      id: 'cs_test_once',
      object: 'checkout.session',
      mode: 'subscription',
      payment_status: 'paid',
      subscription: 'sub_once',
      client_reference_id: alice,
      metadata: { plinth_product: 'pro' },
    });
    expect((await postPrimary(server.url, body)).body).toEqual({ received: true, duplicate: false });
    expect((await postPrimary(server.url, body)).body).toEqual({ received: true, duplicate: true });
    const rows = await server.database.query("SELECT 1 FROM webhook_events WHERE provider = 'primary' AND event_id = $1", [body.id]);
    expect(rows).toHaveLength(1);
  });

  it('ten concurrent deliveries of one primary event: one processes it, the rest are duplicates, one license', async () => {
    const before = await licenseCount();
    const body = primaryEvent('checkout.session.completed', {
      id: 'cs_test_concurrent',
      object: 'checkout.session',
      mode: 'subscription',
      payment_status: 'paid',
      subscription: 'sub_concurrent',
      client_reference_id: alice,
    });
    const answers = await Promise.all(Array.from({ length: 10 }, () => postPrimary(server.url, body)));
    expect(answers.every((answer) => answer.status === 200)).toBe(true);
    expect(answers.filter((answer) => !answer.body.duplicate)).toHaveLength(1);
    expect(await licenseCount()).toBe(before + 1);
  });

  it('ten concurrent deliveries of one backup order: processed once, one license', async () => {
    const before = await licenseCount();
    const body = backupOrder('5001', alice);
    const answers = await Promise.all(Array.from({ length: 10 }, () => postBackup(server.url, body)));
    expect(answers.every((answer) => answer.status === 200)).toBe(true);
    expect(answers.filter((answer) => !answer.body.duplicate)).toHaveLength(1);
    expect(await licenseCount()).toBe(before + 1);
    expect((await postBackup(server.url, body)).body.duplicate).toBe(true);
  });
});

describe('payment status moves (as Stripe moves them)', () => {
  it('PROCESSING ends in SUCCEEDED, and a final state never moves back', async () => {
    const payment = await pay({ payment_method_id: 'pm_processing' });
    const id = payment.payment_intent_id!;
    await postPrimary(server.url, intentEvent('payment_intent.succeeded', { id, status: 'succeeded' }));
    expect(await paymentRow(id)).toMatchObject({ status: 'SUCCEEDED' });
    await postPrimary(
      server.url,
      intentEvent('payment_intent.payment_failed', {
        id,
        status: 'requires_payment_method',
        last_payment_error: { code: 'card_declined', message: 'declined' },
      }),
    );
    await postPrimary(server.url, intentEvent('payment_intent.processing', { id, status: 'processing' }));
    expect(await paymentRow(id)).toMatchObject({ status: 'SUCCEEDED' });
  });

  it('REQUIRES_ACTION ends in FAILED when authentication fails', async () => {
    const payment = await pay({ payment_method_id: 'pm_card_authenticationRequired' });
    const id = payment.payment_intent_id!;
    expect(await paymentRow(id)).toMatchObject({ status: 'REQUIRES_ACTION' });
    await postPrimary(
      server.url,
      intentEvent('payment_intent.payment_failed', {
        id,
        status: 'requires_payment_method',
        last_payment_error: { code: 'payment_intent_authentication_failure', message: 'Authentication failed' },
      }),
    );
    expect(await paymentRow(id)).toEqual({ status: 'FAILED', failure_code: 'PAYMENT_FAILED' });
  });

  it('a payment whose answer was lost (timeout) is found by the id in the metadata', async () => {
    const key = randomUUID();
    provider.slowMs = 1500;
    const server2 = await startTestServer(paymentSettings(provider, { PAYMENTS_PROVIDER_TIMEOUT_MS: '200' }), { database: server.database });
    try {
      const response = await graphql(
        server2.graphqlUrl,
        ProcessPaymentDocument,
        { input: { amount: 3131, currency: 'usd', payment_method_id: 'pm_slow', customer_id: alice } },
        { ...bearer(signToken({ userId: alice })), 'idempotency-key': key },
      );
      expect(response.body.data!.processPayment).toMatchObject({ success: false, status: 'PROCESSING', payment_intent_id: null });
    } finally {
      await server2.close();
    }
    const [row] = await server.database.query<{ id: string }>('SELECT id FROM payments WHERE amount = 3131');
    await postPrimary(
      server.url,
      intentEvent('payment_intent.succeeded', { id: 'pi_lost_answer', status: 'succeeded', metadata: { plinth_payment_id: row.id } }),
    );
    expect(await paymentRow('pi_lost_answer')).toMatchObject({ status: 'SUCCEEDED', failure_code: null });
  });

  it('a payment whose call never stored it (a crash, an answer still on its way) is recorded from the event', async () => {
    const id = randomUUID();
    await postPrimary(
      server.url,
      intentEvent('payment_intent.succeeded', {
        id: 'pi_from_event',
        status: 'succeeded',
        amount: 4545,
        currency: 'gbp',
        metadata: { plinth_payment_id: id, plinth_customer_id: alice, plinth_idempotency_key: `${alice}:lost-call` },
      }),
    );
    const [row] = await server.database.query('SELECT * FROM payments WHERE id = $1', [id]);
    expect(row).toMatchObject({
      provider: 'primary',
      provider_payment_id: 'pi_from_event',
      idempotency_key: `${alice}:lost-call`,
      customer_user_id: alice,
      amount: '4545',
      currency: 'GBP',
      status: 'SUCCEEDED',
    });
  });

  it('an event for a payment we do not know is acknowledged and changes nothing', async () => {
    const answer = await postPrimary(server.url, intentEvent('payment_intent.succeeded', { id: 'pi_unknown', status: 'succeeded' }));
    expect(answer).toEqual({ status: 200, body: { received: true, duplicate: false } });
    expect(await paymentRow('pi_unknown')).toBeUndefined();
  });
});

describe('subscription paymentUpdated', () => {
  it('pushes each change of a payment to its owner and admins, not to another user', async () => {
    const payment = await pay({ payment_method_id: 'pm_processing', amount: 2222 });
    const id = payment.payment_intent_id!;
    const bob = await createUser(server.database, 'bob-subscriber@example.com');
    const clients = [alice, bob, null].map((userId) =>
      subscriptionClient(server.wsUrl, { headers: bearer(userId ? signToken({ userId }) : signToken({ roles: ['admin'] })) }),
    );
    try {
      const [own, other, admin] = clients.map((client) => subscribe(client, PaymentUpdatedDocument, { payment_intent_id: id }));
      await Promise.all([own.ready, other.ready, admin.ready]);
      await postPrimary(server.url, intentEvent('payment_intent.succeeded', { id, status: 'succeeded' }));
      const expected = { paymentUpdated: { id: expect.any(String), payment_intent_id: id, customer_id: alice, status: 'SUCCEEDED', failure_code: null } };
      expect((await own.next()).data).toEqual(expected);
      expect((await admin.next()).data).toEqual(expected);
      await expect(other.next(500)).rejects.toThrow(/no subscription result/);
      // A delivery of the same event again changes nothing and pushes nothing.
      await postPrimary(server.url, intentEvent('payment_intent.succeeded', { id, status: 'succeeded' }));
      await expect(own.next(500)).rejects.toThrow(/no subscription result/);
    } finally {
      await Promise.all(clients.map((client) => client.dispose()));
    }
  });

  it('reaches a subscriber on another instance than the one the webhook came to', async () => {
    const payment = await pay({ payment_method_id: 'pm_processing', amount: 2323 });
    const id = payment.payment_intent_id!;
    const other = await startTestServer(paymentSettings(provider, BACKUP_SETTINGS), { database: server.database });
    const client = subscriptionClient(other.wsUrl, { headers: bearer(signToken({ userId: alice })) });
    try {
      const subscription = subscribe(client, PaymentUpdatedDocument, { payment_intent_id: id });
      await subscription.ready;
      await postPrimary(
        server.url,
        intentEvent('payment_intent.payment_failed', {
          id,
          status: 'requires_payment_method',
          last_payment_error: { code: 'card_declined', message: 'declined' },
        }),
      );
      expect((await subscription.next()).data).toMatchObject({ paymentUpdated: { payment_intent_id: id, status: 'FAILED', failure_code: 'CARD_DECLINED' } });
    } finally {
      await client.dispose();
      await other.close();
    }
  });

  it('refuses an anonymous subscriber', async () => {
    const client = subscriptionClient(server.wsUrl);
    try {
      const subscription = subscribe(client, PaymentUpdatedDocument, { payment_intent_id: 'pi_x' });
      const result = await subscription.next();
      expect(result.errors?.[0].extensions?.code).toBe('FORBIDDEN');
    } finally {
      await client.dispose();
    }
  });
});
