import { CancelJobDocument, JobsDocument, RetryJobDocument } from '../generated/graphql';
import { createTestDatabase, type TestDatabase } from '../support/database';
import { graphql } from '../support/graphql';
import { createRunsTable, eventually, jobRow, RECORDER_QUEUE, recorderModule } from '../support/job-recorder';
import { ADMIN_SECRET, startTestServer, testEnvironment, type TestServer } from '../support/server';
import { runCli } from '../support/spawn';
import { bearer, signToken } from '../support/tokens';

const STACK_TRACE = /\n\s+at \S+/;
const asAdmin = { 'x-gql-admin-secret': ADMIN_SECRET };
const settings = { JOBS_TEST_RECORD_RETRY_LIMIT: '0', JOBS_POLL_INTERVAL_SECONDS: '1' };

let database: TestDatabase;
/** Serves the API and runs no worker, so the jobs stay in the states the tests put them in. */
let api: TestServer;
let failed: string;
let completed: string;
let delayed: string;

/** Runs jobs to the given states with a worker process of the server, then stops it. */
async function runJobs(send: (server: TestServer) => Promise<void>, until: () => Promise<boolean>): Promise<void> {
  const worker = await startTestServer({ ...settings, PLINTH_PROCESS_ROLES: 'worker' }, { database, modules: [recorderModule()] });
  try {
    await send(worker);
    await eventually(until, 15_000, 'the jobs settling');
  } finally {
    await worker.close();
  }
}

beforeAll(async () => {
  database = await createTestDatabase();
  await createRunsTable(database);
  await runJobs(
    async ({ server }) => {
      failed = await server.jobs.send(RECORDER_QUEUE, { fail: 'no such mailbox' });
      completed = await server.jobs.send(RECORDER_QUEUE, { to: 'ada@example.com' });
      delayed = await server.jobs.send(RECORDER_QUEUE, { later: true }, { startAfter: new Date(Date.now() + 3_600_000) });
    },
    async () => (await jobRow(database, failed)).state === 'failed' && (await jobRow(database, completed)).state === 'completed',
  );
  api = await startTestServer({ ...settings, PLINTH_PROCESS_ROLES: 'api' }, { database, modules: [recorderModule()] });
});
afterAll(async () => {
  await api.close();
  await database.drop();
});

describe('the jobs admin API', () => {
  it('lists jobs newest first, with their data, output, error and times', async () => {
    const response = await graphql(api.graphqlUrl, JobsDocument, {}, asAdmin);
    expect(response.body.errors).toBeUndefined();
    const jobs = response.body.data!.jobs;
    expect(jobs.map((job) => job.id)).toEqual([delayed, completed, failed]);
    expect(jobs[1]).toEqual({
      id: completed,
      queue: RECORDER_QUEUE,
      state: 'COMPLETED',
      data: { to: 'ada@example.com' },
      output: { pid: process.pid },
      error: null,
      retryCount: 0,
      retryLimit: 0,
      createdOn: expect.any(String),
      startAfter: expect.any(String),
      startedOn: expect.any(String),
      completedOn: expect.any(String),
    });
    expect(jobs[2]).toMatchObject({
      state: 'FAILED',
      output: { name: 'Error', message: 'no such mailbox' },
      error: 'no such mailbox',
    });
    expect(jobs[0]).toMatchObject({ state: 'CREATED', startedOn: null, completedOn: null });
    expect(Date.parse(jobs[0].startAfter)).toBeGreaterThan(Date.now() + 3_000_000);
  });

  it('filters by queue and state, and bounds first to 1..500', async () => {
    const byState = await graphql(api.graphqlUrl, JobsDocument, { state: 'FAILED' }, asAdmin);
    expect(byState.body.data!.jobs.map((job) => job.id)).toEqual([failed]);
    const byQueue = await graphql(api.graphqlUrl, JobsDocument, { queue: 'mail' }, asAdmin);
    expect(byQueue.body.data!.jobs).toEqual([]);
    const firstTwo = await graphql(api.graphqlUrl, JobsDocument, { first: 2 }, asAdmin);
    expect(firstTwo.body.data!.jobs).toHaveLength(2);

    for (const first of [0, 501, -1]) {
      const response = await graphql(api.graphqlUrl, JobsDocument, { first }, asAdmin);
      expect(response.body.errors).toEqual([
        expect.objectContaining({ message: 'first must be a whole number from 1 to 500', extensions: { code: 'BAD_REQUEST' } }),
      ]);
    }
  });

  it('cancels a job that has not finished, and retries a cancelled one', async () => {
    const cancelled = await graphql(api.graphqlUrl, CancelJobDocument, { id: delayed }, asAdmin);
    expect(cancelled.body.data!.cancelJob).toMatchObject({ id: delayed, state: 'CANCELLED', completedOn: expect.any(String) });
    const again = await graphql(api.graphqlUrl, CancelJobDocument, { id: delayed }, asAdmin);
    expect(again.body.errors).toEqual([
      expect.objectContaining({
        message: `job ${delayed} is cancelled; only created or retry or active jobs can be cancelled`,
        extensions: { code: 'BAD_REQUEST' },
      }),
    ]);
    const resumed = await graphql(api.graphqlUrl, RetryJobDocument, { id: delayed }, asAdmin);
    expect(resumed.body.data!.retryJob).toMatchObject({ id: delayed, state: 'CREATED', completedOn: null });
  });

  it('refuses what cannot be done with a clear code: finished jobs, unknown ids, ids that are not UUIDs', async () => {
    const cancel = (id: string) => graphql(api.graphqlUrl, CancelJobDocument, { id }, asAdmin);
    const retry = (id: string) => graphql(api.graphqlUrl, RetryJobDocument, { id }, asAdmin);
    const cases = [
      [cancel, completed, 'BAD_REQUEST', `job ${completed} is completed; only created or retry or active jobs can be cancelled`],
      [retry, completed, 'BAD_REQUEST', `job ${completed} is completed; only failed or cancelled jobs can be retried`],
      [retry, '00000000-0000-4000-8000-000000000000', 'NOT_FOUND', 'no job 00000000-0000-4000-8000-000000000000 (finished jobs are archived after 12 hours)'],
      [cancel, 'not-a-uuid', 'BAD_REQUEST', 'a job id is a UUID'],
      [retry, "'; DROP TABLE pgboss.job; --", 'BAD_REQUEST', 'a job id is a UUID'],
    ] as const;
    for (const [call, id, code, message] of cases) {
      const response = await call(id);
      expect(response.status).toBe(200);
      expect(response.body).toEqual({ data: null, errors: [expect.objectContaining({ message, extensions: { code } })] });
    }
  });

  it('is for the admin role only', async () => {
    const user = bearer(signToken({ roles: ['user'] }));
    const calls = [
      (headers: Record<string, string>) => graphql(api.graphqlUrl, JobsDocument, {}, headers),
      (headers: Record<string, string>) => graphql(api.graphqlUrl, RetryJobDocument, { id: failed }, headers),
      (headers: Record<string, string>) => graphql(api.graphqlUrl, CancelJobDocument, { id: delayed }, headers),
    ];
    for (const call of calls) {
      for (const headers of [user, {}]) {
        const response = await call(headers);
        expect(response.body.data ?? null).toBeNull();
        expect(response.body.errors).toEqual([expect.objectContaining({ extensions: { code: 'FORBIDDEN' } })]);
      }
    }
    expect((await jobRow(database, failed)).state).toBe('failed');
  });

  it('retries a failed job, allowing it one more attempt, which a worker then runs', async () => {
    const retried = await graphql(api.graphqlUrl, RetryJobDocument, { id: failed }, asAdmin);
    expect(retried.body.data!.retryJob).toMatchObject({ id: failed, state: 'RETRY', retryLimit: 1, error: 'no such mailbox' });
    await runJobs(
      async () => undefined,
      async () => (await jobRow(database, failed)).state === 'failed' && (await jobRow(database, failed)).retry_count === 1,
    );
  });
});

describe('plinth jobs', () => {
  const env = () => testEnvironment(database.url);

  it('lists jobs as a table, or as JSON, filtered like the API', async () => {
    const table = await runCli(['jobs', 'list'], env());
    expect(table.code).toBe(0);
    const [header, ...rows] = table.stdout.trim().split('\n');
    expect(header.split(/\s+/)).toEqual(['ID', 'QUEUE', 'STATE', 'RETRIES', 'CREATED', 'ERROR']);
    expect(rows).toHaveLength(3);
    expect(rows.find((row) => row.startsWith(failed))).toMatch(new RegExp(`^${failed}\\s+${RECORDER_QUEUE}\\s+FAILED\\s+1/1\\s+\\S+\\s+no such mailbox$`));

    const json = await runCli(['jobs', 'list', '--state', 'COMPLETED', '--queue', RECORDER_QUEUE, '--json'], env());
    expect(json.code).toBe(0);
    expect(JSON.parse(json.stdout)).toEqual([expect.objectContaining({ id: completed, state: 'completed', output: { pid: process.pid } })]);
    expect(JSON.parse((await runCli(['jobs', 'list', '--first', '1', '--json'], env())).stdout)).toHaveLength(1);
  });

  it('cancels and retries, answering with the new state', async () => {
    const cancelled = await runCli(['jobs', 'cancel', delayed], env());
    expect(cancelled).toEqual({ code: 0, stdout: `job ${delayed} (queue ${RECORDER_QUEUE}) is CANCELLED\n`, stderr: '' });
    const retried = await runCli(['jobs', 'retry', delayed], env());
    expect(retried.stdout).toBe(`job ${delayed} (queue ${RECORDER_QUEUE}) is CREATED\n`);
    expect((await jobRow(database, delayed)).state).toBe('created');
  });

  it('fails with a clear message and exit code 1 on bad input, without a stack trace', async () => {
    const cases = [
      [['jobs', 'retry', completed], `job ${completed} is completed; only failed or cancelled jobs can be retried`],
      [['jobs', 'cancel', 'nope'], 'a job id is a UUID'],
      [['jobs', 'cancel', '00000000-0000-4000-8000-000000000000'], 'no job 00000000-0000-4000-8000-000000000000'],
      [['jobs', 'list', '--state', 'sleeping'], 'state must be one of created, retry, active, completed, cancelled, failed'],
      [['jobs', 'list', '--first', 'all'], 'first must be a whole number from 1 to 500'],
    ] as const;
    for (const [args, message] of cases) {
      const result = await runCli([...args], env());
      expect(result.code).toBe(1);
      expect(result.stderr).toContain(`plinth: ${message}`);
      expect(result.stderr).not.toMatch(STACK_TRACE);
      expect(result.stdout).toBe('');
    }
  });
});
