import { createTestDatabase, type TestDatabase } from '../support/database';
import { startTestServer } from '../support/server';
import { startWebhookReceiver, type WebhookReceiver } from '../support/webhook-receiver';
import { metadataRequest } from '../support/metadata';

let database: TestDatabase;
let receiver: WebhookReceiver;

beforeAll(async () => {
  database = await createTestDatabase();
  receiver = await startWebhookReceiver();
});
afterAll(async () => {
  await receiver.close();
  await database.drop();
});

describe('a graceful shutdown', () => {
  it('finishes the attempts in flight and gives back the events it claimed ahead, for another process to take at once', async () => {
    receiver.answer('/slow', { status: 200, delayMs: 300 });
    const server = await startTestServer({ EVENTS_TRIGGER_CONCURRENCY: '2', EVENTS_POLL_INTERVAL_MS: '200' }, { database });
    await database.query('CREATE TABLE tasks (id serial PRIMARY KEY)');
    const created = await metadataRequest(server.url, {
      type: 'pg_create_event_trigger',
      args: { name: 'slow', table: 'tasks', webhook: `${receiver.url}/slow`, insert: { columns: '*' } },
    });
    expect(created.status).toBe(200);
    await database.query('INSERT INTO tasks SELECT FROM generate_series(1, 10)');
    await receiver.waitFor('/slow', 2);
    await server.server.close();
    const rows = await database.query<{ delivered: boolean; locked: Date | null; tries: number }>(
      "SELECT delivered, locked, tries FROM event_log WHERE trigger_name = 'slow'",
    );
    expect(rows).toHaveLength(10);
    // Two were in flight (concurrency 2) and finished; those claimed ahead are free again, none is locked.
    expect(rows.filter((row) => row.locked !== null)).toEqual([]);
    const delivered = rows.filter((row) => row.delivered).length;
    expect(delivered).toBe(receiver.at('/slow').length);
    expect(delivered).toBeGreaterThanOrEqual(2);
    expect(delivered).toBeLessThan(10);
    expect(rows.filter((row) => !row.delivered).every((row) => row.tries === 0)).toBe(true);
  });
});
