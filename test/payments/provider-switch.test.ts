import { spawnServer, type SpawnedServer } from '../support/spawn';
import { startTestServer, testEnvironment, type TestServer } from '../support/server';
import { bearer, signToken } from '../support/tokens';
import { ADMIN_KEY, BACKUP_WEBHOOK_SECRET, createUser, paymentSettings } from './support';

const primary = { url: 'http://127.0.0.1:9', apiKey: 'sk_test_switch' };
const backupSettings = {
  BACKUP_PROVIDER_API_KEY: 'backup-api-key',
  BACKUP_PROVIDER_STORE_ID: '12345',
  BACKUP_PROVIDER_WEBHOOK_SECRET: BACKUP_WEBHOOK_SECRET,
};

let server: TestServer;

beforeAll(async () => {
  server = await startTestServer(paymentSettings(primary, backupSettings));
});
afterAll(async () => {
  await server?.close();
});

async function call(base: string, method: 'GET' | 'POST', body?: unknown, key: string | null = ADMIN_KEY) {
  const response = await fetch(`${base}/admin/payment-provider`, {
    method,
    headers: { ...(key === null ? {} : { 'x-admin-key': key }), ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
    body: body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body),
  });
  return { status: response.status, body: (await response.json()) as Record<string, unknown> };
}

const stored = async () => (await server.database.query<{ provider: string }>('SELECT provider FROM payment_provider_state'))[0].provider;

describe('GET and POST /admin/payment-provider', () => {
  it('answers the state: PAYMENT_PROVIDER (primary by default) stored, both providers configured', async () => {
    expect(await call(server.url, 'GET')).toEqual({
      status: 200,
      body: { active: 'primary', persisted: 'primary', primary_configured: true, backup_configured: true },
    });
  });

  it.each([
    ['missing', null],
    ['wrong', 'not-the-admin-key-at-all'],
    ['a prefix of the key', ADMIN_KEY.slice(0, -1)],
    ['empty', ''],
  ])('refuses an X-Admin-Key that is %s with 401 JSON, and switches nothing', async (_case, key) => {
    const get = await call(server.url, 'GET', undefined, key);
    expect(get.status).toBe(401);
    expect(get.body).toMatchObject({ success: false, error_code: 'UNAUTHENTICATED' });
    const post = await call(server.url, 'POST', { provider: 'backup' }, key);
    expect(post.status).toBe(401);
    expect(await stored()).toBe('primary');
  });

  it.each([
    ['an unknown provider', { provider: 'paypal' }],
    ['no provider', {}],
    ['a provider of the wrong type', { provider: 1 }],
    ['a body that is not JSON', '{provider'],
  ])('answers %s with 400 and changes nothing', async (_case, body) => {
    const response = await call(server.url, 'POST', body);
    expect(response.status).toBe(400);
    expect(response.body).toMatchObject({ success: false });
    expect(await stored()).toBe('primary');
  });

  it('switches to backup and back, answering previous and active', async () => {
    const toBackup = await call(server.url, 'POST', { provider: 'backup' });
    expect(toBackup.status).toBe(200);
    expect(toBackup.body).toEqual({ previous: 'primary', active: 'backup', message: expect.stringMatching(/backup/) });
    expect(await stored()).toBe('backup');
    expect((await call(server.url, 'GET')).body).toMatchObject({ active: 'backup', persisted: 'backup' });

    const again = await call(server.url, 'POST', { provider: 'backup' });
    expect(again.body).toEqual({ previous: 'backup', active: 'backup', message: expect.stringMatching(/already/) });

    const back = await call(server.url, 'POST', { provider: 'primary' });
    expect(back.body).toEqual({ previous: 'backup', active: 'primary', message: expect.any(String) });
    expect(await stored()).toBe('primary');
  });
});

describe('a backup provider missing a setting', () => {
  it.each(Object.keys(backupSettings))('without %s: 503 "not fully configured", and nothing changes', async (missing) => {
    const settings: Record<string, string> = { ...backupSettings };
    delete settings[missing];
    const partial = await startTestServer(paymentSettings(primary, settings), { database: server.database });
    try {
      expect((await call(partial.url, 'GET')).body).toMatchObject({ backup_configured: false, primary_configured: true });
      const response = await call(partial.url, 'POST', { provider: 'backup' });
      expect(response.status).toBe(503);
      expect(response.body).toMatchObject({ success: false, error_code: 'BACKUP_NOT_CONFIGURED' });
      expect(response.body.message).toMatch(/backup provider is not fully configured/);
      expect(response.body.message).toContain(missing);
      expect(await stored()).toBe('primary');
      if (missing === 'BACKUP_PROVIDER_WEBHOOK_SECRET') {
        const webhook = await fetch(`${partial.url}/webhooks/backup`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', 'x-signature': '0'.repeat(64) },
          body: JSON.stringify({ meta: { event_name: 'order_created' }, data: {} }),
        });
        expect(webhook.status).toBe(400);
        expect(await webhook.json()).toMatchObject({ error_code: 'WEBHOOK_NOT_CONFIGURED' });
      }
    } finally {
      await partial.close();
    }
  });

  it('a stored backup whose settings are gone is persisted but not active', async () => {
    await call(server.url, 'POST', { provider: 'backup' });
    const partial = await startTestServer(paymentSettings(primary), { database: server.database });
    try {
      expect((await call(partial.url, 'GET')).body).toEqual({ active: 'primary', persisted: 'backup', primary_configured: true, backup_configured: false });
    } finally {
      await partial.close();
      await call(server.url, 'POST', { provider: 'primary' });
    }
  });
});

describe('the selection lives in the database', () => {
  let other: SpawnedServer | undefined;
  afterAll(() => {
    other?.child.kill('SIGKILL');
  });

  it('a switch on one instance is seen at once by a second server process, and PAYMENT_PROVIDER does not override it', async () => {
    // The second process starts with PAYMENT_PROVIDER=backup: the stored selection (primary) wins.
    other = await spawnServer(testEnvironment(server.database.url, { ...paymentSettings(primary, backupSettings), PAYMENT_PROVIDER: 'backup' }));
    expect((await call(other.url, 'GET')).body).toMatchObject({ active: 'primary', persisted: 'primary' });

    expect((await call(server.url, 'POST', { provider: 'backup' })).status).toBe(200);
    expect((await call(other.url, 'GET')).body).toMatchObject({ active: 'backup', persisted: 'backup' });

    expect((await call(other.url, 'POST', { provider: 'primary' })).body).toMatchObject({ previous: 'backup', active: 'primary' });
    expect((await call(server.url, 'GET')).body).toMatchObject({ active: 'primary' });
  });

  it('the selection survives the process being killed and started again', async () => {
    await call(other!.url, 'POST', { provider: 'backup' });
    other!.child.kill('SIGKILL');
    await other!.exited;
    other = await spawnServer(testEnvironment(server.database.url, paymentSettings(primary, backupSettings)));
    expect((await call(other.url, 'GET')).body).toMatchObject({ active: 'backup', persisted: 'backup' });
  });
});

describe('a primary provider without its API key', () => {
  it('is not configured: payments and checkouts are refused without any call out', async () => {
    const settings = paymentSettings(primary);
    delete (settings as Record<string, string | undefined>).PRIMARY_PROVIDER_API_KEY;
    const unkeyed = await startTestServer(settings, { database: server.database });
    try {
      expect((await call(unkeyed.url, 'GET')).body).toMatchObject({ active: 'primary', primary_configured: false });
      const user = await createUser(server.database, 'unkeyed@example.com');
      const headers = { 'content-type': 'application/json', ...bearer(signToken({ userId: user })) };
      const payment = await fetch(unkeyed.graphqlUrl, {
        method: 'POST',
        headers,
        body: JSON.stringify({
          query: 'mutation ($input: PaymentInput!) { processPayment(input: $input) { success status message } }',
          variables: { input: { amount: 100, currency: 'USD', payment_method_id: 'pm_card_visa', customer_id: user } },
        }),
      });
      expect(((await payment.json()) as { data: { processPayment: unknown } }).data.processPayment).toMatchObject({
        success: false,
        status: 'FAILED',
        message: expect.stringMatching(/not configured/),
      });
      const checkout = await fetch(`${unkeyed.url}/billing/checkout`, { method: 'POST', headers, body: JSON.stringify({ product: 'pro' }) });
      expect(checkout.status).toBe(503);
      expect(await checkout.json()).toMatchObject({ error_code: 'PROVIDER_NOT_CONFIGURED' });
    } finally {
      await unkeyed.close();
    }
  });
});
