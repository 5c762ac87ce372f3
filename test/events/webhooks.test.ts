import { createHmac } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import Fastify, { type FastifyInstance } from 'fastify';
import { ConfigError, loadConfig } from '../../src/config';
import { installErrorHandling } from '../../src/http/errors';
import { registerEventReceiver, type ScheduledEvent, type TriggerEvent } from '../../src/platform/event-receiver';
import { ADMIN_SECRET, startTestServer, testEnvironment, type TestServer } from '../support/server';
import { startWebhookReceiver, type WebhookReceiver } from '../support/webhook-receiver';
import { eventually, metadataRequest } from './support';

const GITHUB_SECRET = 'github-webhook-secret-0123';
const ACME_SECRET = 'acme-signing-secret-4567';
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
  });
});
afterAll(async () => {
  await server.close();
  await receiver.close();
});

const sign = (secret: string, body: string) => createHmac('sha256', secret).update(body).digest('hex');
async function post(provider: string, body: string, headers: Record<string, string>) {
  const response = await fetch(`${server.url}/actions/external/${provider}`, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body });
  return { status: response.status, body: (await response.json()) as Record<string, unknown> };
}
const stored = () => server.database.query<{ provider: string; delivery_id: string | null; payload: unknown; headers: Record<string, string> }>('SELECT provider, delivery_id, payload, headers FROM external_webhook_deliveries ORDER BY received_at');

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
    expect(await post('acme', acme, { 'x-acme-signature': `v1=${sign(ACME_SECRET, acme)}`, 'x-acme-delivery': 'a-1' })).toEqual({ status: 200, body: { status: 'ok' } });
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
    expect(load({ EXTERNAL_WEBHOOK_STRIPE_SECRET: 'short' })).toThrow("EXTERNAL_WEBHOOK_STRIPE_SECRET must be set to the provider's signing secret (8 characters or more)");
    expect(load({ EXTERNAL_WEBHOOK_STRIPE_SECRET: 'long-enough-secret', EXTERNAL_WEBHOOK_STRIPE_DELIVERY_HEADER: 'bad header' })).toThrow('EXTERNAL_WEBHOOK_STRIPE_DELIVERY_HEADER must be an HTTP header name');
    expect(load({ EVENTS_CRON_TIME_ZONE: 'Mars/Olympus' })).toThrow('EVENTS_CRON_TIME_ZONE must be an IANA time zone such as UTC or Europe/Paris');
    expect(load({ EVENTS_CONCURRENCY: '0' })).toThrow('EVENTS_CONCURRENCY must be at least 1');
    expect(load({ EVENTS_RETRY_SECOND_MS: '5000' })).toThrow('EVENTS_RETRY_SECOND_MS must be at most 1000');
    expect(load({ EVENTS_CRON_TIME_ZONE: 'Europe/Paris' })().events.cronTimeZone).toBe('Europe/Paris');
    expect(load({ EXTERNAL_WEBHOOK_GIT_LAB_SECRET: 'long-enough-secret' })().events.externalProviders['git-lab']).toEqual({
      secret: 'long-enough-secret',
      signatureHeader: 'x-hub-signature-256',
      signaturePrefix: 'sha256=',
      deliveryHeader: undefined,
    });
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
    const delivery = await eventually(async () => handled.find((item) => item.kind === 'event' && item.trigger.name === 'receipts') as TriggerEvent | undefined);
    expect(delivery.event.data.new).toEqual({ id: expect.any(Number), total: 42 });
    expect(delivery.delivery_info.current_retry).toBe(1);
    const [log] = await server.database.query<{ status: number; response: { data: { body: unknown } } }>(
      "SELECT status, response FROM event_invocation_logs WHERE trigger_name = 'receipts' ORDER BY created_at DESC LIMIT 1",
    );
    expect(log).toEqual({ status: 200, response: expect.objectContaining({ data: expect.objectContaining({ body: { status: 'success', message: `handled event ${delivery.id}` } }) }) });

    const scheduled = await metadataRequest(server.url, {
      type: 'create_scheduled_event',
      args: { webhook: url, schedule_at: new Date().toISOString(), payload: { remind: true }, headers: [{ name: 'X-Gql-Admin-Secret', value: '{{ADMIN_SECRET}}' }] },
    });
    const reminder = await eventually(async () => handled.find((item) => item.kind === 'scheduled') as ScheduledEvent | undefined);
    expect(reminder).toEqual({ kind: 'scheduled', id: scheduled.body.event_id, name: null, scheduled_time: expect.any(String), payload: { remind: true }, comment: null });
  });

  it('answers 401 {status: "unauthorized"} to a wrong or missing secret, and 400 to a body that is no event', async () => {
    for (const headers of [{}, { 'x-gql-admin-secret': 'wrong' }] as Record<string, string>[]) {
      const response = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: '{}' });
      expect({ status: response.status, body: await response.json() }).toEqual({ status: 401, body: { status: 'unauthorized', message: 'invalid or missing x-gql-admin-secret' } });
    }
    const response = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json', 'x-gql-admin-secret': ADMIN_SECRET }, body: '{"hello": "world"}' });
    expect({ status: response.status, body: await response.json() }).toEqual({
      status: 400,
      body: { status: 'error', message: 'the body is neither an event trigger payload nor a scheduled event', retry: false },
    });
  });
});
