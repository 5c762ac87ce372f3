import { GenerateReportDocument, ReportJobDocument, type ReportJobFieldsFragment } from '../generated/graphql';
import { createTestDatabase, type TestDatabase } from '../support/database';
import { graphql } from '../support/graphql';
import { ADMIN_SECRET, startTestServer, testEnvironment, type TestServer } from '../support/server';
import { spawnServer, type SpawnedServer } from '../support/spawn';

const ADMIN = { 'x-gql-admin-secret': ADMIN_SECRET };
const ROWS = 200_000;
/** The report queue's timeout, which is also the lease a crashed run holds its job for. */
const TIMEOUT_SECONDS = 15;

let database: TestDatabase;
/** Takes the request and answers queries; runs no worker. */
let api: TestServer;
const running = new Set<SpawnedServer>();

async function startWorker(): Promise<SpawnedServer> {
  const worker = await spawnServer(
    testEnvironment(database.url, {
      PLINTH_PROCESS_ROLES: 'worker',
      JOBS_REPORT_GENERATION_TIMEOUT_SECONDS: String(TIMEOUT_SECONDS),
      JOBS_MAINTENANCE_INTERVAL_SECONDS: '1',
      JOBS_POLL_INTERVAL_SECONDS: '1',
      JOBS_SHUTDOWN_GRACE_SECONDS: '1',
    }),
  );
  running.add(worker);
  void worker.exited.then(() => running.delete(worker));
  return worker;
}

async function job(id: string): Promise<ReportJobFieldsFragment> {
  return (await graphql(api.graphqlUrl, ReportJobDocument, { job_id: id }, ADMIN)).body.data!.reportJob!;
}

async function until(id: string, done: (report: ReportJobFieldsFragment) => boolean, timeoutMs: number): Promise<ReportJobFieldsFragment> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const report = await job(id);
    if (done(report)) return report;
    if (Date.now() > deadline) throw new Error(`report ${id} stayed ${JSON.stringify(report)}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

beforeAll(async () => {
  database = await createTestDatabase();
  api = await startTestServer({ PLINTH_PROCESS_ROLES: 'api' }, { database });
  await database.query(
    `INSERT INTO users (email, name, created_at)
     SELECT 'crash' || n || '@example.com', 'Crash ' || n, '2023-01-01T00:00:00Z'::timestamptz + n * interval '1 second'
     FROM generate_series(1, $1) AS n`,
    [ROWS],
  );
});
afterAll(async () => {
  for (const worker of running) worker.child.kill('SIGKILL');
  await Promise.all([...running].map((worker) => worker.exited));
  await api.close();
  await database.drop();
});

describe('a report whose worker is killed mid-run', () => {
  it('is run again from the start by the next worker and completes, with every row once', async () => {
    const first = await startWorker();
    const id = (await graphql(api.graphqlUrl, GenerateReportDocument, { input: { kind: 'USERS', format: 'CSV' } }, ADMIN)).body.data!.generateReport.job_id!;
    const midway = await until(id, (report) => report.status === 'RUNNING' && report.rows_written > 0, 30_000);
    first.child.kill('SIGKILL');
    await first.exited;
    expect(midway.rows_written).toBeLessThan(ROWS);

    // Nothing of the killed run is kept: its transaction died with it.
    expect(await database.query('SELECT 1 FROM storage_objects WHERE key = $1', [`reports/${id}/result`])).toEqual([]);
    expect((await job(id)).status).toBe('RUNNING');

    await startWorker();
    const done = await until(id, (report) => report.status !== 'RUNNING' && report.status !== 'QUEUED', (TIMEOUT_SECONDS + 30) * 1000);
    expect(done).toMatchObject({ status: 'COMPLETED', rows_written: ROWS, total_rows: ROWS, progress: 1, error: null });
    const [row] = await database.query<{ attempts: number }>('SELECT attempts FROM report_jobs WHERE id = $1', [id]);
    expect(row.attempts).toBe(2);

    const csv = await (await fetch(`${api.url}/reports/${id}/result`, { headers: ADMIN })).text();
    const lines = csv.split('\r\n');
    expect(lines).toHaveLength(ROWS + 2); // the header, the rows, and the empty string after the last CRLF
    const emails = new Set(lines.slice(1, -1).map((line) => line.split(',')[1]));
    expect(emails.size).toBe(ROWS);
  });
});
