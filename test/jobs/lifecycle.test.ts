import { parsePrometheus, sampleValue } from '../support/prometheus';
import { createTestDatabase, type TestDatabase } from '../support/database';
import { createRunsTable, eventually, jobRow, RECORDER_QUEUE, recorderModule, runsOf } from '../support/job-recorder';
import type { AnyModule } from '../../src/platform/module';
import { startTestServer, type TestServer } from '../support/server';

let database: TestDatabase;
const servers: TestServer[] = [];
let worker: TestServer;

async function start(overrides: Record<string, string>, logTo?: { write(line: string): void }): Promise<TestServer> {
  const server = await startTestServer({ JOBS_POLL_INTERVAL_SECONDS: '1', ...overrides }, { database, logTo, modules: [recorderModule()] });
  servers.push(server);
  return server;
}

async function stop(server: TestServer): Promise<void> {
  servers.splice(servers.indexOf(server), 1);
  await server.close();
}

beforeAll(async () => {
  database = await createTestDatabase();
  await createRunsTable(database);
});
afterAll(async () => {
  for (const server of servers.splice(0).reverse()) await server.close();
  await database.drop();
});

describe('process roles', () => {
  let api: TestServer;
  let waiting: string;

  it('api: serves GraphQL and sends jobs, but runs none', async () => {
    api = await start({ PLINTH_PROCESS_ROLES: 'api' });
    waiting = await api.server.jobs.send(RECORDER_QUEUE, {});
    const session = await fetch(api.graphqlUrl, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ query: '{ session { role } }' }),
    });
    expect(await session.json()).toEqual({ data: { session: { role: 'anonymous' } } });
    // Two poll intervals and more: a worker would have run it.
    await new Promise((resolve) => setTimeout(resolve, 2500));
    expect((await jobRow(database, waiting)).state).toBe('created');
    expect(await runsOf(database, waiting)).toEqual([]);
  });

  it('worker: runs the jobs and answers the health probes and /metrics, and nothing else over HTTP', async () => {
    worker = await start({ PLINTH_PROCESS_ROLES: 'worker' });
    await eventually(async () => (await jobRow(database, waiting)).state === 'completed', 10_000, 'the waiting job completing');

    expect(await (await fetch(`${worker.url}/healthz`)).json()).toEqual({ status: 'ok' });
    expect(await (await fetch(`${worker.url}/readyz`)).json()).toEqual({ status: 'ready', database: 'ok' });
    const metrics = parsePrometheus(await (await fetch(`${worker.url}/metrics`)).text());
    expect(sampleValue(metrics, 'plinth_jobs', { queue: RECORDER_QUEUE, state: 'completed' })).toBeGreaterThanOrEqual(1);
    const graphql = await fetch(worker.graphqlUrl, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ query: '{ session { role } }' }),
    });
    expect(graphql.status).toBe(404);
    expect(await graphql.json()).toEqual({ success: false, message: 'Route POST /v1/graphql not found', error_code: 'NOT_FOUND' });
  });
});

describe('shutdown', () => {
  it('lets running jobs finish within the grace, releases the others to other workers, and logs no error', async () => {
    const lines: string[] = [];
    const stopping = await start(
      { PLINTH_PROCESS_ROLES: 'worker', LOG_LEVEL: 'info', JOBS_SHUTDOWN_GRACE_SECONDS: '1', PLINTH_SHUTDOWN_TIMEOUT_MS: '5000' },
      { write: (line) => void lines.push(line) },
    );
    // Only this process may take the jobs: the other worker stops first.
    await stop(worker);

    const short = await stopping.server.jobs.send(RECORDER_QUEUE, { sleepMs: 400 });
    const long = await stopping.server.jobs.send(RECORDER_QUEUE, { sleepMs: 3000 });
    await eventually(async () => (await runsOf(database, long)).length === 1 && (await runsOf(database, short)).length === 1, 10_000, 'both jobs starting');

    const closing = Date.now();
    await stop(stopping);
    expect(Date.now() - closing).toBeLessThan(2500);

    expect((await jobRow(database, short)).state).toBe('completed');
    expect(await jobRow(database, long)).toEqual({
      state: 'retry',
      retry_count: 0, // a release is not a failed attempt
      started_on: null,
      output: { name: 'Released', message: 'the worker shut down before the job finished' },
    });
    expect((await runsOf(database, long))[0].ended_at).toBeNull(); // aborted through its signal
    const logged = lines.map((line) => JSON.parse(line) as { level: number; msg: string });
    expect(logged.filter((line) => line.level >= 50)).toEqual([]);
    expect(lines.join('')).not.toMatch(/"stack"|\\n\s+at /);
    expect(logged.map((line) => line.msg)).toContain('released jobs still running at shutdown');

    // Released at once: the next worker runs it again, as a first attempt.
    await start({ PLINTH_PROCESS_ROLES: 'worker' });
    await eventually(async () => (await jobRow(database, long)).state === 'completed', 15_000, 'the released job completing');
    expect((await runsOf(database, long)).map((run) => run.attempt)).toEqual([0, 0]);
  });

  it('names a step that hangs, leaves it behind at PLINTH_SHUTDOWN_TIMEOUT_MS and still releases the database', async () => {
    const lines: string[] = [];
    const hanging: AnyModule = { name: 'test-hanging', create: () => ({}), work: async () => () => new Promise<void>(() => undefined) };
    const server = await startTestServer(
      { PLINTH_PROCESS_ROLES: 'worker', LOG_LEVEL: 'info', JOBS_SHUTDOWN_GRACE_SECONDS: '0', PLINTH_SHUTDOWN_TIMEOUT_MS: '1500' },
      { database, logTo: { write: (line) => void lines.push(line) }, modules: [hanging] },
    );

    const closing = Date.now();
    expect(await server.server.close()).toEqual(['test-hanging workers']);
    const took = Date.now() - closing;
    expect(took).toBeGreaterThanOrEqual(1400);
    expect(took).toBeLessThan(8000);
    expect(server.server.dataSource.isInitialized).toBe(false);
    const logged = lines.map((line) => JSON.parse(line) as { level: number; msg: string; step?: string });
    expect(logged.filter((line) => line.level >= 50).map(({ msg, step }) => ({ msg, step }))).toEqual([
      { msg: 'shutdown step did not finish in time (PLINTH_SHUTDOWN_TIMEOUT_MS); going on', step: 'test-hanging workers' },
    ]);
  });
});
