import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { authPost, GENEROUS_AUTH_LIMITS, jwtPayload, linkIn } from '../support/auth';
import { createTestDatabase, type TestDatabase } from '../support/database';
import { CLAIMS_NAMESPACE, startTestServer, testEnvironment, type TestServer } from '../support/server';
import { startSmtpReceiver, type SmtpReceiver, smtpSettings } from '../support/smtp';
import { runCli } from '../support/spawn';

const STACK_TRACE = /\n\s+at \S+/;
// Each test runs several `plinth auth` processes, seconds each on a loaded machine: past Jest's
// default 60 s.
jest.setTimeout(180_000);
const AUTH_URL = 'https://auth.plinth.test';

let database: TestDatabase;
let server: TestServer;
let receiver: SmtpReceiver;
let environment: Record<string, string>;

beforeAll(async () => {
  database = await createTestDatabase();
  receiver = await startSmtpReceiver();
  const settings = {
    ...GENEROUS_AUTH_LIMITS,
    ...smtpSettings(receiver.port),
    JOBS_POLL_INTERVAL_SECONDS: '1',
    AUTH_SERVER_URL: AUTH_URL,
    AUTH_EMAIL_SIGNIN_EMAIL_VERIFIED_REQUIRED: 'false',
    AUTH_ALLOWED_ROLES: 'user,me,editor',
  };
  server = await startTestServer(settings, { database });
  environment = testEnvironment(database.url, settings);
  for (const email of ['ann@example.com', 'bob@example.com', 'cy@example.com']) {
    expect((await signUp(email)).status).toBe(200);
  }
  await authPost(server.url, '/signup/email-password', {
    email: 'ed@example.com',
    password: 'cli password',
    options: { defaultRole: 'editor', allowedRoles: ['editor', 'me'] },
  });
});
afterAll(async () => {
  await server.close();
  await receiver.close();
  await database.drop();
});

const signUp = (email: string) => authPost(server.url, '/signup/email-password', { email, password: 'cli password' });
const signIn = (email: string, password = 'cli password') =>
  authPost<{ session: { accessToken: string; refreshToken: string }; error?: string }>(server.url, '/signin/email-password', { email, password });
const plinth = (...args: string[]) => runCli(['auth', ...args], environment);

describe('plinth auth user', () => {
  it('list prints a table for people and JSON for scripts, filtered by role', async () => {
    const listed = await plinth('user', 'list');
    expect(listed.code).toBe(0);
    const lines = listed.stdout.trim().split('\n');
    expect(lines[0]).toMatch(/^ID\s+EMAIL\s+NAME\s+DEFAULT ROLE\s+ROLES\s+VERIFIED\s+STATE\s+CREATED$/);
    expect(lines.slice(1).map((line) => line.split(/\s+/)[1])).toEqual(['ann@example.com', 'bob@example.com', 'cy@example.com', 'ed@example.com']);

    const editors = await plinth('user', 'list', '--role', 'editor', '--json');
    expect(JSON.parse(editors.stdout)).toEqual([
      expect.objectContaining({ email: 'ed@example.com', defaultRole: 'editor', roles: ['editor', 'me'], state: 'active', emailVerified: false }),
    ]);
  });

  it('get shows one account, and names an unknown address without a stack trace', async () => {
    const found = await plinth('user', 'get', 'ANN@example.com', '--json');
    expect(found.code).toBe(0);
    expect(JSON.parse(found.stdout)).toMatchObject({ email: 'ann@example.com', roles: ['user', 'me'], state: 'active' });
    const missing = await plinth('user', 'get', 'nobody@example.com');
    expect(missing.code).toBe(1);
    expect(missing.stderr).toContain('no user has the address nobody@example.com');
    expect(missing.stderr).not.toMatch(STACK_TRACE);
  });

  it('disable blocks sign-in and ends the sessions; enable lets the user back in', async () => {
    const session = (await signIn('bob@example.com')).body.session;
    const disabled = await plinth('user', 'disable', 'bob@example.com');
    expect(disabled).toMatchObject({ code: 0, stdout: expect.stringMatching(/^bob@example.com \([0-9a-f-]+\) is disabled\n$/) });
    expect((await signIn('bob@example.com')).body.error).toBe('disabled-user');
    expect((await authPost(server.url, '/token', { refreshToken: session.refreshToken })).status).toBe(401);

    expect((await plinth('user', 'enable', 'bob@example.com')).stdout).toContain('is active');
    expect((await signIn('bob@example.com')).status).toBe(200);
  });

  it('delete is soft: the row stays, sign-in is blocked, the sessions end', async () => {
    const session = (await signIn('cy@example.com')).body.session;
    const deleted = await plinth('user', 'delete', 'cy@example.com', '--json');
    expect(JSON.parse(deleted.stdout)).toMatchObject({ email: 'cy@example.com', state: 'deleted' });
    expect(await database.query("SELECT 1 FROM users WHERE email = 'cy@example.com' AND deleted_at IS NOT NULL")).toHaveLength(1);
    expect((await signIn('cy@example.com')).body.error).toBe('invalid-email-password');
    expect((await authPost(server.url, '/token', { refreshToken: session.refreshToken })).status).toBe(401);
    // Enabling does not undo a deletion.
    await plinth('user', 'enable', 'cy@example.com');
    expect((await signIn('cy@example.com')).status).toBe(401);
  });

  it('role add, list and remove change the roles the next token carries; the default role stays', async () => {
    expect((await plinth('user', 'role', 'add', 'ann@example.com', '--role', 'admin')).stdout).toBe('ann@example.com: user, me, admin (default user)\n');
    const token = (await signIn('ann@example.com')).body.session.accessToken;
    expect((jwtPayload(token)[CLAIMS_NAMESPACE] as Record<string, unknown>)['x-gql-allowed-roles']).toEqual(['user', 'me', 'admin']);
    expect(JSON.parse((await plinth('user', 'role', 'list', 'ann@example.com', '--json')).stdout)).toEqual({
      defaultRole: 'user',
      roles: ['user', 'me', 'admin'],
    });
    const listed = await plinth('user', 'role', 'list', 'ann@example.com');
    expect(listed.stdout.split('\n')[1]).toMatch(/^user\s+yes$/);

    expect((await plinth('user', 'role', 'remove', 'ann@example.com', '--role', 'admin')).code).toBe(0);
    const refused = await plinth('user', 'role', 'remove', 'ann@example.com', '--role', 'user');
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain('user is the default role of ann@example.com');
    const notHeld = await plinth('user', 'role', 'remove', 'ann@example.com', '--role', 'editor');
    expect(notHeld.stderr).toContain('does not have the role editor');
    const badName = await plinth('user', 'role', 'add', 'ann@example.com', '--role', 'not a role');
    expect(badName.code).toBe(1);
    expect((await plinth('user', 'role', 'add', 'ann@example.com')).stderr).toContain("required option '-r, --role <role>'");
    expect(JSON.parse((await plinth('user', 'role', 'list', 'ann@example.com', '--json')).stdout).roles).toEqual(['user', 'me']);
  });

  it('password-reset queues the reset mail, which the running server delivers', async () => {
    const result = await plinth('user', 'password-reset', 'ann@example.com');
    expect(result).toMatchObject({ code: 0, stdout: 'a password-reset link was queued for ann@example.com\n' });
    let mail = await receiver.next(20_000);
    while (!mail.recipients.includes('ann@example.com')) mail = await receiver.next(20_000);
    const link = new URL(linkIn(mail.parsed.text, `${AUTH_URL}/verify`));
    expect(link.searchParams.get('type')).toBe('passwordReset');
    const ticket = link.searchParams.get('ticket')!;
    expect(await authPost(server.url, '/user/password', { newPassword: 'set from the cli mail', ticket })).toMatchObject({ status: 200 });
    expect((await signIn('ann@example.com', 'set from the cli mail')).status).toBe(200);

    const refused = await plinth('user', 'password-reset', 'cy@example.com');
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain('cy@example.com is deleted');
  });
});

describe('plinth auth email configure', () => {
  let folder: string;
  beforeEach(() => {
    folder = fs.mkdtempSync(path.join(os.tmpdir(), 'plinth-auth-cli-'));
  });
  afterEach(() => fs.rmSync(folder, { recursive: true, force: true }));

  const configure = (...args: string[]) => runCli(['auth', 'email', 'configure', ...args], {}, folder);

  it('writes the SMTP settings into .env, keeping its other lines and replacing the old values', async () => {
    const file = path.join(folder, '.env');
    fs.writeFileSync(file, '# my settings\nPORT=9000\nSMTP_HOST=old.example.com\n');
    const result = await configure('--provider', 'smtp', '--host', 'smtp.example.com', '--port', '2525', '--user', 'mailer', '--password', 'p@ss word');
    expect(result).toMatchObject({ code: 0, stdout: `mail settings written to .env: SMTP_HOST, SMTP_PORT, SMTP_USER, SMTP_PASSWORD\n` });
    expect(fs.readFileSync(file, 'utf8')).toBe(
      '# my settings\nPORT=9000\nSMTP_HOST=smtp.example.com\nSMTP_PORT=2525\nSMTP_USER=mailer\nSMTP_PASSWORD="p@ss word"\n',
    );
    expect(fs.statSync(file).mode & 0o777).toBe(0o600);
  });

  it('refuses another provider, a bad port and a user without a password, writing nothing', async () => {
    const other = await configure('--provider', 'ses', '--host', 'x', '--port', '25');
    expect(other.code).not.toBe(0);
    expect(other.stderr).toContain('Allowed choices are smtp');
    const badPort = await configure('--provider', 'smtp', '--host', 'x', '--port', '70000');
    expect(badPort.stderr).toContain('must be a port number');
    const half = await configure('--provider', 'smtp', '--host', 'x', '--port', '25', '--user', 'only');
    expect(half.code).toBe(1);
    expect(half.stderr).toContain('SMTP_USER and SMTP_PASSWORD must be set together');
    expect(fs.existsSync(path.join(folder, '.env'))).toBe(false);
  });
});

describe('without a running server', () => {
  it('the commands work on the database alone', async () => {
    await server.close();
    const listed = await plinth('user', 'list', '--json');
    expect(listed.code).toBe(0);
    expect(JSON.parse(listed.stdout)).toHaveLength(4);
    expect((await plinth('user', 'disable', 'ed@example.com')).code).toBe(0);
    expect(await database.query("SELECT 1 FROM users WHERE email = 'ed@example.com' AND disabled")).toHaveLength(1);
    server = await startTestServer({ ...GENEROUS_AUTH_LIMITS }, { database });
  });
});
