import { JobQueue } from '../../src/platform/job-queue';
import { createTestDatabase, type TestDatabase } from '../support/database';
import { createRunsTable, eventually, jobRow, RECORDER_QUEUE, recorderModule, runsOf, type RecorderJob } from '../support/job-recorder';
import { startTestServer, type TestServer } from '../support/server';

let database: TestDatabase;
let server: TestServer;

beforeAll(async () => {
  database = await createTestDatabase();
  await createRunsTable(database);
  server = await startTestServer(
    // The module's timeout (30 s) is overridden by the queue's variable; its retries are not.
    { JOBS_TEST_RECORD_TIMEOUT_SECONDS: '2', JOBS_POLL_INTERVAL_SECONDS: '1' },
    { database, modules: [recorderModule({ retryLimit: 2, retryDelaySeconds: 1, retryBackoff: true, timeoutSeconds: 30 })] },
  );
});
afterAll(async () => {
  await server.close();
  await database.drop();
});

const send = (data: RecorderJob) => server.server.jobs.send(RECORDER_QUEUE, data);
const completed = (id: string) => eventually(async () => (await jobRow(database, id))?.state === 'completed', 20_000, `job ${id} completing`);

describe('the job queue', () => {
  it('gives each queue the defaults, then its module, then its JOBS_<QUEUE>_* variables', async () => {
    const [queue] = await database.query('SELECT retry_limit, retry_delay, retry_backoff, expire_seconds FROM pgboss.queue WHERE name = $1', [RECORDER_QUEUE]);
    // expire_seconds is the timeout plus the two-second margin.
    expect(queue).toEqual({ retry_limit: 2, retry_delay: 1, retry_backoff: true, expire_seconds: 4 });
  });

  it('runs a job, keeping what the worker returned', async () => {
    const id = await send({});
    await completed(id);
    expect((await jobRow(database, id)).output).toEqual({ pid: process.pid });
    expect(await runsOf(database, id)).toEqual([expect.objectContaining({ attempt: 0, ended_at: expect.any(Date) })]);
  });

  it('never runs a job sent in a transaction that rolls back, and runs one whose transaction commits', async () => {
    const { dataSource, jobs } = server.server;
    let rolledBack = '';
    await expect(
      dataSource.transaction(async (manager) => {
        rolledBack = await jobs.send(RECORDER_QUEUE, {}, { transaction: manager });
        // Visible inside the transaction, before it ends.
        expect(await manager.query('SELECT count(*)::int AS n FROM pgboss.job WHERE id = $1', [rolledBack])).toEqual([{ n: 1 }]);
        throw new Error('roll back');
      }),
    ).rejects.toThrow('roll back');
    const committed = await dataSource.transaction((manager) => jobs.send(RECORDER_QUEUE, {}, { transaction: manager }));

    await completed(committed);
    // Two poll intervals more: a worker would have found the job by now.
    await new Promise((resolve) => setTimeout(resolve, 2500));
    expect(await jobRow(database, rolledBack)).toBeUndefined();
    expect(await runsOf(database, rolledBack)).toEqual([]);
  });

  it('refuses a transaction option that is not a running transaction, and queues that no module declares', async () => {
    const { dataSource, jobs } = server.server;
    await expect(jobs.send(RECORDER_QUEUE, {}, { transaction: dataSource.manager })).rejects.toThrow('must be the EntityManager of a running transaction');
    await expect(jobs.send('nobody_declares_this', {})).rejects.toThrow('no module declares the job queue "nobody_declares_this"');
    await expect(jobs.send(RECORDER_QUEUE, [1, 2])).rejects.toThrow('job data must be a JSON object');
  });

  it('retries a failing job with a growing delay, then keeps it as failed with its error', async () => {
    const id = await send({ fail: 'the mail server said no' });
    await eventually(async () => (await jobRow(database, id))?.state === 'failed', 30_000, 'the job failing for good');

    const row = await jobRow(database, id);
    expect(row.retry_count).toBe(2);
    expect(row.output).toEqual({ name: 'Error', message: 'the mail server said no' });
    const runs = await runsOf(database, id);
    expect(runs.map((run) => run.attempt)).toEqual([0, 1, 2]);
    // Retry delay 1 s with backoff: the first retry waits 1 to 2 s, the second 2 to 4 s.
    const gap = (index: number) => runs[index + 1].started_at.getTime() - runs[index].ended_at!.getTime();
    expect(gap(0)).toBeGreaterThanOrEqual(950);
    expect(gap(1)).toBeGreaterThanOrEqual(1950);
  });

  it('aborts a job that runs past its timeout and retries it', async () => {
    const id = await send({ firstAttemptMs: 60_000 });
    await completed(id);
    const runs = await runsOf(database, id);
    expect(runs).toEqual([
      expect.objectContaining({ attempt: 0, ended_at: null }), // aborted through its signal
      expect.objectContaining({ attempt: 1, ended_at: expect.any(Date) }),
    ]);
    expect(runs[1].started_at.getTime() - runs[0].started_at.getTime()).toBeGreaterThanOrEqual(2000);
  });

  it('counts jobs by queue and state, every state of every queue included', async () => {
    const counts = await server.server.jobs.countsByQueueAndState();
    const recorder = counts.filter((count) => count.queue === RECORDER_QUEUE);
    expect(recorder.map((count) => count.state)).toEqual(['created', 'retry', 'active', 'completed', 'cancelled', 'failed']);
    const [{ completed: completedCount, failed }] = await database.query<{ completed: number; failed: number }>(
      `SELECT count(*) FILTER (WHERE state = 'completed')::int AS completed, count(*) FILTER (WHERE state = 'failed')::int AS failed
       FROM pgboss.job WHERE name = $1`,
      [RECORDER_QUEUE],
    );
    expect(recorder.find((count) => count.state === 'completed')!.count).toBe(completedCount);
    expect(recorder.find((count) => count.state === 'failed')!.count).toBe(failed);
    expect(failed).toBe(1);
  });
});

describe('declaring queues', () => {
  const refused = (overrides: Record<string, string>, modules: ReturnType<typeof recorderModule>[]) => startTestServer(overrides, { database, modules });

  it('stops start-up on settings for a queue no module declares (a misspelt name)', async () => {
    // The message names the misspelt setting and lists the declared queues, the test's among them.
    await expect(refused({ JOBS_TEST_RECORDS_CONCURRENCY: '2' }, [recorderModule()])).rejects.toThrow(
      /^JOBS_TEST_RECORDS_\* is set, but no module declares that job queue \(queues: mail, .*\btest_record\)$/,
    );
  });

  it("stops start-up on a module's invalid settings or queue name", async () => {
    await expect(refused({}, [recorderModule({ concurrency: 0 })])).rejects.toThrow('job queue "test_record": concurrency must be at least 1 (got 0)');
    await expect(refused({}, [recorderModule({ retryDelaySeconds: 1.5 })])).rejects.toThrow(
      'job queue "test_record": retryDelaySeconds must be a whole number (got 1.5)',
    );
    const badName = { ...recorderModule(), jobs: () => [{ queue: 'Mail Out', work: async () => undefined }] };
    await expect(refused({}, [badName])).rejects.toThrow('job queue "Mail Out": a name is a lower-case letter');
    const twice = { ...recorderModule(), name: 'second', jobs: () => [{ queue: 'test-record', work: async () => undefined }] };
    await expect(refused({}, [twice, recorderModule()])).rejects.toThrow(
      'job queues "test-record" and "test_record" would share the settings JOBS_TEST_RECORD_*',
    );
    // Refused before anything reached the database.
    expect(await database.query("SELECT name FROM pgboss.queue WHERE name = 'test-record'")).toEqual([]);
  });

  it('stops the job queue it started when start-up is refused (pg-boss timers left behind kept the process alive)', async () => {
    const stopped = jest.spyOn(JobQueue.prototype, 'stop');
    try {
      await expect(refused({}, [recorderModule({ concurrency: 0 })])).rejects.toThrow('concurrency must be at least 1');
      expect(stopped).toHaveBeenCalledTimes(1);
    } finally {
      stopped.mockRestore();
    }
  });
});
