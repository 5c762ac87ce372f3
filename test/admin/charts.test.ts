import { Writable } from 'node:stream';
import { createRunsTable, recorderModule, RECORDER_QUEUE } from '../support/job-recorder';
import { createTestDatabase } from '../support/database';
import { freePort } from '../support/global-setup';
import { metadataRequest } from '../support/metadata';
import { ADMIN_SECRET } from '../support/server';
import { until } from '../support/until';
import { AdminClient, startAdminServer, type AdminTestServer } from './support';

interface History {
  intervalSeconds: number;
  minutes: number;
  instance: { hostname: string; pid: number };
  timestamps: number[];
  series: { name: string; scope: string; unit: string; values: (number | null)[] }[];
}

let server: AdminTestServer;
let admin: AdminClient;

beforeAll(async () => {
  const database = await createTestDatabase();
  await createRunsTable(database);
  await database.query('CREATE TABLE chart_orders (id serial PRIMARY KEY, note text)');
  server = await startAdminServer(
    { JOBS_POLL_INTERVAL_SECONDS: '1', PLATFORM_ADMIN_METRICS_INTERVAL_SECONDS: '1' },
    { database, modules: [recorderModule()], logTo: new Writable({ write: (_chunk, _encoding, done) => done() }) },
  );
  admin = new AdminClient(server.adminUrl);
  expect((await admin.login()).status).toBe(200);
});
afterAll(async () => {
  await server.close();
  await server.database.drop();
});

async function history(minutes?: number): Promise<History> {
  const answer = await admin.request<History>('GET', `/api/metrics/history${minutes === undefined ? '' : `?minutes=${minutes}`}`);
  expect(answer.status).toBe(200);
  return answer.body;
}

const valuesOf = (body: History, name: string) => body.series.find((series) => series.name === name)!.values;

/** Waits for samples taken after `since` and answers them (the history from `since` on). */
async function samplesAfter(since: number, count: number): Promise<History> {
  let body: History | undefined;
  await until(
    async () => {
      body = await history(5);
      return body.timestamps.filter((timestamp) => timestamp > since).length >= count;
    },
    15_000,
    `${count} samples after the requests`,
  );
  const first = body!.timestamps.findIndex((timestamp) => timestamp > since);
  return {
    ...body!,
    timestamps: body!.timestamps.slice(first),
    series: body!.series.map((series) => ({ ...series, values: series.values.slice(first) })),
  };
}

const graphql = (query: string) =>
  fetch(server.graphqlUrl, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-gql-admin-secret': ADMIN_SECRET },
    body: JSON.stringify({ query }),
  });

describe('the charts’ history (GET /api/metrics/history)', () => {
  it('answers 401 without a session, and 400 for minutes out of 1 to 60', async () => {
    const anonymous = await new AdminClient(server.adminUrl).request('GET', '/api/metrics/history');
    expect({ status: anonymous.status, code: anonymous.body.error_code }).toEqual({ status: 401, code: 'UNAUTHENTICATED' });
    for (const minutes of ['0', '61', '-5', '1.5', 'an hour']) {
      const answer = await admin.request('GET', `/api/metrics/history?minutes=${encodeURIComponent(minutes)}`);
      expect({ minutes, status: answer.status, code: answer.body.error_code }).toEqual({ minutes, status: 400, code: 'VALIDATION_ERROR' });
    }
    // And on the main port the route does not exist.
    expect((await fetch(`${server.url}/_admin/api/metrics/history`)).status).toBe(404);
  });

  it('describes each series, where it comes from, and samples every interval', async () => {
    const body = await samplesAfter(0, 2);
    expect(body).toMatchObject({ intervalSeconds: 1, minutes: 5, instance: { pid: process.pid } });
    expect(body.series.map((series) => [series.name, series.scope])).toEqual([
      ['requestRate', 'instance'],
      ['errorRate', 'instance'],
      ['eventBacklog', 'cluster'],
      ['jobQueueDepth', 'cluster'],
    ]);
    for (const series of body.series) expect(series.values).toHaveLength(body.timestamps.length);
    const gaps = body.timestamps.slice(1).map((timestamp, index) => timestamp - body.timestamps[index]);
    for (const gap of gaps) expect(gap).toBeGreaterThanOrEqual(900);
    expect([...body.timestamps].sort((a, b) => a - b)).toEqual(body.timestamps);
    // One minute holds no more than a minute of samples.
    const minute = await history(1);
    expect(minute.timestamps.every((timestamp) => timestamp >= Date.now() - 61_000)).toBe(true);
  });

  it('follows the requests made: their rate, and the 5xx and GraphQL errors among them', async () => {
    const since = Date.now();
    const requests = 60;
    await Promise.all(Array.from({ length: requests }, () => graphql('{ __typename }')));
    // Documents that cannot run: a GraphQL error each.
    const errors = 7;
    for (let index = 0; index < errors; index++) expect(await (await graphql('{ no_such_field }')).json()).toMatchObject({ errors: [expect.anything()] });
    const body = await samplesAfter(since, 2);
    // Each rate is per second over a sample's interval: summed over the samples' seconds they give the count back.
    const seconds = body.intervalSeconds;
    const served = valuesOf(body, 'requestRate').reduce((sum: number, value) => sum + (value ?? 0) * seconds, 0);
    const failed = valuesOf(body, 'errorRate').reduce((sum: number, value) => sum + (value ?? 0) * seconds, 0);
    expect(served).toBeGreaterThanOrEqual((requests + errors) * 0.85);
    expect(failed).toBeGreaterThanOrEqual(errors * 0.85);
    // The history's own requests are few: a quiet server's error rate goes back to 0.
    await until(async () => (await history(1)).series.find((series) => series.name === 'errorRate')!.values.at(-1) === 0, 10_000, 'no errors');
  });

  it('counts the jobs waiting while their worker is stopped, and the event deliveries pending while the dispatcher is', async () => {
    const worker = `jobs.${RECORDER_QUEUE}`;
    expect((await admin.request('POST', `/api/services/${worker}/stop`)).status).toBe(200);
    expect((await admin.request('POST', '/api/services/events/stop')).status).toBe(200);
    try {
      const webhook = `http://127.0.0.1:${await freePort()}/nobody`;
      const created = await metadataRequest(server.url, {
        type: 'pg_create_event_trigger',
        args: { name: 'chart_orders_created', table: { schema: 'public', name: 'chart_orders' }, webhook, insert: { columns: '*' } },
      });
      expect(created.status).toBe(200);
      for (let index = 0; index < 3; index++) await server.server.jobs.send(RECORDER_QUEUE, {});
      await server.database.query("INSERT INTO chart_orders (note) SELECT 'order ' || n FROM generate_series(1, 4) AS n");
      const since = Date.now();
      const body = await samplesAfter(since, 1);
      expect(valuesOf(body, 'jobQueueDepth').at(-1)).toBeGreaterThanOrEqual(3);
      expect(valuesOf(body, 'eventBacklog').at(-1)).toBeGreaterThanOrEqual(4);
    } finally {
      expect((await admin.request('POST', `/api/services/${worker}/start`)).status).toBe(200);
      expect((await admin.request('POST', '/api/services/events/start')).status).toBe(200);
    }
    // Started again, the worker empties its queue, and the history shows it.
    await until(async () => (await history(1)).series.find((series) => series.name === 'jobQueueDepth')!.values.at(-1) === 0, 15_000, 'the queue emptied');
  });
});
