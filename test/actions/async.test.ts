import { parse } from 'graphql';
import type { TypedDocumentNode } from '@graphql-typed-document-node/core';
import { startActionHandler, type ActionHandlerServer } from '../support/action-handler';
import { createTestDatabase, type TestDatabase } from '../support/database';
import { postGraphQL } from '../support/graphql';
import { ADMIN_SECRET, startTestServer, testEnvironment, type TestServer } from '../support/server';
import { spawnServer, type SpawnedServer } from '../support/spawn';
import { bearer, signToken } from '../support/tokens';
import { subscribe, subscriptionClient } from '../support/ws';

let handler: ActionHandlerServer;
const admin = { 'x-gql-admin-secret': ADMIN_SECRET };
const userId = 'b3b6a1b2-1c3d-4e5f-8a9b-0c1d2e3f4a5b';
const userToken = signToken({ userId, roles: ['user'] });
const otherToken = signToken({ roles: ['user'] });

type Result = {
  id: string;
  created_at: string;
  output: { order_id: string; total: number } | null;
  errors: { message: string; extensions: { code: string } } | null;
};

async function metadata(url: string, body: unknown) {
  const response = await fetch(`${url}/v1/metadata`, { method: 'POST', headers: { 'content-type': 'application/json', ...admin }, body: JSON.stringify(body) });
  return { status: response.status, body: (await response.json()) as Record<string, unknown> };
}

const declare = (handlerPath: string) => ({
  type: 'bulk',
  args: [
    {
      type: 'set_custom_types',
      args: {
        input_objects: [{ name: 'OrderInput', fields: [{ name: 'item', type: 'String!' }] }],
        objects: [
          {
            name: 'OrderOutput',
            fields: [
              { name: 'order_id', type: 'String!' },
              { name: 'total', type: 'Int!' },
            ],
          },
        ],
      },
    },
    {
      type: 'create_action',
      args: {
        name: 'placeOrder',
        definition: {
          kind: 'asynchronous',
          arguments: [{ name: 'order', type: 'OrderInput!' }],
          output_type: 'OrderOutput',
          handler: `${handler.url}${handlerPath}`,
        },
      },
    },
    { type: 'create_action_permission', args: { action: 'placeOrder', role: 'user' } },
  ],
});

const place = (url: string, headers: Record<string, string>, item = 'book') =>
  postGraphQL<{ placeOrder: string }>(`${url}/v1/graphql`, { query: `mutation { placeOrder(order: {item: "${item}"}) }` }, headers);
const read = (url: string, id: string, headers: Record<string, string>) =>
  postGraphQL<{ placeOrder: Result | null }>(
    `${url}/v1/graphql`,
    { query: `query { placeOrder(id: "${id}") { id created_at output { order_id total } errors } }` },
    headers,
  );

async function settled(url: string, id: string, headers: Record<string, string>, timeoutMs = 20_000): Promise<Result> {
  const started = Date.now();
  while (Date.now() - started < timeoutMs) {
    const result = (await read(url, id, headers)).body.data?.placeOrder;
    if (result && (result.output || result.errors)) return result;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  throw new Error(`the async action ${id} did not finish within ${timeoutMs} ms`);
}

beforeAll(async () => {
  handler = await startActionHandler();
});
afterAll(async () => {
  await handler.close();
});

describe('an asynchronous action', () => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer({ JOBS_POLL_INTERVAL_SECONDS: '1' });
    handler.route('/order', (call) => ({
      status: 200,
      body: { order_id: `order-${(call.body.input.order as { item: string }).item}`, total: 42 },
      delayMs: 400,
    }));
    handler.route('/order-refused', () => ({ status: 400, body: { message: 'out of stock', extensions: { code: 'OUT_OF_STOCK' } } }));
    expect(await metadata(server.url, declare('/order'))).toMatchObject({ status: 200 });
  });
  afterAll(async () => {
    await server.close();
  });

  it('answers an action id at once; the result is pushed by the subscription and read by the query', async () => {
    const started = Date.now();
    const placed = await place(server.url, bearer(userToken));
    const id = placed.body.data!.placeOrder;
    expect(id).toMatch(/^[0-9a-f-]{36}$/);
    expect(Date.now() - started).toBeLessThan(400);

    const client = subscriptionClient(server.wsUrl, { headers: { Authorization: `Bearer ${userToken}` } });
    const document = parse(`subscription { placeOrder(id: "${id}") { id output { order_id total } errors } }`) as TypedDocumentNode<
      { placeOrder: Result | null },
      Record<string, never>
    >;
    const subscription = subscribe(client, document);
    try {
      let event = await subscription.next();
      if (!event.data?.placeOrder?.output) event = await subscription.next(20_000);
      expect(event.data?.placeOrder).toEqual({ id, output: { order_id: 'order-book', total: 42 }, errors: null });
    } finally {
      subscription.dispose();
      await client.dispose();
    }
    const result = await read(server.url, id, bearer(userToken));
    expect(result.body.data?.placeOrder).toMatchObject({ id, output: { order_id: 'order-book', total: 42 }, errors: null });
    expect(new Date(result.body.data!.placeOrder!.created_at).getTime()).toBeGreaterThan(started - 5_000);
    const call = handler.calls.find((entry) => entry.path === '/order')!;
    expect(call.body.session_variables['x-gql-user-id']).toBe(userId);
    expect(call.headers['x-gql-role']).toBe('user');
  });

  it('is read only by the session that started it, or admin', async () => {
    const id = (await place(server.url, bearer(userToken))).body.data!.placeOrder;
    await settled(server.url, id, bearer(userToken));
    expect((await read(server.url, id, bearer(otherToken))).body.data).toEqual({ placeOrder: null });
    expect((await read(server.url, id, admin)).body.data?.placeOrder?.output).toEqual({ order_id: 'order-book', total: 42 });
    expect((await read(server.url, 'not-a-uuid', admin)).body.errors?.[0].extensions?.code).toBe('BAD_USER_INPUT');
    const client = subscriptionClient(server.wsUrl, { headers: { Authorization: `Bearer ${otherToken}` } });
    const document = parse(`subscription { placeOrder(id: "${id}") { id output { order_id total } } }`) as TypedDocumentNode<
      { placeOrder: Result | null },
      Record<string, never>
    >;
    const subscription = subscribe(client, document);
    try {
      expect((await subscription.next()).data).toEqual({ placeOrder: null });
    } finally {
      subscription.dispose();
      await client.dispose();
    }
    expect((await place(server.url, bearer(signToken({ roles: ['viewer'] })))).body.errors?.[0].extensions?.code).toBe('FORBIDDEN');
  });

  it("keeps a handler's error as the call's errors", async () => {
    expect(
      await metadata(server.url, {
        type: 'update_action',
        args: {
          name: 'placeOrder',
          definition: {
            kind: 'asynchronous',
            arguments: [{ name: 'order', type: 'OrderInput!' }],
            output_type: 'OrderOutput',
            handler: `${handler.url}/order-refused`,
          },
        },
      }),
    ).toMatchObject({ status: 200 });
    const id = (await place(server.url, bearer(userToken))).body.data!.placeOrder;
    const result = await settled(server.url, id, bearer(userToken));
    expect(result).toMatchObject({ output: null, errors: { message: 'out of stock', extensions: { code: 'OUT_OF_STOCK', status: 400 } } });
  });
});

describe('an asynchronous action whose process is killed during the call', () => {
  let database: TestDatabase;
  const spawned: SpawnedServer[] = [];
  afterAll(async () => {
    for (const child of spawned) {
      child.child.kill('SIGKILL');
      await child.exited;
    }
    await database?.drop();
  });

  it('still runs after a restart, and its result is kept once', async () => {
    database = await createTestDatabase();
    let calls = 0;
    // The first call never answers (the process dies during it); the next one does.
    handler.route('/order-once', () => {
      calls += 1;
      return calls === 1
        ? { status: 200, body: { order_id: 'late', total: 1 }, delayMs: 60_000 }
        : { status: 200, body: { order_id: 'after-restart', total: 7 } };
    });
    const env = {
      ...testEnvironment(database.url),
      JOBS_POLL_INTERVAL_SECONDS: '1',
      JOBS_MAINTENANCE_INTERVAL_SECONDS: '1',
      // The lease of a call: after a crash the job is taken back once it has passed.
      JOBS_ACTION_ASYNC_TIMEOUT_SECONDS: '3',
    };
    const first = await spawnServer(env);
    spawned.push(first);
    expect(await metadata(first.url, declare('/order-once'))).toMatchObject({ status: 200 });
    const id = (await place(first.url, bearer(userToken))).body.data!.placeOrder;
    const started = Date.now();
    while (calls === 0 && Date.now() - started < 15_000) await new Promise((resolve) => setTimeout(resolve, 50));
    expect(calls).toBe(1);
    first.child.kill('SIGKILL');
    await first.exited;

    const second = await spawnServer(env);
    spawned.push(second);
    const result = await settled(second.url, id, bearer(userToken), 40_000);
    expect(result.output).toEqual({ order_id: 'after-restart', total: 7 });
    expect(calls).toBe(2);
    const rows = await database.query<{ status: string; count: string }>('SELECT status, count(*) FROM action_log GROUP BY status');
    expect(rows).toEqual([{ status: 'completed', count: '1' }]);
    // Nothing runs it a third time.
    await new Promise((resolve) => setTimeout(resolve, 2_000));
    expect(calls).toBe(2);
  });
});
