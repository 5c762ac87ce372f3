import { randomUUID } from 'node:crypto';
import { createTestDatabase, type TestDatabase } from '../support/database';
import { spawnServer } from '../support/spawn';
import { testEnvironment } from '../support/server';
import { ADMIN } from './support';

let database: TestDatabase;

beforeAll(async () => {
  database = await createTestDatabase();
});
afterAll(async () => {
  await database.drop();
});

async function admin<T>(url: string, query: string): Promise<T> {
  const response = await fetch(`${url}/v1/graphql`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...ADMIN },
    body: JSON.stringify({ query }),
  });
  return ((await response.json()) as { data: T }).data;
}

it('loses no acknowledged event when the process is killed with SIGKILL mid-stream, and keeps counts consistent', async () => {
  const server = await spawnServer(testEnvironment(database.url, { PLINTH_PROCESS_ROLES: 'api' }));
  const { createErrorProject } = await admin<{ createErrorProject: { id: number } }>(
    server.url,
    'mutation { createErrorProject(input: {name: "Crash", slug: "crash", service: "crash"}) { id } }',
  );
  const { createErrorToken } = await admin<{ createErrorToken: { token: string } }>(
    server.url,
    `mutation { createErrorToken(input: {project: "${createErrorProject.id}", kind: DSN, name: "k"}) { token } }`,
  );
  const acknowledged: string[] = [];
  let killed = false;
  const sender = async (lane: number) => {
    for (let index = 0; !killed; index++) {
      const eventId = randomUUID();
      try {
        const response = await fetch(`${server.url}/api/errors/events`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', authorization: `Bearer ${createErrorToken.token}` },
          body: JSON.stringify({ event_id: eventId, message: `lane ${lane} failure ${index % 7}`, level: 'error' }),
        });
        if (response.status === 200) acknowledged.push(eventId);
      } catch {
        // The connection died with the process: not acknowledged.
      }
    }
  };
  const lanes = Array.from({ length: 16 }, (_, lane) => sender(lane));
  while (acknowledged.length < 300) await new Promise((resolve) => setTimeout(resolve, 20));
  server.child.kill('SIGKILL');
  expect((await server.exited).signal).toBe('SIGKILL');
  killed = true;
  await Promise.all(lanes);

  const stored = new Set(
    (await database.query<{ event_id: string }>('SELECT event_id FROM error_events WHERE project_id = $1', [createErrorProject.id])).map((row) => row.event_id),
  );
  const lost = acknowledged.filter((id) => !stored.has(id));
  // The kill comes once 300 are acknowledged; on a slow machine no further answer may get out before it.
  expect({ acknowledged: acknowledged.length >= 300, lost }).toEqual({ acknowledged: true, lost: [] });
  // Each batch is one statement: the errors' counts are exactly the events stored.
  const [{ total }] = await database.query<{ total: string }>('SELECT sum(occurrence_count) AS total FROM error_groups WHERE project_id = $1', [
    createErrorProject.id,
  ]);
  expect(Number(total)).toBe(stored.size);
}, 120_000);
