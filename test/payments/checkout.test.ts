import { ProcessPaymentDocument } from '../generated/graphql';
import { startBackupProvider, type BackupProviderServer } from '../support/backup-provider';
import { graphql } from '../support/graphql';
import { startPrimaryProvider, type PrimaryProviderServer } from '../support/primary-provider';
import { ADMIN_SECRET, startTestServer, type TestServer } from '../support/server';
import { bearer, signToken } from '../support/tokens';
import { ADMIN_KEY, BACKUP_SETTINGS, createUser, paymentSettings } from './support';

let primary: PrimaryProviderServer;
let backup: BackupProviderServer;
let server: TestServer;
let alice: string;
let aliceToken: Record<string, string>;

beforeAll(async () => {
  primary = await startPrimaryProvider();
  backup = await startBackupProvider(BACKUP_SETTINGS.BACKUP_PROVIDER_API_KEY, BACKUP_SETTINGS.BACKUP_PROVIDER_STORE_ID);
  server = await startTestServer(
    paymentSettings(primary, {
      ...BACKUP_SETTINGS,
      BACKUP_PROVIDER_API_URL: backup.url,
      PRIMARY_PROVIDER_PRICE_ID_TEAM: 'price_team_yearly',
      BILLING_PROVIDER: 'primary',
      BILLING_CHECKOUT_SUCCESS_URL: 'https://app.example.com/thanks',
      // Past a slow provider's 2 s below; a loopback call in this process can take 300 ms on a loaded machine.
      PAYMENTS_PROVIDER_TIMEOUT_MS: '1000',
    }),
  );
  alice = await createUser(server.database, 'alice@example.com');
  aliceToken = bearer(signToken({ userId: alice }));
});
afterAll(async () => {
  await server?.close();
  await primary?.close();
  await backup?.close();
});

async function checkout(body: unknown, headers: Record<string, string> = aliceToken) {
  const response = await fetch(`${server.url}/billing/checkout`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: JSON.stringify(body),
  });
  return { status: response.status, cacheControl: response.headers.get('cache-control'), body: (await response.json()) as Record<string, unknown> };
}

async function switchTo(provider: 'primary' | 'backup') {
  const response = await fetch(`${server.url}/admin/payment-provider`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-admin-key': ADMIN_KEY },
    body: JSON.stringify({ provider }),
  });
  expect(response.status).toBe(200);
}

describe('POST /billing/checkout', () => {
  it('primary active: a Stripe Checkout session for the product, not cacheable', async () => {
    const answer = await checkout({ product: 'pro', email: 'alice@example.com' });
    expect(answer.status).toBe(200);
    expect(answer.cacheControl).toBe('no-store');
    expect(answer.body).toEqual({ url: expect.stringMatching(/^https:\/\/checkout\.stripe\.com\/c\/pay\/cs_test_/), provider: 'primary' });
    const sent = primary.requests.at(-1)!;
    expect(sent.path).toBe('/v1/checkout/sessions');
    expect(sent.params).toMatchObject({
      mode: 'subscription',
      'line_items[0][price]': 'price_pro_monthly',
      'line_items[0][quantity]': '1',
      client_reference_id: alice,
      customer_email: 'alice@example.com',
      success_url: 'https://app.example.com/thanks',
      'metadata[plinth_product]': 'pro',
      'subscription_data[metadata][plinth_customer_id]': alice,
    });
  });

  it('backup active: a Lemon Squeezy checkout through its JSON:API; switching back goes back', async () => {
    await switchTo('backup');
    try {
      const answer = await checkout({ product: 'pro' });
      expect(answer.status).toBe(200);
      expect(answer.cacheControl).toBe('no-store');
      expect(answer.body).toEqual({ url: expect.stringMatching(/^https:\/\/plinth-test\.lemonsqueezy\.com\/checkout\/custom\//), provider: 'backup' });
      const sent = backup.checkouts.at(-1)!;
      expect(sent.body.data).toMatchObject({
        type: 'checkouts',
        attributes: { checkout_data: { custom: { user_id: alice } }, product_options: { redirect_url: 'https://app.example.com/thanks' } },
        relationships: { store: { data: { type: 'stores', id: '4242' } }, variant: { data: { type: 'variants', id: '777' } } },
      });
      // team has a primary price only: the backup provider does not sell it.
      const team = await checkout({ product: 'team' });
      expect(team).toMatchObject({ status: 400, body: { error_code: 'UNKNOWN_PRODUCT', message: expect.stringContaining('pro') } });

      backup.delayMs = 2000;
      const slow = await checkout({ product: 'pro' });
      expect(slow).toMatchObject({ status: 504, body: { error_code: 'PROVIDER_TIMEOUT' } });
    } finally {
      backup.delayMs = 0;
      await switchTo('primary');
    }
    expect((await checkout({ product: 'team' })).body).toMatchObject({ provider: 'primary' });
  });

  it.each([
    ['an unknown product', { product: 'enterprise' }, 400, 'UNKNOWN_PRODUCT'],
    ['no product', {}, 400, 'BAD_REQUEST'],
    ['a product that is not a lower-case name', { product: 'PRO' }, 400, 'BAD_REQUEST'],
    ['a malformed e-mail', { product: 'pro', email: 'not-mail' }, 400, 'BAD_REQUEST'],
  ])('answers %s with 400 and asks no provider', async (_case, body, status, code) => {
    const requests = primary.requests.length;
    const answer = await checkout(body);
    expect(answer.status).toBe(status);
    expect(answer.body).toMatchObject({ success: false, error_code: expect.stringMatching(new RegExp(`${code}|VALIDATION_ERROR`)) });
    expect(primary.requests.length).toBe(requests);
  });

  it.each([
    ['no token', {}],
    ['a bad token', { authorization: 'Bearer not.a.jwt' }],
    ['the admin secret without a user id', { 'x-gql-admin-secret': ADMIN_SECRET }],
  ])('refuses %s with 401', async (_case, headers) => {
    const answer = await checkout({ product: 'pro' }, headers);
    expect(answer.status).toBe(401);
    expect(answer.body).toMatchObject({ success: false });
  });
});

describe('GET /billing/health', () => {
  it('shows the active provider and the BILLING_PROVIDER alias', async () => {
    const response = await fetch(`${server.url}/billing/health`);
    expect(await response.json()).toEqual({ status: 'ok', active: 'primary', billing_provider: 'primary' });
  });
});

describe('the checkouts quota (RATE_LIMIT_CHECKOUTS_*, at its default of 60 an hour for each user, shared with processPayment)', () => {
  it("refuses a user's 61st checkout or payment of the hour with RATE_LIMITED, asking no provider and recording nothing; others go on", async () => {
    const bob = await createUser(server.database, 'bob-quota@example.com');
    const bobToken = bearer(signToken({ userId: bob }));
    const pay = (headers: Record<string, string>) =>
      graphql(
        server.graphqlUrl,
        ProcessPaymentDocument,
        { input: { amount: 100, currency: 'usd', payment_method_id: 'pm_card_visa', customer_id: bob } },
        headers,
      );
    for (let count = 0; count < 40; count++) expect((await checkout({ product: 'pro' }, bobToken)).status).toBe(200);
    for (let count = 0; count < 20; count++) expect((await pay(bobToken)).body.data!.processPayment.success).toBe(true);
    const providerRequests = primary.requests.length;
    const paymentRows = async () => Number((await server.database.query<{ count: string }>('SELECT count(*) FROM payments'))[0].count);
    const payments = await paymentRows();

    const refused = await fetch(`${server.url}/billing/checkout`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...bobToken },
      body: JSON.stringify({ product: 'pro' }),
    });
    expect(refused.status).toBe(429);
    const retryAfter = refused.headers.get('retry-after');
    expect(Number(retryAfter)).toBeGreaterThan(3500);
    expect(await refused.json()).toEqual({
      success: false,
      error: 'rate-limited',
      message: `Too many checkouts and payments: at most 60 per hour for each user; try again in ${retryAfter} s`,
      error_code: 'RATE_LIMITED',
    });
    const refusedPayment = await pay(bobToken);
    expect(refusedPayment.body.data).toBeNull();
    expect(refusedPayment.body.errors![0]).toMatchObject({
      message: expect.stringMatching(/^Too many checkouts and payments: at most 60 per hour for each user; try again in \d+ s$/),
      extensions: { code: 'RATE_LIMITED', retryAfter: expect.any(Number) },
    });
    expect(primary.requests.length).toBe(providerRequests);
    expect(await paymentRows()).toBe(payments);

    expect((await checkout({ product: 'pro' })).status).toBe(200);
    // The admin role is never counted: an admin session charging Bob goes through.
    expect((await pay({ 'x-gql-admin-secret': ADMIN_SECRET })).body.data!.processPayment.success).toBe(true);
  });
});
