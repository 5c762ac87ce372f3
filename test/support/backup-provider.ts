import { randomBytes, randomUUID } from 'node:crypto';
import http, { type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';

const JSON_API = 'application/vnd.api+json';

/**
 * A local server speaking the backup provider's documented API (Lemon Squeezy, JSON:API):
 * `POST /v1/checkouts` with `Accept` and `Content-Type: application/vnd.api+json` and a bearer
 * API key, answering 201 with the checkout resource (its `attributes.url`), or JSON:API errors.
 */
export interface BackupProviderServer {
  url: string;
  apiKey: string;
  storeId: string;
  /** Checkout documents received, in order. */
  checkouts: { headers: IncomingMessage['headers']; body: { data: Record<string, any> } }[];
  /** Answers every request this late (ms); 0 by default. */
  delayMs: number;
  close(): Promise<void>;
}

export async function startBackupProvider(apiKey = `ls_${randomBytes(12).toString('hex')}`, storeId = '4242'): Promise<BackupProviderServer> {
  const state = { delayMs: 0 };
  const checkouts: BackupProviderServer['checkouts'] = [];
  const sockets = new Set<Socket>();
  const server = http.createServer((request, response) => void handle(request, response));
  server.on('connection', (socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
  });

  async function handle(request: IncomingMessage, response: ServerResponse): Promise<void> {
    const chunks: Buffer[] = [];
    for await (const chunk of request) chunks.push(chunk as Buffer);
    if (state.delayMs > 0) await new Promise((resolve) => setTimeout(resolve, state.delayMs));
    if (request.headers.authorization !== `Bearer ${apiKey}`) return send(response, 401, errors('401', 'Unauthorized', 'Unauthenticated.'));
    if (request.headers.accept !== JSON_API || request.headers['content-type'] !== JSON_API) {
      return send(response, 406, errors('406', 'Not Acceptable', 'The request must use the JSON:API media type.'));
    }
    if (request.method !== 'POST' || request.url !== '/v1/checkouts') return send(response, 404, errors('404', 'Not Found', 'Not found.'));
    let body: { data: Record<string, any> };
    try {
      body = JSON.parse(Buffer.concat(chunks).toString('utf8'));
    } catch {
      return send(response, 400, errors('400', 'Bad Request', 'The body is not JSON.'));
    }
    checkouts.push({ headers: request.headers, body });
    const data = body?.data ?? {};
    const store = data.relationships?.store?.data;
    const variant = data.relationships?.variant?.data;
    if (data.type !== 'checkouts' || store?.type !== 'stores' || variant?.type !== 'variants') {
      return send(response, 422, errors('422', 'Unprocessable Entity', 'The data must be a checkouts resource with store and variant.'));
    }
    if (store.id !== storeId) return send(response, 422, errors('422', 'Unprocessable Entity', 'The store does not exist.'));
    const id = randomUUID();
    const now = new Date().toISOString();
    send(response, 201, {
      jsonapi: { version: '1.0' },
      links: { self: `https://api.lemonsqueezy.com/v1/checkouts/${id}` },
      data: {
        type: 'checkouts',
        id,
        attributes: {
          store_id: Number(store.id),
          variant_id: Number(variant.id),
          custom_price: null,
          product_options: data.attributes?.product_options ?? {},
          checkout_options: {},
          checkout_data: data.attributes?.checkout_data ?? {},
          expires_at: null,
          created_at: now,
          updated_at: now,
          test_mode: true,
          url: `https://plinth-test.lemonsqueezy.com/checkout/custom/${id}?signature=${randomBytes(32).toString('hex')}`,
        },
        relationships: {},
        links: { self: `https://api.lemonsqueezy.com/v1/checkouts/${id}` },
      },
    });
  }

  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    apiKey,
    storeId,
    checkouts,
    get delayMs() {
      return state.delayMs;
    },
    set delayMs(value: number) {
      state.delayMs = value;
    },
    close: () =>
      new Promise<void>((resolve) => {
        for (const socket of sockets) socket.destroy();
        server.close(() => resolve());
      }),
  };
}

function errors(status: string, title: string, detail: string) {
  return { jsonapi: { version: '1.0' }, errors: [{ status, title, detail }] };
}

function send(response: ServerResponse, status: number, body: unknown): void {
  response.writeHead(status, { 'content-type': JSON_API });
  response.end(JSON.stringify(body));
}
