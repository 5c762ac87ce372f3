import { createTestDatabase, type TestDatabase } from '../support/database';
import { postGraphQL } from '../support/graphql';
import { ADMIN_SECRET, startTestServer, type TestServer } from '../support/server';
import { bearer, signToken } from '../support/tokens';

let database: TestDatabase;
const servers: TestServer[] = [];
const admin = { 'x-gql-admin-secret': ADMIN_SECRET };

async function metadata(url: string, body: unknown) {
  const response = await fetch(`${url}/v1/metadata`, { method: 'POST', headers: { 'content-type': 'application/json', ...admin }, body: JSON.stringify(body) });
  return { status: response.status, body: (await response.json()) as Record<string, unknown> };
}

/** Milliseconds until `seen` holds for the answer to `query` on `url` as `headers` (undefined after 5 s). */
async function servedAfter(
  url: string,
  query: string,
  seen: (body: { data?: unknown; errors?: { message: string }[] }) => boolean,
  headers: Record<string, string> = admin,
): Promise<number | undefined> {
  const started = Date.now();
  while (Date.now() - started < 5_000) {
    if (seen((await postGraphQL(`${url}/v1/graphql`, { query }, headers)).body)) return Date.now() - started;
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  return undefined;
}

beforeAll(async () => {
  database = await createTestDatabase();
  servers.push(await startTestServer({}, { database }));
  servers.push(await startTestServer({}, { database }));
  await database.query(`CREATE TABLE notes (id int PRIMARY KEY, text text); INSERT INTO notes VALUES (1, 'first')`);
});

afterAll(async () => {
  for (const server of servers) await server.close();
  await database.drop();
});

it('a table tracked through one server is served by another within a second, and untracked the same way', async () => {
  const [first, second] = servers;
  const query = '{ notes { id text } }';
  expect((await postGraphQL(`${second.url}/v1/graphql`, { query }, admin)).body.errors?.[0].message).toMatch(/Cannot query field "notes"/);
  expect(await metadata(first.url, { type: 'pg_track_table', args: { table: 'notes' } })).toEqual({ status: 200, body: { message: 'success' } });
  const tracked = await servedAfter(second.url, query, (body) => JSON.stringify(body.data) === JSON.stringify({ notes: [{ id: 1, text: 'first' }] }));
  expect(tracked).toBeDefined();
  expect(tracked!).toBeLessThan(1_000);

  expect(await metadata(second.url, { type: 'pg_untrack_table', args: { table: 'notes' } })).toEqual({ status: 200, body: { message: 'success' } });
  const untracked = await servedAfter(first.url, query, (body) => body.errors?.[0]?.message.includes('Cannot query field "notes"') === true);
  expect(untracked).toBeDefined();
  expect(untracked!).toBeLessThan(1_000);
});

it("a permission created or dropped through one server changes the role's schema on another within a second", async () => {
  const [first, second] = servers;
  const reader = bearer(signToken({ roles: ['reader'] }));
  const query = '{ notes { text } }';
  expect(await metadata(first.url, { type: 'pg_track_table', args: { table: 'notes' } })).toEqual({ status: 200, body: { message: 'success' } });
  expect((await postGraphQL(`${second.url}/v1/graphql`, { query }, reader)).body.errors?.[0].message).toMatch(/Cannot query field "notes"/);
  const permission = { table: 'notes', role: 'reader', permission: { columns: ['text'], filter: {} } };
  expect((await metadata(first.url, { type: 'pg_create_select_permission', args: permission })).status).toBe(200);
  const opened = await servedAfter(second.url, query, (body) => JSON.stringify(body.data) === JSON.stringify({ notes: [{ text: 'first' }] }), reader);
  expect(opened).toBeDefined();
  expect(opened!).toBeLessThan(1_000);

  expect((await metadata(first.url, { type: 'pg_drop_select_permission', args: { table: 'notes', role: 'reader' } })).status).toBe(200);
  const closed = await servedAfter(second.url, query, (body) => body.errors?.[0]?.message.includes('Cannot query field "notes"') === true, reader);
  expect(closed).toBeDefined();
  expect(closed!).toBeLessThan(1_000);
  expect((await metadata(first.url, { type: 'pg_untrack_table', args: { table: 'notes' } })).status).toBe(200);
});
