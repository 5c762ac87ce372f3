import { createTestDatabase, type TestDatabase } from '../support/database';
import { startTestServer, testEnvironment, type TestServer } from '../support/server';
import { spawnServer, type SpawnedServer } from '../support/spawn';
import { startWebhookReceiver, type WebhookReceiver } from '../support/webhook-receiver';
import { metadataRequest } from '../support/metadata';
import { eventually } from './support';

let database: TestDatabase;
/** Serves the metadata API; delivers nothing. */
let api: TestServer;
let receiver: WebhookReceiver;
const running = new Set<SpawnedServer>();
/** Requests for one event seen in flight at once, by event id (must stay empty). */
const overlaps: string[] = [];
const inFlight = new Set<string>();

/** `plinth start` in a process of its own, worker role only: it delivers events. */
async function startWorker(instance: string): Promise<SpawnedServer> {
  const worker = await spawnServer(
    testEnvironment(database.url, {
      PLINTH_PROCESS_ROLES: 'worker',
      EVENTS_POLL_INTERVAL_MS: '200',
      EVENTS_LEASE_MARGIN_SECONDS: '1',
      EVENTS_TRIGGER_CONCURRENCY: '8',
      PLINTH_TEST_INSTANCE: instance,
    }),
  );
  running.add(worker);
  void worker.exited.then(() => running.delete(worker));
  return worker;
}

beforeAll(async () => {
  database = await createTestDatabase();
  receiver = await startWebhookReceiver();
  api = await startTestServer({ PLINTH_PROCESS_ROLES: 'api' }, { database });
  await database.query('CREATE TABLE jobs (id serial PRIMARY KEY, batch text NOT NULL)');
  // The crash case's webhook timeout is short so that its lease (timeout + margin) ends soon after
  // the kill; the shared case's is long, so that a worker slowed by a loaded machine never times
  // an answer out and retries it (an honest second attempt, which this test would count as a repeat).
  for (const [name, delayMs, timeoutSeconds] of [
    ['shared', 5, 30],
    ['crash', 400, 1],
  ] as const) {
    receiver.answer(`/${name}`, (request) => {
      const id = request.body.id as string;
      if (inFlight.has(id)) overlaps.push(id);
      inFlight.add(id);
      setTimeout(() => inFlight.delete(id), delayMs);
      return { status: 200, delayMs };
    });
    const created = await metadataRequest(api.url, {
      type: 'pg_create_event_trigger',
      args: {
        name,
        table: 'jobs',
        webhook: `${receiver.url}/${name}`,
        insert: { columns: '*' },
        condition: { new: { batch: { _eq: name } } },
        headers: [{ name: 'X-Instance', value: '{{PLINTH_TEST_INSTANCE}}' }],
        retry_conf: { num_retries: 5, interval_sec: 1, timeout_sec: timeoutSeconds },
      },
    });
    expect(created.status).toBe(200);
  }
}, 60_000);
/** Kills every worker still running, so that none of one case delivers the next case's events (a failed case stops before its own clean-up). */
async function killWorkers(): Promise<void> {
  for (const worker of running) worker.child.kill('SIGKILL');
  await Promise.all([...running].map((worker) => worker.exited));
}
afterEach(killWorkers);
afterAll(async () => {
  await killWorkers();
  await api.close();
  await receiver.close();
  await database.drop();
});

const deliveredCount = async (trigger: string) =>
  (await database.query<{ n: number }>('SELECT count(*)::int AS n FROM event_log WHERE trigger_name = $1 AND delivered', [trigger]))[0].n;

describe('delivery across processes', () => {
  it('two processes on one database deliver every event, share the work, and never attempt one twice at once', async () => {
    await Promise.all([startWorker('a'), startWorker('b')]);
    await database.query("INSERT INTO jobs (batch) SELECT 'shared' FROM generate_series(1, 300)");
    await eventually(async () => ((await deliveredCount('shared')) === 300 ? true : undefined), 60_000, 'all 300 events delivered');
    const requests = receiver.at('/shared');
    const ids = requests.map((request) => request.body.id as string);
    expect(new Set(ids).size).toBe(300);
    expect(ids).toHaveLength(300);
    expect(overlaps).toEqual([]);
    const byInstance = new Map<string, number>();
    for (const request of requests) byInstance.set(String(request.headers['x-instance']), (byInstance.get(String(request.headers['x-instance'])) ?? 0) + 1);
    expect([...byInstance.keys()].sort()).toEqual(['a', 'b']);
  }, 90_000);

  it('kill -9 while events are pending and in flight loses none: a new process delivers them all after the lease', async () => {
    const first = await startWorker('doomed');
    await database.query("INSERT INTO jobs (batch) SELECT 'crash' FROM generate_series(1, 40)");
    await receiver.waitFor('/crash', 3, 30_000);
    first.child.kill('SIGKILL');
    await first.exited;
    const [{ locked }] = await database.query<{ locked: number }>(
      "SELECT count(*)::int AS locked FROM event_log WHERE trigger_name = 'crash' AND locked IS NOT NULL AND NOT delivered",
    );
    const delivered = await deliveredCount('crash');
    expect(delivered).toBeLessThan(40);
    await startWorker('heir');
    await eventually(async () => ((await deliveredCount('crash')) === 40 ? true : undefined), 60_000, 'all 40 events delivered after the restart');
    const ids = new Set(receiver.at('/crash').map((request) => request.body.id as string));
    expect(ids.size).toBe(40);
    // The attempts cut short by the kill were made again by the heir (at least once).
    const byHeir = receiver.at('/crash').filter((request) => request.headers['x-instance'] === 'heir');
    expect(byHeir.length).toBeGreaterThanOrEqual(40 - delivered);
    expect(locked + delivered).toBeGreaterThan(0);
    expect(overlaps).toEqual([]);
  }, 120_000);
});
