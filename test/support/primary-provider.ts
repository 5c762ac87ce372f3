import { createHash, randomBytes } from 'node:crypto';
import http, { type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

/**
 * A local server speaking the primary provider's documented API (Stripe): form-encoded requests
 * under /v1 with a bearer secret key, JSON answers, errors as {error: {type, code, message}},
 * and idempotency keys honoured as Stripe honours them (the same key and parameters replay the
 * first answer with `Idempotent-Replayed: true`; other parameters are an idempotency_error).
 *
 * Payment methods behave like Stripe's test ones: pm_card_visa succeeds,
 * pm_card_chargeDeclined is declined, pm_card_authenticationRequired needs 3-D Secure;
 * pm_processing stays processing, pm_slow answers after `slowMs`, pm_server_error is a 500.
 */
export interface PrimaryProviderServer {
  url: string;
  apiKey: string;
  /** Payment intents created (a replayed request creates none). */
  charges(): number;
  /** Every request received, in order. */
  requests: RecordedRequest[];
  /** Payment intents by id, as the provider holds them. */
  intents: Map<string, Record<string, unknown>>;
  sessions: Map<string, Record<string, unknown>>;
  slowMs: number;
  close(): Promise<void>;
}

export interface RecordedRequest {
  method: string;
  path: string;
  idempotencyKey: string | undefined;
  params: Record<string, string>;
}

const id = (prefix: string) => `${prefix}_${randomBytes(12).toString('hex')}`;

export async function startPrimaryProvider(apiKey = `sk_test_${randomBytes(12).toString('hex')}`): Promise<PrimaryProviderServer> {
  const replays = new Map<string, { fingerprint: string; status: number; body: string }>();
  const intents = new Map<string, Record<string, unknown>>();
  const sessions = new Map<string, Record<string, unknown>>();
  const requests: RecordedRequest[] = [];
  let charges = 0;
  const state = { slowMs: 2000 };

  const server = http.createServer((request, response) => {
    void handle(request, response).catch(() => send(response, 500, apiError('api_error', undefined, 'fake provider failure')));
  });
  const sockets = new Set<import('node:net').Socket>();
  server.on('connection', (socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
  });

  async function handle(request: IncomingMessage, response: ServerResponse): Promise<void> {
    const chunks: Buffer[] = [];
    for await (const chunk of request) chunks.push(chunk as Buffer);
    const raw = Buffer.concat(chunks).toString('utf8');
    const url = new URL(request.url ?? '/', 'http://localhost');
    const params = Object.fromEntries(new URLSearchParams(request.method === 'GET' ? url.search : raw));
    const idempotencyKey = typeof request.headers['idempotency-key'] === 'string' ? request.headers['idempotency-key'] : undefined;
    requests.push({ method: request.method ?? 'GET', path: url.pathname, idempotencyKey, params });

    if (request.headers.authorization !== `Bearer ${apiKey}`) {
      return send(response, 401, apiError('invalid_request_error', undefined, 'Invalid API Key provided'));
    }
    if (request.method === 'POST' && idempotencyKey) {
      const fingerprint = createHash('sha256').update(`${url.pathname}\n${raw}`).digest('hex');
      const seen = replays.get(idempotencyKey);
      if (seen) {
        if (seen.fingerprint !== fingerprint) {
          return send(
            response,
            400,
            apiError('idempotency_error', undefined, 'Keys for idempotent requests can only be used with the same parameters they were first used with.'),
          );
        }
        response.writeHead(seen.status, { 'content-type': 'application/json', 'idempotent-replayed': 'true' });
        response.end(seen.body);
        return;
      }
      const [status, body] = await route(request.method, url.pathname, params);
      const text = JSON.stringify(body);
      // Stripe keeps the result of a request that reached its API, errors included (not 500s).
      if (status < 500) replays.set(idempotencyKey, { fingerprint, status, body: text });
      response.writeHead(status, { 'content-type': 'application/json' });
      response.end(text);
      return;
    }
    const [status, body] = await route(request.method ?? 'GET', url.pathname, params);
    send(response, status, body);
  }

  async function route(method: string, path: string, params: Record<string, string>): Promise<[number, unknown]> {
    if (method === 'POST' && path === '/v1/payment_intents') return createIntent(params);
    const intent = /^\/v1\/payment_intents\/([^/]+)$/.exec(path);
    if (method === 'GET' && intent) {
      const found = intents.get(intent[1]);
      return found ? [200, found] : [404, apiError('invalid_request_error', 'resource_missing', `No such payment_intent: '${intent[1]}'`)];
    }
    if (method === 'POST' && path === '/v1/checkout/sessions') return createSession(params);
    return [404, apiError('invalid_request_error', undefined, `Unrecognized request URL (${method}: ${path}).`)];
  }

  async function createIntent(params: Record<string, string>): Promise<[number, unknown]> {
    const amount = Number(params.amount);
    if (!Number.isInteger(amount) || amount < 1)
      return [400, apiError('invalid_request_error', 'parameter_invalid_integer', 'Invalid integer: amount', 'amount')];
    if (!/^[a-z]{3}$/.test(params.currency ?? '')) return [400, apiError('invalid_request_error', 'invalid_currency', 'Invalid currency', 'currency')];
    const method = params.payment_method;
    if (method === 'pm_slow') await new Promise((resolve) => setTimeout(resolve, state.slowMs));
    if (method === 'pm_server_error') return [500, apiError('api_error', undefined, 'An unknown error occurred')];
    charges += 1;
    const intentId = id('pi');
    const metadata = Object.fromEntries(
      Object.entries(params)
        .filter(([key]) => key.startsWith('metadata['))
        .map(([key, value]) => [key.slice(9, -1), value]),
    );
    const base: Record<string, unknown> = {
      id: intentId,
      object: 'payment_intent',
      amount,
      currency: params.currency,
      description: params.description ?? null,
      metadata,
      payment_method: method,
      client_secret: `${intentId}_secret_${randomBytes(8).toString('hex')}`,
      created: Math.floor(Date.now() / 1000),
      livemode: false,
      latest_charge: null,
      next_action: null,
      last_payment_error: null,
    };
    const expandCharge = Object.entries(params).some(([key, value]) => key.startsWith('expand[') && value === 'latest_charge');
    const charge = (status: string) => {
      const chargeId = id('ch');
      return expandCharge ? { id: chargeId, object: 'charge', status, receipt_url: `https://pay.stripe.com/receipts/payment/${chargeId}` } : chargeId;
    };
    switch (method) {
      case 'pm_card_visa':
        Object.assign(base, { status: 'succeeded', latest_charge: charge('succeeded') });
        break;
      case 'pm_card_authenticationRequired':
        Object.assign(base, { status: 'requires_action', next_action: { type: 'use_stripe_sdk', use_stripe_sdk: {} } });
        break;
      case 'pm_processing':
      case 'pm_slow':
        Object.assign(base, { status: 'processing' });
        break;
      case 'pm_card_chargeDeclined': {
        const error = {
          type: 'card_error',
          code: 'card_declined',
          decline_code: 'generic_decline',
          message: 'Your card was declined.',
          payment_intent: { ...base, status: 'requires_payment_method', latest_charge: charge('failed') },
        };
        (error.payment_intent as Record<string, unknown>).last_payment_error = { code: 'card_declined', message: error.message };
        intents.set(intentId, error.payment_intent);
        return [402, { error }];
      }
      default:
        charges -= 1;
        return [400, apiError('invalid_request_error', 'resource_missing', `No such PaymentMethod: '${method}'`, 'payment_method')];
    }
    intents.set(intentId, base);
    return [200, base];
  }

  function createSession(params: Record<string, string>): [number, unknown] {
    if (!params['line_items[0][price]']) return [400, apiError('invalid_request_error', 'parameter_missing', 'Missing required param: line_items[0][price].')];
    const sessionId = id('cs_test');
    const session = {
      id: sessionId,
      object: 'checkout.session',
      mode: params.mode,
      url: `https://checkout.stripe.com/c/pay/${sessionId}`,
      client_reference_id: params.client_reference_id ?? null,
      customer_email: params.customer_email ?? null,
      success_url: params.success_url,
      cancel_url: params.cancel_url,
      price: params['line_items[0][price]'],
      metadata: {},
      status: 'open',
    };
    sessions.set(sessionId, session);
    return [200, session];
  }

  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    apiKey,
    charges: () => charges,
    requests,
    intents,
    sessions,
    get slowMs() {
      return state.slowMs;
    },
    set slowMs(value: number) {
      state.slowMs = value;
    },
    close: () =>
      new Promise<void>((resolve) => {
        for (const socket of sockets) socket.destroy();
        server.close(() => resolve());
      }),
  };
}

function apiError(type: string, code: string | undefined, message: string, param?: string) {
  return { error: { type, ...(code ? { code } : {}), message, ...(param ? { param } : {}) } };
}

function send(response: ServerResponse, status: number, body: unknown): void {
  if (response.headersSent) return;
  response.writeHead(status, { 'content-type': 'application/json' });
  response.end(JSON.stringify(body));
}
