import type { IncomingMessage } from 'node:http';
import type { FastifyBaseLogger } from 'fastify';
import { CloseCode, handleProtocols, makeServer, MessageType, parseMessage, type ServerOptions } from 'graphql-ws';
import type { WebSocket, WebSocketServer } from 'ws';
import { collectGarbage } from '../platform/idle-collection';

/**
 * What graphql-ws hands our hooks as `ctx.extra`: the client's address rather than the upgrade
 * request, which a connection would otherwise keep alive (with its headers) as long as it lasts.
 */
export interface SocketExtra {
  socket: WebSocket;
  clientIp: string;
}

/** The message types a client may send (graphql-transport-ws); the others are the server's. */
const CLIENT_MESSAGE_TYPES = new Set<string>([
  MessageType.ConnectionInit,
  MessageType.Ping,
  MessageType.Pong,
  MessageType.Subscribe,
  MessageType.Complete,
]);

/** Sockets that do not answer a ping within this long are dropped (graphql-ws's own default). */
const KEEP_ALIVE_MS = 12_000;

/** Connections that must have closed, and at least half of those open at the peak, before a collection is asked for. */
const DEPARTURE_COLLECTION_MIN = 1000;
/** Quiet time after the last of those closes before the collection runs (one per wave of departures). */
const DEPARTURE_COLLECTION_DELAY_MS = 2000;

/**
 * Asks V8 for a full collection once many connections have closed. Their objects (about 10 KB of
 * heap each) are garbage then, but a server whose clients left allocates little, so nothing
 * starts a collection and V8's memory reducer has spent its turns while they connected: 10,000
 * subscribers gone left the heap 120 MB above idle for good. A collection gives it back.
 */
class DepartureCollector {
  private open = 0;
  private peak = 0;
  private timer?: NodeJS.Timeout;

  opened(): void {
    this.open++;
    if (this.open > this.peak) this.peak = this.open;
  }

  closed(): void {
    this.open--;
    if (this.peak - this.open < DEPARTURE_COLLECTION_MIN || this.open > this.peak / 2) return;
    clearTimeout(this.timer);
    this.timer = setTimeout(() => {
      this.peak = this.open;
      collectGarbage();
    }, DEPARTURE_COLLECTION_DELAY_MS).unref();
  }

  dispose(): void {
    clearTimeout(this.timer);
  }
}

/**
 * graphql-ws on a `ws` server, as its `use/ws` adapter does, with one difference: a message the
 * protocol does not let a client send (`next`, `connection_ack`, an unknown type, a malformed
 * one) closes with 4400 Bad Request, as the protocol asks. graphql-ws 6 throws on those after the
 * handshake and its adapter turns the throw into 4500 and a console.error.
 */
export function serveGraphQLWs<P extends Record<string, unknown> | undefined>(
  options: ServerOptions<P, SocketExtra>,
  wss: WebSocketServer,
  logger: FastifyBaseLogger,
  clientIp: (request: IncomingMessage) => string,
): { dispose(): Promise<void> } {
  const server = makeServer<P, SocketExtra>(options);
  wss.options.handleProtocols = handleProtocols;
  wss.on('error', (error) => logger.error({ err: error }, 'the WebSocket server failed'));
  const departures = new DepartureCollector();

  wss.on('connection', (socket, request) => {
    departures.opened();
    socket.once('error', (error) => {
      logger.warn({ err: error }, 'a WebSocket connection failed');
      socket.close(CloseCode.InternalServerError, 'Internal server error');
    });

    let pongWait: NodeJS.Timeout | undefined;
    const pingInterval = setInterval(() => {
      if (socket.readyState !== socket.OPEN) return;
      pongWait = setTimeout(() => socket.terminate(), KEEP_ALIVE_MS);
      socket.once('pong', () => clearTimeout(pongWait));
      socket.ping();
    }, KEEP_ALIVE_MS);

    const closed = server.opened(
      {
        protocol: socket.protocol,
        send: (data) =>
          new Promise<void>((resolve, reject) => {
            if (socket.readyState !== socket.OPEN) return resolve();
            socket.send(data, (error) => (error ? reject(error) : resolve()));
          }),
        close: (code, reason) => socket.close(code, reason),
        onMessage: (handle) =>
          socket.on('message', async (data) => {
            const text = String(data);
            if (!isClientMessage(text)) return socket.close(CloseCode.BadRequest, 'Invalid message received');
            try {
              await handle(text);
            } catch (error) {
              logger.error({ err: error }, 'unexpected error handling a graphql-ws message');
              socket.close(CloseCode.InternalServerError, 'Internal server error');
            }
          }),
      },
      { socket, clientIp: clientIp(request) },
    );

    socket.once('close', (code, reason) => {
      clearTimeout(pongWait);
      clearInterval(pingInterval);
      departures.closed();
      void closed(code, String(reason));
    });
  });

  return {
    async dispose() {
      departures.dispose();
      for (const client of wss.clients) client.close(1001, 'Going away');
      wss.removeAllListeners();
      await new Promise<void>((resolve, reject) => wss.close((error) => (error ? reject(error) : resolve())));
    },
  };
}

function isClientMessage(text: string): boolean {
  try {
    return CLIENT_MESSAGE_TYPES.has(parseMessage(text).type);
  } catch {
    return false;
  }
}
