import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { newsletterEnvironment } from '../support/newsletter';
import { until } from '../support/until';
import { PRODUCTION, startTestServer, type TestServer } from '../support/server';

/**
 * The HTTP delivery of the platform mailer against a local server speaking Resend's documented
 * API: POST /emails with a bearer key, {from, to, subject, html, text, headers, tags}, answered
 * with {id}; refusals as {statusCode, name, message}.
 */
interface ApiCall {
  method: string;
  path: string;
  authorization: string | undefined;
  idempotencyKey: string | undefined;
  body: {
    from: string;
    to: string[];
    subject: string;
    html: string;
    text: string;
    headers?: Record<string, string>;
    tags?: { name: string; value: string }[];
  };
}

const API_KEY = 're_test_0123456789abcdef';
const calls: ApiCall[] = [];
/** Statuses to answer the next calls for an address with, before accepting them again. */
const refusals = new Map<string, number[]>();
let api: http.Server;
let server: TestServer;

beforeAll(async () => {
  api = http.createServer((request, response) => {
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', () => {
      const call = {
        method: request.method!,
        path: request.url!,
        authorization: request.headers.authorization,
        idempotencyKey: request.headers['idempotency-key'] as string | undefined,
        body: JSON.parse(Buffer.concat(chunks).toString('utf8') || '{}'),
      };
      calls.push(call);
      response.setHeader('content-type', 'application/json');
      if (call.authorization !== `Bearer ${API_KEY}`) {
        response.statusCode = 401;
        return response.end(JSON.stringify({ statusCode: 401, name: 'missing_api_key', message: 'Missing API key in the authorization header.' }));
      }
      const refusal = refusals.get(call.body.to?.[0])?.shift();
      if (refusal) {
        response.statusCode = refusal;
        return response.end(JSON.stringify({ statusCode: refusal, name: 'application_error', message: 'Something went wrong.' }));
      }
      response.end(JSON.stringify({ id: `email-${calls.length}` }));
    });
  });
  await new Promise<void>((resolve) => api.listen(0, '127.0.0.1', resolve));
  const { SMTP_HOST: _host, SMTP_PORT: _port, SMTP_USER: _user, SMTP_PASSWORD: _password, SMTP_SECURE: _secure, ...environment } = newsletterEnvironment(1);
  server = await startTestServer({
    ...environment,
    ...PRODUCTION,
    EMAIL_DELIVERY_API_KEY: API_KEY,
    EMAIL_DELIVERY_API_URL: `http://127.0.0.1:${(api.address() as AddressInfo).port}`,
    EMAIL_DELIVERY_FROM: 'news@plinth.test',
    EMAIL_DELIVERY_LIST_ID_NEWSLETTER: 'plinth-news',
    PLINTH_PUBLIC_URL: 'https://api.plinth.test',
  });
});
afterAll(async () => {
  await server.close();
  await new Promise((resolve) => api.close(resolve));
});

const subscribe = (email: string) =>
  fetch(`${server.url}/newsletter/subscribe`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ email, name: 'Ada' }),
  });

describe('mail through the delivery API (EMAIL_DELIVERY_API_KEY), without SMTP, in production', () => {
  it('sends each mail as one POST /emails with the bearer key, the sender, the unsubscribe headers, the list and an idempotency key', async () => {
    expect((await subscribe('ada@example.com')).status).toBe(202);
    await until(() => calls.length === 1, 15_000, 'the call');
    const [call] = calls;
    expect(call).toMatchObject({ method: 'POST', path: '/emails', authorization: `Bearer ${API_KEY}` });
    expect(call.idempotencyKey).toMatch(/^newsletter-confirm\/[0-9a-f-]{36}\/1\/\d+$/);
    expect(call.body).toEqual({
      from: 'Plinth News <news@plinth.test>',
      to: ['ada@example.com'],
      subject: 'Confirm your subscription to the Plinth News newsletter',
      html: expect.stringContaining('https://api.plinth.test/newsletter/confirm?token='),
      text: expect.stringContaining('Hi Ada'),
      headers: {
        'List-Unsubscribe': expect.stringMatching(/^<https:\/\/api\.plinth\.test\/newsletter\/unsubscribe\?email=ada%40example.com&token=[0-9a-f]{64}>$/),
        'List-Unsubscribe-Post': 'List-Unsubscribe=One-Click',
        'List-Id': '<plinth-news.api.plinth.test>',
      },
      tags: [{ name: 'list', value: 'plinth-news' }],
    });
  });

  it('sends nothing else: no contact or audience call carries subscriber data to the provider', async () => {
    const link = /href="(https:\/\/api\.plinth\.test\/newsletter\/confirm[^"]+)"/.exec(calls[0].body.html)![1].replace(/&amp;/g, '&');
    const confirmed = await fetch(link.replace('https://api.plinth.test', server.url));
    expect(confirmed.status).toBe(200);
    await until(() => calls.some((call) => call.body.subject?.startsWith('Welcome')), 15_000, 'W1');
    expect(new Set(calls.map((call) => `${call.method} ${call.path}`))).toEqual(new Set(['POST /emails']));
    const welcome = calls.find((call) => call.body.subject.startsWith('Welcome'))!;
    expect(welcome.idempotencyKey).toMatch(/^newsletter-series\/[0-9a-f-]{36}$/);
  });

  it('retries a refused call through the queue, and delivers once the API accepts', async () => {
    refusals.set('retry@example.com', [500, 429]);
    // Ada's series is still arriving: only the calls for this address count.
    const attempts = () => calls.filter((call) => call.body.to?.[0] === 'retry@example.com');
    expect((await subscribe('retry@example.com')).status).toBe(202);
    await until(() => attempts().length === 3, 30_000, 'two refusals and a success');
    await new Promise((resolve) => setTimeout(resolve, 1000));
    expect(attempts()).toHaveLength(3);
    // The same mail each time: the provider can tell a retry from a new mail.
    expect(new Set(attempts().map((call) => call.idempotencyKey)).size).toBe(1);
    const jobs = await server.database.query<{ state: string; output: { message?: string } | null }>(
      "SELECT state, output FROM pgboss.job WHERE name = 'mail' AND data->>'to' = 'retry@example.com'",
    );
    expect(jobs).toEqual([{ state: 'completed', output: null }]);
  });
});
