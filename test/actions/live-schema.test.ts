import { startActionHandler, type ActionHandlerServer } from '../support/action-handler';
import { createTestDatabase, type TestDatabase } from '../support/database';
import { postGraphQL } from '../support/graphql';
import { eventually } from '../support/job-recorder';
import { ADMIN_SECRET, startTestServer, testEnvironment } from '../support/server';
import { spawnServer, type SpawnedServer } from '../support/spawn';

let database: TestDatabase;
let handler: ActionHandlerServer;
const servers: SpawnedServer[] = [];
const admin = { 'x-gql-admin-secret': ADMIN_SECRET };

async function metadata(url: string, body: unknown) {
  const response = await fetch(`${url}/v1/metadata`, { method: 'POST', headers: { 'content-type': 'application/json', ...admin }, body: JSON.stringify(body) });
  return { status: response.status, body: (await response.json()) as Record<string, unknown> };
}

const declare = (name: string, path: string) => ({
  type: 'bulk',
  args: [
    { type: 'set_custom_types', args: { objects: [{ name: 'Greeting', fields: [{ name: 'text', type: 'String!' }] }] } },
    {
      type: 'create_action',
      args: { name, definition: { arguments: [{ name: 'who', type: 'String!' }], output_type: 'Greeting', handler: `${handler.url}${path}` } },
    },
  ],
});

beforeAll(async () => {
  database = await createTestDatabase();
  handler = await startActionHandler();
  handler.route('/greet', (call) => ({ status: 200, body: { text: `hello ${call.body.input.who}` } }));
  handler.route('/slow', () => ({ status: 200, body: { text: 'slow answer' }, delayMs: 2_500 }));
});

afterAll(async () => {
  for (const spawned of servers) {
    spawned.child.kill('SIGKILL');
    await spawned.exited;
  }
  await handler.close();
  await database.drop();
});

it('a change made through one server process is served by another within a second, without a restart', async () => {
  const env = { ...testEnvironment(database.url), PLINTH_PROCESS_ROLES: 'api' };
  servers.push(await spawnServer(env));
  servers.push(await spawnServer(env));
  const [first, second] = servers;
  const query = { query: 'mutation { greet(who: "B") { text } }' };
  expect((await postGraphQL(`${second.url}/v1/graphql`, query, admin)).body.errors?.[0].message).toMatch(/Cannot query field "greet"/);

  expect(await metadata(first.url, declare('greet', '/greet'))).toMatchObject({ status: 200 });
  const changed = Date.now();
  let seenAfter: number | undefined;
  while (Date.now() - changed < 5_000) {
    const response = await postGraphQL<{ greet: { text: string } }>(`${second.url}/v1/graphql`, query, admin);
    if (response.body.data?.greet) {
      seenAfter = Date.now() - changed;
      expect(response.body.data.greet).toEqual({ text: 'hello B' });
      break;
    }
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  expect(seenAfter).toBeDefined();
  expect(seenAfter!).toBeLessThan(1_000);

  // And back: dropped on the second, gone from the first.
  expect(await metadata(second.url, { type: 'drop_action', args: { name: 'greet' } })).toMatchObject({ status: 200 });
  const dropped = Date.now();
  let goneAfter: number | undefined;
  while (Date.now() - dropped < 5_000) {
    const response = await postGraphQL(`${first.url}/v1/graphql`, query, admin);
    if (response.body.errors?.[0]?.message.includes('Cannot query field "greet"')) {
      goneAfter = Date.now() - dropped;
      break;
    }
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  expect(goneAfter).toBeDefined();
  expect(goneAfter!).toBeLessThan(1_000);
});

it('a request in flight finishes on the schema it started with', async () => {
  const server = await startTestServer({}, { database });
  try {
    expect(await metadata(server.url, declare('slowGreet', '/slow'))).toMatchObject({ status: 200 });
    const inFlight = postGraphQL<{ slowGreet: { text: string } }>(server.graphqlUrl, { query: 'mutation { slowGreet(who: "A") { text } }' }, admin);
    // The handler holds its answer for a while once called (polled: a loaded machine takes longer to call it).
    await eventually(async () => handler.calls.some((call) => call.path === '/slow'), 10_000, 'the slow handler being called');
    // The action and its output type go while its call is in flight.
    expect(await metadata(server.url, { type: 'clear_metadata', args: {} })).toMatchObject({ status: 200 });
    const after = await postGraphQL(server.graphqlUrl, { query: 'mutation { slowGreet(who: "A") { text } }' }, admin);
    expect(after.body.errors?.[0].message).toMatch(/Cannot query field "slowGreet"/);
    expect((await inFlight).body).toEqual({ data: { slowGreet: { text: 'slow answer' } } });
  } finally {
    await server.close();
  }
});
