import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createTestDatabase, type TestDatabase } from '../support/database';
import { freePort } from '../support/global-setup';
import { testEnvironment } from '../support/server';
import { spawnServer, type SpawnedServer } from '../support/spawn';
import { until } from '../support/until';
import { AdminClient, adminPasswordHash, startAdminServer, type AdminTestServer } from './support';

let server: AdminTestServer;
let admin: AdminClient;

interface Run {
  id: number;
  environment: string;
  status: string;
  exitCode: number | null;
  startedBy: string;
  startedAt: string;
  endedAt: string | null;
  output?: string;
}

const ROUTES: { method: string; route: string; body?: unknown }[] = [
  { method: 'GET', route: '/api/deploy/environments' },
  { method: 'POST', route: '/api/deploy/staging' },
  { method: 'POST', route: '/api/deploy/production' },
  { method: 'GET', route: '/api/deploy/runs' },
  { method: 'GET', route: '/api/deploy/runs/1' },
  { method: 'GET', route: '/api/deploy/runs/1/output' },
  { method: 'GET', route: '/api/certificates' },
];

/** The deploy script of `environment` in the project folder, which the configured command runs. */
function script(project: string, environment: string, text: string): void {
  fs.writeFileSync(path.join(project, `deploy-${environment}.sh`), text);
}

/** Reads a run's output stream to its `end` event: its lines and the run it ends with. */
async function readOutput(client: AdminClient, baseUrl: string, id: number, headers: Record<string, string> = {}) {
  const response = await fetch(`${baseUrl}/api/deploy/runs/${id}/output`, { headers: { cookie: client.cookie!, ...headers } });
  expect(response.status).toBe(200);
  expect(response.headers.get('content-type')).toContain('text/event-stream');
  const text = await response.text();
  const events = text
    .split('\n\n')
    .filter((block) => block.includes('event:'))
    .map((block) => {
      const field = (name: string) =>
        block
          .split('\n')
          .find((line) => line.startsWith(`${name}: `))
          ?.slice(name.length + 2);
      return { id: field('id'), event: field('event'), data: JSON.parse(field('data') ?? 'null') };
    });
  return {
    lines: events.filter((event) => event.event === 'line').map((event) => ({ seq: Number(event.id), ...(event.data as { stream: string; text: string }) })),
    end: events.find((event) => event.event === 'end')?.data as Run | undefined,
  };
}

async function waitForEnd(client: AdminClient, id: number): Promise<Run> {
  let run: Run | undefined;
  await until(async () => {
    run = (await client.request<Run>('GET', `/api/deploy/runs/${id}`)).body;
    return run.status !== 'running';
  }, 20_000);
  return run!;
}

beforeAll(async () => {
  server = await startAdminServer({
    PLATFORM_DEPLOY_STAGING_COMMAND: 'sh ./deploy-staging.sh',
    PLATFORM_DEPLOY_PRODUCTION_COMMAND: 'sh ./deploy-production.sh',
    PLATFORM_DEPLOY_TIMEOUT_SECONDS: '4',
  });
  admin = new AdminClient(server.adminUrl);
  expect((await admin.login()).status).toBe(200);
});
afterAll(async () => {
  await server?.close();
});

describe('the deployment API', () => {
  it('answers 401 without a session and 403 without the CSRF token, starting nothing', async () => {
    const anonymous = new AdminClient(server.adminUrl);
    for (const { method, route, body } of ROUTES) {
      const answer = await anonymous.request(method, route, body);
      expect({ route, status: answer.status, code: answer.body.error_code }).toEqual({ route, status: 401, code: 'UNAUTHENTICATED' });
    }
    for (const { method, route, body } of ROUTES.filter((entry) => entry.method !== 'GET')) {
      const answer = await admin.request(method, route, body, { 'x-csrf-token': 'not-the-token' });
      expect({ route, status: answer.status, code: answer.body.error_code }).toEqual({ route, status: 403, code: 'CSRF_TOKEN_INVALID' });
    }
    expect((await admin.request<{ runs: Run[] }>('GET', '/api/deploy/runs')).body.runs).toEqual([]);
  });

  it('shows each environment’s command', async () => {
    const answer = await admin.request('GET', '/api/deploy/environments');
    expect(answer).toMatchObject({
      status: 200,
      body: {
        environments: [
          { environment: 'staging', configured: true, command: 'sh ./deploy-staging.sh', workingDirectory: server.project, timeoutSeconds: 4 },
          { environment: 'production', configured: true, command: 'sh ./deploy-production.sh' },
        ],
        running: null,
      },
    });
  });

  it('runs a command that prints lines and exits 0, streaming its output, and records it', async () => {
    script(
      server.project,
      'staging',
      'echo "deploying $PLINTH_DEPLOY_ENVIRONMENT run $PLINTH_DEPLOY_RUN_ID from $(pwd)"\necho warning >&2\nprintf "no newline at the end"\n',
    );
    const started = await admin.request<Run>('POST', '/api/deploy/staging');
    expect(started).toMatchObject({ status: 202, body: { environment: 'staging', status: 'running', startedBy: 'admin', exitCode: null, endedAt: null } });
    const { id } = started.body;
    const { lines, end } = await readOutput(admin, server.adminUrl, id);
    expect(
      lines
        .slice(0, 3)
        .map(({ text }) => text)
        .sort(),
    ).toEqual([`deploying staging run ${id} from ${server.project}`, 'no newline at the end', 'warning'].sort());
    expect(lines.find((line) => line.text === 'warning')?.stream).toBe('stderr');
    expect(lines.at(-1)?.text).toBe('[plinth] succeeded (exit code 0)');
    expect(end).toMatchObject({ id, status: 'succeeded', exitCode: 0 });
    const run = await admin.request<Run>('GET', `/api/deploy/runs/${id}`);
    expect(run.body).toMatchObject({ status: 'succeeded', exitCode: 0, output: expect.stringContaining(`deploying staging run ${id}`) });
    expect(Date.parse(run.body.endedAt!)).toBeGreaterThanOrEqual(Date.parse(run.body.startedAt));
    // Reconnecting after the second line sends the rest only.
    const resumed = await readOutput(admin, server.adminUrl, id, { 'last-event-id': '2' });
    expect(resumed.lines[0].seq).toBe(3);
  });

  it('records a command that exits 3 as failed, with its exit code', async () => {
    script(server.project, 'production', 'echo "migrating"\necho "migration failed" >&2\nexit 3\n');
    const started = await admin.request<Run>('POST', '/api/deploy/production', {});
    expect(started.status).toBe(202);
    const run = await waitForEnd(admin, started.body.id);
    expect(run).toMatchObject({ environment: 'production', status: 'failed', exitCode: 3, output: expect.stringContaining('migration failed') });
    const history = await admin.request<{ runs: Run[] }>('GET', '/api/deploy/runs');
    expect(history.body.runs.map((entry) => [entry.environment, entry.status, entry.exitCode])).toEqual([
      ['production', 'failed', 3],
      ['staging', 'succeeded', 0],
    ]);
    const filtered = await admin.request<{ runs: Run[] }>('GET', '/api/deploy/runs?environment=staging&limit=5');
    expect(filtered.body.runs.map((entry) => entry.environment)).toEqual(['staging']);
  });

  it('runs one deployment at a time: a second answers 409 while the first runs', async () => {
    const release = path.join(server.project, 'release');
    script(server.project, 'staging', `echo waiting\nwhile [ ! -f ${release} ]; do sleep 0.1; done\necho released\n`);
    const first = await admin.request<Run>('POST', '/api/deploy/staging');
    expect(first.status).toBe(202);
    for (const environment of ['staging', 'production']) {
      const second = await admin.request('POST', `/api/deploy/${environment}`);
      expect(second).toMatchObject({ status: 409, body: { error_code: 'DEPLOY_RUNNING', message: expect.stringContaining(`run ${first.body.id}`) } });
    }
    expect((await admin.request('GET', '/api/deploy/environments')).body).toMatchObject({ running: { id: first.body.id, status: 'running' } });
    // The output streams live: the first line arrives while the command still waits.
    const response = await fetch(`${server.adminUrl}/api/deploy/runs/${first.body.id}/output`, { headers: { cookie: admin.cookie! } });
    const reader = response.body!.getReader();
    let received = '';
    while (!received.includes('"text":"waiting"')) received += new TextDecoder().decode((await reader.read()).value);
    expect(received).not.toContain('released');
    fs.writeFileSync(release, '');
    for (let chunk = await reader.read(); !chunk.done; chunk = await reader.read()) received += new TextDecoder().decode(chunk.value);
    expect(received).toContain('"text":"released"');
    expect(received).toMatch(/event: end\ndata: \{[^\n]*"status":"succeeded"/);
    expect(await waitForEnd(admin, first.body.id)).toMatchObject({ status: 'succeeded', output: expect.stringContaining('released') });
    fs.rmSync(release);
  });

  it('stops a command past PLATFORM_DEPLOY_TIMEOUT_SECONDS and records it as timed out', async () => {
    script(server.project, 'staging', 'ps -o pgid= -p $$ > deploy.pid\necho slow\nsleep 60\n');
    const started = await admin.request<Run>('POST', '/api/deploy/staging');
    const run = await waitForEnd(admin, started.body.id);
    expect(run).toMatchObject({ status: 'timed-out', output: expect.stringContaining('PLATFORM_DEPLOY_TIMEOUT_SECONDS') });
    // The command's whole process group is gone (sleep included): no process of it but a zombie awaiting its reaper.
    const group = Number(fs.readFileSync(path.join(server.project, 'deploy.pid'), 'utf8'));
    const members = execFileSync('ps', ['-eo', 'pgid=,stat='])
      .toString()
      .split('\n')
      .map((line) => line.trim().split(/\s+/));
    expect(members.filter(([pgid, stat]) => Number(pgid) === group && !stat.startsWith('Z'))).toEqual([]);
  });

  it('says TLS is not configured when no certificate is named', async () => {
    expect(await admin.request('GET', '/api/certificates')).toEqual(
      expect.objectContaining({
        status: 200,
        body: { tlsConfigured: false, message: expect.stringContaining('TLS is not configured'), warningDays: 14, certificates: [], problems: [] },
      }),
    );
  });

  it('refuses bad input with clear codes', async () => {
    expect(await admin.request('GET', '/api/deploy/runs/999999')).toMatchObject({ status: 404, body: { error_code: 'UNKNOWN_RUN' } });
    expect(await admin.request('GET', '/api/deploy/runs/999999/output')).toMatchObject({ status: 404, body: { error_code: 'UNKNOWN_RUN' } });
    for (const route of ['/api/deploy/runs/abc', '/api/deploy/runs/0', '/api/deploy/runs?environment=moon', '/api/deploy/runs?limit=0']) {
      const answer = await admin.request('GET', route);
      expect({ route, status: answer.status, code: answer.body.error_code }).toEqual({ route, status: 400, code: 'VALIDATION_ERROR' });
    }
    // The request carries no command.
    const injected = await admin.request('POST', '/api/deploy/staging', { command: 'touch /tmp/pwned' });
    expect(injected).toMatchObject({ status: 400, body: { error_code: 'VALIDATION_ERROR' } });
    expect((await admin.request('POST', '/api/deploy/qa')).status).toBe(404);
  });
});

describe('deployments across restarts', () => {
  let database: TestDatabase;
  let project: string;
  let running: SpawnedServer | undefined;

  beforeAll(async () => {
    database = await createTestDatabase();
    project = fs.mkdtempSync(path.join(os.tmpdir(), 'plinth-deploy-'));
  });
  afterAll(async () => {
    running?.child.kill('SIGKILL');
    await running?.exited;
    const pidFile = path.join(project, 'deploy.pid');
    if (fs.existsSync(pidFile)) {
      try {
        process.kill(-Number(fs.readFileSync(pidFile, 'utf8')), 'SIGKILL');
      } catch {
        // ended already
      }
    }
    await database.drop();
  });

  async function start(port: number, passwordHash: string): Promise<{ server: SpawnedServer; client: AdminClient }> {
    const server = await spawnServer(
      testEnvironment(database.url, {
        PLATFORM_ADMIN_ENABLED: 'true',
        PLATFORM_ADMIN_PORT: String(port),
        PLATFORM_ADMIN_PASSWORD: passwordHash,
        PLATFORM_PROJECT_PATH: project,
        PLATFORM_DEPLOY_STAGING_COMMAND: 'sh ./deploy-staging.sh',
      }),
    );
    running = server;
    const client = new AdminClient(`http://127.0.0.1:${port}`);
    expect((await client.login()).status).toBe(200);
    return { server, client };
  }

  it('keeps the history, and shows a run whose server was killed (kill -9) as interrupted', async () => {
    const port = await freePort();
    const hash = await adminPasswordHash();
    const first = await start(port, hash);
    expect(await first.client.request('POST', '/api/deploy/production')).toMatchObject({ status: 409, body: { error_code: 'DEPLOY_NOT_CONFIGURED' } });

    script(project, 'staging', 'echo quick\n');
    const quick = await first.client.request<Run>('POST', '/api/deploy/staging');
    expect(await waitForEnd(first.client, quick.body.id)).toMatchObject({ status: 'succeeded' });

    script(project, 'staging', 'ps -o pgid= -p $$ > deploy.pid\necho "long deployment started"\nsleep 30\n');
    const long = await first.client.request<Run>('POST', '/api/deploy/staging');
    expect(long.status).toBe(202);
    // The heartbeat saves the output so far.
    await until(async () =>
      (await database.query<{ output: string }>('SELECT output::text FROM admin_deploy_runs WHERE id = $1', [long.body.id]))[0].output.includes('started'),
    );
    first.server.child.kill('SIGKILL');
    await first.server.exited;
    process.kill(-Number(fs.readFileSync(path.join(project, 'deploy.pid'), 'utf8')), 'SIGKILL');

    const second = await start(port, hash);
    const history = await second.client.request<{ runs: Run[] }>('GET', '/api/deploy/runs');
    expect(history.body.runs.map((run) => [run.id, run.status, run.exitCode])).toEqual([
      [long.body.id, 'interrupted', null],
      [quick.body.id, 'succeeded', 0],
    ]);
    const interrupted = await second.client.request<Run>('GET', `/api/deploy/runs/${long.body.id}`);
    expect(interrupted.body.output).toContain('long deployment started');
    expect(interrupted.body.output).toContain('[plinth] interrupted');
    expect(interrupted.body.endedAt).not.toBeNull();
    const stream = await readOutput(second.client, `http://127.0.0.1:${port}`, long.body.id);
    expect(stream.end).toMatchObject({ status: 'interrupted' });

    // A new deployment can start, and a stop of the server (SIGTERM) interrupts it cleanly.
    script(project, 'staging', 'echo "again"\nsleep 30\n');
    const again = await second.client.request<Run>('POST', '/api/deploy/staging');
    expect(again.status).toBe(202);
    second.server.child.kill('SIGTERM');
    expect(await second.server.exited).toEqual({ code: 0, signal: null });
    running = undefined;
    const [row] = await database.query<{ status: string; output: string }>('SELECT status, output::text FROM admin_deploy_runs WHERE id = $1', [again.body.id]);
    expect(row.status).toBe('interrupted');
    expect(row.output).toContain('the server shut down');
  });
});
