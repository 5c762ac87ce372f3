import { ActivateLicenseDocument, LicensesDocument, SubscriptionsDocument } from '../generated/graphql';
import { graphql } from '../support/graphql';
import { startTestServer, type TestServer } from '../support/server';
import { bearer, signToken } from '../support/tokens';
import { ADMIN_KEY, BACKUP_SETTINGS, backupOrder, backupSubscription, createUser, paymentSettings, postBackup, postPrimary, primaryEvent } from './support';

let server: TestServer;
let alice: string;
let bob: string;
const DAY = 86_400;
const now = () => Math.floor(Date.now() / 1000);

beforeAll(async () => {
  server = await startTestServer(
    paymentSettings({ url: 'http://127.0.0.1:9', apiKey: 'sk_test_licenses' }, { ...BACKUP_SETTINGS, PAYMENTS_LICENSE_ACTIVATION_LIMIT: '3' }),
  );
  alice = await createUser(server.database, 'alice@example.com');
  bob = await createUser(server.database, 'bob@example.com');
});
afterAll(async () => {
  await server?.close();
});

async function license(where: string, parameters: unknown[]) {
  const [row] = await server.database.query<Record<string, unknown>>(`SELECT * FROM licenses WHERE ${where}`, parameters);
  return row;
}
async function subscription(externalId: string) {
  const [row] = await server.database.query<Record<string, unknown>>('SELECT * FROM subscriptions WHERE external_id = $1', [externalId]);
  return row;
}
const activate = async (key: string, instance: string) =>
  (await graphql(server.graphqlUrl, ActivateLicenseDocument, { key, instance })).body.data!.activateLicense;

async function switchTo(provider: 'primary' | 'backup') {
  const response = await fetch(`${server.url}/admin/payment-provider`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-admin-key': ADMIN_KEY },
    body: JSON.stringify({ provider }),
  });
  expect(response.status).toBe(200);
}

/** The events of a completed primary Checkout, in an order Stripe may deliver them. */
async function primaryPurchase(subscriptionId: string, customer: string, periodEnd: number) {
  const metadata = { plinth_customer_id: customer, plinth_product: 'pro' };
  await postPrimary(
    server.url,
    primaryEvent('customer.subscription.created', {
      id: subscriptionId,
      object: 'subscription',
      status: 'active',
      metadata,
      items: { data: [{ id: 'si_1', price: { id: 'price_pro_monthly' }, current_period_end: periodEnd }] },
    }),
  );
  await postPrimary(
    server.url,
    primaryEvent('checkout.session.completed', {
      id: `cs_${subscriptionId}`,
      object: 'checkout.session',
      mode: 'subscription',
      payment_status: 'paid',
      subscription: subscriptionId,
      client_reference_id: customer,
      customer_details: { email: 'alice@example.com' },
      metadata,
    }),
  );
  await postPrimary(
    server.url,
    primaryEvent('invoice.paid', {
      id: `in_${subscriptionId}_1`,
      object: 'invoice',
      billing_reason: 'subscription_create',
      parent: { type: 'subscription_details', subscription_details: { subscription: subscriptionId, metadata } },
      lines: { data: [{ period: { start: now(), end: periodEnd }, pricing: { price_details: { price: 'price_pro_monthly' } } }] },
    }),
  );
}

describe('primary: a completed checkout', () => {
  it('makes one subscription and one license for the customer, whatever order the events come in', async () => {
    const end = now() + 30 * DAY;
    await primaryPurchase('sub_alice', alice, end);
    expect(await subscription('sub_alice')).toMatchObject({
      provider: 'primary',
      customer_user_id: alice,
      customer_email: 'alice@example.com',
      product: 'pro',
      status: 'active',
      current_period_end: new Date(end * 1000),
    });
    const granted = await license("source_id = 'sub_alice'", []);
    expect(granted).toMatchObject({
      provider: 'primary',
      customer_user_id: alice,
      product: 'pro',
      status: 'active',
      activation_count: 0,
      activation_limit: 3,
      renewal_date: new Date(end * 1000),
    });
    expect(granted.license_key).toMatch(/^[0-9A-Z]{5}(-[0-9A-Z]{5}){3}$/);
  });

  it('renews at primary while backup is active: invoice.paid moves the renewal date', async () => {
    await switchTo('backup');
    try {
      const next = now() + 60 * DAY;
      const answer = await postPrimary(
        server.url,
        primaryEvent('invoice.paid', {
          id: 'in_sub_alice_2',
          object: 'invoice',
          billing_reason: 'subscription_cycle',
          subscription: 'sub_alice',
          lines: { data: [{ period: { start: now() + 30 * DAY, end: next }, price: { id: 'price_pro_monthly' } }] },
        }),
      );
      expect(answer.status).toBe(200);
      expect(await subscription('sub_alice')).toMatchObject({ status: 'active', current_period_end: new Date(next * 1000) });
      expect(await license("source_id = 'sub_alice'", [])).toMatchObject({ status: 'active', renewal_date: new Date(next * 1000) });
    } finally {
      await switchTo('primary');
    }
  });

  it('a failed renewal payment makes it past_due; the license stays usable while the provider retries', async () => {
    await postPrimary(
      server.url,
      primaryEvent('invoice.payment_failed', {
        id: 'in_sub_alice_3',
        object: 'invoice',
        subscription: 'sub_alice',
        attempt_count: 1,
        lines: { data: [] },
      }),
    );
    expect(await subscription('sub_alice')).toMatchObject({ status: 'past_due' });
    expect(await license("source_id = 'sub_alice'", [])).toMatchObject({ status: 'active' });
  });

  it('a deleted subscription cancels the license, for good', async () => {
    await primaryPurchase('sub_short', alice, now() + 30 * DAY);
    await postPrimary(
      server.url,
      primaryEvent('customer.subscription.deleted', { id: 'sub_short', object: 'subscription', status: 'canceled', ended_at: now() - 5 }),
    );
    expect(await subscription('sub_short')).toMatchObject({ status: 'canceled' });
    const canceled = await license("source_id = 'sub_short'", []);
    expect(canceled).toMatchObject({ status: 'canceled', renewal_date: null });
    expect((canceled.expires_at as Date).getTime()).toBeLessThan(Date.now());
    // A late invoice.paid of the old period does not bring it back.
    await postPrimary(server.url, primaryEvent('invoice.paid', { id: 'in_late', object: 'invoice', subscription: 'sub_short', lines: { data: [] } }));
    expect(await subscription('sub_short')).toMatchObject({ status: 'canceled' });
    expect(await activate(canceled.license_key as string, 'laptop')).toMatchObject({ success: false, error_code: 'LICENSE_INACTIVE' });
  });
});

describe('backup: orders and subscriptions', () => {
  it('an order creates a license; its subscription events update that same license', async () => {
    await postBackup(server.url, backupOrder('3001', bob));
    expect(await license("provider = 'backup' AND source_id = '3001'", [])).toMatchObject({
      customer_user_id: bob,
      product: 'pro',
      status: 'active',
      renewal_date: null,
    });
    const renewsAt = new Date(Date.now() + 30 * DAY * 1000);
    renewsAt.setMilliseconds(0);
    await postBackup(server.url, backupSubscription('subscription_created', '8001', '3001', bob, { renews_at: renewsAt.toISOString() }));
    expect(await subscription('8001')).toMatchObject({
      provider: 'backup',
      customer_user_id: bob,
      product: 'pro',
      status: 'active',
      current_period_end: renewsAt,
    });
    const rows = await server.database.query("SELECT * FROM licenses WHERE provider = 'backup' AND customer_user_id = $1", [bob]);
    expect(rows).toEqual([expect.objectContaining({ renewal_date: renewsAt, status: 'active' })]);

    const later = new Date(renewsAt.getTime() + 30 * DAY * 1000);
    await postBackup(server.url, backupSubscription('subscription_updated', '8001', '3001', bob, { renews_at: later.toISOString() }));
    expect(await license("source_id = '3001'", [])).toMatchObject({ renewal_date: later });

    await postBackup(
      server.url,
      backupSubscription('subscription_cancelled', '8001', '3001', bob, { status: 'cancelled', cancelled: true, ends_at: later.toISOString() }),
    );
    expect(await subscription('8001')).toMatchObject({ status: 'canceled' });
    expect(await license("source_id = '3001'", [])).toMatchObject({ status: 'canceled', renewal_date: null, expires_at: later });
  });

  it('a subscription that arrives before its order makes one license all the same', async () => {
    await postBackup(server.url, backupSubscription('subscription_created', '8002', '3002', bob));
    await postBackup(server.url, backupOrder('3002', bob));
    expect(await server.database.query("SELECT 1 FROM licenses WHERE source_id = '3002'")).toHaveLength(1);
  });

  it('an order that is not paid grants nothing; a custom user id that is no user is ignored', async () => {
    await postBackup(server.url, backupOrder('3003', bob, { status: 'pending' }));
    expect(await license("source_id = '3003'", [])).toBeUndefined();
    expect((await postBackup(server.url, backupOrder('3004', 'not-a-user-id'))).status).toBe(200);
    expect(await license("source_id = '3004'", [])).toMatchObject({ customer_user_id: null, status: 'active' });
  });
});

describe('activateLicense', () => {
  it.each([
    ['primary', "source_id = 'sub_alice'"],
    ['backup', "source_id = '3002'"],
  ])('works the same for a %s license: once per instance, up to the limit', async (_provider, where) => {
    const key = (await license(where, [])).license_key as string;
    expect(await activate(key, 'laptop')).toMatchObject({ success: true, license: { activation_count: 1 } });
    expect(await activate(key, 'laptop')).toMatchObject({ success: true, message: expect.stringMatching(/already/), license: { activation_count: 1 } });
    expect(await activate(key.toLowerCase(), 'desktop')).toMatchObject({ success: true, license: { activation_count: 2 } });
    expect(await activate(key, 'server')).toMatchObject({ success: true, license: { activation_count: 3 } });
    expect(await activate(key, 'fourth')).toMatchObject({ success: false, error_code: 'ACTIVATION_LIMIT_REACHED', license: { activation_count: 3 } });
    expect((await license(where, [])).activation_count).toBe(3);
  });

  it('concurrent activations of different instances never pass the limit', async () => {
    await postBackup(server.url, backupOrder('3100', bob));
    const key = (await license("source_id = '3100'", [])).license_key as string;
    const results = await Promise.all(Array.from({ length: 8 }, (_, index) => activate(key, `machine-${index}`)));
    expect(results.filter((result) => result.success)).toHaveLength(3);
    expect((await license("source_id = '3100'", [])).activation_count).toBe(3);
  });

  it('refuses an unknown key and bad input without counting anything', async () => {
    expect(await activate('AAAAA-BBBBB-CCCCC-DDDDD', 'x')).toMatchObject({ success: false, error_code: 'LICENSE_NOT_FOUND' });
    expect(await activate('', 'x')).toMatchObject({ success: false, error_code: 'VALIDATION_ERROR', errors: [{ field: 'key', code: 'REQUIRED_FIELD' }] });
    expect(await activate('k', 'x'.repeat(201))).toMatchObject({ errors: [{ field: 'instance', code: 'INVALID_LENGTH' }] });
  });
});

describe('queries: own for a customer, all for an admin', () => {
  it('subscriptions', async () => {
    const own = await graphql(server.graphqlUrl, SubscriptionsDocument, {}, bearer(signToken({ userId: bob })));
    expect(own.body.data!.subscriptions.map((row) => row.external_id).sort()).toEqual(['8001', '8002']);
    const all = await graphql(server.graphqlUrl, SubscriptionsDocument, {}, bearer(signToken({ roles: ['admin'] })));
    expect(all.body.data!.subscriptions.map((row) => row.external_id)).toEqual(expect.arrayContaining(['8001', 'sub_alice', 'sub_short']));
  });

  it('licenses', async () => {
    const own = await graphql(server.graphqlUrl, LicensesDocument, { customer_id: bob }, bearer(signToken({ userId: alice })));
    expect(own.body.data!.licenses.length).toBeGreaterThan(0);
    expect(own.body.data!.licenses.every((row) => row.customer_id === alice)).toBe(true);
    const ofBob = await graphql(server.graphqlUrl, LicensesDocument, { customer_id: bob }, bearer(signToken({ roles: ['admin'] })));
    expect(ofBob.body.data!.licenses.every((row) => row.customer_id === bob)).toBe(true);
    const anonymous = await graphql(server.graphqlUrl, LicensesDocument, {});
    expect(anonymous.body.errors?.[0].extensions?.code).toBe('FORBIDDEN');
  });
});
