import { randomUUID } from 'node:crypto';
import WebSocket from 'ws';
import { ADMIN_SECRET, startTestServer, type TestServer } from '../support/server';
import { signToken } from '../support/tokens';
import { until } from '../support/until';

/**
 * GQL_GRAPHQL_WS_MAX_CONNECTIONS_PER_USER, _MAX_SUBSCRIPTIONS_PER_CONNECTION and
 * _MAX_SUBSCRIPTIONS_PER_USER at their defaults (20, 100, 200), with real graphql-ws clients.
 */
let server: TestServer;

beforeAll(async () => {
  server = await startTestServer();
});
afterAll(async () => {
  await server.close();
});

interface ServerMessage {
  id?: string;
  type: string;
  payload?: unknown;
}

/** A graphql-transport-ws connection: what the server sent, and how it ended. */
class Connection {
  readonly socket: WebSocket;
  readonly received: ServerMessage[] = [];
  /** Resolves with true once acknowledged, false when the server closed it first. */
  readonly acknowledged: Promise<boolean>;
  readonly closed: Promise<{ code: number; reason: string }>;

  constructor(connectionParams: Record<string, unknown>) {
    this.socket = new WebSocket(server.wsUrl, 'graphql-transport-ws');
    this.closed = new Promise((resolve) => this.socket.on('close', (code, reason) => resolve({ code, reason: String(reason) })));
    this.acknowledged = new Promise((resolve, reject) => {
      this.socket.on('error', reject);
      this.socket.on('open', () => this.socket.send(JSON.stringify({ type: 'connection_init', payload: connectionParams })));
      this.socket.on('message', (data) => {
        const message = JSON.parse(String(data)) as ServerMessage;
        this.received.push(message);
        if (message.type === 'connection_ack') resolve(true);
      });
      void this.closed.then(() => resolve(false));
    });
  }

  /** Subscribes to a file's processing updates: a subscription that stays open and quiet. */
  subscribe(id: string): void {
    const query = `subscription { fileProcessingUpdated(file_id: "${randomUUID()}") { id } }`;
    this.socket.send(JSON.stringify({ id, type: 'subscribe', payload: { query } }));
  }

  complete(id: string): void {
    this.socket.send(JSON.stringify({ id, type: 'complete' }));
  }

  /**
   * Resolves once the server answered a ping sent now: it has counted every subscribe sent before
   * (graphql-ws hands it each message in order, and onSubscribe counts before its first await).
   * Errors for them may still be on their way: a wait for "none came" still needs settle().
   */
  async flushed(): Promise<void> {
    const pongs = this.received.filter((message) => message.type === 'pong').length;
    this.socket.send(JSON.stringify({ type: 'ping' }));
    await until(() => this.received.filter((message) => message.type === 'pong').length > pongs, 10_000, 'a pong');
  }

  /** Resolves once the server sent an error for subscription `id`; those sent before on this connection got theirs first. */
  async errorFor(id: string): Promise<void> {
    await until(() => this.errors().has(id), 10_000, `an error for subscription ${id}`);
  }

  /** Errors the server sent for subscriptions, by id. */
  errors(): Map<string, { message: string; extensions?: Record<string, unknown> }[]> {
    const found = new Map<string, { message: string; extensions?: Record<string, unknown> }[]>();
    for (const message of this.received) {
      if (message.type === 'error') found.set(message.id!, message.payload as { message: string }[]);
    }
    return found;
  }

  async close(): Promise<void> {
    this.socket.close(1000, 'done');
    await this.closed;
  }
}

const asUser = (userId: string) => ({ headers: { authorization: `Bearer ${signToken({ userId })}` } });
/** Long enough for a message the server would send to arrive: the wait before asserting that none came. */
const settle = () => new Promise((resolve) => setTimeout(resolve, 400));

async function connected(count: number, params: Record<string, unknown>): Promise<Connection[]> {
  const connections = Array.from({ length: count }, () => new Connection(params));
  expect(await Promise.all(connections.map((connection) => connection.acknowledged))).toEqual(connections.map(() => true));
  return connections;
}

async function closeAll(connections: Connection[]): Promise<void> {
  await Promise.all(connections.map((connection) => connection.close()));
}

/** A connection of `params` once the server has let go of one that just closed (it counts the close when it sees it). */
async function reconnected(params: Record<string, unknown>): Promise<Connection> {
  for (let attempt = 0; attempt < 20; attempt++) {
    const connection = new Connection(params);
    if (await connection.acknowledged) return connection;
    await settle();
  }
  throw new Error('no connection was accepted again');
}

describe('connections per user (GQL_GRAPHQL_WS_MAX_CONNECTIONS_PER_USER, 20)', () => {
  it("closes a user's 21st connection with 4429 Too many connections; other users, anonymous callers and admins are counted apart", async () => {
    const alice = randomUUID();
    const open = await connected(20, asUser(alice));
    try {
      const refused = new Connection(asUser(alice));
      expect(await refused.acknowledged).toBe(false);
      expect(await refused.closed).toEqual({ code: 4429, reason: 'Too many connections: at most 20 for each user' });
      expect(refused.received).toEqual([]);

      open.push(...(await connected(1, asUser(randomUUID()))));
      open.push(...(await connected(1, { headers: { 'x-gql-admin-secret': ADMIN_SECRET } })));

      // A closed connection gives its place back.
      await open.shift()!.close();
      open.push(await reconnected(asUser(alice)));
    } finally {
      await closeAll(open);
    }
  });

  it('counts callers without a user id by their address: a 21st anonymous connection from 127.0.0.1 is closed with 4429', async () => {
    const open = await connected(20, {});
    try {
      const refused = new Connection({});
      expect(await refused.closed).toEqual({ code: 4429, reason: 'Too many connections: at most 20 for each user' });
      // The admin role is not limited.
      open.push(...(await connected(25, { headers: { 'x-gql-admin-secret': ADMIN_SECRET } })));
    } finally {
      await closeAll(open);
    }
  });
});

describe('subscriptions (GQL_GRAPHQL_WS_MAX_SUBSCRIPTIONS_PER_CONNECTION 100, _PER_USER 200)', () => {
  const QUOTA = { code: 'QUOTA_EXCEEDED' };

  it("refuses a connection's 101st subscription with QUOTA_EXCEEDED, and takes one again once another completes", async () => {
    const [connection] = await connected(1, asUser(randomUUID()));
    try {
      for (let id = 1; id <= 100; id++) connection.subscribe(String(id));
      await connection.flushed();
      await settle();
      expect(connection.errors()).toEqual(new Map());

      connection.subscribe('101');
      await connection.errorFor('101');
      expect(connection.errors()).toEqual(
        new Map([['101', [{ message: 'Too many subscriptions on this connection: at most 100 at once; complete one first', extensions: QUOTA }]]]),
      );

      connection.complete('1');
      connection.subscribe('102');
      connection.subscribe('103');
      await connection.errorFor('103');
      expect([...connection.errors().keys()]).toEqual(['101', '103']);

      // Completing one and subscribing at once with a new id moves no count: still 100 at once.
      for (let id = 2; id <= 30; id++) {
        connection.complete(String(id));
        connection.subscribe(`again-${id}`);
      }
      await connection.flushed();
      await settle();
      expect([...connection.errors().keys()]).toEqual(['101', '103']);
      connection.subscribe('104');
      await connection.errorFor('104');
      expect([...connection.errors().keys()]).toEqual(['101', '103', '104']);

      // An id taken again before its subscription has ended is refused (its end would drop the
      // new one from the connection, uncounted); once it has ended, the id may be used again.
      connection.complete('31');
      connection.subscribe('31');
      await connection.errorFor('31');
      expect(connection.errors().get('31')).toEqual([
        { message: 'Subscription 31 is still ending; subscribe with another id', extensions: { code: 'SUBSCRIBER_ALREADY_EXISTS' } },
      ]);
      connection.subscribe('31');
      connection.subscribe('105');
      await connection.errorFor('105');
      expect([...connection.errors().keys()]).toEqual(['101', '103', '104', '31', '105']);
      expect(connection.received.filter((message) => message.type === 'error' && message.id === '31')).toHaveLength(1);
      expect(connection.socket.readyState).toBe(WebSocket.OPEN);
    } finally {
      await connection.close();
    }
  });

  it("refuses a user's 201st subscription across connections; another user is unaffected, and a closed connection gives its subscriptions back", async () => {
    const carol = randomUUID();
    const [first, second, third] = await connected(3, asUser(carol));
    const [other] = await connected(1, asUser(randomUUID()));
    try {
      for (let id = 1; id <= 100; id++) first.subscribe(`a${id}`);
      for (let id = 1; id <= 100; id++) second.subscribe(`b${id}`);
      await Promise.all([first.flushed(), second.flushed()]);
      await settle();
      expect([first.errors(), second.errors()]).toEqual([new Map(), new Map()]);

      third.subscribe('c1');
      other.subscribe('d1');
      await Promise.all([third.errorFor('c1'), other.flushed()]);
      await settle();
      expect(third.errors()).toEqual(
        new Map([['c1', [{ message: 'Too many subscriptions for this user: at most 200 at once across connections; complete one first', extensions: QUOTA }]]]),
      );
      expect(other.errors()).toEqual(new Map());

      await first.close();
      await settle();
      third.subscribe('c2');
      await settle();
      expect([...third.errors().keys()]).toEqual(['c1']);
    } finally {
      await closeAll([second, third, other]);
    }
  });
});
