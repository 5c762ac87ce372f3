import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Writable } from 'node:stream';
import { parseEnv } from 'node:util';
import { generate } from 'otplib';
import { loadConfig } from '../../src/config';
import { createTestDatabase, type TestDatabase } from '../support/database';
import { freePort } from '../support/global-setup';
import { testEnvironment } from '../support/server';
import { childEnvironment, CLI, runCli } from '../support/spawn';
import { until } from '../support/until';
import { AdminClient, ADMIN_PASSWORD, startAdminServer, type AdminTestServer } from './support';

// Each test runs `plinth admin` processes, seconds each on a loaded machine.
jest.setTimeout(120_000);

let database: TestDatabase;
let project: string;
let environment: Record<string, string>;
let server: AdminTestServer;
const settingsFile = () => path.join(project, '.env');
const settings = () => (fs.existsSync(settingsFile()) ? (parseEnv(fs.readFileSync(settingsFile(), 'utf8')) as Record<string, string>) : {});
const plinth = (args: string[], env = environment) => runCli(['admin', ...args], env, project);

beforeAll(async () => {
  database = await createTestDatabase();
  project = fs.mkdtempSync(path.join(os.tmpdir(), 'plinth-admin-ops-'));
  const port = String(await freePort());
  environment = testEnvironment(database.url, { PLATFORM_PROJECT_PATH: project, PLATFORM_ADMIN_ENABLED: 'true', PLATFORM_ADMIN_PORT: port });
  server = await startAdminServer(
    { PLATFORM_ADMIN_PORT: port, LOG_LEVEL: 'info' },
    { database, project, logTo: new Writable({ write: (_chunk, _encoding, done) => done() }) },
  );
});
afterAll(async () => {
  await server?.close();
  await database?.drop();
});

describe('plinth admin logs', () => {
  it('prints the lines the server logged, filtered by service and level, with a session of its own that it ends', async () => {
    server.server.logger.child({ component: 'recurring' }).warn({ task: 'tidy' }, 'a scheduler line from the test');
    server.server.logger.info('an info line from the test');
    const all = await plinth(['logs']);
    expect(all.stderr).toBe('');
    expect(all.code).toBe(0);
    expect(all.stdout).toMatch(/^\d{4}-\d\d-\d\dT[\d:.]+Z WARN {2}a scheduler line from the test .*component=recurring task=tidy$/m);
    expect(all.stdout).toContain('INFO  an info line from the test');

    const scheduler = await plinth(['logs', '--service', 'scheduler', '--json']);
    expect(scheduler.code).toBe(0);
    const lines = scheduler.stdout
      .trim()
      .split('\n')
      .map((line) => JSON.parse(line) as { msg: string; component: string });
    expect(lines.map((line) => line.msg)).toContain('a scheduler line from the test');
    expect(lines.every((line) => line.component === 'recurring')).toBe(true);

    const warnings = await plinth(['logs', '--level', 'warn']);
    expect(warnings.stdout).toContain('a scheduler line from the test');
    expect(warnings.stdout).not.toContain('an info line from the test');
    // Each command's session is gone when it ends.
    expect(await database.query('SELECT count(*)::int AS n FROM admin_sessions')).toEqual([{ n: 0 }]);
  });

  it('follows new lines until interrupted', async () => {
    const child = spawn(process.execPath, [CLI, 'admin', 'logs', '--follow', '--tail', '0'], {
      env: childEnvironment(environment),
      cwd: project,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    child.stdout.on('data', (chunk) => (stdout += chunk));
    const exited = new Promise<number | null>((resolve) => child.on('close', (code) => resolve(code)));
    await until(
      async () => (await database.query<{ n: number }>('SELECT count(*)::int AS n FROM admin_sessions'))[0].n === 1,
      30_000,
      'the command opened its session',
    );
    // Its stream is open once the server counts the request: log until a line shows.
    await until(
      () => {
        server.server.logger.info('a followed line');
        return stdout.includes('a followed line');
      },
      30_000,
      'the followed line was printed',
    );
    child.kill('SIGINT');
    expect(await exited).toBe(0);
    expect(await database.query('SELECT count(*)::int AS n FROM admin_sessions')).toEqual([{ n: 0 }]);
  });

  it('says so, exiting 1, when the dashboard is disabled, does not answer, or the service is unknown', async () => {
    const disabled = await plinth(['logs'], { ...environment, PLATFORM_ADMIN_ENABLED: 'false' });
    expect(disabled.code).toBe(1);
    expect(disabled.stderr).toContain('the admin dashboard is disabled');
    const unreachable = await plinth(['logs'], { ...environment, PLATFORM_ADMIN_PORT: String(await freePort()) });
    expect(unreachable.code).toBe(1);
    expect(unreachable.stderr).toContain('the dashboard does not answer at http://127.0.0.1:');
    const unknown = await plinth(['logs', '--service', 'nothing']);
    expect(unknown.code).toBe(1);
    expect(unknown.stderr).toContain('refused the log stream (404)');
    const level = await plinth(['logs', '--level', 'loud']);
    expect(level.code).toBe(1);
    expect(level.stderr).toContain('must be one of trace, debug');
  });
});

/** `plinth admin totp enable`, answering the code `answer(secret)` once the secret is printed. */
async function enableTotp(answer: (secret: string) => Promise<string>): Promise<{ code: number | null; stdout: string; stderr: string; secret: string }> {
  const child = spawn(process.execPath, [CLI, 'admin', 'totp', 'enable'], {
    env: childEnvironment(environment),
    cwd: project,
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  let secret = '';
  child.stderr.on('data', (chunk) => (stderr += chunk));
  child.stdout.on('data', (chunk) => {
    stdout += chunk;
    const found = /^secret: ([A-Z2-7]+)$/m.exec(stdout);
    if (found && !secret) {
      secret = found[1];
      void answer(secret).then((code) => child.stdin.end(`${code}\n`));
    }
  });
  const code = await new Promise<number | null>((resolve) => child.on('close', resolve));
  return { code, stdout, stderr, secret };
}

describe('plinth admin totp', () => {
  it('refuses a wrong code and writes nothing', async () => {
    const before = settings();
    const refused = await enableTotp(async (secret) => {
      const right = await generate({ secret });
      expect(right).toMatch(/^\d{6}$/);
      return String((Number(right) + 1) % 1_000_000).padStart(6, '0');
    });
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain('the code does not match the new secret: nothing was written');
    expect(settings()).toEqual(before);
  });

  it('enable writes the secret it showed once a code of it matches; logins then need a code; disable removes it', async () => {
    const enabled = await enableTotp((secret) => generate({ secret }));
    expect(enabled.code).toBe(0);
    expect(enabled.stdout).toContain(`otpauth://totp/Plinth%20admin:admin?secret=${enabled.secret}`);
    // The QR code, drawn with block characters.
    expect(enabled.stdout).toMatch(/[█▀▄]{10}/);
    expect(enabled.stdout).toContain(`TOTP is on in ${settingsFile()}`);
    expect(settings().PLATFORM_ADMIN_TOTP_SECRET).toBe(enabled.secret);
    expect(fs.statSync(settingsFile()).mode & 0o777).toBe(0o600);
    const config = loadConfig({ ...environment, ...settings() });
    expect(config.admin.totpSecret).toBe(enabled.secret);

    // A server started with it asks for the code.
    const withTotp = await startAdminServer(
      { PLATFORM_ADMIN_TOTP_SECRET: enabled.secret },
      { database, project, logTo: new Writable({ write: (_chunk, _encoding, done) => done() }) },
    );
    try {
      const client = new AdminClient(withTotp.adminUrl);
      expect((await client.login()).body).toMatchObject({ error_code: 'OTP_REQUIRED' });
      expect((await client.login({ username: 'admin', password: ADMIN_PASSWORD, otp: await generate({ secret: enabled.secret }) })).status).toBe(200);
    } finally {
      await withTotp.close();
    }

    const disabled = await plinth(['totp', 'disable']);
    expect(disabled.code).toBe(0);
    expect(settings().PLATFORM_ADMIN_TOTP_SECRET ?? '').toBe('');
    expect(loadConfig({ ...environment, ...settings() }).admin.totpSecret).toBeUndefined();
  });
});
