import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { buildSchema } from 'graphql';
import pino from 'pino';
import WebSocket, { WebSocketServer } from 'ws';
import { serveGraphQLWs } from '../../src/graphql/ws-server';

const KEEP_ALIVE_MS = 400;

let server: http.Server;
let served: { dispose(): Promise<void> };
let url: string;

beforeAll(async () => {
  server = http.createServer();
  const wss = new WebSocketServer({ server });
  served = serveGraphQLWs(
    { schema: buildSchema('type Query { answer: Int }'), connectionInitWaitTimeout: 0 },
    wss,
    pino({ level: 'silent' }),
    (request) => request.socket.remoteAddress ?? '',
    KEEP_ALIVE_MS,
  );
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  url = `ws://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(async () => {
  await served.dispose();
  await new Promise((resolve) => server.close(resolve));
});

/** A graphql-transport-ws connection, open, with the pings it received counted. */
async function connect(answersPings: boolean) {
  const socket = new WebSocket(url, 'graphql-transport-ws', { autoPong: answersPings });
  const state = { pings: 0, closedWith: undefined as number | undefined, closedAt: 0 };
  socket.on('ping', () => state.pings++);
  socket.on('close', (code) => {
    state.closedWith = code;
    state.closedAt = Date.now();
  });
  await new Promise((resolve) => socket.once('open', resolve));
  return { socket, state };
}

describe('graphql-ws keep-alive', () => {
  it('terminates a connection that does not answer a ping by the next one, and keeps those that answer', async () => {
    const openedAt = Date.now();
    const answering = await connect(true);
    const silent = await connect(false);
    await new Promise((resolve) => setTimeout(resolve, 4 * KEEP_ALIVE_MS));
    try {
      // Pinged after one interval, dropped (no close frame: 1006) after the second.
      expect(silent.state).toMatchObject({ pings: 1, closedWith: 1006 });
      expect(silent.state.closedAt - openedAt).toBeGreaterThanOrEqual(2 * KEEP_ALIVE_MS - 100);
      expect(answering.state.closedWith).toBeUndefined();
      expect(answering.state.pings).toBeGreaterThanOrEqual(3);
    } finally {
      answering.socket.close();
    }
  });
});
