import { randomUUID } from 'node:crypto';
import {
  CancelReportJobDocument,
  GenerateReportDocument,
  ReportJobDocument,
  ReportJobUpdatedDocument,
  type ReportInput,
  type ReportJobFieldsFragment,
} from '../generated/graphql';
import { createTestDatabase, type TestDatabase } from '../support/database';
import { graphql } from '../support/graphql';
import { ADMIN_SECRET, startTestServer, type TestServer } from '../support/server';
import { bearer, signToken } from '../support/tokens';
import { subscribe, subscriptionClient } from '../support/ws';

const ADMIN = { 'x-gql-admin-secret': ADMIN_SECRET };
const USER_ID = randomUUID();
const USER = bearer(signToken({ userId: USER_ID }));
const STRANGER = bearer(signToken({ userId: randomUUID() }));
/** Enough rows that a run takes a few seconds here, to act while it is RUNNING. */
const MANY_ROWS = 300_000;

let server: TestServer;

beforeAll(async () => {
  server = await startTestServer({ JOBS_POLL_INTERVAL_SECONDS: '1' });
  await server.database.query(`
    INSERT INTO users (email, name, company, created_at) VALUES
      ('ada@example.com', 'Ada', 'Analytical, "Engines"', '2024-01-01T00:00:00Z'),
      ('grace@example.com', '=HYPERLINK("http://evil")', NULL, '2024-06-01T00:00:00Z'),
      ('linus@example.com', 'Linus', 'Kernel', '2025-01-01T00:00:00Z')`);
});
afterAll(async () => {
  await server.close();
});

const generate = (input: ReportInput, headers: Record<string, string> = ADMIN, target = server) =>
  graphql(target.graphqlUrl, GenerateReportDocument, { input }, headers);
const jobAs = async (id: string, headers: Record<string, string>, target = server) =>
  (await graphql(target.graphqlUrl, ReportJobDocument, { job_id: id }, headers)).body.data?.reportJob;

function local(link: string, target = server): string {
  return link.replace(/^http:\/\/localhost:\d+/, target.url);
}

async function until(id: string, done: (job: ReportJobFieldsFragment) => boolean, target = server): Promise<ReportJobFieldsFragment> {
  for (let attempt = 0; attempt < 600; attempt++) {
    const job = await jobAs(id, ADMIN, target);
    if (job && done(job)) return job;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  throw new Error(`report ${id} did not reach the expected state in time`);
}
const finished = (job: ReportJobFieldsFragment) => ['COMPLETED', 'FAILED', 'CANCELLED'].includes(job.status);

describe('generateReport', () => {
  it('answers at once with the job id, QUEUED and an estimate, then writes the CSV', async () => {
    const output = (await generate({ kind: 'USERS', format: 'CSV' })).body.data!.generateReport;
    expect(output).toMatchObject({ success: true, status: 'QUEUED', job_id: expect.stringMatching(/^[0-9a-f-]{36}$/), errors: null });
    expect(output.estimated_duration).toBeGreaterThanOrEqual(1);

    const job = await until(output.job_id!, finished);
    expect(job).toMatchObject({ status: 'COMPLETED', kind: 'USERS', format: 'CSV', progress: 1, rows_written: 3, total_rows: 3, error: null });
    const response = await fetch(local(job.result_url!));
    expect(response.status).toBe(200);
    expect(response.headers.get('content-type')).toBe('text/csv; charset=utf-8');
    expect(response.headers.get('x-content-type-options')).toBe('nosniff');
    expect(response.headers.get('content-disposition')).toMatch(/^attachment; filename="users-report-[0-9a-f-]+\.csv"/);
    const lines = (await response.text()).split('\r\n');
    expect(lines[0]).toBe('id,email,name,company,email_verified,created_at');
    expect(lines.slice(1, 4).map((line) => line.split(',').slice(1).join(','))).toEqual([
      'ada@example.com,Ada,"Analytical, ""Engines""",false,2024-01-01T00:00:00.000Z',
      // A formula is defused with an apostrophe.
      `grace@example.com,"'=HYPERLINK(""http://evil"")",,false,2024-06-01T00:00:00.000Z`,
      'linus@example.com,Linus,Kernel,false,2025-01-01T00:00:00.000Z',
    ]);
    expect(lines[4]).toBe('');
    expect(job.result_size).toBe(Buffer.byteLength(lines.join('\r\n')));
  });

  it('writes JSON over a time range (from inclusive, to exclusive)', async () => {
    const output = (await generate({ kind: 'USERS', format: 'JSON', from: '2024-01-01T00:00:00Z', to: '2025-01-01T00:00:00Z' })).body.data!.generateReport;
    const job = await until(output.job_id!, finished);
    expect(job).toMatchObject({ status: 'COMPLETED', from: '2024-01-01T00:00:00.000Z', to: '2025-01-01T00:00:00.000Z' });
    const rows = (await (await fetch(local(job.result_url!))).json()) as { email: string; email_verified: boolean }[];
    expect(rows.map((row) => row.email)).toEqual(['ada@example.com', 'grace@example.com']);
    expect(rows[0].email_verified).toBe(false);
  });

  it('writes an empty report as a header alone, or []', async () => {
    const csv = await until((await generate({ kind: 'USERS', from: '2030-01-01T00:00:00Z' })).body.data!.generateReport.job_id!, finished);
    expect(await (await fetch(local(csv.result_url!))).text()).toBe('id,email,name,company,email_verified,created_at\r\n');
    const json = await until((await generate({ kind: 'JOBS', format: 'JSON', from: '2030-01-01T00:00:00Z' })).body.data!.generateReport.job_id!, finished);
    expect(await (await fetch(local(json.result_url!))).json()).toEqual([]);
  });

  it('refuses a range that ends before it starts, queuing nothing', async () => {
    const [before] = await server.database.query<{ count: string }>('SELECT count(*) FROM report_jobs');
    const output = (await generate({ kind: 'USERS', from: '2025-01-01T00:00:00Z', to: '2024-01-01T00:00:00Z' })).body.data!.generateReport;
    expect(output).toMatchObject({ success: false, job_id: null, status: null, errors: [{ field: 'to', code: 'INVALID_FORMAT' }] });
    const [after] = await server.database.query<{ count: string }>('SELECT count(*) FROM report_jobs');
    expect(after.count).toBe(before.count);
  });

  it('keeps USERS and JOBS reports for admins, and lists only your own files for you', async () => {
    const users = (await generate({ kind: 'USERS' }, USER)).body.data!.generateReport;
    expect(users).toMatchObject({ success: false, job_id: null, errors: [{ field: 'kind', code: 'FORBIDDEN' }] });
    expect((await generate({ kind: 'USERS' }, {})).body.errors![0].extensions!.code).toBe('FORBIDDEN');

    await server.database.query(
      `INSERT INTO files (owner_id, file_name, file_type, file_size, storage_key, options) VALUES
        ($1, 'mine.txt', 'text/plain', 1, 'files/x/content', '{}'), ('someone-else', 'theirs.txt', 'text/plain', 1, 'files/y/content', '{}')`,
      [USER_ID],
    );
    const mine = (await generate({ kind: 'FILES', format: 'JSON' }, USER)).body.data!.generateReport;
    const job = await until(mine.job_id!, finished);
    expect(job.requested_by).toBe(USER_ID);
    const rows = (await (await fetch(local(job.result_url!))).json()) as { file_name: string; file_size: number }[];
    expect(rows).toEqual([expect.objectContaining({ file_name: 'mine.txt', file_size: 1, owner_id: USER_ID })]);
    const all = await until((await generate({ kind: 'FILES', format: 'JSON' })).body.data!.generateReport.job_id!, finished);
    expect(((await (await fetch(local(all.result_url!))).json()) as unknown[]).length).toBe(2);
  });

  it("shows a job to the user who asked and to admins; another user's job is refused", async () => {
    const id = (await generate({ kind: 'FILES' }, USER)).body.data!.generateReport.job_id!;
    const job = await until(id, finished);
    expect((await jobAs(id, USER))?.job_id).toBe(id);
    expect(await jobAs(id, STRANGER)).toBeNull();
    expect(await jobAs(randomUUID(), USER)).toBeNull();

    const cancel = await graphql(server.graphqlUrl, CancelReportJobDocument, { job_id: id }, STRANGER);
    expect(cancel.body.errors![0].extensions!.code).toBe('NOT_FOUND');

    const path = `${server.url}/reports/${id}/result`;
    expect((await fetch(path, { headers: USER })).status).toBe(200);
    expect((await fetch(path, { headers: STRANGER })).status).toBe(404);
    expect((await fetch(path)).status).toBe(401);
    // Its first character changed to another (an 'A' left as it was would pass the signature 1 time in 64).
    const tampered = local(job.result_url!).replace(/signature=(.)/, (_match, first: string) => `signature=${first === 'A' ? 'B' : 'A'}`);
    expect(tampered).not.toBe(local(job.result_url!));
    const refused = await fetch(tampered);
    expect([refused.status, ((await refused.json()) as { error_code: string }).error_code]).toEqual([403, 'INVALID_SIGNATURE']);
  });
});

describe('a large report: progress, the subscription, cancellation', () => {
  beforeAll(async () => {
    await server.database.query(
      `INSERT INTO users (email, name, created_at)
       SELECT 'bulk' || n || '@example.com', 'Bulk ' || n, '2023-01-01T00:00:00Z'::timestamptz + n * interval '1 second'
       FROM generate_series(1, $1) AS n`,
      [MANY_ROWS],
    );
    await server.database.query('ANALYZE users');
  });

  it('estimates the duration from the rows, and the subscription receives each state up to COMPLETED', async () => {
    const client = subscriptionClient(server.wsUrl, { headers: ADMIN });
    try {
      const output = (await generate({ kind: 'USERS', from: '2023-01-01T00:00:00Z', to: '2024-01-01T00:00:00Z' })).body.data!.generateReport;
      // The planner's estimate of 300,000 rows, at ROWS_PER_SECOND (40,000).
      expect(output.estimated_duration).toBeGreaterThanOrEqual(5);
      expect(output.estimated_duration).toBeLessThanOrEqual(10);
      const updates = subscribe(client, ReportJobUpdatedDocument, { job_id: output.job_id! });
      await updates.ready;
      const seen: ReportJobFieldsFragment[] = [];
      while (!seen.length || !finished(seen[seen.length - 1])) {
        seen.push((await updates.next(30_000)).data!.reportJobUpdated);
      }
      updates.dispose();
      const statuses = seen.map((job) => job.status);
      expect(statuses[statuses.length - 1]).toBe('COMPLETED');
      expect(statuses.slice(0, -1).every((status) => status === 'RUNNING')).toBe(true);
      const progress = seen.map((job) => job.progress);
      expect(progress).toEqual([...progress].sort((a, b) => a - b));
      expect(seen.some((job) => job.progress > 0 && job.progress < 1)).toBe(true);
      expect(seen[seen.length - 1]).toMatchObject({ rows_written: MANY_ROWS, total_rows: MANY_ROWS, progress: 1 });
    } finally {
      await client.dispose();
    }
  });

  it('cancels a RUNNING job: the worker stops and keeps nothing, and subscribers see CANCELLED', async () => {
    const id = (await generate({ kind: 'USERS', format: 'JSON' })).body.data!.generateReport.job_id!;
    const adminClient = subscriptionClient(server.wsUrl, { headers: ADMIN });
    const strangerClient = subscriptionClient(server.wsUrl, { headers: STRANGER });
    const updates = subscribe(adminClient, ReportJobUpdatedDocument, { job_id: id });
    const forStranger = subscribe(strangerClient, ReportJobUpdatedDocument, { job_id: id });
    try {
      await Promise.all([updates.ready, forStranger.ready]);
      await until(id, (job) => job.status === 'RUNNING' && job.rows_written > 0);
      const cancelled = (await graphql(server.graphqlUrl, CancelReportJobDocument, { job_id: id }, ADMIN)).body.data!.cancelReportJob;
      expect(cancelled).toMatchObject({ status: 'CANCELLED', result_url: null });
      let last: ReportJobFieldsFragment;
      do last = (await updates.next(10_000)).data!.reportJobUpdated;
      while (last.status === 'RUNNING');
      expect(last.status).toBe('CANCELLED');
      await expect(forStranger.next(500)).rejects.toThrow(/no subscription result/);
    } finally {
      updates.dispose();
      forStranger.dispose();
      await adminClient.dispose();
      await strangerClient.dispose();
    }
    // The worker notices at its next progress record and rolls its writes back.
    await new Promise((resolve) => setTimeout(resolve, 1500));
    const job = await jobAs(id, ADMIN);
    expect(job).toMatchObject({ status: 'CANCELLED', result_url: null, result_size: null });
    expect(await server.database.query('SELECT 1 FROM storage_objects WHERE key = $1', [`reports/${id}/result`])).toEqual([]);
    const again = await graphql(server.graphqlUrl, CancelReportJobDocument, { job_id: id }, ADMIN);
    expect(again.body.errors![0]).toMatchObject({ extensions: { code: 'BAD_REQUEST' }, message: expect.stringMatching(/CANCELLED/) });
    expect((await fetch(`${server.url}/reports/${id}/result`, { headers: ADMIN })).status).toBe(404);
  });
});

describe('a QUEUED job', () => {
  let database: TestDatabase;
  let api: TestServer;
  beforeAll(async () => {
    database = await createTestDatabase();
    api = await startTestServer({ PLINTH_PROCESS_ROLES: 'api' }, { database });
  });
  afterAll(async () => {
    await api.close();
    await database.drop();
  });

  it('is cancelled by the user who asked, and a worker that picks it up later does nothing', async () => {
    const id = (await generate({ kind: 'FILES' }, USER, api)).body.data!.generateReport.job_id!;
    expect((await jobAs(id, USER, api))?.status).toBe('QUEUED');
    const cancelled = (await graphql(api.graphqlUrl, CancelReportJobDocument, { job_id: id }, USER)).body.data!.cancelReportJob;
    expect(cancelled).toMatchObject({ status: 'CANCELLED', started_at: null });

    const worker = await startTestServer({ PLINTH_PROCESS_ROLES: 'worker', JOBS_POLL_INTERVAL_SECONDS: '1' }, { database });
    try {
      const [queueJob] = await database.query<{ state: string }>(
        `SELECT j.state FROM pgboss.job j JOIN report_jobs r ON r.queue_job_id = j.id WHERE r.id = $1`,
        [id],
      );
      for (let attempt = 0; attempt < 50 && queueJob.state !== 'completed'; attempt++) {
        await new Promise((resolve) => setTimeout(resolve, 100));
        const [current] = await database.query<{ state: string }>(
          `SELECT j.state FROM pgboss.job j JOIN report_jobs r ON r.queue_job_id = j.id WHERE r.id = $1`,
          [id],
        );
        queueJob.state = current.state;
      }
      expect(queueJob.state).toBe('completed');
      expect(await jobAs(id, USER, api)).toMatchObject({ status: 'CANCELLED', started_at: null });
    } finally {
      await worker.close();
    }
  });
});

describe('failures', () => {
  let database: TestDatabase;
  let api: TestServer;
  beforeAll(async () => {
    database = await createTestDatabase();
    api = await startTestServer({ PLINTH_PROCESS_ROLES: 'api' }, { database });
  });
  afterAll(async () => {
    await api.close();
    await database.drop();
  });

  it('records FAILED, without the database error text, when the report cannot be written', async () => {
    const id = (await generate({ kind: 'USERS' }, ADMIN, api)).body.data!.generateReport.job_id!;
    // The report's statement will fail: a column it reads is gone.
    await database.query('ALTER TABLE users RENAME COLUMN company TO organisation');
    const worker = await startTestServer({ PLINTH_PROCESS_ROLES: 'worker', JOBS_POLL_INTERVAL_SECONDS: '1' }, { database });
    try {
      const job = await until(id, finished, api);
      expect(job).toMatchObject({ status: 'FAILED', result_url: null, error: expect.stringMatching(/internal error/) });
      expect(job.error).not.toMatch(/company|column/);
    } finally {
      await worker.close();
      await database.query('ALTER TABLE users RENAME COLUMN organisation TO company');
    }
  });

  it('records FAILED at the first read once the queue gave up on a job (its worker crashed too often)', async () => {
    const id = (await generate({ kind: 'USERS' }, ADMIN, api)).body.data!.generateReport.job_id!;
    await database.query(`UPDATE report_jobs SET status = 'RUNNING' WHERE id = $1`, [id]);
    await database.query(`UPDATE pgboss.job SET state = 'failed' WHERE id = (SELECT queue_job_id FROM report_jobs WHERE id = $1)`, [id]);
    const job = await jobAs(id, ADMIN, api);
    expect(job).toMatchObject({ status: 'FAILED', error: expect.stringMatching(/too many times/) });
    expect((await database.query<{ status: string }>('SELECT status FROM report_jobs WHERE id = $1', [id]))[0].status).toBe('FAILED');
  });
});

describe('the handler route /actions/generate-report', () => {
  const call = (input: unknown, headers: Record<string, string>) =>
    fetch(`${server.url}/actions/generate-report`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...headers },
      body: JSON.stringify({ action: { name: 'generateReport' }, input: { input }, session_variables: {} }),
    });

  it('queues a report for the session user', async () => {
    const response = await call({ kind: 'FILES', format: 'JSON' }, { ...ADMIN, 'x-gql-role': 'user', 'x-gql-user-id': USER_ID });
    expect(response.status).toBe(200);
    const body = (await response.json()) as { success: boolean; job_id: string; status: string; estimated_duration: number };
    expect(body).toMatchObject({ success: true, status: 'QUEUED', estimated_duration: expect.any(Number) });
    expect((await jobAs(body.job_id, USER))?.requested_by).toBe(USER_ID);
  });

  it('answers a refused kind and bad input with the envelope', async () => {
    const forbidden = await call({ kind: 'USERS' }, { ...ADMIN, 'x-gql-role': 'user', 'x-gql-user-id': USER_ID });
    expect(await forbidden.json()).toMatchObject({ success: false, error_code: 'FORBIDDEN', errors: [{ field: 'kind' }] });
    const unknown = await call({ kind: 'PAYMENTS' }, ADMIN);
    expect(unknown.status).toBe(400);
    expect(await unknown.json()).toMatchObject({ success: false, error_code: 'VALIDATION_ERROR' });
    const missing = await call({}, ADMIN);
    expect(await missing.json()).toMatchObject({ success: false, error_code: 'VALIDATION_ERROR', errors: [{ field: 'kind', code: 'REQUIRED_FIELD' }] });
  });

  it('refuses the unauthorised role and a missing admin secret', async () => {
    expect((await call({ kind: 'FILES' }, { ...ADMIN, 'x-gql-role': 'anonymous' })).status).toBe(403);
    expect((await call({ kind: 'FILES' }, {})).status).toBe(401);
  });
});

describe('the reports quota (RATE_LIMIT_REPORTS_*, at its default of 20 an hour for each user)', () => {
  const route = (userId: string) =>
    fetch(`${server.url}/actions/generate-report`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...ADMIN, 'x-gql-role': 'user', 'x-gql-user-id': userId },
      body: JSON.stringify({ action: { name: 'generateReport' }, input: { input: { kind: 'FILES', format: 'JSON' } } }),
    });
  const jobCount = async () => Number((await server.database.query<{ count: string }>('SELECT count(*) FROM report_jobs'))[0].count);

  it("refuses a user's 21st request of the hour with RATE_LIMITED on GraphQL and 429 on the handler route, queuing nothing; others go on", async () => {
    const userId = randomUUID();
    const user = bearer(signToken({ userId }));
    for (let count = 0; count < 10; count++) expect((await generate({ kind: 'FILES', format: 'JSON' }, user)).body.data!.generateReport.success).toBe(true);
    for (let count = 0; count < 10; count++) expect(await (await route(userId)).json()).toMatchObject({ success: true });
    const before = await jobCount();

    const refused = await generate({ kind: 'FILES', format: 'JSON' }, user);
    expect(refused.body.data).toBeNull();
    expect(refused.body.errors).toEqual([
      {
        message: expect.stringMatching(/^Too many report requests: at most 20 per hour for each user; try again in \d+ s$/),
        locations: expect.any(Array),
        path: ['generateReport'],
        extensions: { code: 'RATE_LIMITED', retryAfter: expect.any(Number) },
      },
    ]);
    const viaRoute = await route(userId);
    expect(viaRoute.status).toBe(429);
    expect(viaRoute.headers.get('retry-after')).toMatch(/^\d+$/);
    expect(await viaRoute.json()).toMatchObject({ success: false, error_code: 'RATE_LIMITED', message: expect.stringMatching(/^Too many report requests/) });
    expect(await jobCount()).toBe(before);

    expect((await generate({ kind: 'FILES', format: 'JSON' }, STRANGER)).body.data!.generateReport.success).toBe(true);
    expect((await generate({ kind: 'FILES', format: 'JSON' }, ADMIN)).body.data!.generateReport.success).toBe(true);
  });
});
