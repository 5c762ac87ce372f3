import fs from 'node:fs';
import path from 'node:path';
import { RegisterUserDocument, UserRegisteredDocument } from './generated/graphql';
import { createTestDatabase, type TestDatabase } from './support/database';
import { graphql } from './support/graphql';
import { ADMIN_SECRET, testEnvironment } from './support/server';
import { spawnServer, type SpawnedServer } from './support/spawn';
import { subscribe, subscriptionClient } from './support/ws';

let database: TestDatabase;
const running = new Set<SpawnedServer>();

async function start(): Promise<SpawnedServer> {
  const server = await spawnServer(testEnvironment(database.url));
  running.add(server);
  void server.exited.then(() => running.delete(server));
  return server;
}

beforeAll(async () => {
  database = await createTestDatabase({ empty: true });
});
afterAll(async () => {
  for (const server of running) server.child.kill('SIGKILL');
  await Promise.all([...running].map((server) => server.exited));
  await database.drop();
});

const register = (server: SpawnedServer, email: string) =>
  graphql(`${server.url}/v1/graphql`, RegisterUserDocument, { input: { email, password: 'password123', name: 'Multi' } });

describe('several server processes on one database', () => {
  let a: SpawnedServer;
  let b: SpawnedServer;

  it('start together, migrating the database once', async () => {
    [a, b] = await Promise.all([start(), start()]);
    const migrations = await database.query<{ name: string }>('SELECT name FROM plinth_migrations ORDER BY id');
    // Each migration of migrations/ (a file <timestamp>-<Name>.ts holds class <Name><timestamp>) once.
    const files = fs.readdirSync(path.resolve(__dirname, '..', '..', 'migrations')).filter((file) => file.endsWith('.ts'));
    const expected = files.sort().map((file) => file.replace(/^(\d+)-(\w+)\.ts$/, '$2$1'));
    expect(migrations.map((row) => row.name)).toEqual(expected);
    expect(expected.length).toBeGreaterThanOrEqual(4);
  });

  it('deliver a registration made on one process to a subscriber on the other', async () => {
    const client = subscriptionClient(`${b.url.replace('http', 'ws')}/v1/graphql/subscriptions`, {
      headers: { 'x-gql-admin-secret': ADMIN_SECRET },
    });
    const subscription = subscribe(client, UserRegisteredDocument);
    try {
      await subscription.ready;
      const registered = await register(a, 'cross-process@example.com');
      expect(registered.body.data!.registerUser.success).toBe(true);
      expect(await subscription.next()).toEqual({
        data: { userRegistered: expect.objectContaining({ email: 'cross-process@example.com', id: registered.body.data!.registerUser.user!.id }) },
      });
    } finally {
      subscription.dispose();
      await client.dispose();
    }
  });

  it('keep every acknowledged registration when a process is killed, and the restarted process serves it', async () => {
    const acknowledged: string[] = [];
    for (let index = 0; index < 5; index += 1) {
      const response = await register(a, `durable-${index}@example.com`);
      if (response.body.data!.registerUser.success) acknowledged.push(`durable-${index}@example.com`);
    }
    expect(acknowledged).toHaveLength(5);

    a.child.kill('SIGKILL');
    expect((await a.exited).signal).toBe('SIGKILL');

    // The other process goes on serving, and sees the same data.
    const duplicate = await register(b, 'durable-0@example.com');
    expect(duplicate.body.data!.registerUser.errors).toEqual([expect.objectContaining({ field: 'email', code: 'ALREADY_EXISTS' })]);

    a = await start();
    const rows = await database.query<{ email: string }>("SELECT email FROM users WHERE email LIKE 'durable-%' ORDER BY email");
    expect(rows.map((row) => row.email)).toEqual(acknowledged);
    const again = await register(a, 'durable-3@example.com');
    expect(again.body.data!.registerUser.errors).toEqual([expect.objectContaining({ field: 'email', code: 'ALREADY_EXISTS' })]);
    expect((await register(a, 'after-restart@example.com')).body.data!.registerUser.success).toBe(true);
  });

  it('shut down cleanly on SIGTERM, finishing the request in flight', async () => {
    const inFlight = register(b, 'in-flight@example.com');
    await new Promise((resolve) => setTimeout(resolve, 20));
    b.child.kill('SIGTERM');

    const [response, exit] = await Promise.all([inFlight, b.exited]);
    expect(response.body.data!.registerUser.success).toBe(true);
    expect(exit).toEqual({ code: 0, signal: null });
    expect(b.output()).toContain('shutting down');
    expect(await database.query("SELECT 1 FROM users WHERE email = 'in-flight@example.com'")).toHaveLength(1);
  });
});
