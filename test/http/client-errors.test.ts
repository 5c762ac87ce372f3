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
    const socket = new Duplex({ read() {}, write(chunk: Buffer, _encoding, done) { written.push(chunk.toString()); done(); } });
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
