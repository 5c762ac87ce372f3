import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createTestDatabase, type TestDatabase } from './support/database';
import { ADMIN_SECRET, PRODUCTION, testEnvironment } from './support/server';
import { spawn } from 'node:child_process';
import { childEnvironment, CLI, runCli, spawnServer } from './support/spawn';

const SCHEMA_FILE = path.resolve(__dirname, '..', '..', 'schema', 'schema.graphql');
/** The migrations in the order they apply, as TypeORM names them (`<Name><timestamp>`), read from migrations/. */
const MIGRATIONS = fs
  .readdirSync(path.resolve(__dirname, '..', '..', 'migrations'))
  .filter((file) => /^\d+-\w+\.ts$/.test(file))
  .sort()
  .map((file) => file.replace(/^(\d+)-(\w+)\.ts$/, '$2$1'));
const STACK_TRACE = /\n\s+at \S+/;

let database: TestDatabase;
let folder: string;

beforeAll(async () => {
  database = await createTestDatabase({ empty: true });
});
afterAll(async () => {
  await database.drop();
});
beforeEach(() => {
  folder = fs.mkdtempSync(path.join(os.tmpdir(), 'plinth-cli-'));
});
afterEach(() => fs.rmSync(folder, { recursive: true, force: true }));

describe('plinth', () => {
  it('--help lists its commands', async () => {
    const result = await runCli(['--help'], {});
    expect(result.code).toBe(0);
    for (const command of ['start', 'migrate', 'schema', 'jobs', 'build']) expect(result.stdout).toMatch(new RegExp(`^\\s+${command}\\b`, 'm'));
  });

  it('stops at start-up with a message naming the bad variable, without a stack trace', async () => {
    const result = await runCli(['start'], { PORT: 'eighty', LOG_LEVEL: 'silent' });
    expect(result.code).toBe(1);
    expect(result.stderr).toContain('PORT must be a number (got "eighty")');
    expect(result.stderr).not.toMatch(STACK_TRACE);
  });

  it('reads .env from the working folder', async () => {
    fs.writeFileSync(path.join(folder, '.env'), 'GQL_GRAPHQL_MAX_DEPTH=deep\n');
    const result = await runCli(['start'], {}, folder);
    expect(result.code).toBe(1);
    expect(result.stderr).toContain('GQL_GRAPHQL_MAX_DEPTH');
  });

  it('refuses to start in production without its secrets', async () => {
    const result = await runCli(['start'], { NODE_ENV: 'production', DATABASE_URL: database.url });
    expect(result.code).toBe(1);
    expect(result.stderr).toContain('GQL_GRAPHQL_ADMIN_SECRET is required when NODE_ENV=production');
    expect(result.stderr).toContain('GQL_GRAPHQL_JWT_SECRET is required when NODE_ENV=production');
    expect(result.stderr).toContain('STORAGE_URL_SIGNING_SECRET is required when NODE_ENV=production');
  });

  it('refuses to start in production with a weak admin secret or no key of its own for signed links, never printing a secret', async () => {
    const weak = 'weak-but-not-empty-admin-secret';
    const jwtKey = 'j'.repeat(40);
    const result = await runCli(['start'], {
      NODE_ENV: 'production',
      DATABASE_URL: database.url,
      GQL_GRAPHQL_ADMIN_SECRET: weak,
      GQL_GRAPHQL_JWT_SECRET: JSON.stringify({ type: 'HS256', key: jwtKey }),
    });
    expect(result.code).toBe(1);
    expect(result.stderr).toContain('GQL_GRAPHQL_ADMIN_SECRET must be at least 32 characters when NODE_ENV=production');
    expect(result.stderr).toContain('STORAGE_URL_SIGNING_SECRET is required when NODE_ENV=production');
    expect(result.stderr).not.toContain(weak);
    expect(result.stderr).not.toContain(jwtKey);
    expect(result.stderr).not.toMatch(STACK_TRACE);
  });

  it('rejects a bad --port option', async () => {
    const result = await runCli(['start', '--port', 'abc'], {});
    expect(result.code).not.toBe(0);
    expect(result.stderr).toContain('must be a port number');
  });

  describe('schema', () => {
    it('prints exactly the committed schema/schema.graphql', async () => {
      const result = await runCli(['schema'], {});
      expect(result.code).toBe(0);
      expect(result.stdout).toBe(fs.readFileSync(SCHEMA_FILE, 'utf8'));
    });

    it('--check passes for the committed schema and fails for a stale one', async () => {
      expect((await runCli(['schema', '--check', SCHEMA_FILE], {})).code).toBe(0);
      const stale = path.join(folder, 'schema.graphql');
      fs.writeFileSync(stale, fs.readFileSync(SCHEMA_FILE, 'utf8').replace('registerUser', 'signUp'));
      const result = await runCli(['schema', '--check', stale], {});
      expect(result.code).toBe(1);
      expect(result.stderr).toContain('is stale');
    });
  });

  describe('migrate', () => {
    const env = () => testEnvironment(database.url);

    // One CLI process per migration reverted, seconds each on a loaded machine: past the default 60 s.
    it("applies the migrations, reports an up-to-date database, reverts each one after the invitations' and re-applies", async () => {
      const first = await runCli(['migrate'], env());
      expect(first.code).toBe(0);
      expect(first.stdout).toBe(`applied: ${MIGRATIONS.join(', ')}\n`);
      expect((await runCli(['migrate'], env())).stdout).toBe('the database is up to date\n');
      expect((await runCli(['migrate', '--check'], env())).code).toBe(0);

      // Every migration from the invitations' on can be reverted, newest first, one per call.
      const fromInvitations = MIGRATIONS.slice(MIGRATIONS.indexOf('CreateUserInvitations1795280000000'));
      for (let index = fromInvitations.length - 1; index > 0; index -= 1) {
        const reverted = await runCli(['migrate', '--revert'], env());
        expect({ migration: fromInvitations[index], code: reverted.code, stderr: reverted.stderr }).toEqual({
          migration: fromInvitations[index],
          code: 0,
          stderr: '',
        });
      }
      // An invited user (no password) does not survive the invitations' revert: password_hash is NOT NULL again.
      await database.query("INSERT INTO users (email, name) VALUES ('invited@example.com', 'Invited')");
      expect((await runCli(['migrate', '--revert'], env())).code).toBe(0);
      expect(await database.query("SELECT to_regclass('user_invitations') AS t")).toEqual([{ t: null }]);
      expect(await database.query('SELECT count(*)::int AS count FROM users')).toEqual([{ count: 0 }]);
      await expect(database.query("INSERT INTO users (email, name) VALUES ('again@example.com', 'Again')")).rejects.toThrow(/password_hash/);
      const pending = await runCli(['migrate', '--check'], env());
      expect(pending.code).toBe(2);
      expect(pending.stdout).toBe('migrations are pending\n');

      expect((await runCli(['migrate'], env())).stdout).toBe(`applied: ${fromInvitations.join(', ')}\n`);
    }, 180_000);

    it('fails with a clear message when the database cannot be reached', async () => {
      const result = await runCli(['migrate'], testEnvironment('postgres://postgres@127.0.0.1:1/none'));
      expect(result.code).toBe(1);
      expect(result.stderr).toMatch(/^plinth: .*ECONNREFUSED/m);
      expect(result.stderr).not.toMatch(STACK_TRACE);
    });
  });

  it('in development, generates the admin secret, prints it once, and it works', async () => {
    const env = {
      ...testEnvironment(database.url),
      NODE_ENV: 'development',
      PLINTH_DATA_DIR: folder,
      GQL_GRAPHQL_ADMIN_SECRET: '',
      GQL_GRAPHQL_JWT_SECRET: '',
    };
    const first = await spawnServer(env);
    const printed = /generated one for development[^\n]*\n\s+([0-9a-f]{64})/.exec(first.output());
    expect(printed).not.toBeNull();
    const secret = printed![1];
    expect(secret).not.toBe(ADMIN_SECRET);
    const asAdmin = await fetch(`${first.url}/v1/graphql`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-gql-admin-secret': secret },
      body: JSON.stringify({ query: '{ session { role } }' }),
    });
    expect(await asAdmin.json()).toEqual({ data: { session: { role: 'admin' } } });
    first.child.kill('SIGTERM');
    await first.exited;

    const second = await spawnServer(env);
    expect(second.output()).not.toContain('generated one for development');
    expect(second.output()).not.toContain(secret);
    second.child.kill('SIGTERM');
    await second.exited;
  });

  describe('logs', () => {
    /** Runs `plinth start` until it is ready, at a pseudo-terminal (util-linux `script`) or into a pipe. */
    function startUntilReady(env: Record<string, string>, at: 'terminal' | 'pipe'): Promise<string> {
      const [command, args] = at === 'terminal' ? ['script', ['-qefc', `${process.execPath} ${CLI} start`, '/dev/null']] : [process.execPath, [CLI, 'start']];
      return new Promise((resolve, reject) => {
        const child = spawn(command, args, { env: childEnvironment(env), stdio: ['pipe', 'pipe', 'pipe'] });
        let output = '';
        const timer = setTimeout(() => child.kill('SIGKILL'), 30_000);
        child.stdout.on('data', (chunk) => {
          output += chunk;
          if (output.includes('Plinth is ready')) child.kill('SIGTERM');
        });
        child.on('error', reject);
        child.on('close', () => {
          clearTimeout(timer);
          resolve(output);
        });
      });
    }
    const env = () => ({ ...testEnvironment(database.url), LOG_LEVEL: 'info', PLINTH_DATA_DIR: folder });

    it('are pretty at a terminal in development', async () => {
      const output = await startUntilReady({ ...env(), NODE_ENV: 'development' }, 'terminal');
      expect(output).toMatch(/INFO.*Plinth is ready/);
      expect(output).not.toContain('{"level"');
    });

    it('are JSON at a terminal outside development, and wherever LOG_FORMAT=json says so', async () => {
      for (const extra of [PRODUCTION, { NODE_ENV: 'development', LOG_FORMAT: 'json' }] as Record<string, string>[]) {
        const output = await startUntilReady({ ...env(), ...extra }, 'terminal');
        const ready = output.split(/\r?\n/).find((line) => line.includes('Plinth is ready'));
        expect(JSON.parse(ready!)).toMatchObject({ level: 30, msg: 'Plinth is ready' });
      }
    });

    it('are pretty when LOG_FORMAT=pretty, even into a pipe', async () => {
      const output = await startUntilReady({ ...env(), LOG_FORMAT: 'pretty' }, 'pipe');
      expect(output).toMatch(/INFO.*Plinth is ready/);
      expect(output).not.toContain('{"level"');
    });
  });
});
