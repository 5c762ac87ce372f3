import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseEnv } from 'node:util';
import { PasswordHasher } from '../../src/common/passwords';
import { ConfigError, loadConfig } from '../../src/config';
import { createTestDatabase, type TestDatabase } from '../support/database';
import { freePort } from '../support/global-setup';
import { testEnvironment, TEST_PASSWORD_HASH } from '../support/server';
import { childEnvironment, CLI, runCli } from '../support/spawn';
import { AdminClient, startAdminServer } from './support';

// Each test runs several `plinth admin` processes, seconds each on a loaded machine.
jest.setTimeout(120_000);

let database: TestDatabase;
let project: string;
let environment: Record<string, string>;
const settingsFile = () => path.join(project, '.env');
const settings = () => parseEnv(fs.readFileSync(settingsFile(), 'utf8')) as Record<string, string>;
const plinth = (...args: string[]) => runCli(['admin', ...args], environment, project);
const hasher = new PasswordHasher({ memoryKib: 7168, iterations: 5, parallelism: 1 });

beforeAll(async () => {
  database = await createTestDatabase();
  project = fs.mkdtempSync(path.join(os.tmpdir(), 'plinth-admin-cli-'));
  environment = testEnvironment(database.url, { PLATFORM_PROJECT_PATH: project, PLATFORM_ADMIN_PORT: String(await freePort()) });
});
afterAll(() => database.drop());

describe('plinth admin', () => {
  it('enable turns the dashboard on and prints a temporary password once; the settings file keeps only its hash, and it logs in', async () => {
    const before = await plinth('status', '--json');
    expect(before.code).toBe(0);
    expect(JSON.parse(before.stdout)).toMatchObject({ enabled: false, passwordSet: false, user: 'admin', settingsFile: settingsFile(), answering: false });

    const enabled = await plinth('enable');
    expect(enabled.code).toBe(0);
    const temporary = /temporary password: (\S+)/.exec(enabled.stdout)![1];
    expect(temporary).toMatch(/^[A-Za-z0-9_-]{24}$/);
    const written = settings();
    expect(written.PLATFORM_ADMIN_ENABLED).toBe('true');
    expect(written.PLATFORM_ADMIN_PASSWORD).toMatch(/^\$argon2id\$v=19\$/);
    expect(fs.readFileSync(settingsFile(), 'utf8')).not.toContain(temporary);
    expect(fs.statSync(settingsFile()).mode & 0o777).toBe(0o600);

    // The server started with the settings file lets the temporary password in.
    const server = await startAdminServer({ ...written, PLATFORM_ADMIN_PORT: environment.PLATFORM_ADMIN_PORT }, { database, project });
    try {
      expect((await new AdminClient(server.adminUrl).login({ username: 'admin', password: temporary })).status).toBe(200);
      const status = await plinth('status', '--json');
      expect(JSON.parse(status.stdout)).toMatchObject({ enabled: true, passwordSet: true, totp: false, answering: true, url: server.adminUrl });
      expect((await plinth('status')).stdout).toContain('answering: yes');

      // A second enable keeps the password.
      const again = await plinth('enable');
      expect(again.stdout).not.toContain('temporary password');
      expect(settings().PLATFORM_ADMIN_PASSWORD).toBe(written.PLATFORM_ADMIN_PASSWORD);

      // reset ends the sessions and lifts a lock-out.
      await database.query("UPDATE admin_login_state SET failures = 9, last_failure_at = now(), locked_until = now() + interval '1 hour'");
      const reset = await plinth('reset');
      expect(reset.code).toBe(0);
      expect(reset.stdout).toContain('ended 1 admin session(s)');
      expect(await database.query('SELECT count(*)::int AS n FROM admin_sessions')).toEqual([{ n: 0 }]);
      expect(await database.query('SELECT failures, locked_until FROM admin_login_state')).toEqual([{ failures: 0, locked_until: null }]);
    } finally {
      await server.close();
    }
  });

  it('password stores the argon2id hash of the given password, refuses a short one, and reads one from a pipe', async () => {
    const short = await plinth('password', 'short');
    expect(short.code).toBe(1);
    expect(short.stderr).toContain('at least 12 characters');
    const given = await plinth('password', 'a new admin password');
    expect(given.code).toBe(0);
    expect(await hasher.matches('a new admin password', settings().PLATFORM_ADMIN_PASSWORD)).toBe(true);
    expect(fs.readFileSync(settingsFile(), 'utf8')).not.toContain('a new admin password');

    const piped = await new Promise<{ code: number | null; stdout: string }>((resolve, reject) => {
      const child = spawn(process.execPath, [CLI, 'admin', 'password'], { env: childEnvironment(environment), cwd: project, stdio: ['pipe', 'pipe', 'pipe'] });
      let stdout = '';
      child.stdout.on('data', (chunk) => (stdout += chunk));
      child.on('error', reject);
      child.on('close', (code) => resolve({ code, stdout }));
      child.stdin.end('a piped admin password\nignored second line\n');
    });
    expect(piped.code).toBe(0);
    expect(piped.stdout).not.toContain('a piped admin password');
    expect(await hasher.matches('a piped admin password', settings().PLATFORM_ADMIN_PASSWORD)).toBe(true);
  });

  it('open prints the address (and says when there is no browser); disable turns the dashboard off', async () => {
    const opened = await plinth('open');
    expect(opened.code).toBe(0);
    expect(opened.stdout).toBe(`http://127.0.0.1:${environment.PLATFORM_ADMIN_PORT}\n`);
    expect(opened.stderr).toContain('no browser to open here');
    expect((await plinth('open', '--no-browser')).stderr).toBe('');
    const disabled = await plinth('disable');
    expect(disabled.code).toBe(0);
    expect(settings().PLATFORM_ADMIN_ENABLED).toBe('false');
    expect(JSON.parse((await plinth('status', '--json')).stdout)).toMatchObject({ enabled: false });
    expect((await plinth('open')).stderr).toContain('the dashboard is disabled');
  });

  it('stops at a bad setting, naming the variable and never repeating a password', async () => {
    fs.appendFileSync(settingsFile(), 'PLATFORM_ADMIN_SESSION_IDLE_MINUTES=abc\n');
    const refused = await plinth('status');
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain('PLATFORM_ADMIN_SESSION_IDLE_MINUTES');
    fs.writeFileSync(settingsFile(), fs.readFileSync(settingsFile(), 'utf8').replace('PLATFORM_ADMIN_SESSION_IDLE_MINUTES=abc\n', ''));
    for (const [variable, value] of [
      ['PLATFORM_ADMIN_PASSWORD', 'hunter2 plain text'],
      ['PLATFORM_ADMIN_SESSION_IDLE_MINUTES', '0'],
      ['PLATFORM_ADMIN_ENABLED', 'maybe'],
      ['PLATFORM_ADMIN_TOTP_SECRET', 'not base32!'],
      ['PLATFORM_PROJECT_PATH', 'relative/path'],
      ['PLATFORM_ADMIN_USER', 'two words'],
      ['PLATFORM_ADMIN_HOST', 'not a host!'],
    ]) {
      let problem: unknown;
      try {
        loadConfig({ ...testEnvironment(database.url, TEST_PASSWORD_HASH), [variable]: value });
      } catch (error) {
        problem = error;
      }
      expect(problem).toBeInstanceOf(ConfigError);
      expect((problem as ConfigError).problems.join('\n')).toContain(variable);
      expect((problem as ConfigError).message).not.toContain('hunter2');
    }
  });
});
