import type { IncomingMessage } from 'node:http';
import type { FastifyBaseLogger } from 'fastify';
import { CloseCode, handleProtocols, makeServer, MessageType, parseMessage, type ServerOptions, type WebSocket as GraphQLWsSocket } from 'graphql-ws';
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
const CLIENT_MESSAGE_TYPES = new Set<string>([MessageType.ConnectionInit, MessageType.Ping, MessageType.Pong, MessageType.Subscribe, MessageType.Complete]);

/** Sockets that do not answer a ping within this long are dropped (graphql-ws's own default). */
const KEEP_ALIVE_MS = 12_000;
/** Turns per KEEP_ALIVE_MS, each pinging a slice of the sockets: 10,000 connections are not pinged in one burst. */
const KEEP_ALIVE_SLICES = 12;

/** Connections that must have closed, and at least half of those open at the peak, before a collection is asked for. */
const DEPARTURE_COLLECTION_MIN = 1000;
/** Quiet time after the last of those closes before the collection runs (one per wave of departures). */
const DEPARTURE_COLLECTION_DELAY_MS = 2000;

/**
 * Asks V8 for a full collection once many connections have closed. Their objects are garbage
 * then, but a server whose clients left allocates little, so nothing starts a collection, and V8's
 * memory reducer has spent its turns while they connected: the heap would stay grown for good.
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
 * Pings every socket once per interval and terminates those that did not answer the ping before:
 * one timer for the server, and a set entry per socket, where a timer per socket (with its
 * closures and the wait for its pong) would add to every connection's memory.
 */
class KeepAlive {
  private readonly slices = Array.from({ length: KEEP_ALIVE_SLICES }, () => new Set<WebSocket>());
  private readonly unanswered = new Set<WebSocket>();
  private turn = 0;
  private readonly timer: NodeJS.Timeout;
  /** Every socket's 'pong' listener (`this` is the socket). */
  private readonly answered: (this: WebSocket) => void;

  constructor(intervalMs: number) {
    const unanswered = this.unanswered;
    this.answered = function (this: WebSocket) {
      unanswered.delete(this);
    };
    this.timer = setInterval(() => this.pingSlice(), intervalMs / KEEP_ALIVE_SLICES).unref();
  }

  add(socket: WebSocket): void {
    // Into the slice pinged last: a whole interval passes before its first ping.
    this.slices[(this.turn + KEEP_ALIVE_SLICES - 1) % KEEP_ALIVE_SLICES].add(socket);
    socket.on('pong', this.answered);
  }

  remove(socket: WebSocket): void {
    for (const slice of this.slices) slice.delete(socket);
    this.unanswered.delete(socket);
  }

  dispose(): void {
    clearInterval(this.timer);
  }

  private pingSlice(): void {
    const slice = this.slices[this.turn];
    this.turn = (this.turn + 1) % KEEP_ALIVE_SLICES;
    for (const socket of slice) {
      if (socket.readyState !== socket.OPEN) continue;
      if (this.unanswered.has(socket)) {
        socket.terminate();
        continue;
      }
      this.unanswered.add(socket);
      socket.ping();
    }
  }
}

/**
 * graphql-ws's view of a connection (its server's `WebSocket`), on a ws socket. A class rather
 * than an object of closures: a connection keeps it as long as it lasts.
 */
class GraphQLWsConnection implements GraphQLWsSocket {
  constructor(
    private readonly socket: WebSocket,
    private readonly logger: FastifyBaseLogger,
  ) {}

  get protocol(): string {
    return this.socket.protocol;
  }

  send(data: string): Promise<void> {
    const socket = this.socket;
    return new Promise<void>((resolve, reject) => {
      if (socket.readyState !== socket.OPEN) return resolve();
      socket.send(data, (error) => (error ? reject(error) : resolve()));
    });
  }

  close(code: number, reason: string): void {
    this.socket.close(code, reason);
  }

  onMessage(handle: (data: string) => Promise<void>): void {
    const { socket, logger } = this;
    // Not an async function: a subscribe message's handling lasts as long as the subscription, and
    // a suspended async function would hold its frame (and the message) that long.
    socket.on('message', (data) => {
      const text = String(data);
      if (!isClientMessage(text)) return socket.close(CloseCode.BadRequest, 'Invalid message received');
      handle(text).catch((error: unknown) => {
        logger.error({ err: error }, 'unexpected error handling a graphql-ws message');
        socket.close(CloseCode.InternalServerError, 'Internal server error');
      });
    });
  }
}

/**
 * graphql-ws on a `ws` server, as its `use/ws` adapter does, with one difference: a message the
 * protocol does not let a client send (`next`, `connection_ack`, an unknown type, a malformed
 * one) closes with 4400 Bad Request, as the protocol asks. graphql-ws 6 throws on those after the
 * handshake and its adapter turns the throw into 4500 and a console.error. Every socket is pinged
 * each `keepAliveMs` (tests shorten it), and dropped when it did not answer the ping before.
 */
export function serveGraphQLWs<P extends Record<string, unknown> | undefined>(
  options: ServerOptions<P, SocketExtra>,
  wss: WebSocketServer,
  logger: FastifyBaseLogger,
  clientIp: (request: IncomingMessage) => string,
  keepAliveMs = KEEP_ALIVE_MS,
): { dispose(): Promise<void> } {
  const server = makeServer<P, SocketExtra>(options);
  wss.options.handleProtocols = handleProtocols;
  wss.on('error', (error) => logger.error({ err: error }, 'the WebSocket server failed'));
  const departures = new DepartureCollector();

  const keepAlive = new KeepAlive(keepAliveMs);
  // One listener for every socket (`this` is the socket).
  const failed = function (this: WebSocket, error: Error) {
    logger.warn({ err: error }, 'a WebSocket connection failed');
    this.close(CloseCode.InternalServerError, 'Internal server error');
  };

  wss.on('connection', (socket, request) => {
    departures.opened();
    keepAlive.add(socket);
    socket.on('error', failed);
    const closed = server.opened(new GraphQLWsConnection(socket, logger), { socket, clientIp: clientIp(request) });
    socket.on('close', (code, reason) => {
      keepAlive.remove(socket);
      departures.closed();
      void closed(code, String(reason));
    });
  });

  return {
    async dispose() {
      departures.dispose();
      keepAlive.dispose();
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
