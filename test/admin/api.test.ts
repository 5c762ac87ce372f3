import fs from 'node:fs';
import path from 'node:path';
import { Writable } from 'node:stream';
import { PLINTH_VERSION } from '../../src/common/package-version';
import { createRunsTable, recorderModule, RECORDER_QUEUE } from '../support/job-recorder';
import { createTestDatabase } from '../support/database';
import { until } from '../support/until';
import { AdminClient, startAdminServer, type AdminTestServer } from './support';

let server: AdminTestServer;
let admin: AdminClient;

/** Every route behind the session, with a body that would be accepted. */
const ROUTES: { method: string; route: string; body?: unknown }[] = [
  { method: 'GET', route: '/api/auth/session' },
  { method: 'POST', route: '/api/auth/logout' },
  { method: 'GET', route: '/api/health' },
  { method: 'GET', route: '/api/services' },
  { method: 'POST', route: '/api/services/events/restart' },
  { method: 'GET', route: '/api/config' },
  { method: 'POST', route: '/api/config', body: { settings: { PLATFORM_ADMIN_LOG_LINES: '500' } } },
  { method: 'GET', route: '/api/env' },
  { method: 'GET', route: '/api/logs/all' },
];

beforeAll(async () => {
  const database = await createTestDatabase();
  await createRunsTable(database);
  server = await startAdminServer(
    { JOBS_POLL_INTERVAL_SECONDS: '1', LOG_LEVEL: 'info' },
    { database, modules: [recorderModule()], logTo: new Writable({ write: (_chunk, _encoding, done) => done() }) },
  );
  admin = new AdminClient(server.adminUrl);
  expect((await admin.login()).status).toBe(200);
});
afterAll(async () => {
  await server.close();
  await server.database.drop();
});

describe('the admin API', () => {
  it('answers 401 on every route without a session, and without a live one', async () => {
    const anonymous = new AdminClient(server.adminUrl);
    for (const { method, route, body } of ROUTES) {
      const answer = await anonymous.request(method, route, body);
      expect({ method, route, status: answer.status, code: answer.body.error_code }).toEqual({ method, route, status: 401, code: 'UNAUTHENTICATED' });
    }
  });

  it('refuses every state-changing route without the CSRF token, or with another session’s, changing nothing', async () => {
    const other = new AdminClient(server.adminUrl);
    await other.login();
    for (const { method, route, body } of ROUTES.filter((entry) => entry.method !== 'GET')) {
      for (const token of [undefined, other.csrfToken!]) {
        const answer = await admin.request(method, route, body, token === undefined ? { 'x-csrf-token': '' } : { 'x-csrf-token': token });
        expect({ route, token, status: answer.status, code: answer.body.error_code }).toEqual({ route, token, status: 403, code: 'CSRF_TOKEN_INVALID' });
      }
    }
    // The header twice is no token either.
    const twice = await fetch(`${server.adminUrl}/api/services/events/restart`, {
      method: 'POST',
      headers: [
        ['cookie', admin.cookie!],
        ['x-csrf-token', admin.csrfToken!],
        ['x-csrf-token', admin.csrfToken!],
      ],
    });
    expect(twice.status).toBe(403);
    expect((await admin.request('GET', '/api/auth/session')).status).toBe(200);
    expect(fs.existsSync(path.join(server.project, '.env'))).toBe(false);
  });

  it("reports each part's state and the CLI version", async () => {
    const health = await admin.request<{ status: string; version: string; cliVersion: string; parts: { name: string; state: string; actions: string[] }[] }>(
      'GET',
      '/api/health',
    );
    expect(health.status).toBe(200);
    expect(health.body).toMatchObject({ status: 'ok', version: PLINTH_VERSION, cliVersion: PLINTH_VERSION });
    const states = Object.fromEntries(health.body.parts.map((part) => [part.name, part.state]));
    expect(states).toMatchObject({
      http: 'running',
      auth: 'running',
      database: 'running',
      events: 'running',
      scheduler: 'running',
      mailer: 'running',
      'jobs.mail': 'running',
      [`jobs.${RECORDER_QUEUE}`]: 'running',
    });
    expect(health.body.parts.find((part) => part.name === 'database')).toMatchObject({ latencyMs: expect.any(Number) });
    const services = await admin.request<{ services: { name: string; actions: string[] }[] }>('GET', '/api/services');
    expect(services.status).toBe(200);
    expect(services.body.services.map((part) => part.name)).toEqual(health.body.parts.map((part) => part.name));
    expect(services.body.services.find((part) => part.name === 'events')!.actions).toEqual(['stop', 'restart']);
  });

  it("stops a queue's worker: a job sent meanwhile waits, and is processed once the worker starts again", async () => {
    const worker = `jobs.${RECORDER_QUEUE}`;
    const stopped = await admin.request('POST', `/api/services/${worker}/stop`);
    expect(stopped.status).toBe(200);
    expect(stopped.body).toMatchObject({ name: worker, state: 'stopped', actions: ['start', 'restart'] });
    expect((await admin.request('GET', '/api/health')).body).toMatchObject({ status: 'degraded' });
    expect((await admin.request('POST', `/api/services/${worker}/stop`)).body).toMatchObject({ error_code: 'ACTION_NOT_POSSIBLE' });

    const jobId = await server.server.jobs.send(RECORDER_QUEUE, {});
    // Two poll intervals and the send's wake-up pass without the job being claimed.
    await new Promise((resolve) => setTimeout(resolve, 2500));
    expect(await server.database.query('SELECT 1 FROM job_runs WHERE job_id = $1', [jobId])).toEqual([]);
    const waiting = await admin.request<{ services: { name: string; jobs: { waiting: number } }[] }>('GET', '/api/services');
    expect(waiting.body.services.find((part) => part.name === worker)!.jobs.waiting).toBe(1);

    const started = await admin.request('POST', `/api/services/${worker}/start`);
    expect(started.body).toMatchObject({ name: worker, state: 'running' });
    await until(
      async () => (await server.database.query('SELECT 1 FROM job_runs WHERE job_id = $1 AND ended_at IS NOT NULL', [jobId])).length === 1,
      10_000,
      'the job ran',
    );
  });

  it('stops and starts the event dispatcher; refuses parts it does not drive (409), unknown ones (404) and unknown actions (400)', async () => {
    expect((await admin.request('POST', '/api/services/events/stop')).body).toMatchObject({ state: 'stopped' });
    expect((await admin.request('POST', '/api/services/events/start')).body).toMatchObject({ state: 'running' });
    expect((await admin.request('POST', '/api/services/events/restart')).body).toMatchObject({ state: 'running' });
    for (const name of ['http', 'database', 'mailer']) {
      const refused = await admin.request('POST', `/api/services/${name}/stop`);
      expect({ name, status: refused.status, code: refused.body.error_code }).toEqual({ name, status: 409, code: 'ACTION_NOT_POSSIBLE' });
    }
    const unknown = await admin.request('POST', '/api/services/jobs.nothing/stop');
    expect({ status: unknown.status, code: unknown.body.error_code }).toEqual({ status: 404, code: 'UNKNOWN_SERVICE' });
    for (const route of ['/api/services/events/pause', '/api/services/Events/stop', `/api/services/${'a'.repeat(100)}/stop`]) {
      expect((await admin.request('POST', route)).status).toBe(400);
    }
    // The action takes no body.
    expect((await admin.request('POST', '/api/services/events/stop', { force: true })).status).toBe(400);
    expect((await admin.request('GET', '/api/services')).body).toMatchObject({
      services: expect.arrayContaining([expect.objectContaining({ name: 'events', state: 'running' })]),
    });
  });

  it('shows every setting with secrets masked', async () => {
    const config = await admin.request<{ settingsFile: string; settings: { name: string; value: string | null; secret: boolean; source: string }[] }>(
      'GET',
      '/api/config',
    );
    expect(config.status).toBe(200);
    expect(config.body.settingsFile).toBe(path.join(server.project, '.env'));
    const byName = Object.fromEntries(config.body.settings.map((setting) => [setting.name, setting]));
    expect(byName.PLATFORM_ADMIN_PASSWORD).toMatchObject({ value: '********', secret: true });
    expect(byName.GQL_GRAPHQL_ADMIN_SECRET).toMatchObject({ value: '********', secret: true });
    expect(byName.PLATFORM_ADMIN_ENABLED).toMatchObject({ value: 'true', secret: false, source: 'environment' });
    expect(byName.SMTP_HOST).toMatchObject({ value: null, source: 'default' });
    expect(JSON.stringify(config.body)).not.toContain('$argon2id$');
  });

  it('validates a change with the start-up rules, naming the variable, and writes nothing when one value is bad', async () => {
    const file = path.join(server.project, '.env');
    const invalid = await admin.request('POST', '/api/config', { settings: { PLATFORM_ADMIN_SESSION_IDLE_MINUTES: '45', PLATFORM_ADMIN_PORT: 'abc' } });
    expect(invalid.status).toBe(400);
    expect(invalid.body).toMatchObject({ error_code: 'INVALID_CONFIG', errors: [{ field: 'PLATFORM_ADMIN_PORT' }] });
    expect(invalid.body.message).toContain('PLATFORM_ADMIN_PORT');
    const notHash = await admin.request('POST', '/api/config', { settings: { PLATFORM_ADMIN_PASSWORD: 'plain text password' } });
    expect(notHash.body).toMatchObject({ error_code: 'INVALID_CONFIG', errors: [{ field: 'PLATFORM_ADMIN_PASSWORD' }] });
    expect(notHash.body.message).not.toContain('plain text password');
    const unknown = await admin.request('POST', '/api/config', { settings: { NOT_A_PLINTH_SETTING: 'x' } });
    expect(unknown.body).toMatchObject({ error_code: 'UNKNOWN_SETTING', errors: [{ field: 'NOT_A_PLINTH_SETTING' }] });
    for (const body of [{}, { settings: {} }, { settings: { lower_case: 'x' } }, { settings: { SMTP_HOST: { host: 'x' } } }, { settings: 'PORT=1' }]) {
      const answer = await admin.request('POST', '/api/config', body);
      expect({ body, status: answer.status }).toEqual({ body, status: 400 });
    }
    expect(fs.existsSync(file)).toBe(false);
  });

  it('writes a valid change to the settings file and says it needs a restart', async () => {
    const file = path.join(server.project, '.env');
    fs.writeFileSync(file, '# kept\nLOG_LEVEL=info\n');
    const changed = await admin.request('POST', '/api/config', {
      settings: {
        PLATFORM_ADMIN_SESSION_IDLE_MINUTES: '45',
        JOBS_MAIL_CONCURRENCY: '3',
        SMTP_PASSWORD: 'smtp secret value',
        SMTP_USER: 'mailer',
        SMTP_HOST: 'smtp.example.com',
      },
    });
    expect(changed.status).toBe(200);
    expect(changed.body).toEqual({
      settingsFile: file,
      written: ['PLATFORM_ADMIN_SESSION_IDLE_MINUTES', 'JOBS_MAIL_CONCURRENCY', 'SMTP_PASSWORD', 'SMTP_USER', 'SMTP_HOST'],
      restartRequired: ['PLATFORM_ADMIN_SESSION_IDLE_MINUTES', 'JOBS_MAIL_CONCURRENCY', 'SMTP_PASSWORD', 'SMTP_USER', 'SMTP_HOST'],
      overriddenByEnvironment: [],
    });
    const text = fs.readFileSync(file, 'utf8');
    expect(text).toMatch(/^# kept\nLOG_LEVEL=info\nPLATFORM_ADMIN_SESSION_IDLE_MINUTES=45\nJOBS_MAIL_CONCURRENCY=3\nSMTP_PASSWORD="smtp secret value"\n/);
    const config = await admin.request<{ settings: { name: string; value: string | null; fileValue: string | null; pendingRestart: boolean }[] }>(
      'GET',
      '/api/config',
    );
    const byName = Object.fromEntries(config.body.settings.map((setting) => [setting.name, setting]));
    expect(byName.PLATFORM_ADMIN_SESSION_IDLE_MINUTES).toMatchObject({ value: null, fileValue: '45', pendingRestart: true });
    expect(byName.SMTP_PASSWORD).toMatchObject({ fileValue: '********', pendingRestart: true });
    // Unsetting: an empty value in the file.
    expect((await admin.request('POST', '/api/config', { settings: { SMTP_PASSWORD: null, SMTP_USER: null } })).status).toBe(200);
    expect(fs.readFileSync(file, 'utf8')).toContain('SMTP_PASSWORD=\n');
  });

  it("describes this instance's environment", async () => {
    const env = await admin.request('GET', '/api/env');
    expect(env.status).toBe(200);
    expect(env.body).toMatchObject({
      plinthVersion: PLINTH_VERSION,
      nodeEnv: 'test',
      nodeVersion: process.version,
      pid: process.pid,
      processRoles: ['api', 'worker'],
      projectPath: server.project,
      database: { kind: 'DATABASE_URL', serverVersion: expect.stringMatching(/^\d+/) },
    });
  });
});

/** A Server-Sent Events stream, read as it comes. */
class EventStream {
  private readonly reader: ReadableStreamDefaultReader<Uint8Array>;
  private readonly decoder = new TextDecoder();
  text = '';

  constructor(readonly response: Response) {
    this.reader = response.body!.getReader();
  }

  /** Reads until `done` holds for the text so far (or fails after `timeoutMs`); answers the text. */
  async until(done: (text: string) => boolean, timeoutMs = 10_000): Promise<string> {
    const deadline = Date.now() + timeoutMs;
    while (!done(this.text)) {
      let timer: NodeJS.Timeout | undefined;
      const timeout = new Promise<'timeout'>((resolve) => (timer = setTimeout(() => resolve('timeout'), Math.max(0, deadline - Date.now()))));
      const chunk = await Promise.race([this.reader.read(), timeout]);
      clearTimeout(timer);
      if (chunk === 'timeout' || chunk.done) throw new Error(`the stream ended or stalled; it said:\n${this.text}`);
      this.text += this.decoder.decode(chunk.value, { stream: true });
    }
    return this.text;
  }
}

function logEvents(text: string): { id: number; line: Record<string, unknown> }[] {
  return [...text.matchAll(/^id: (\d+)\nevent: log\ndata: (.*)$/gm)].map((match) => ({
    id: Number(match[1]),
    line: JSON.parse(match[2]) as Record<string, unknown>,
  }));
}

describe('the log stream', () => {
  const streams: AbortController[] = [];
  afterEach(() => {
    for (const stream of streams.splice(0)) stream.abort();
  });
  const open = async (route: string, headers: Record<string, string> = {}) => {
    const abort = new AbortController();
    streams.push(abort);
    return new EventStream(await fetch(`${server.adminUrl}${route}`, { headers: { cookie: admin.cookie!, ...headers }, signal: abort.signal }));
  };

  it('streams new log lines as Server-Sent Events, filtered by part and level', async () => {
    const [all, events, errors] = await Promise.all([
      open('/api/logs/all?tail=0&level=info'),
      open('/api/logs/events?tail=0'),
      open('/api/logs/all?tail=0&level=error'),
    ]);
    expect(all.response.status).toBe(200);
    expect(all.response.headers.get('content-type')).toBe('text/event-stream; charset=utf-8');
    await Promise.all([all, events, errors].map((stream) => stream.until((text) => text.includes(': following'))));
    server.server.logger.child({ component: 'events' }).warn({ marker: 'from-the-test' }, 'a dispatcher line');
    server.server.logger.child({ module: 'newsletter' }).info('another line');
    server.server.logger.child({ module: 'newsletter' }).error('an error line');
    const allText = await all.until((text) => text.includes('an error line'));
    // Less the request lines of the streams opened beside it.
    expect(
      logEvents(allText)
        .filter((event) => !('reqId' in event.line))
        .map((event) => event.line.msg),
    ).toEqual(['a dispatcher line', 'another line', 'an error line']);
    const eventsText = await events.until((text) => text.includes('a dispatcher line'));
    expect(logEvents(eventsText).map((event) => event.line)).toEqual([expect.objectContaining({ component: 'events', marker: 'from-the-test', level: 40 })]);
    const errorsText = await errors.until((text) => text.includes('an error line'));
    expect(logEvents(errorsText).map((event) => event.line.msg)).toEqual(['an error line']);
  });

  it('starts with recent lines (after Last-Event-ID when given), and refuses an unknown part', async () => {
    server.server.logger.warn('first recent line');
    server.server.logger.warn('second recent line');
    // Warnings and above: the request lines (info) of these streams stay out.
    const recent = await open('/api/logs/all?tail=2&level=warn');
    const [first, second] = logEvents(await recent.until((text) => text.includes(': following')));
    expect([first.line.msg, second.line.msg]).toEqual(['first recent line', 'second recent line']);
    const resumed = await open('/api/logs/all?tail=10&level=warn', { 'last-event-id': String(first.id) });
    expect(logEvents(await resumed.until((text) => text.includes(': following'))).map((event) => event.line.msg)).toEqual(['second recent line']);
    const unknown = await admin.request('GET', '/api/logs/nothing');
    expect({ status: unknown.status, code: unknown.body.error_code }).toEqual({ status: 404, code: 'UNKNOWN_SERVICE' });
    expect((await admin.request('GET', '/api/logs/all?level=loud')).status).toBe(400);
    expect((await admin.request('GET', '/api/logs/all?tail=-1')).status).toBe(400);
  });
});
