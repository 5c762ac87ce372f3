import net from 'node:net';
import { UNREAD_BODY_LINGER_MS } from '../../src/platform/fastify/unread-body';
import type { TestDatabase } from '../support/database';
import { spawnServerOnNewDatabase, type SpawnedServer } from '../support/spawn';
import { ADMIN, projectWithKey, sendEvent } from './support';

/**
 * A body refused before it was read (413), sent to a server in another process: in the test's own
 * process the client's writes and the server's answer take turns on one event loop, and the race
 * below never shows.
 */
let database: TestDatabase;
let server: SpawnedServer;
let stop: () => Promise<void>;

beforeAll(async () => {
  ({ server, database, stop } = await spawnServerOnNewDatabase());
});
afterAll(() => stop());

const eventCount = async (projectId: number) =>
  Number((await database.query<{ count: string }>('SELECT count(*) FROM error_events WHERE project_id = $1', [projectId]))[0].count);

it("answers 413 to a body far past the limit while the caller is still sending it: declared or chunked, ERRORS_MAX_EVENT_BYTES or Fastify's own limit", async () => {
  const { projectId, dsnKey } = await projectWithKey(`${server.url}/v1/graphql`, 'huge');
  // Closed at once, such a connection would reset the rest of the body, and the caller's write
  // would fail (EPIPE) before it read the answer.
  for (const bytes of [2_000_000, 8_000_000]) {
    const declared = await sendEvent(server.url, dsnKey, 'x'.repeat(bytes));
    expect(declared.status).toBe(413);
    expect(await declared.json()).toMatchObject({ error_code: 'PAYLOAD_TOO_LARGE' });
  }
  const chunk = Buffer.alloc(64 * 1024, 'x');
  let sent = 0;
  const chunked = await fetch(`${server.url}/api/errors/events`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${dsnKey}` },
    body: new ReadableStream({
      pull(controller) {
        if (sent++ < 128) controller.enqueue(chunk);
        else controller.close();
      },
    }),
    duplex: 'half',
  } as RequestInit);
  expect(chunked.status).toBe(413);
  expect(await eventCount(projectId)).toBe(0);
  // Fastify's own body limit on another route.
  const metadata = await fetch(`${server.url}/v1/metadata`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...ADMIN },
    body: 'x'.repeat(2_000_000),
  });
  expect(metadata.status).toBe(413);
});

it('reads a refused body that keeps trickling in only until the lingering time is over', async () => {
  const { dsnKey } = await projectWithKey(`${server.url}/v1/graphql`, 'trickle');
  // Half-open allowed: the server's end of sending does not end this side, which keeps sending.
  const socket = net.connect({ port: Number(new URL(server.url).port), host: '127.0.0.1', allowHalfOpen: true });
  let answer = '';
  let answeredAt = 0;
  socket.on('data', (data) => {
    answer += String(data);
    if (!answeredAt && answer.includes('\r\n\r\n')) answeredAt = performance.now();
  });
  const closedAt = new Promise<number>((resolve) => socket.on('close', () => resolve(performance.now())));
  // Writing on after the server gave up ends in a reset, which is the point.
  socket.on('error', () => undefined);
  socket.write(
    `POST /api/errors/events HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nAuthorization: Bearer ${dsnKey}\r\n` +
      `Content-Length: ${100 * 1024 * 1024}\r\n\r\n${'x'.repeat(1024)}`,
  );
  const trickle = setInterval(() => socket.writable && socket.write('x'.repeat(1024)), 100);
  const closed = await closedAt;
  clearInterval(trickle);
  expect(answer).toMatch(/^HTTP\/1\.1 413 /);
  // Kept reading the rest until the lingering time ended; not forever.
  expect(closed - answeredAt).toBeGreaterThan(UNREAD_BODY_LINGER_MS - 500);
  expect(closed - answeredAt).toBeLessThan(UNREAD_BODY_LINGER_MS + 3000);
});
