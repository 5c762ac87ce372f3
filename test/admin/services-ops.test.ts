import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { Writable } from 'node:stream';
import type { PlinthModule } from '../../src/platform/module';
import { createTestDatabase, type TestDatabase } from '../support/database';
import { freePort } from '../support/global-setup';
import { createRunsTable, recorderModule, RECORDER_QUEUE } from '../support/job-recorder';
import { startTestServer, testEnvironment, type TestServer } from '../support/server';
import { spawnServer } from '../support/spawn';
import { until } from '../support/until';
import { adminPasswordHash, AdminClient, startAdminServer, type AdminTestServer } from './support';

jest.setTimeout(120_000);

interface Part {
  name: string;
  state: string;
  actions: string[];
  detail?: string;
  latencyMs?: number;
  pausedOnAllInstances?: boolean;
  cluster?: { expected: number; timedOut: boolean; instances: { instance: string; hostname: string; pid: number; state?: string; error?: unknown }[] };
}

const quiet = () => new Writable({ write: (_chunk, _encoding, done) => done() });
const WORKER = `jobs.${RECORDER_QUEUE}`;

/** Which server ran each run of the recurring task `ticks.tick` (every 100 ms, one server at a time). */
const ticks: string[] = [];
function tickModule(label: string): PlinthModule<object> {
  return {
    name: 'test-ticks',
    create: () => ({}),
    recurring: () => [{ name: 'tick', schedule: { everyMs: 100 }, run: async () => void ticks.push(label) }],
  };
}

/** A tiny service answering its health with its pid (a custom service this process does not run). */
function tinyService(): Promise<http.Server> {
  const server = http.createServer((_request, response) => response.end(JSON.stringify({ pid: process.pid })));
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve(server)));
}

let database: TestDatabase;
let a: AdminTestServer;
let b: AdminTestServer;
let adminA: AdminClient;
let adminB: AdminClient;
let tiny: http.Server;
let closedPort: number;

const services = async (client: AdminClient) => (await client.request<{ services: Part[] }>('GET', '/api/services')).body.services;
const partOf = async (client: AdminClient, name: string) => (await services(client)).find((part) => part.name === name)!;

beforeAll(async () => {
  database = await createTestDatabase();
  await createRunsTable(database);
  tiny = await tinyService();
  closedPort = await freePort();
  const declared = {
    JOBS_POLL_INTERVAL_SECONDS: '1',
    CS_1: `tiny:express-ts:${(tiny.address() as AddressInfo).port}:/tiny`,
    CS_1_HOST: '127.0.0.1',
    CS_2: `gone:fastify-ts:${closedPort}:/gone`,
    CS_2_HOST: '127.0.0.1',
    PLATFORM_ADMIN_BROADCAST_TIMEOUT_MS: '5000',
  };
  a = await startAdminServer(declared, { database, modules: [recorderModule(), tickModule('a')], logTo: quiet() });
  b = await startAdminServer(declared, { database, modules: [recorderModule(), tickModule('b')], logTo: quiet() });
  adminA = new AdminClient(a.adminUrl);
  adminB = new AdminClient(b.adminUrl);
  expect((await adminA.login()).status).toBe(200);
  expect((await adminB.login()).status).toBe(200);
});
afterAll(async () => {
  await a?.close();
  await b?.close();
  tiny?.close();
  await database?.drop();
});

describe('services: scheduler, all instances, custom services', () => {
  it('answers 401 without a session and 403 without the CSRF token, for both scopes', async () => {
    const anonymous = new AdminClient(a.adminUrl);
    for (const route of ['/api/services/scheduler/stop', '/api/services/scheduler/stop?scope=all']) {
      const answer = await anonymous.request('POST', route);
      expect({ route, status: answer.status, code: answer.body.error_code }).toEqual({ route, status: 401, code: 'UNAUTHENTICATED' });
      const forged = await adminA.request('POST', route, undefined, { 'x-csrf-token': '' });
      expect({ route, status: forged.status, code: forged.body.error_code }).toEqual({ route, status: 403, code: 'CSRF_TOKEN_INVALID' });
    }
    expect((await anonymous.request('GET', '/api/services')).status).toBe(401);
    expect(await partOf(adminA, 'scheduler')).toMatchObject({ state: 'running' });
  });

  it('pauses the scheduler on one instance (the other runs the task) and on both (nothing runs), and resumes it', async () => {
    await until(() => ticks.length >= 2, 10_000, 'the recurring task ran');
    const pausedA = await adminA.request<Part>('POST', '/api/services/scheduler/stop');
    expect(pausedA.status).toBe(200);
    expect(pausedA.body).toMatchObject({ name: 'scheduler', state: 'stopped', actions: ['start', 'restart'] });
    const health = await adminA.request<{ status: string; parts: Part[] }>('GET', '/api/health');
    expect(health.body.status).toBe('degraded');
    expect(health.body.parts.find((part) => part.name === 'scheduler')!.state).toBe('stopped');
    expect(await partOf(adminB, 'scheduler')).toMatchObject({ state: 'running' });
    // From now on only b runs it.
    let seen = ticks.length;
    await until(() => ticks.length >= seen + 3, 10_000, 'b ran the task');
    expect(ticks.slice(seen + 1).every((label) => label === 'b')).toBe(true);

    expect((await adminB.request<Part>('POST', '/api/services/scheduler/stop')).body).toMatchObject({ state: 'stopped' });
    seen = ticks.length;
    await new Promise((resolve) => setTimeout(resolve, 1500));
    expect(ticks.length).toBe(seen);
    // Stopping it again is refused: it is stopped.
    expect((await adminB.request('POST', '/api/services/scheduler/stop')).body).toMatchObject({ error_code: 'ACTION_NOT_POSSIBLE' });

    expect((await adminA.request<Part>('POST', '/api/services/scheduler/start')).body).toMatchObject({ state: 'running', actions: ['stop', 'restart'] });
    await until(() => ticks.length >= seen + 2, 10_000, 'a ran the task again');
    expect(ticks.slice(seen).every((label) => label === 'a')).toBe(true);
    expect((await adminB.request<Part>('POST', '/api/services/scheduler/restart')).body).toMatchObject({ state: 'running' });
  });

  it('stops a worker on every instance with scope=all: both acknowledge, the stop stands for an instance started later, and start ends it', async () => {
    const stopped = await adminA.request<Part>('POST', `/api/services/${WORKER}/stop?scope=all`);
    expect(stopped.status).toBe(200);
    expect(stopped.body).toMatchObject({ name: WORKER, state: 'stopped', pausedOnAllInstances: true });
    const cluster = stopped.body.cluster!;
    expect(cluster).toMatchObject({ expected: 2, timedOut: false });
    expect(cluster.instances).toHaveLength(2);
    expect(new Set(cluster.instances.map((instance) => instance.instance)).size).toBe(2);
    expect(cluster.instances.map((instance) => instance.state)).toEqual(['stopped', 'stopped']);
    expect(cluster.instances[0]).toMatchObject({ hostname: os.hostname(), pid: process.pid });
    expect(await partOf(adminB, WORKER)).toMatchObject({ state: 'stopped', pausedOnAllInstances: true });
    expect(a.server.jobs.workers().find((worker) => worker.queue === RECORDER_QUEUE)!.claiming).toBe(false);
    expect(b.server.jobs.workers().find((worker) => worker.queue === RECORDER_QUEUE)!.claiming).toBe(false);
    expect(await database.query('SELECT name FROM admin_paused_services')).toEqual([{ name: WORKER }]);

    // A job sent meanwhile waits on both.
    const jobId = await a.server.jobs.send(RECORDER_QUEUE, {});
    await new Promise((resolve) => setTimeout(resolve, 2500));
    expect(await database.query('SELECT 1 FROM job_runs WHERE job_id = $1', [jobId])).toEqual([]);

    // An instance that starts now stops the worker too.
    let c: TestServer | undefined;
    try {
      c = await startTestServer({ JOBS_POLL_INTERVAL_SECONDS: '1' }, { database, modules: [recorderModule()], logTo: quiet() });
      const started = c;
      await until(() => started.server.jobs.workers().find((worker) => worker.queue === RECORDER_QUEUE)?.claiming === false, 10_000, 'c stopped the worker');
      // Three instances now answer.
      const again = await adminB.request<Part>('POST', `/api/services/${WORKER}/stop?scope=all`);
      expect(again.body.cluster).toMatchObject({ expected: 3, timedOut: false });
      expect(again.body.cluster!.instances.map((instance) => instance.state)).toEqual(['stopped', 'stopped', 'stopped']);
    } finally {
      await c?.close();
    }

    const resumed = await adminB.request<Part>('POST', `/api/services/${WORKER}/start?scope=all`);
    expect(resumed.body).toMatchObject({ state: 'running', cluster: { expected: 2, timedOut: false } });
    expect(resumed.body.pausedOnAllInstances).toBeUndefined();
    expect(resumed.body.cluster!.instances.map((instance) => instance.state)).toEqual(['running', 'running']);
    expect(await database.query('SELECT name FROM admin_paused_services')).toEqual([]);
    await until(
      async () => (await database.query('SELECT 1 FROM job_runs WHERE job_id = $1 AND ended_at IS NOT NULL', [jobId])).length === 1,
      15_000,
      'the job ran',
    );

    // The scheduler too, on both at once.
    const scheduler = await adminA.request<Part>('POST', '/api/services/scheduler/stop?scope=all');
    expect(scheduler.body.cluster!.instances.map((instance) => instance.state)).toEqual(['stopped', 'stopped']);
    expect(await partOf(adminB, 'scheduler')).toMatchObject({ state: 'stopped' });
    expect((await adminA.request<Part>('POST', '/api/services/scheduler/restart?scope=all')).body.cluster!.instances).toHaveLength(2);
    expect(await partOf(adminB, 'scheduler')).toMatchObject({ state: 'running' });
  });

  it('health-checks the custom services it does not run: running with a latency, or unavailable; their actions are refused', async () => {
    const listed = await services(adminA);
    const tinyPart = listed.find((part) => part.name === 'cs.tiny')!;
    expect(tinyPart).toMatchObject({ state: 'running', actions: [], detail: expect.stringContaining('/healthz answered 200') });
    expect(tinyPart.latencyMs).toEqual(expect.any(Number));
    expect(listed.find((part) => part.name === 'cs.gone')).toMatchObject({
      state: 'unavailable',
      actions: [],
      detail: expect.stringContaining('nothing answers'),
    });
    const refused = await adminA.request('POST', '/api/services/cs.tiny/restart');
    expect({ status: refused.status, code: refused.body.error_code }).toEqual({ status: 409, code: 'ACTION_NOT_POSSIBLE' });
    expect(refused.body.message).toContain('only health-checked');
  });

  it('refuses unknown services (404), unknown actions and scopes (400), and parts it does not drive (409), on both scopes', async () => {
    for (const route of ['/api/services/nothing/stop', '/api/services/cs.nothing/stop', '/api/services/nothing/stop?scope=all']) {
      const answer = await adminA.request('POST', route);
      expect({ route, status: answer.status, code: answer.body.error_code }).toEqual({ route, status: 404, code: 'UNKNOWN_SERVICE' });
    }
    for (const route of ['/api/services/scheduler/pause', '/api/services/scheduler/stop?scope=everywhere', '/api/services/Scheduler/stop']) {
      expect({ route, status: (await adminA.request('POST', route)).status }).toEqual({ route, status: 400 });
    }
    for (const route of [
      '/api/services/http/stop',
      '/api/services/mailer/restart',
      '/api/services/database/stop?scope=all',
      '/api/services/auth/stop?scope=all',
    ]) {
      const answer = await adminA.request('POST', route);
      expect({ route, status: answer.status, code: answer.body.error_code }).toEqual({ route, status: 409, code: 'ACTION_NOT_POSSIBLE' });
    }
    expect(await database.query('SELECT name FROM admin_paused_services')).toEqual([]);
  });
});

describe('custom services run by plinth start', () => {
  it('stops, starts and restarts a service the server process runs', async () => {
    const servicesDir = fs.mkdtempSync(path.join(os.tmpdir(), 'plinth-services-'));
    fs.mkdirSync(path.join(servicesDir, 'echo', 'dist'), { recursive: true });
    fs.writeFileSync(
      path.join(servicesDir, 'echo', 'dist', 'server.js'),
      "require('node:http').createServer((q, r) => r.end(JSON.stringify({ pid: process.pid }))).listen(Number(process.env.PORT), process.env.HOST, () => console.log('listening'));\n",
    );
    const servicePort = await freePort();
    const adminPort = await freePort();
    const project = fs.mkdtempSync(path.join(os.tmpdir(), 'plinth-admin-'));
    // Stopped on all instances before this one starts: it keeps the service stopped.
    await database.query("INSERT INTO admin_paused_services (name) VALUES ('cs.echo')");
    const spawned = await spawnServer(
      testEnvironment(database.url, {
        PLATFORM_ADMIN_ENABLED: 'true',
        PLATFORM_ADMIN_PORT: String(adminPort),
        PLATFORM_ADMIN_PASSWORD: await adminPasswordHash(),
        PLATFORM_PROJECT_PATH: project,
        PLINTH_SERVICES_DIR: servicesDir,
        CS_1: `echo:express-ts:${servicePort}:/echo`,
        CS_1_HOST: '127.0.0.1',
      }),
    );
    const pidOf = async () => ((await (await fetch(`http://127.0.0.1:${servicePort}/healthz`)).json()) as { pid: number }).pid;
    try {
      const admin = new AdminClient(`http://127.0.0.1:${adminPort}`);
      expect((await admin.login()).status).toBe(200);
      expect(await partOf(admin, 'cs.echo')).toMatchObject({ state: 'stopped', actions: ['start', 'restart'], pausedOnAllInstances: true });
      await expect(fetch(`http://127.0.0.1:${servicePort}/healthz`)).rejects.toThrow();
      // Started on all instances: the two in this process do not declare it, and say so.
      const everywhere = await admin.request<Part>('POST', '/api/services/cs.echo/start?scope=all');
      expect(everywhere.body).toMatchObject({ state: 'running', cluster: { expected: 3, timedOut: false } });
      expect(everywhere.body.pausedOnAllInstances).toBeUndefined();
      const answers = everywhere.body.cluster!.instances;
      expect(answers.filter((answer) => answer.state === 'running')).toHaveLength(1);
      expect(answers.filter((answer) => (answer.error as { code: string } | undefined)?.code === 'UNKNOWN_SERVICE')).toHaveLength(2);
      expect(await database.query('SELECT name FROM admin_paused_services')).toEqual([]);
      const first = await pidOf();
      expect(await partOf(admin, 'cs.echo')).toMatchObject({ actions: ['stop', 'restart'], detail: expect.stringContaining(`pid ${first}`) });

      const restarted = await admin.request<Part>('POST', '/api/services/cs.echo/restart');
      expect(restarted.body).toMatchObject({ state: 'running', actions: ['stop', 'restart'] });
      const second = await pidOf();
      expect(second).not.toBe(first);

      const stopped = await admin.request<Part>('POST', '/api/services/cs.echo/stop');
      expect(stopped.body).toMatchObject({ state: 'stopped', actions: ['start', 'restart'] });
      await expect(fetch(`http://127.0.0.1:${servicePort}/healthz`)).rejects.toThrow();
      // Kept stopped: the supervisor does not start it again.
      await new Promise((resolve) => setTimeout(resolve, 1000));
      expect(await partOf(admin, 'cs.echo')).toMatchObject({ state: 'stopped' });

      expect((await admin.request<Part>('POST', '/api/services/cs.echo/start')).body).toMatchObject({ state: 'running' });
      expect(await pidOf()).not.toBe(second);

      // Its output is in the dashboard's log stream.
      const stream = await fetch(`http://127.0.0.1:${adminPort}/api/logs/cs.echo?tail=100`, { headers: { cookie: admin.cookie! } });
      let text = '';
      const decoder = new TextDecoder();
      for await (const chunk of stream.body as unknown as AsyncIterable<Uint8Array>) {
        text += decoder.decode(chunk, { stream: true });
        if (text.includes(': following')) break;
      }
      const lines = [...text.matchAll(/^data: (.*)$/gm)].map((match) => JSON.parse(match[1]) as { msg: string; component: string; service: string });
      expect(lines.filter((line) => line.msg === 'listening')).toHaveLength(3);
      expect(lines.every((line) => line.component === 'custom-service' && line.service === 'echo')).toBe(true);
    } finally {
      spawned.child.kill('SIGTERM');
      await spawned.exited;
    }
    await expect(fetch(`http://127.0.0.1:${servicePort}/healthz`)).rejects.toThrow();
  });
});
