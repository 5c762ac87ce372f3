import { createHmac, randomBytes } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import Fastify, { type FastifyInstance } from 'fastify';
import { ConfigError, loadConfig } from '../../src/config';
import { installErrorHandling } from '../../src/http/errors';
import { registerEventReceiver, type ScheduledEvent, type TriggerEvent } from '../../src/platform/event-receiver';
import { ADMIN_SECRET, startTestServer, testEnvironment, type TestServer } from '../support/server';
import { startWebhookReceiver, type WebhookReceiver } from '../support/webhook-receiver';
import { metadataRequest } from '../support/metadata';
import { eventually, sleep } from './support';

const GITHUB_SECRET = 'github-webhook-secret-0123';
const ACME_SECRET = 'acme-signing-secret-4567';
const STRIPE_SECRET = 'whsec_stripe-endpoint-secret-89ab';
const SLACK_SECRET = 'slack-signing-secret-cdef';
const SHOPIFY_SECRET = 'shopify-client-secret-0246';
const SVIX_KEY = randomBytes(24);
let server: TestServer;
let receiver: WebhookReceiver;

beforeAll(async () => {
  receiver = await startWebhookReceiver();
  server = await startTestServer({
    EVENTS_POLL_INTERVAL_MS: '200',
    EVENTS_RETRY_SECOND_MS: '20',
    EXTERNAL_WEBHOOK_GITHUB_SECRET: GITHUB_SECRET,
    EXTERNAL_WEBHOOK_ACME_SECRET: ACME_SECRET,
    EXTERNAL_WEBHOOK_ACME_SIGNATURE_HEADER: 'X-Acme-Signature',
    EXTERNAL_WEBHOOK_ACME_SIGNATURE_PREFIX: 'v1=',
    EXTERNAL_WEBHOOK_ACME_DELIVERY_HEADER: 'X-Acme-Delivery',
    // The timestamped schemes at their default tolerance (300 s), the window at its default (168 h).
    EXTERNAL_WEBHOOK_STRIPE_SECRET: STRIPE_SECRET,
    EXTERNAL_WEBHOOK_STRIPE_SCHEME: 'stripe',
    EXTERNAL_WEBHOOK_SLACK_SECRET: SLACK_SECRET,
    EXTERNAL_WEBHOOK_SLACK_SCHEME: 'slack',
    EXTERNAL_WEBHOOK_SHOPIFY_SECRET: SHOPIFY_SECRET,
    EXTERNAL_WEBHOOK_SHOPIFY_SCHEME: 'shopify',
    EXTERNAL_WEBHOOK_SVIX_SECRET: `whsec_${SVIX_KEY.toString('base64')}`,
    EXTERNAL_WEBHOOK_SVIX_SCHEME: 'standard-webhooks',
    EVENTS_CLEANUP_INTERVAL_SECONDS: '1',
  });
});
afterAll(async () => {
  await server.close();
  await receiver.close();
});

const sign = (secret: string, body: string) => createHmac('sha256', secret).update(body).digest('hex');
async function post(provider: string, body: string, headers: Record<string, string>) {
  const response = await fetch(`${server.url}/actions/external/${provider}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body,
  });
  return { status: response.status, body: (await response.json()) as Record<string, unknown> };
}
const stored = () =>
  server.database.query<{ provider: string; delivery_id: string | null; payload: unknown; headers: Record<string, string> }>(
    'SELECT provider, delivery_id, payload, headers FROM external_webhook_deliveries ORDER BY received_at',
  );

describe('external provider webhooks', () => {
  // Spaces and key order as the provider sent them: the signature is over these exact bytes.
  const body = '{"action":"opened",  "number": 7, "repository": {"full_name": "acme/app"}}';

  it('refuse a missing or forged signature with 401 and store nothing', async () => {
    expect(await post('github', body, {})).toEqual({ status: 401, body: { status: 'unauthorized', message: 'the x-hub-signature-256 header is missing' } });
    expect(await post('github', body, { 'x-hub-signature-256': `sha256=${sign('wrong-secret', body)}` })).toEqual({
      status: 401,
      body: { status: 'unauthorized', message: 'the x-hub-signature-256 signature does not match the body' },
    });
    // Signed over other bytes (the same JSON re-serialised).
    expect((await post('github', body, { 'x-hub-signature-256': `sha256=${sign(GITHUB_SECRET, JSON.stringify(JSON.parse(body)))}` })).status).toBe(401);
    expect((await post('github', body, { 'x-hub-signature-256': sign(GITHUB_SECRET, body) })).status).toBe(401);
    expect((await post('acme', body, { 'x-hub-signature-256': `sha256=${sign(ACME_SECRET, body)}` })).status).toBe(401);
    expect(await post('nobody', body, {})).toEqual({ status: 404, body: { status: 'not_found', message: 'no external provider "nobody" is configured' } });
    expect(await stored()).toEqual([]);
  });

  it('store a verified delivery once per delivery id, in a table event triggers can watch', async () => {
    const created = await metadataRequest(server.url, {
      type: 'pg_create_event_trigger',
      args: { name: 'github_pushes', table: 'external_webhook_deliveries', webhook: `${receiver.url}/github`, insert: { columns: '*' } },
    });
    expect(created.status).toBe(200);
    const headers = { 'x-hub-signature-256': `sha256=${sign(GITHUB_SECRET, body)}`, 'x-github-delivery': 'delivery-1', 'x-github-event': 'pull_request' };
    expect(await post('github', body, headers)).toEqual({ status: 200, body: { status: 'ok' } });
    expect(await post('github', body, headers)).toEqual({ status: 200, body: { status: 'ok', duplicate: true } });
    const acme = '{"type":"invoice.paid"}';
    expect(await post('acme', acme, { 'x-acme-signature': `v1=${sign(ACME_SECRET, acme)}`, 'x-acme-delivery': 'a-1' })).toEqual({
      status: 200,
      body: { status: 'ok' },
    });
    const rows = await stored();
    expect(rows.map(({ provider, delivery_id, payload }) => ({ provider, delivery_id, payload }))).toEqual([
      { provider: 'github', delivery_id: 'delivery-1', payload: JSON.parse(body) },
      { provider: 'acme', delivery_id: 'a-1', payload: { type: 'invoice.paid' } },
    ]);
    expect(rows[0].headers['x-github-event']).toBe('pull_request');
    expect(rows[0].headers).not.toHaveProperty('x-hub-signature-256');
    const [event] = await receiver.waitFor('/github', 1);
    expect(event.body.event.data.new).toMatchObject({ provider: 'github', delivery_id: 'delivery-1', payload: JSON.parse(body) });
  });

  it('need a secret of 8 characters or more per provider, and header names that are header names; the EVENTS_* settings are checked', () => {
    const load = (extra: Record<string, string>) => () => loadConfig(testEnvironment(server.database.url, extra));
    expect(load({ EXTERNAL_WEBHOOK_STRIPE_SIGNATURE_HEADER: 'stripe-signature' })).toThrow(ConfigError);
    expect(load({ EXTERNAL_WEBHOOK_STRIPE_SECRET: 'short' })).toThrow(
      "EXTERNAL_WEBHOOK_STRIPE_SECRET must be set to the provider's signing secret (8 characters or more)",
    );
    expect(load({ EXTERNAL_WEBHOOK_STRIPE_SECRET: 'long-enough-secret', EXTERNAL_WEBHOOK_STRIPE_DELIVERY_HEADER: 'bad header' })).toThrow(
      'EXTERNAL_WEBHOOK_STRIPE_DELIVERY_HEADER must be an HTTP header name',
    );
    expect(load({ EVENTS_CRON_TIME_ZONE: 'Mars/Olympus' })).toThrow('EVENTS_CRON_TIME_ZONE must be an IANA time zone such as UTC or Europe/Paris');
    expect(load({ EVENTS_CONCURRENCY: '0' })).toThrow('EVENTS_CONCURRENCY must be at least 1');
    expect(load({ EVENTS_RETRY_SECOND_MS: '5000' })).toThrow('EVENTS_RETRY_SECOND_MS must be at most 1000');
    expect(load({ EVENTS_CRON_TIME_ZONE: 'Europe/Paris' })().events.cronTimeZone).toBe('Europe/Paris');
    expect(load({ EXTERNAL_WEBHOOK_GIT_LAB_SECRET: 'long-enough-secret' })().events.externalProviders['git-lab']).toEqual({
      scheme: 'hmac-sha256',
      secret: 'long-enough-secret',
      signatureHeader: 'x-hub-signature-256',
      signaturePrefix: 'sha256=',
      deliveryHeader: undefined,
      toleranceSeconds: 300,
    });
  });
});

describe('replayed and repeated external webhooks', () => {
  const hex = (secret: string | Buffer, text: string) => createHmac('sha256', secret).update(text).digest('hex');
  const base64 = (secret: string | Buffer, text: string) => createHmac('sha256', secret).update(text).digest('base64');
  const now = () => Math.floor(Date.now() / 1000);
  const signed = {
    github: (body: string, delivery?: string) => ({
      'x-hub-signature-256': `sha256=${hex(GITHUB_SECRET, body)}`,
      ...(delivery ? { 'x-github-delivery': delivery } : {}),
    }),
    stripe: (body: string, t = now()) => ({ 'stripe-signature': `t=${t},v1=${hex(STRIPE_SECRET, `${t}.${body}`)}` }),
    slack: (body: string, t = now()) => ({ 'x-slack-request-timestamp': String(t), 'x-slack-signature': `v0=${hex(SLACK_SECRET, `v0:${t}:${body}`)}` }),
    shopify: (body: string, id?: string) => ({ 'x-shopify-hmac-sha256': base64(SHOPIFY_SECRET, body), ...(id ? { 'x-shopify-webhook-id': id } : {}) }),
    svix: (body: string, id: string, t = now(), names = 'webhook') => ({
      [`${names}-id`]: id,
      [`${names}-timestamp`]: String(t),
      [`${names}-signature`]: `v1,${base64(SVIX_KEY, `${id}.${t}.${body}`)}`,
    }),
  };
  const rowsOf = async (provider: string) =>
    server.database.query<{ id: string; delivery_id: string | null; payload: unknown }>(
      'SELECT id, delivery_id, payload FROM external_webhook_deliveries WHERE provider = $1 ORDER BY received_at',
      [provider],
    );
  /** The github_pushes trigger's deliveries of one stored row. */
  const firedFor = (id: string) => receiver.at('/github').filter((request) => request.body.event.data.new.id === id);

  it('store the same signed body sent four times once, fire its trigger once, and answer each copy 200', async () => {
    const body = '{"action":"closed","number":8}';
    const answers = [];
    for (let copy = 0; copy < 4; copy += 1) answers.push(await post('github', body, signed.github(body)));
    expect(answers).toEqual([{ status: 200, body: { status: 'ok' } }, ...Array(3).fill({ status: 200, body: { status: 'ok', duplicate: true } })]);
    // A copy with a delivery id of its own (the header is not signed) is the same body.
    expect(await post('github', body, signed.github(body, 'forged-new-delivery-id'))).toEqual({ status: 200, body: { status: 'ok', duplicate: true } });
    const rows = (await rowsOf('github')).filter((row) => JSON.stringify(row.payload) === JSON.stringify(JSON.parse(body)));
    expect(rows).toHaveLength(1);
    await eventually(async () => (firedFor(rows[0].id).length > 0 ? true : undefined));
    await sleep(1000);
    expect(firedFor(rows[0].id)).toHaveLength(1);
    expect(
      await server.database.query("SELECT 1 FROM event_log WHERE trigger_name = 'github_pushes' AND payload->'data'->'new'->>'id' = $1", [rows[0].id]),
    ).toHaveLength(1);
  });

  it('let one of many identical deliveries sent at once through', async () => {
    const body = '{"action":"reopened","number":9}';
    const answers = await Promise.all(Array.from({ length: 8 }, () => post('github', body, signed.github(body))));
    expect(answers.filter((answer) => answer.status === 200 && answer.body.duplicate === undefined)).toHaveLength(1);
    expect(answers.filter((answer) => answer.status === 200 && answer.body.duplicate === true)).toHaveLength(7);
    expect((await rowsOf('github')).filter((row) => JSON.stringify(row.payload) === JSON.stringify(JSON.parse(body)))).toHaveLength(1);
    const stripeBody = JSON.stringify({ id: 'evt_concurrent', type: 'invoice.paid' });
    const stripeAnswers = await Promise.all(Array.from({ length: 8 }, (_, index) => post('stripe', stripeBody, signed.stripe(stripeBody, now() - index))));
    expect(stripeAnswers.filter((answer) => answer.body.duplicate === undefined)).toEqual([{ status: 200, body: { status: 'ok' } }]);
  });

  it('store different bodies with the same provider delivery id once', async () => {
    const first = '{"action":"labeled","number":10}';
    const second = '{"action":"labeled","number":10,"label":"bug"}';
    expect(await post('github', first, signed.github(first, 'delivery-shared'))).toEqual({ status: 200, body: { status: 'ok' } });
    expect(await post('github', second, signed.github(second, 'delivery-shared'))).toEqual({ status: 200, body: { status: 'ok', duplicate: true } });
    expect((await rowsOf('github')).filter((row) => row.delivery_id === 'delivery-shared')).toHaveLength(1);

    // Stripe: the event id in the signed body; a retry comes with a new timestamp and signature.
    const event = JSON.stringify({ id: 'evt_1', type: 'charge.succeeded', data: { object: { amount: 500 } } });
    const resent = JSON.stringify({ id: 'evt_1', type: 'charge.succeeded', data: { object: { amount: 500 } }, request: null });
    expect(await post('stripe', event, signed.stripe(event, now() - 100))).toEqual({ status: 200, body: { status: 'ok' } });
    expect(await post('stripe', resent, signed.stripe(resent))).toEqual({ status: 200, body: { status: 'ok', duplicate: true } });
    // Standard Webhooks: the signed webhook-id.
    expect(await post('svix', '{"type":"user.created"}', signed.svix('{"type":"user.created"}', 'msg_1'))).toEqual({ status: 200, body: { status: 'ok' } });
    expect(await post('svix', '{"type":"user.updated"}', signed.svix('{"type":"user.updated"}', 'msg_1', now(), 'svix'))).toEqual({
      status: 200,
      body: { status: 'ok', duplicate: true },
    });
    // ...while the same body under another signed id is another message.
    expect(await post('svix', '{"type":"user.created"}', signed.svix('{"type":"user.created"}', 'msg_2'))).toEqual({ status: 200, body: { status: 'ok' } });
    // Shopify: X-Shopify-Webhook-Id.
    expect(await post('shopify', '{"id":1}', signed.shopify('{"id":1}', 'shop-hook-1'))).toEqual({ status: 200, body: { status: 'ok' } });
    expect(await post('shopify', '{"id":1,"x":2}', signed.shopify('{"id":1,"x":2}', 'shop-hook-1'))).toEqual({
      status: 200,
      body: { status: 'ok', duplicate: true },
    });
    expect((await rowsOf('stripe')).filter((row) => row.delivery_id === 'evt_1')).toHaveLength(1);
    expect((await rowsOf('svix')).map((row) => row.delivery_id)).toEqual(['msg_1', 'msg_2']);
    expect((await rowsOf('shopify')).map((row) => row.delivery_id)).toEqual(['shop-hook-1']);
  });

  it('refuse a signed timestamp outside the tolerance with 401 and store nothing', async () => {
    const event = JSON.stringify({ id: 'evt_stale', type: 'charge.refunded' });
    const stale = await post('stripe', event, signed.stripe(event, now() - 400));
    expect(stale.status).toBe(401);
    expect(stale.body).toEqual({
      status: 'unauthorized',
      message: expect.stringMatching(/^the signed timestamp is 40\d s old; more than 300 s either way is refused/),
    });
    const future = await post('stripe', event, signed.stripe(event, now() + 900));
    expect(future).toMatchObject({
      status: 401,
      body: { message: expect.stringMatching(/^the signed timestamp is (899|900) s in the future; more than 300 s/) },
    });
    const slackBody = '{"type":"event_callback","event_id":"Ev_stale"}';
    expect((await post('slack', slackBody, signed.slack(slackBody, now() - 301 - 5))).status).toBe(401);
    expect((await post('svix', '{"stale":true}', signed.svix('{"stale":true}', 'msg_stale', now() - 3600))).status).toBe(401);
    expect(await server.database.query("SELECT 1 FROM external_webhook_deliveries WHERE delivery_id IN ('evt_stale', 'Ev_stale', 'msg_stale')")).toEqual([]);
    // Refused copies claimed nothing: the genuine delivery, on time, is stored.
    expect(await post('stripe', event, signed.stripe(event, now() - 250))).toEqual({ status: 200, body: { status: 'ok' } });
    expect(await post('slack', slackBody, signed.slack(slackBody))).toEqual({ status: 200, body: { status: 'ok' } });
  });

  it("check each scheme's signature over the exact bytes, and refuse a forged one", async () => {
    const body = '{"type":"event_callback", "event_id":"Ev_1"}';
    expect((await post('slack', body, { ...signed.slack(body), 'x-slack-signature': `v0=${hex('another-secret', `v0:${now()}:${body}`)}` })).status).toBe(401);
    expect((await post('slack', body, { 'x-slack-signature': signed.slack(body)['x-slack-signature'] })).body).toEqual({
      status: 'unauthorized',
      message: 'the x-slack-request-timestamp header is missing or not a Unix time in seconds',
    });
    expect((await post('slack', body, { ...signed.slack(body), 'x-slack-request-timestamp': String(Date.now()) })).status).toBe(401);
    expect((await post('stripe', body, { 'stripe-signature': `t=${now()},v1=${hex('another-secret', `${now()}.${body}`)}` })).body).toEqual({
      status: 'unauthorized',
      message: 'the stripe-signature signature does not match the body',
    });
    expect((await post('stripe', body, {})).body).toEqual({ status: 'unauthorized', message: 'the stripe-signature header is missing' });
    expect((await post('shopify', body, { 'x-shopify-hmac-sha256': base64('another-secret', body) })).status).toBe(401);
    expect((await post('shopify', body, { 'x-shopify-hmac-sha256': hex(SHOPIFY_SECRET, body) })).status).toBe(401);
    const svix = signed.svix(body, 'msg_forged');
    expect((await post('svix', body, { ...svix, 'webhook-id': 'msg_other' })).status).toBe(401);
    expect((await post('svix', body, { ...svix, 'webhook-signature': `v1,${base64(randomBytes(24), `msg_forged.${now()}.${body}`)}` })).status).toBe(401);
    expect(await server.database.query("SELECT 1 FROM external_webhook_deliveries WHERE delivery_id IN ('Ev_1', 'msg_forged', 'msg_other')")).toEqual([]);
    // Rotated secrets: Standard Webhooks sends one signature per secret; one good one is enough.
    expect(await post('svix', body, { ...svix, 'webhook-signature': `v1,${base64(randomBytes(24), 'other')} ${svix['webhook-signature']}` })).toEqual({
      status: 200,
      body: { status: 'ok' },
    });
    expect(await post('slack', body, signed.slack(body))).toEqual({ status: 200, body: { status: 'ok' } });
    // The signature headers are not stored with the delivery.
    const [row] = await server.database.query<{ headers: Record<string, string> }>(
      "SELECT headers FROM external_webhook_deliveries WHERE delivery_id = 'Ev_1'",
    );
    expect(Object.keys(row.headers)).not.toContain('x-slack-signature');
    expect(row.headers['x-slack-request-timestamp']).toMatch(/^\d+$/);
  });

  it('accept a copy again once its dedup record is older than the window, and delete such records', async () => {
    const body = '{"action":"edited","number":11}';
    expect(await post('github', body, signed.github(body))).toEqual({ status: 200, body: { status: 'ok' } });
    expect(await post('github', body, signed.github(body))).toEqual({ status: 200, body: { status: 'ok', duplicate: true } });
    // 167 hours on: still within the default window (168 h).
    await server.database.query("UPDATE external_webhook_receipts SET received_at = now() - interval '167 hours' WHERE provider = 'github'");
    expect(await post('github', body, signed.github(body))).toEqual({ status: 200, body: { status: 'ok', duplicate: true } });
    await server.database.query("UPDATE external_webhook_receipts SET received_at = now() - interval '169 hours' WHERE provider = 'github'");
    expect(await post('github', body, signed.github(body))).toEqual({ status: 200, body: { status: 'ok' } });
    expect((await rowsOf('github')).filter((row) => JSON.stringify(row.payload) === JSON.stringify(JSON.parse(body)))).toHaveLength(2);
    // The events' maintenance (every EVENTS_CLEANUP_INTERVAL_SECONDS) deletes the expired records.
    await server.database.query("UPDATE external_webhook_receipts SET received_at = now() - interval '200 hours' WHERE provider = 'shopify'");
    await eventually(async () =>
      (await server.database.query("SELECT 1 FROM external_webhook_receipts WHERE provider = 'shopify'")).length === 0 ? true : undefined,
    );
    expect((await server.database.query("SELECT 1 FROM external_webhook_receipts WHERE provider = 'github'")).length).toBeGreaterThan(0);
  });

  it('check the settings: the window, the scheme, the tolerance, the secrets', () => {
    const load = (extra: Record<string, string>) => () => loadConfig(testEnvironment(server.database.url, extra));
    expect(load({})().events.externalDedupWindowHours).toBe(168);
    expect(load({ EXTERNAL_WEBHOOK_DEDUP_WINDOW_HOURS: '0' })).toThrow('EXTERNAL_WEBHOOK_DEDUP_WINDOW_HOURS must be at least 1');
    expect(load({ EXTERNAL_WEBHOOK_DEDUP_WINDOW_HOURS: 'a week' })).toThrow('EXTERNAL_WEBHOOK_DEDUP_WINDOW_HOURS');
    const provider = { EXTERNAL_WEBHOOK_PAY_SECRET: 'long-enough-secret' };
    expect(load({ ...provider, EXTERNAL_WEBHOOK_PAY_SCHEME: 'paypal' })).toThrow(
      'EXTERNAL_WEBHOOK_PAY_SCHEME must be one of hmac-sha256, stripe, slack, shopify, standard-webhooks',
    );
    expect(load({ ...provider, EXTERNAL_WEBHOOK_PAY_SCHEME: 'stripe', EXTERNAL_WEBHOOK_PAY_TOLERANCE_SECONDS: '0' })).toThrow(
      'EXTERNAL_WEBHOOK_PAY_TOLERANCE_SECONDS must be a whole number of seconds from 1 to 3600',
    );
    expect(load({ ...provider, EXTERNAL_WEBHOOK_PAY_SCHEME: 'stripe', EXTERNAL_WEBHOOK_PAY_TOLERANCE_SECONDS: '7200' })).toThrow('from 1 to 3600');
    expect(load({ ...provider, EXTERNAL_WEBHOOK_PAY_TOLERANCE_SECONDS: '60' })).toThrow(
      'EXTERNAL_WEBHOOK_PAY_TOLERANCE_SECONDS applies to schemes that sign a timestamp',
    );
    expect(load({ ...provider, EXTERNAL_WEBHOOK_PAY_SCHEME: 'stripe', EXTERNAL_WEBHOOK_PAY_SIGNATURE_HEADER: 'stripe-signature' })).toThrow(
      'EXTERNAL_WEBHOOK_PAY_SIGNATURE_HEADER applies to the hmac-sha256 scheme only',
    );
    expect(load({ ...provider, EXTERNAL_WEBHOOK_PAY_SCHEME: 'standard-webhooks' })).toThrow(
      "EXTERNAL_WEBHOOK_PAY_SECRET must be the provider's whsec_<base64> secret",
    );
    expect(
      load({ ...provider, EXTERNAL_WEBHOOK_PAY_SCHEME: 'Slack', EXTERNAL_WEBHOOK_PAY_TOLERANCE_SECONDS: '120' })().events.externalProviders.pay,
    ).toMatchObject({ scheme: 'slack', toleranceSeconds: 120 });
  });
});

describe('a receiver written with registerEventReceiver', () => {
  let app: FastifyInstance;
  let url: string;
  const handled: (TriggerEvent | ScheduledEvent)[] = [];
  let failNext = false;

  beforeAll(async () => {
    app = Fastify({ logger: false });
    installErrorHandling(app);
    registerEventReceiver(app, {
      path: '/hooks/orders',
      adminSecret: ADMIN_SECRET,
      summary: 'orders',
      tags: ['events'],
      handle: async (delivery) => {
        if (failNext) {
          failNext = false;
          throw new Error('database is down');
        }
        handled.push(delivery);
        return { status: 'success', message: `handled ${delivery.kind} ${delivery.id}` };
      },
    });
    await app.listen({ port: 0, host: '127.0.0.1' });
    url = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}/hooks/orders`;
    await server.database.query('CREATE TABLE receipts (id serial PRIMARY KEY, total integer NOT NULL)');
  });
  afterAll(async () => {
    await app.close();
  });

  it("gets Plinth's events when the engine sends the admin secret; a failure answers 500 and is retried", async () => {
    const created = await metadataRequest(server.url, {
      type: 'pg_create_event_trigger',
      args: {
        name: 'receipts',
        table: 'receipts',
        webhook: url,
        insert: { columns: '*' },
        headers: [{ name: 'X-Gql-Admin-Secret', value: '{{ADMIN_SECRET}}' }],
        retry_conf: { num_retries: 2, interval_sec: 1 },
      },
    });
    expect(created.status).toBe(200);
    failNext = true;
    await server.database.query('INSERT INTO receipts (total) VALUES (42)');
    const delivery = await eventually(
      async () => handled.find((item) => item.kind === 'event' && item.trigger.name === 'receipts') as TriggerEvent | undefined,
    );
    expect(delivery.event.data.new).toEqual({ id: expect.any(Number), total: 42 });
    expect(delivery.delivery_info.current_retry).toBe(1);
    const [log] = await server.database.query<{ status: number; response: { data: { body: unknown } } }>(
      "SELECT status, response FROM event_invocation_logs WHERE trigger_name = 'receipts' ORDER BY created_at DESC LIMIT 1",
    );
    expect(log).toEqual({
      status: 200,
      response: expect.objectContaining({ data: expect.objectContaining({ body: { status: 'success', message: `handled event ${delivery.id}` } }) }),
    });

    const scheduled = await metadataRequest(server.url, {
      type: 'create_scheduled_event',
      args: {
        webhook: url,
        schedule_at: new Date().toISOString(),
        payload: { remind: true },
        headers: [{ name: 'X-Gql-Admin-Secret', value: '{{ADMIN_SECRET}}' }],
      },
    });
    const reminder = await eventually(async () => handled.find((item) => item.kind === 'scheduled') as ScheduledEvent | undefined);
    expect(reminder).toEqual({
      kind: 'scheduled',
      id: scheduled.body.event_id,
      name: null,
      scheduled_time: expect.any(String),
      payload: { remind: true },
      comment: null,
    });
  });

  it('answers 401 {status: "unauthorized"} to a wrong or missing secret, and 400 to a body that is no event', async () => {
    for (const headers of [{}, { 'x-gql-admin-secret': 'wrong' }] as Record<string, string>[]) {
      const response = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: '{}' });
      expect({ status: response.status, body: await response.json() }).toEqual({
        status: 401,
        body: { status: 'unauthorized', message: 'invalid or missing x-gql-admin-secret' },
      });
    }
    const response = await fetch(url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-gql-admin-secret': ADMIN_SECRET },
      body: '{"hello": "world"}',
    });
    expect({ status: response.status, body: await response.json() }).toEqual({
      status: 400,
      body: { status: 'error', message: 'the body is neither an event trigger payload nor a scheduled event', retry: false },
    });
  });
});
