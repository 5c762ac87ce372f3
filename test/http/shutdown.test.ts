import { PassThrough } from 'node:stream';
import { Agent, request } from 'undici';
import { startTestServer } from '../support/server';

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe('closing the HTTP server', () => {
  it('answers a request in flight on a keep-alive connection, then closes that connection and finishes closing at once', async () => {
    const server = await startTestServer({ PLINTH_SHUTDOWN_TIMEOUT_MS: '10000' });
    // The client would keep the connection for a minute; the server's keep-alive timeout is longer.
    const connections = new Agent({ keepAliveTimeout: 60_000, keepAliveMaxTimeout: 60_000 });
    try {
      const body = JSON.stringify({ query: '{ session { role } }' });
      // The body arrives in two parts: the request is routed, and still in flight when closing starts.
      const parts = new PassThrough();
      const answer = request(server.graphqlUrl, {
        method: 'POST',
        dispatcher: connections,
        headers: { 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(body)) },
        body: parts,
      });
      parts.write(body.slice(0, 10));
      await sleep(200);
      const started = performance.now();
      const closed = server.close();
      await sleep(100);
      parts.end(body.slice(10));
      const response = await answer;
      expect(response.statusCode).toBe(200);
      expect(await response.body.json()).toEqual({ data: { session: { role: 'anonymous' } } });
      // Not held up until the keep-alive timeout (72 s) by the connection the answer left idle.
      await closed;
      expect(performance.now() - started).toBeLessThan(3000);
    } finally {
      await connections.close();
    }
  });
});
