import net from 'node:net';
import { Duplex } from 'node:stream';
import { Agent, fetch } from 'undici';
import { answerClientError } from '../../src/http/errors';
import { freePort } from '../support/global-setup';
import { startTestServer, type TestServer } from '../support/server';

let server: TestServer;
let authPort: number;

beforeAll(async () => {
  authPort = await freePort();
  server = await startTestServer({ AUTH_PORT: String(authPort) });
});
afterAll(() => server.close());

/**
 * Writes `requests` one after another on one connection and returns everything the server sent
 * until it closed the connection, and whether it did.
 */
function converse(port: number, requests: string[]): Promise<{ received: string; closed: boolean }> {
  return new Promise((resolve, reject) => {
    const socket = net.connect(port, '127.0.0.1');
    let received = '';
    const pending = [...requests];
    const timer = setTimeout(() => {
      socket.destroy();
      resolve({ received, closed: false });
    }, 3000);
    socket.on('connect', () => socket.write(pending.shift()!));
    socket.on('data', (chunk) => {
      received += chunk.toString('utf8');
      // The next request once the previous answer is complete (each answer here ends with a JSON body).
      if (pending.length > 0 && received.trimEnd().endsWith('}')) socket.write(pending.shift()!);
    });
    // A reset after the answer is the server closing with the rest of the request unread.
    socket.on('error', (error: NodeJS.ErrnoException) => (error.code === 'ECONNRESET' ? undefined : reject(error)));
    socket.on('close', () => {
      clearTimeout(timer);
      resolve({ received, closed: true });
    });
  });
}

const port = () => Number(new URL(server.url).port);
const HEALTH = 'GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n';

/** The last answer of a conversation: its status line, headers and JSON body. */
function lastAnswer(received: string): { status: number; headers: string; body: Record<string, unknown> } {
  const start = received.lastIndexOf('HTTP/1.1 ');
  const answer = received.slice(start);
  const [head, body] = answer.split('\r\n\r\n');
  return { status: Number(head.slice(9, 12)), headers: head.toLowerCase(), body: JSON.parse(body) as Record<string, unknown> };
}

describe('requests the HTTP parser refuses', () => {
  it('answers headers over the limit with 431 in the JSON envelope, says Connection: close and closes, also after earlier requests on the connection', async () => {
    const oversized = `GET /healthz HTTP/1.1\r\nHost: localhost\r\nX-Big: ${'x'.repeat(20_000)}\r\n\r\n`;
    const { received, closed } = await converse(port(), [HEALTH, oversized]);
    expect(received.startsWith('HTTP/1.1 200')).toBe(true);
    const answer = lastAnswer(received);
    expect(answer.status).toBe(431);
    expect(answer.headers).toContain('\r\nconnection: close');
    expect(answer.headers).toContain('content-type: application/json');
    expect(answer.body).toEqual({ success: false, message: expect.stringContaining('16 KiB'), error_code: 'HEADERS_TOO_LARGE' });
    expect(closed).toBe(true);
  });

  it('answers malformed HTTP with 400 in the JSON envelope and closes', async () => {
    const { received, closed } = await converse(port(), ['GET /healthz HTTP/1.1\r\nHost: localhost\r\nBad Header Name: x\r\n\r\n']);
    const answer = lastAnswer(received);
    expect(answer.status).toBe(400);
    expect(answer.headers).toContain('\r\nconnection: close');
    expect(answer.body).toEqual({ success: false, message: 'The request is not valid HTTP/1.1', error_code: 'BAD_REQUEST' });
    expect(closed).toBe(true);
  });

  it('does the same on AUTH_PORT', async () => {
    const { received, closed } = await converse(authPort, [`GET /healthz HTTP/1.1\r\nHost: localhost\r\nX-Big: ${'x'.repeat(20_000)}\r\n\r\n`]);
    const answer = lastAnswer(received);
    expect(answer.status).toBe(431);
    expect(answer.headers).toContain('\r\nconnection: close');
    expect(answer.body).toMatchObject({ error_code: 'HEADERS_TOO_LARGE' });
    expect(closed).toBe(true);
  });

  it('leaves a keep-alive client nothing to reuse: requests after a refused one on a pooled client all succeed', async () => {
    const connections = new Agent({ keepAliveTimeout: 1000 });
    try {
      const outcomes: string[] = [];
      for (let round = 0; round < 60; round++) {
        const refused = await fetch(`${server.url}/healthz?q=${'x'.repeat(100_000)}`, { dispatcher: connections });
        await refused.text();
        outcomes.push(`${refused.status} ${refused.headers.get('connection')}`);
        for (let i = 0; i < 2; i++) {
          const response = await fetch(`${server.url}/healthz`, { method: 'GET', dispatcher: connections });
          await response.text();
          outcomes.push(String(response.status));
        }
      }
      expect(new Set(outcomes)).toEqual(new Set(['431 close', '200']));
    } finally {
      await connections.close();
    }
  });

  /** A socket that keeps what is written to it, with the in-flight answer Node would hang on it. */
  const recordingSocket = (answerHeadersSent?: boolean) => {
    const written: string[] = [];
    const socket = new Duplex({
      read() {},
      write(chunk: Buffer, _encoding, done) {
        written.push(chunk.toString());
        done();
      },
    });
    if (answerHeadersSent !== undefined) Object.assign(socket, { _httpMessage: { headersSent: answerHeadersSent } });
    return { socket, written };
  };

  it('answers a request that did not arrive in time with 408, and writes nothing into an answer already under way', () => {
    const late = recordingSocket();
    answerClientError(Object.assign(new Error('timeout'), { code: 'ERR_HTTP_REQUEST_TIMEOUT' }), late.socket);
    expect(late.written.join('')).toMatch(/^HTTP\/1\.1 408 Request Timeout\r\nConnection: close\r\n[\s\S]*"error_code":"REQUEST_TIMEOUT"/);
    expect(late.socket.destroyed).toBe(true);

    const pipelined = recordingSocket(true);
    answerClientError(Object.assign(new Error('bad'), { code: 'HPE_INVALID_METHOD' }), pipelined.socket);
    expect(pipelined.written).toEqual([]);
    expect(pipelined.socket.destroyed).toBe(true);
  });
});

describe('HTTP_REQUEST_TIMEOUT_SECONDS', () => {
  let timed: TestServer;
  let timedAuthPort: number;
  beforeAll(async () => {
    timedAuthPort = await freePort();
    timed = await startTestServer({ HTTP_REQUEST_TIMEOUT_SECONDS: '1', AUTH_PORT: String(timedAuthPort) });
  });
  afterAll(() => timed.close());

  /**
   * Sends `head`, then each of `chunks` after `gapMs`, and returns what the server answered, whether
   * it closed the connection, and when (ms after the head).
   */
  function sendSlowly(port: number, head: string, chunks: string[], gapMs: number): Promise<{ received: string; closedAfterMs: number | null }> {
    return new Promise((resolve, reject) => {
      const socket = net.connect(port, '127.0.0.1');
      let received = '';
      let started = 0;
      let timer: NodeJS.Timeout | undefined;
      const giveUp = setTimeout(() => {
        clearInterval(timer);
        socket.destroy();
        resolve({ received, closedAfterMs: null });
      }, 5000);
      socket.on('connect', () => {
        started = Date.now();
        socket.write(head);
        const pending = [...chunks];
        timer = setInterval(() => (pending.length > 0 && !socket.destroyed ? socket.write(pending.shift()!) : clearInterval(timer)), gapMs);
      });
      socket.on('data', (chunk) => (received += chunk.toString('utf8')));
      socket.on('error', (error: NodeJS.ErrnoException) => (['ECONNRESET', 'EPIPE'].includes(error.code!) ? undefined : reject(error)));
      socket.on('close', () => {
        clearTimeout(giveUp);
        clearInterval(timer);
        resolve({ received, closedAfterMs: Date.now() - started });
      });
    });
  }

  const post = (path: string, length: number) =>
    `POST ${path} HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: ${length}\r\n\r\n`;
  const timedPort = () => Number(new URL(timed.url).port);

  it('answers a body that stops coming with 408 once the time is up, and closes the connection', async () => {
    const { received, closedAfterMs } = await sendSlowly(timedPort(), post('/v1/graphql', 100), ['{"query":'], 10);
    const answer = lastAnswer(received);
    expect(answer.status).toBe(408);
    expect(answer.body).toEqual({ success: false, message: 'The request was not received in time', error_code: 'REQUEST_TIMEOUT' });
    expect(closedAfterMs).toBeGreaterThanOrEqual(900);
    expect(closedAfterMs).toBeLessThan(2500);
  });

  it('bounds a body that keeps trickling in (slowloris), whole as it may come in the end', async () => {
    const body = JSON.stringify({ query: '{ __typename }' }).padEnd(60, ' ');
    const { received, closedAfterMs } = await sendSlowly(timedPort(), post('/v1/graphql', body.length), body.split(''), 50);
    expect(lastAnswer(received).status).toBe(408);
    expect(closedAfterMs).toBeLessThan(2500);
  });

  it('answers a slow request that arrives whole in time', async () => {
    const body = JSON.stringify({ query: '{ __typename }' });
    const { received } = await sendSlowly(
      timedPort(),
      `${post('/v1/graphql', body.length).slice(0, -2)}Connection: close\r\n\r\n`,
      [body.slice(0, 10), body.slice(10)],
      250,
    );
    const answer = lastAnswer(received);
    expect(answer.status).toBe(200);
    expect(answer.body).toEqual({ data: { __typename: 'Query' } });
  });

  it('holds on AUTH_PORT too', async () => {
    const { received, closedAfterMs } = await sendSlowly(timedAuthPort, post('/signin/email-password', 100), ['{"email":'], 10);
    expect(lastAnswer(received).status).toBe(408);
    expect(closedAfterMs).toBeLessThan(2500);
  });
});

describe('a body answered before it was read, on a kept-alive connection', () => {
  it.each([
    ['a webhook route that keeps the raw body, in a media type it has no parser for', '/webhooks/primary', 'application/x-www-form-urlencoded', 2_000_000, 415],
    ['the GraphQL route, past its body limit', '/v1/graphql', 'application/json', 2_000_000, 413],
  ])('is read and dropped, and the next request on the connection is answered: %s', async (_what, path, contentType, bytes, status) => {
    const oneConnection = new Agent({ connections: 1, pipelining: 1 });
    try {
      const refused = await fetch(`${server.url}${path}`, {
        method: 'POST',
        headers: { 'content-type': contentType },
        body: 'x'.repeat(bytes),
        dispatcher: oneConnection,
        signal: AbortSignal.timeout(10_000),
      });
      expect(refused.status).toBe(status);
      await refused.text();
      // The next request must not wait behind a body the server stopped reading.
      const next = await fetch(`${server.url}/healthz`, { dispatcher: oneConnection, signal: AbortSignal.timeout(5_000) });
      expect(next.status).toBe(200);
    } finally {
      await oneConnection.close();
    }
  });
});
