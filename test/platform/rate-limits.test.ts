import type { AddressInfo } from 'node:net';
import Fastify from 'fastify';
import pg from 'pg';
import pino from 'pino';
import { createDataSource, runMigrations } from '../../src/db/data-source';
import { installErrorHandling } from '../../src/http/errors';
import { RateLimits, rateLimitHook, type RateLimitRule, type RateLimitStore } from '../../src/platform/rate-limits';
import { RegisterUserDocument } from '../generated/graphql';
import { createTestDatabase, type TestDatabase } from '../support/database';
import { graphql } from '../support/graphql';
import { ADMIN_SECRET, startTestServer, type TestServer } from '../support/server';
import { bearer, signToken } from '../support/tokens';
import { rawSocket } from '../support/ws';

let database: TestDatabase;
const pools: pg.Pool[] = [];
const closing: (() => Promise<unknown>)[] = [];

beforeAll(async () => {
  database = await createTestDatabase();
  const dataSource = createDataSource(database.url, 2);
  await dataSource.initialize();
  await runMigrations(dataSource);
  await dataSource.destroy();
});
afterAll(async () => {
  for (const close of closing.reverse()) await close();
  await Promise.all(pools.map((pool) => pool.end().catch(() => undefined)));
  await database.drop();
});

const silent = pino({ level: 'silent' });

function newPool(): pg.Pool {
  const pool = new pg.Pool({ connectionString: database.url, max: 2 });
  pools.push(pool);
  return pool;
}

/** A Fastify app with GET /limited behind the hook of limit `test`. */
async function limitedApp(limits: RateLimits<'test'>): Promise<string> {
  const app = Fastify({ logger: false });
  installErrorHandling(app);
  app.get('/limited', { onRequest: rateLimitHook(limits.get('test')) }, async () => ({ ok: true }));
  await app.listen({ host: '127.0.0.1', port: 0 });
  closing.push(() => app.close());
  return `http://127.0.0.1:${(app.server.address() as AddressInfo).port}/limited`;
}

async function get(url: string) {
  const response = await fetch(url);
  return { status: response.status, retryAfter: response.headers.get('retry-after'), body: (await response.json()) as Record<string, unknown> };
}

/** Seconds left of a 60 s window that began moments ago (calls hash passwords, so allow a few). */
function expectWindowSeconds(value: unknown) {
  expect(value).toEqual(expect.any(Number));
  expect(value).toBeGreaterThanOrEqual(55);
  expect(value).toBeLessThanOrEqual(60);
}

const rule = (points: number, key: RateLimitRule['key'] = 'ip'): RateLimitRule => ({ points, durationSeconds: 60, key });

describe.each<[string, () => RateLimitStore]>([
  ['memory', () => ({ kind: 'memory' })],
  ['postgres', () => ({ kind: 'postgres', pool: newPool() })],
])('the route hook over the %s store', (kind, store) => {
  it('answers 429 with Retry-After in whole seconds and the envelope with error rate-limited once the points are used', async () => {
    const url = await limitedApp(new RateLimits(store(), { test: rule(3) }, silent));

    for (let index = 0; index < 3; index += 1) expect((await get(url)).status).toBe(200);
    const refused = await get(url);

    expect(refused.status).toBe(429);
    expect(refused.retryAfter).toMatch(/^\d+$/);
    expectWindowSeconds(Number(refused.retryAfter));
    expect(refused.body).toEqual({
      success: false,
      error: 'rate-limited',
      message: `Too many requests; try again in ${refused.retryAfter} s`,
      error_code: 'RATE_LIMITED',
    });
    if (kind === 'postgres') {
      const rows = await database.query<{ key: string; points: number }>("SELECT key, points FROM rate_limits WHERE key LIKE 'test:%'");
      expect(rows).toEqual([{ key: 'test:ip:127.0.0.1', points: 4 }]);
      await database.query("DELETE FROM rate_limits WHERE key LIKE 'test:%'");
    }
  });
});

describe('the PostgreSQL store', () => {
  it('is shared by limiters on separate pools, as by separate processes; the memory store is not', async () => {
    const shared = [
      await limitedApp(new RateLimits({ kind: 'postgres', pool: newPool() }, { test: rule(4) }, silent)),
      await limitedApp(new RateLimits({ kind: 'postgres', pool: newPool() }, { test: rule(4) }, silent)),
    ];
    const separate = [
      await limitedApp(new RateLimits({ kind: 'memory' }, { test: rule(4) }, silent)),
      await limitedApp(new RateLimits({ kind: 'memory' }, { test: rule(4) }, silent)),
    ];
    await database.query("DELETE FROM rate_limits WHERE key LIKE 'test:%'");

    const statuses = async (urls: string[]) => {
      const seen: number[] = [];
      for (const url of [...urls, ...urls, ...urls]) seen.push((await get(url)).status);
      return seen;
    };
    expect(await statuses(shared)).toEqual([200, 200, 200, 200, 429, 429]);
    expect(await statuses(separate)).toEqual([200, 200, 200, 200, 200, 200]);
  });

  it('stores a hash of a token key, never the token', async () => {
    const limits = new RateLimits({ kind: 'postgres', pool: newPool() }, { ingest: rule(10, 'token') }, silent);
    await limits.get('ingest').consume({ ip: '192.0.2.1', token: 'dsn-key-hunter2' });

    const rows = await database.query<{ key: string }>("SELECT key FROM rate_limits WHERE key LIKE 'ingest:%'");
    expect(rows).toEqual([{ key: expect.stringMatching(/^ingest:token:[0-9a-f]{64}$/) }]);
  });

  it('counts in the process while the database fails, and says so once', async () => {
    const lines: string[] = [];
    const logger = pino({ level: 'warn' }, { write: (line: string) => void lines.push(line) });
    const pool = newPool();
    const limiter = new RateLimits({ kind: 'postgres', pool }, { outage: rule(2) }, logger).get('outage');
    await pool.end();

    await limiter.consume({ ip: '192.0.2.7' });
    await limiter.consume({ ip: '192.0.2.7' });
    await expect(limiter.consume({ ip: '192.0.2.7' })).rejects.toMatchObject({
      name: 'Refusal',
      code: 'RATE_LIMITED',
      status: 429,
      retryAfterSeconds: expect.any(Number),
    });
    expect(lines).toHaveLength(1);
    expect(JSON.parse(lines[0])).toMatchObject({ level: 40, limit: 'outage', msg: expect.stringContaining('counting in this process') });
  });
});

describe('the registration limit', () => {
  let server: TestServer;
  let direct: TestServer;

  beforeAll(async () => {
    // Two points a window; the test client's X-Forwarded-For is believed, to give each test its own address.
    server = await startTestServer({ RATE_LIMIT_STORE: 'postgres', RATE_LIMIT_REGISTRATION_POINTS: '2', TRUST_PROXY: '127.0.0.1' }, { database });
    direct = await startTestServer({ RATE_LIMIT_REGISTRATION_POINTS: '2' }, { database });
  });
  afterAll(async () => {
    await server?.close();
    await direct?.close();
  });

  let serial = 0;
  const input = () => ({ email: `limited-${(serial += 1)}@example.com`, password: 'password123', name: 'Limited' });
  const register = (target: TestServer, headers: Record<string, string>) => graphql(target.graphqlUrl, RegisterUserDocument, { input: input() }, headers);
  const registerByAction = async (target: TestServer, headers: Record<string, string>) => {
    const response = await fetch(`${target.url}/actions/register-user`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-gql-admin-secret': ADMIN_SECRET, 'x-gql-role': 'anonymous', ...headers },
      body: JSON.stringify({ action: { name: 'registerUser' }, input: { input: input() } }),
    });
    return { status: response.status, retryAfter: response.headers.get('retry-after'), body: (await response.json()) as Record<string, unknown> };
  };
  const userCount = async () => Number((await database.query<{ count: string }>('SELECT count(*) FROM users'))[0].count);

  it('refuses the third GraphQL registration from one address with RATE_LIMITED and retryAfter, creating nothing', async () => {
    const from = { 'x-forwarded-for': '203.0.113.1' };
    expect((await register(server, from)).body.data!.registerUser.success).toBe(true);
    expect((await register(server, from)).body.data!.registerUser.success).toBe(true);
    const before = await userCount();

    const refused = await register(server, from);

    expect(refused.status).toBe(200);
    expect(refused.body.data).toBeNull();
    expect(refused.body.errors).toEqual([
      {
        message: expect.stringMatching(/^Too many requests; try again in \d+ s$/),
        locations: expect.any(Array),
        path: ['registerUser'],
        extensions: { code: 'RATE_LIMITED', retryAfter: expect.any(Number) },
      },
    ]);
    expectWindowSeconds(refused.body.errors![0].extensions!.retryAfter);
    expect(await userCount()).toBe(before);
    expect((await register(server, { 'x-forwarded-for': '203.0.113.2' })).body.data!.registerUser.success).toBe(true);
  });

  it('counts a caller with a user id by that id, whatever its address', async () => {
    const first = bearer(signToken({ roles: ['user'] }));
    for (const address of ['203.0.113.10', '203.0.113.11']) {
      expect((await register(server, { ...first, 'x-forwarded-for': address })).body.data!.registerUser.success).toBe(true);
    }
    const refused = await register(server, { ...first, 'x-forwarded-for': '203.0.113.12' });
    expect(refused.body.errors![0].extensions).toEqual({ code: 'RATE_LIMITED', retryAfter: expect.any(Number) });

    const other = bearer(signToken({ roles: ['user'] }));
    expect((await register(server, { ...other, 'x-forwarded-for': '203.0.113.12' })).body.data!.registerUser.success).toBe(true);
  });

  it('is one limit for the GraphQL mutation and the action route, which answers 429 with Retry-After', async () => {
    const from = { 'x-forwarded-for': '203.0.113.20' };
    // The engine names the visitor's address: it counts as the visitor's own call would.
    const forVisitor = { 'x-gql-client-address': '203.0.113.20' };
    expect((await register(server, from)).body.data!.registerUser.success).toBe(true);
    expect((await registerByAction(server, forVisitor)).body.success).toBe(true);

    const refused = await registerByAction(server, forVisitor);

    expect(refused.status).toBe(429);
    expect(refused.retryAfter).toMatch(/^\d+$/);
    expectWindowSeconds(Number(refused.retryAfter));
    expect(refused.body).toEqual({
      success: false,
      error: 'rate-limited',
      message: `Too many requests; try again in ${refused.retryAfter} s`,
      error_code: 'RATE_LIMITED',
    });
    // The engine names the user in X-Gql-User-Id: that user has a count of its own.
    expect((await registerByAction(server, { ...forVisitor, 'x-gql-user-id': 'engine-user-1' })).body.success).toBe(true);
  });

  it('applies to the mutation sent over graphql-ws too', async () => {
    // Without X-Forwarded-For the address is the WebSocket's own, 127.0.0.1.
    await register(server, {});
    await register(server, {});
    const { received } = await rawSocket(
      server.wsUrl,
      [
        { type: 'connection_init', payload: {} },
        {
          type: 'subscribe',
          id: '1',
          payload: { query: 'mutation { registerUser(input: {email: "ws@example.com", password: "password123", name: "Ws"}) { success } }' },
        },
      ],
      { closeAfterMs: 1500 },
    );

    expect(received).toContainEqual({
      type: 'next',
      id: '1',
      payload: expect.objectContaining({ errors: [expect.objectContaining({ extensions: { code: 'RATE_LIMITED', retryAfter: expect.any(Number) } })] }),
    });
  });

  it('ignores X-Forwarded-For without TRUST_PROXY: every address is the peer', async () => {
    for (const address of ['198.51.100.1', '198.51.100.2']) {
      expect((await register(direct, { 'x-forwarded-for': address })).body.data!.registerUser.success).toBe(true);
    }
    const refused = await register(direct, { 'x-forwarded-for': '198.51.100.3' });
    expect(refused.body.errors![0].extensions!.code).toBe('RATE_LIMITED');
  });
});
