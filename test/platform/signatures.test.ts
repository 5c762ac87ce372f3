import { createHmac } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import Fastify, { type FastifyInstance } from 'fastify';
import { installErrorHandling } from '../../src/http/errors';
import { keepRawBodies, verifyHmacSha256 } from '../../src/platform/signatures';

// GitHub's published example for X-Hub-Signature-256 ("Validating webhook deliveries").
const GITHUB_SECRET = "It's a Secret to Everybody";
const GITHUB_PAYLOAD = 'Hello, World!';
const GITHUB_SIGNATURE = 'sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17';

const sign = (payload: string | Buffer, secret: string) => `sha256=${createHmac('sha256', secret).update(payload).digest('hex')}`;

describe('verifyHmacSha256', () => {
  const payload = Buffer.from(GITHUB_PAYLOAD);

  it("accepts GitHub's test vector", () => {
    expect(verifyHmacSha256(payload, GITHUB_SECRET, GITHUB_SIGNATURE, 'sha256=')).toBe(true);
    expect(verifyHmacSha256(payload, Buffer.from(GITHUB_SECRET), GITHUB_SIGNATURE.slice('sha256='.length))).toBe(true);
    expect(verifyHmacSha256(payload, GITHUB_SECRET, GITHUB_SIGNATURE.toUpperCase().replace('SHA256=', 'sha256='), 'sha256=')).toBe(true);
  });

  it('refuses a tampered body and a wrong secret', () => {
    expect(verifyHmacSha256(Buffer.from('Hello, World?'), GITHUB_SECRET, GITHUB_SIGNATURE, 'sha256=')).toBe(false);
    expect(verifyHmacSha256(Buffer.from(`${GITHUB_PAYLOAD}\n`), GITHUB_SECRET, GITHUB_SIGNATURE, 'sha256=')).toBe(false);
    expect(verifyHmacSha256(payload, "It's a Secret to Nobody", GITHUB_SIGNATURE, 'sha256=')).toBe(false);
  });

  it.each([
    ['no signature', undefined],
    ['an empty one', ''],
    ['a repeated header', [GITHUB_SIGNATURE, GITHUB_SIGNATURE]],
    ['no prefix', GITHUB_SIGNATURE.slice('sha256='.length)],
    ['another prefix', GITHUB_SIGNATURE.replace('sha256=', 'sha1=')],
    ['a short one', GITHUB_SIGNATURE.slice(0, -2)],
    ['a long one', `${GITHUB_SIGNATURE}00`],
    ['non-hex digits', `sha256=${'z'.repeat(64)}`],
    ['hex with a space', `${GITHUB_SIGNATURE.slice(0, -1)} `],
    ['a multi-byte character', `sha256=${'é'.repeat(64)}`],
  ])('is false, without throwing, for %s', (_case, signature) => {
    expect(verifyHmacSha256(payload, GITHUB_SECRET, signature, 'sha256=')).toBe(false);
  });

  it('is false for a missing body (a route whose body was not JSON)', () => {
    expect(verifyHmacSha256(undefined, GITHUB_SECRET, GITHUB_SIGNATURE, 'sha256=')).toBe(false);
  });
});

describe('a webhook route over HTTP', () => {
  const SECRET = 'webhook-secret-for-tests';
  let app: FastifyInstance;
  let baseUrl: string;
  const seen: { rawBody: Buffer | undefined; body: unknown }[] = [];

  beforeAll(async () => {
    app = Fastify({ logger: false });
    installErrorHandling(app);
    keepRawBodies(app);
    // What a webhook route looks like: the signature is checked before anything reads the body.
    app.post('/webhook', {
      config: { rawBody: true },
      preValidation: async (request, reply) => {
        if (!verifyHmacSha256(request.rawBody, SECRET, request.headers['x-hub-signature-256'], 'sha256=')) {
          return reply.code(401).send({ error: 'invalid-signature', message: 'the signature does not match the body' });
        }
      },
      handler: async (request) => ({ received: request.body }),
    });
    app.post('/plain', async (request) => {
      seen.push({ rawBody: request.rawBody, body: request.body });
      return { received: request.body };
    });
    await app.listen({ host: '127.0.0.1', port: 0 });
    baseUrl = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
  });
  afterAll(async () => {
    await app.close();
  });

  async function post(path: string, body: string, headers: Record<string, string> = {}) {
    const response = await fetch(`${baseUrl}${path}`, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body });
    const text = await response.text();
    return { status: response.status, text, body: JSON.parse(text) as Record<string, unknown> };
  }

  // Whitespace and key order that parsing and re-serialising would change.
  const odd = '{ "zeta" : 1,\n\t"alpha":[ 1 , 2.50 ],  "text":"caf\\u00e9" }\n';

  it('verifies the signature over the bytes received, not over the parsed JSON', async () => {
    expect(sign(JSON.stringify(JSON.parse(odd)), SECRET)).not.toBe(sign(odd, SECRET));

    const response = await post('/webhook', odd, { 'x-hub-signature-256': sign(odd, SECRET) });

    expect(response.status).toBe(200);
    expect(response.body).toEqual({ received: { zeta: 1, alpha: [1, 2.5], text: 'café' } });
  });

  it('refuses a tampered body, a re-serialised body, and a missing signature with 401', async () => {
    const signature = sign(odd, SECRET);
    const tampered = await post('/webhook', odd.replace('1,', '2,'), { 'x-hub-signature-256': signature });
    const reserialised = await post('/webhook', JSON.stringify(JSON.parse(odd)), { 'x-hub-signature-256': signature });
    const unsigned = await post('/webhook', odd);

    for (const response of [tampered, reserialised, unsigned]) {
      expect(response.status).toBe(401);
      expect(response.body).toEqual({ error: 'invalid-signature', message: 'the signature does not match the body' });
    }
  });

  it('keeps the bytes of a body that arrives in pieces, a character split between two of them', async () => {
    const body = Buffer.from(`{"text":"${'é'.repeat(40_000)}"}`);
    // The first piece ends in the middle of an é (two bytes in UTF-8).
    const cut = 9 + 2 * 1_000 + 1;
    const answer = await new Promise<{ status: number; text: string }>((resolve, reject) => {
      const request = http.request(`${baseUrl}/webhook`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'transfer-encoding': 'chunked', 'x-hub-signature-256': sign(body, SECRET) },
      });
      request.on('response', (response) => {
        const chunks: Buffer[] = [];
        response.on('data', (chunk: Buffer) => chunks.push(chunk));
        response.on('end', () => resolve({ status: response.statusCode ?? 0, text: Buffer.concat(chunks).toString() }));
      });
      request.on('error', reject);
      request.write(body.subarray(0, cut));
      setTimeout(() => request.end(body.subarray(cut)), 50);
    });

    expect(answer.status).toBe(200);
    // Compared as a whole: a failure prints a boolean, not 80 kB.
    expect((JSON.parse(answer.text) as { received: { text: string } }).received.text === 'é'.repeat(40_000)).toBe(true);
  });

  it('refuses a body over the limit with 413, and answers the next request after a client that left mid-body', async () => {
    const large = Buffer.alloc(1024 * 1024 + 1, 'a');
    const refused = await fetch(`${baseUrl}/webhook`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-hub-signature-256': sign(large, SECRET) },
      body: large,
    });
    expect(refused.status).toBe(413);

    await new Promise<void>((resolve) => {
      const request = http.request(`${baseUrl}/webhook`, { method: 'POST', headers: { 'content-type': 'application/json', 'transfer-encoding': 'chunked' } });
      request.on('error', () => resolve());
      request.write('{"partial":');
      setTimeout(() => {
        request.destroy();
        resolve();
      }, 50);
    });
    const next = await post('/webhook', odd, { 'x-hub-signature-256': sign(odd, SECRET) });
    expect(next.status).toBe(200);
  });

  it('refuses bad JSON with 400, signed or not, never 500', async () => {
    const response = await post('/webhook', '{"a":', { 'x-hub-signature-256': sign('{"a":', SECRET) });
    expect(response.status).toBe(400);
    expect(response.text).not.toMatch(/at .*\.js:\d+/);
  });

  it('parses JSON for other routes as Fastify does, without keeping the bytes', async () => {
    const plain = await post('/plain', odd);
    expect(plain.status).toBe(200);
    expect(plain.body).toEqual({ received: { zeta: 1, alpha: [1, 2.5], text: 'café' } });
    expect(seen.at(-1)).toEqual({ rawBody: undefined, body: { zeta: 1, alpha: [1, 2.5], text: 'café' } });

    // Fastify's defaults: a byte-order mark is skipped, __proto__ is refused, an empty body is a 400.
    expect((await post('/plain', '\ufeff{"a":1}')).body).toEqual({ received: { a: 1 } });
    expect((await post('/plain', '{"__proto__":{"admin":true}}')).status).toBe(400);
    expect((await post('/plain', '')).status).toBe(400);
    expect((await post('/plain', '{"a":1}', { 'content-type': 'application/json; charset=utf-8' })).body).toEqual({ received: { a: 1 } });
  });
});
