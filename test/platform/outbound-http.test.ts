import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import https from 'node:https';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { loadConfig } from '../../src/config';
import { createOutboundHttp, OutboundHttpError, type OutboundHttp } from '../../src/platform/outbound-http';
import { freePort } from '../support/global-setup';

const MiB = 1024 * 1024;
const servers: net.Server[] = [];
/** Every connection the test servers accepted: some servers never answer, so they are cut at the end. */
const sockets = new Set<net.Socket>();
let client: OutboundHttp;

/** Listens on 127.0.0.1 and returns the server's base URL. */
async function listen(server: net.Server, scheme = 'http'): Promise<string> {
  servers.push(server);
  server.on('connection', (socket: net.Socket) => {
    sockets.add(socket);
    socket.once('close', () => sockets.delete(socket));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return `${scheme}://127.0.0.1:${(server.address() as net.AddressInfo).port}`;
}

/** The error a call fails with (the test fails if it does not). */
async function failure(call: Promise<unknown>): Promise<OutboundHttpError> {
  const error = await call.then(
    () => new Error('the call succeeded'),
    (reason: unknown) => reason,
  );
  if (!(error instanceof OutboundHttpError)) throw error;
  return error;
}

beforeAll(() => {
  client = createOutboundHttp(loadConfig({}).outboundHttp);
});
afterAll(async () => {
  await client.close();
  for (const socket of sockets) socket.destroy();
  await Promise.all(servers.map((server) => new Promise((resolve) => server.close(resolve))));
});

describe('outbound HTTP failures', () => {
  it('TIMEOUT: a server that never answers, bounded by the total timeout', async () => {
    const url = await listen(http.createServer(() => undefined));
    const started = Date.now();

    const error = await failure(client.request(`${url}/slow`, { timeoutMs: 200 }));

    expect(error).toMatchObject({ code: 'TIMEOUT', message: `GET ${url}: timed out after 200 ms` });
    expect(Date.now() - started).toBeLessThan(2000);
  });

  it('TIMEOUT: a TLS handshake that never completes, bounded by the connect timeout', async () => {
    const url = await listen(
      net.createServer(() => undefined),
      'https',
    );
    const started = Date.now();

    const error = await failure(client.request(url, { connectTimeoutMs: 200, timeoutMs: 10_000 }));

    expect(error.code).toBe('TIMEOUT');
    expect(Date.now() - started).toBeLessThan(2000);
  });

  it('CONNECTION_REFUSED: a closed port', async () => {
    const port = await freePort();
    const error = await failure(client.request(`http://127.0.0.1:${port}/`));
    expect(error).toMatchObject({ code: 'CONNECTION_REFUSED', message: `GET http://127.0.0.1:${port}: connection refused` });
  });

  it('DNS: a name that cannot resolve', async () => {
    const error = await failure(client.request('http://plinth-outbound-test.invalid/'));
    expect(error.code).toBe('DNS');
  });

  it('TLS: a server with a self-signed certificate', async () => {
    const folder = fs.mkdtempSync(path.join(os.tmpdir(), 'plinth-tls-'));
    try {
      const [key, cert] = [path.join(folder, 'key.pem'), path.join(folder, 'cert.pem')];
      execFileSync(
        'openssl',
        [
          'req',
          '-x509',
          '-newkey',
          'ec',
          '-pkeyopt',
          'ec_paramgen_curve:prime256v1',
          '-nodes',
          '-keyout',
          key,
          '-out',
          cert,
          '-days',
          '1',
          '-subj',
          '/CN=127.0.0.1',
        ],
        { stdio: 'ignore' },
      );
      const url = await listen(
        https.createServer({ key: fs.readFileSync(key), cert: fs.readFileSync(cert) }, (_request, response) => response.end('secret')),
        'https',
      );

      const error = await failure(client.request(url));

      expect(error.code).toBe('TLS');
    } finally {
      fs.rmSync(folder, { recursive: true, force: true });
    }
  });

  it('CONNECTION_RESET: a server that drops the connection', async () => {
    const url = await listen(http.createServer((request) => request.socket.destroy()));
    expect((await failure(client.request(url))).code).toBe('CONNECTION_RESET');
  });

  it('TOO_LARGE: a streamed body past the cap, whose rest is never read', async () => {
    const total = 64 * MiB;
    let outcome!: Promise<{ written: number; finished: boolean }>;
    const url = await listen(
      http.createServer((_request, response) => {
        outcome = new Promise((resolve) => response.on('close', () => resolve({ written, finished: response.writableFinished })));
        const chunk = Buffer.alloc(64 * 1024, 97);
        let written = 0;
        const write = () => {
          while (written < total) {
            written += chunk.length;
            if (!response.write(chunk)) return void response.once('drain', write);
          }
          response.end();
        };
        write();
      }),
    );

    const error = await failure(client.request(url, { maxResponseBytes: MiB }));

    expect(error).toMatchObject({ code: 'TOO_LARGE', status: 200, message: `GET ${url}: response larger than the limit (${MiB} bytes)` });
    const { written, finished } = await outcome;
    expect(finished).toBe(false);
    expect(written).toBeLessThan(total / 2);
  });

  it('TOO_LARGE: a declared Content-Length past the cap, before reading anything', async () => {
    const url = await listen(
      http.createServer((_request, response) => {
        response.writeHead(200, { 'content-length': String(2 * MiB) });
        response.write(Buffer.alloc(1024));
      }),
    );
    const error = await failure(client.request(url, { maxResponseBytes: MiB, timeoutMs: 5000 }));
    expect(error.code).toBe('TOO_LARGE');
  });

  it('INVALID_JSON: an answer that is not JSON, with its status', async () => {
    const url = await listen(http.createServer((_request, response) => response.writeHead(502, { 'content-type': 'text/html' }).end('<h1>Bad gateway</h1>')));
    const error = await failure(client.requestJson(`${url}/api`, { json: { ok: true } }));
    expect(error).toMatchObject({ code: 'INVALID_JSON', status: 502, message: `POST ${url}: response is not valid JSON` });
    expect(error.cause).toBeUndefined();
  });

  it('never puts the path, query string, headers or body in the error', async () => {
    const port = await freePort();
    const silent = await listen(http.createServer(() => undefined));
    const secret = { headers: { authorization: 'Bearer SECRET-HEADER' }, body: 'SECRET-BODY', timeoutMs: 100 };

    for (const error of [
      await failure(client.request(`http://127.0.0.1:${port}/hooks/SECRET-PATH?token=SECRET-QUERY`, { ...secret, method: 'POST' })),
      await failure(client.request(`${silent}/hooks/SECRET-PATH?token=SECRET-QUERY`, { ...secret, method: 'POST' })),
    ]) {
      expect(`${error.message} ${error.stack} ${JSON.stringify(error)}`).not.toContain('SECRET');
    }
  });
});

describe('outbound HTTP answers', () => {
  it('returns a 302 as it is and does not follow it', async () => {
    let followed = 0;
    const url = await listen(
      http.createServer((request, response) => {
        if (request.url === '/target') followed += 1;
        response.writeHead(request.url === '/start' ? 302 : 200, { location: '/target' }).end();
      }),
    );

    const response = await client.request(`${url}/start`);

    expect(response.status).toBe(302);
    expect(response.headers.location).toBe('/target');
    expect(followed).toBe(0);
  });

  it('sends and reads JSON', async () => {
    const url = await listen(
      http.createServer((request, response) => {
        const chunks: Buffer[] = [];
        request.on('data', (chunk: Buffer) => chunks.push(chunk));
        request.on('end', () =>
          response.writeHead(201, { 'content-type': 'application/json' }).end(
            JSON.stringify({
              method: request.method,
              type: request.headers['content-type'],
              accept: request.headers.accept,
              got: JSON.parse(Buffer.concat(chunks).toString()),
            }),
          ),
        );
      }),
    );

    const response = await client.requestJson<Record<string, unknown>>(`${url}/echo`, { json: { input: { name: 'Ada' } } });

    expect(response.status).toBe(201);
    expect(response.body).toEqual({ method: 'POST', type: 'application/json', accept: 'application/json', got: { input: { name: 'Ada' } } });
  });

  it('reuses one keep-alive connection for sequential calls to an origin', async () => {
    let connections = 0;
    const server = http.createServer((_request, response) => response.end('ok'));
    server.on('connection', () => (connections += 1));
    const url = await listen(server);

    for (const call of ['a', 'b', 'c']) {
      expect((await client.request(`${url}/${call}`)).body.toString()).toBe('ok');
      // undici puts the connection back in the pool just after the body ends; a call made in
      // the same tick would open a second one.
      await new Promise((resolve) => setImmediate(resolve));
    }

    expect(connections).toBe(1);
  });

  it('opens at most OUTBOUND_HTTP_MAX_CONNECTIONS_PER_ORIGIN connections, queueing the other calls', async () => {
    const bounded = createOutboundHttp(loadConfig({ OUTBOUND_HTTP_MAX_CONNECTIONS_PER_ORIGIN: '2' }).outboundHttp);
    let connections = 0;
    const server = http.createServer((_request, response) => setTimeout(() => response.end('ok'), 50));
    server.on('connection', () => (connections += 1));
    const url = await listen(server);
    try {
      const answers = await Promise.all(Array.from({ length: 6 }, (_, index) => bounded.request(`${url}/${index}`)));
      expect(answers.map((answer) => answer.status)).toEqual([200, 200, 200, 200, 200, 200]);
      expect(connections).toBe(2);
    } finally {
      await bounded.close();
    }
  });
});
