import type { IncomingMessage } from 'node:http';
import type { FastifyBaseLogger } from 'fastify';
import { CloseCode, handleProtocols, makeServer, MessageType, parseMessage, type ServerOptions } from 'graphql-ws';
import type { WebSocket, WebSocketServer } from 'ws';

/** What graphql-ws hands our hooks as `ctx.extra`. */
export interface SocketExtra {
  socket: WebSocket;
  request: IncomingMessage;
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
): { dispose(): Promise<void> } {
  const server = makeServer<P, SocketExtra>(options);
  wss.options.handleProtocols = handleProtocols;
  wss.on('error', (error) => logger.error({ err: error }, 'the WebSocket server failed'));

  wss.on('connection', (socket, request) => {
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
      { socket, request },
    );

    socket.once('close', (code, reason) => {
      clearTimeout(pongWait);
      clearInterval(pingInterval);
      void closed(code, String(reason));
    });
  });

  return {
    async dispose() {
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
