import { createTestDatabase, type TestDatabase } from '../support/database';
import { createRunsTable, eventually, jobRow, RECORDER_QUEUE, recorderModule, runsOf } from '../support/job-recorder';
import { startTestServer, testEnvironment, type TestServer } from '../support/server';
import { JOB_SERVER, spawnServer, type SpawnedServer } from '../support/spawn';

const TIMEOUT_SECONDS = 3;
const MAINTENANCE_INTERVAL_SECONDS = 1;
const POLL_INTERVAL_SECONDS = 1;
/** The lease as docs/decisions.md states it: timeout + 2 s margin + maintenance interval + poll interval (no retry delay here). */
const LEASE_MS = (TIMEOUT_SECONDS + 2 + MAINTENANCE_INTERVAL_SECONDS + POLL_INTERVAL_SECONDS) * 1000;

let database: TestDatabase;
/** Sends the jobs; runs none. */
let sender: TestServer;
const running = new Set<SpawnedServer>();

/** The real server in a process of its own, worker role only, with the recorder's queue. */
async function startWorker(): Promise<SpawnedServer> {
  const env = testEnvironment(database.url, {
    PLINTH_PROCESS_ROLES: 'worker',
    JOBS_TEST_RECORD_TIMEOUT_SECONDS: String(TIMEOUT_SECONDS),
    JOBS_TEST_RECORD_RETRY_DELAY_SECONDS: '0',
    JOBS_MAINTENANCE_INTERVAL_SECONDS: String(MAINTENANCE_INTERVAL_SECONDS),
    JOBS_POLL_INTERVAL_SECONDS: String(POLL_INTERVAL_SECONDS),
    JOBS_SHUTDOWN_GRACE_SECONDS: '1',
  });
  const worker = await spawnServer(env, 45_000, { args: [JOB_SERVER] });
  running.add(worker);
  void worker.exited.then(() => running.delete(worker));
  return worker;
}

beforeAll(async () => {
  database = await createTestDatabase();
  await createRunsTable(database);
  sender = await startTestServer({ PLINTH_PROCESS_ROLES: 'api' }, { database, modules: [recorderModule()] });
});
afterAll(async () => {
  for (const worker of running) worker.child.kill('SIGKILL');
  await Promise.all([...running].map((worker) => worker.exited));
  await sender.close();
  await database.drop();
});

describe('job workers in several processes', () => {
  it('two processes on one database run 500 jobs, each exactly once, never one twice at once', async () => {
    const workers = await Promise.all([startWorker(), startWorker()]);
    const ids: string[] = [];
    for (let index = 0; index < 500; index += 1) {
      ids.push(await sender.server.jobs.send(RECORDER_QUEUE, { sleepMs: 2 + (index % 7) * 3 }));
    }
    await eventually(
      async () => (await database.query<{ n: number }>("SELECT count(*)::int AS n FROM pgboss.job WHERE state = 'completed'"))[0].n === 500,
      60_000,
      'all 500 jobs completing',
    );

    const [runs] = await database.query<{ runs: number; jobs: number; unfinished: number; processes: number }>(
      `SELECT count(*)::int AS runs, count(DISTINCT job_id)::int AS jobs, count(*) FILTER (WHERE ended_at IS NULL)::int AS unfinished,
         count(DISTINCT pid)::int AS processes FROM job_runs WHERE job_id = ANY($1::uuid[])`,
      [ids],
    );
    expect(runs).toEqual({ runs: 500, jobs: 500, unfinished: 0, processes: 2 });
    const duplicates = await database.query('SELECT job_id FROM job_runs GROUP BY job_id HAVING count(*) > 1');
    expect(duplicates).toEqual([]);
    const [{ overlaps }] = await database.query<{ overlaps: number }>(
      `SELECT count(*)::int AS overlaps FROM job_runs a JOIN job_runs b
         ON a.job_id = b.job_id AND a.id < b.id AND a.started_at < b.ended_at AND b.started_at < a.ended_at`,
    );
    expect(overlaps).toBe(0);
    // And neither process ran more at once than its concurrency (JOBS_DEFAULT_CONCURRENCY, 4).
    const [{ most }] = await database.query<{ most: number }>(
      `SELECT max(concurrent)::int AS most FROM (
         SELECT (SELECT count(*) FROM job_runs b WHERE b.pid = a.pid AND b.started_at <= a.started_at AND b.ended_at > a.started_at) AS concurrent
         FROM job_runs a) AS counts`,
    );
    expect(most).toBeLessThanOrEqual(4);
    expect(most).toBeGreaterThan(1);

    for (const worker of workers) worker.child.kill('SIGTERM');
    expect(await Promise.all(workers.map((worker) => worker.exited))).toEqual([
      { code: 0, signal: null },
      { code: 0, signal: null },
    ]);
  });

  it('a job whose process is killed mid-run is run again by a restarted process within the lease', async () => {
    const first = await startWorker();
    const id = await sender.server.jobs.send(RECORDER_QUEUE, { firstAttemptMs: 60_000 });
    await eventually(async () => (await runsOf(database, id)).length === 1, 10_000, 'the job starting');

    first.child.kill('SIGKILL');
    const killedAt = Date.now();
    expect((await first.exited).signal).toBe('SIGKILL');
    expect((await jobRow(database, id)).state).toBe('active');

    const second = await startWorker();
    await eventually(async () => (await jobRow(database, id)).state === 'completed', 30_000, 'the job completing after the restart');
    const restartedAfter = Date.now() - killedAt;
    // Within the lease, plus what the restart itself took (up to a few seconds on a busy machine).
    expect(restartedAfter).toBeLessThan(LEASE_MS + 5000);

    const runs = await runsOf(database, id);
    expect(runs).toEqual([
      expect.objectContaining({ attempt: 0, pid: first.child.pid, ended_at: null }),
      expect.objectContaining({ attempt: 1, pid: second.child.pid, ended_at: expect.any(Date) }),
    ]);
    // Taken back no earlier than the lease allows: the timeout plus the margin after it started.
    expect(runs[1].started_at.getTime() - runs[0].started_at.getTime()).toBeGreaterThanOrEqual((TIMEOUT_SECONDS + 2) * 1000);

    second.child.kill('SIGTERM');
    expect(await second.exited).toEqual({ code: 0, signal: null });
  });

  it('SIGTERM releases a running job and the process exits 0 without an error in its log', async () => {
    const worker = await startWorker();
    const id = await sender.server.jobs.send(RECORDER_QUEUE, { sleepMs: 20_000 });
    await eventually(async () => (await runsOf(database, id)).length === 1, 10_000, 'the job starting');

    worker.child.kill('SIGTERM');
    expect(await worker.exited).toEqual({ code: 0, signal: null });
    expect((await jobRow(database, id)).state).toBe('retry');
    const lines = worker
      .output()
      .trim()
      .split('\n')
      .map((line) => JSON.parse(line) as { level: number; msg: string });
    expect(lines.filter((line) => line.level >= 50)).toEqual([]);
    expect(worker.output()).not.toMatch(/"stack"|\\n\s+at /);
    expect(lines.map((line) => line.msg)).toEqual(expect.arrayContaining(['released jobs still running at shutdown']));
  });
});
