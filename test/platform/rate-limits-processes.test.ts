import { RegisterUserDocument } from '../generated/graphql';
import { createTestDatabase, type TestDatabase } from '../support/database';
import { graphql } from '../support/graphql';
import { testEnvironment } from '../support/server';
import { spawnServer, type SpawnedServer } from '../support/spawn';

let database: TestDatabase;
const running: SpawnedServer[] = [];

beforeAll(async () => {
  database = await createTestDatabase();
});
afterAll(async () => {
  for (const server of running) server.child.kill('SIGTERM');
  await Promise.all(running.map((server) => server.exited));
  await database.drop();
});

it('shares the PostgreSQL-backed registration limit between two plinth processes', async () => {
  const env = testEnvironment(database.url, { RATE_LIMIT_STORE: 'postgres', RATE_LIMIT_REGISTRATION_POINTS: '3' });
  const [a, b] = await Promise.all([spawnServer(env), spawnServer(env)]);
  running.push(a, b);
  let serial = 0;
  const register = (server: SpawnedServer) =>
    graphql(`${server.url}/v1/graphql`, RegisterUserDocument, { input: { email: `p${(serial += 1)}@example.com`, password: 'password123', name: 'P' } });

  const codes: (string | undefined)[] = [];
  for (const server of [a, b, a, b, a]) {
    const response = await register(server);
    codes.push(response.body.errors?.[0].extensions?.code ?? String(response.body.data!.registerUser.success));
  }
  expect(codes).toEqual(['true', 'true', 'true', 'RATE_LIMITED', 'RATE_LIMITED']);
});
