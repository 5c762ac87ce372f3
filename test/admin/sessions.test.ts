import { Writable } from 'node:stream';
import { generate, generateSecret } from 'otplib';
import { sha256 } from '../../src/common/sha256';
import { resetAdminLogins } from '../../src/modules/admin/admin-sessions.service';
import { freePort } from '../support/global-setup';
import { startTestServer } from '../support/server';
import { ADMIN_PASSWORD, AdminClient, adminPasswordHash, startAdminServer, type AdminTestServer } from './support';

let server: AdminTestServer;
let logged = '';
const logTo = new Writable({
  write(chunk: Buffer, _encoding, done) {
    logged += chunk.toString();
    done();
  },
});

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const wrong = { username: 'admin', password: 'not the password' };

beforeAll(async () => {
  server = await startAdminServer(
    { PLATFORM_ADMIN_LOGIN_MAX_FAILURES: '4', PLATFORM_ADMIN_LOGIN_LOCKOUT_MINUTES: '2', TRUST_PROXY: 'loopback', LOG_LEVEL: 'info' },
    { logTo },
  );
});
afterAll(() => server.close());
beforeEach(() => resetAdminLogins(server.server.dataSource));

describe('admin login', () => {
  it('sets an HttpOnly, SameSite=Strict session cookie and answers the CSRF token; only the token’s hash is stored', async () => {
    const client = new AdminClient(server.adminUrl);
    const login = await client.login();
    expect(login.status).toBe(200);
    expect(login.body).toEqual({ username: 'admin', csrfToken: expect.any(String), createdAt: expect.any(String), idleExpiresAt: expect.any(String) });
    const [cookie] = login.headers.getSetCookie();
    expect(cookie).toMatch(/^plinth_admin_session=[A-Za-z0-9_-]{43}; Path=\/; HttpOnly; SameSite=Strict$/);
    const token = client.cookie!.split('=')[1];
    const stored = await server.database.query<{ token_hash: Buffer }>('SELECT token_hash FROM admin_sessions');
    expect(stored.map((row) => row.token_hash.toString('hex'))).toContain(sha256(token).toString('hex'));
    expect(JSON.stringify(stored)).not.toContain(token);
    expect(login.body.csrfToken).not.toBe(token);

    const session = await client.request('GET', '/api/auth/session');
    expect(session.status).toBe(200);
    expect(session.body).toMatchObject({ username: 'admin', csrfToken: login.body.csrfToken });
    expect(session.headers.get('cache-control')).toBe('no-store');
    // Neither the password nor the session token reaches the log.
    expect(logged).toContain('admin logged in');
    expect(logged).not.toContain(ADMIN_PASSWORD);
    expect(logged).not.toContain(token);
  });

  it('marks the cookie Secure when the dashboard is reached over TLS through a trusted proxy', async () => {
    const login = await new AdminClient(server.adminUrl).request(
      'POST',
      '/api/auth/login',
      { username: 'admin', password: ADMIN_PASSWORD },
      { 'x-forwarded-proto': 'https' },
    );
    expect(login.status).toBe(200);
    expect(login.headers.getSetCookie()[0]).toMatch(/; Secure$/);
  });

  it('refuses a wrong password or user name with 401, and bad input with 400, never 500', async () => {
    const client = new AdminClient(server.adminUrl);
    const refused = await client.login(wrong);
    expect(refused.status).toBe(401);
    expect(refused.body).toMatchObject({ success: false, error_code: 'INVALID_CREDENTIALS' });
    expect(refused.headers.getSetCookie()).toEqual([]);
    await resetAdminLogins(server.server.dataSource);
    expect((await client.login({ username: 'root', password: ADMIN_PASSWORD })).status).toBe(401);
    for (const body of [{}, { username: 'admin' }, { password: ADMIN_PASSWORD }, { username: 'admin', password: 'x'.repeat(2000) }, []]) {
      const answer = await client.request('POST', '/api/auth/login', body);
      expect({ body, status: answer.status }).toEqual({ body, status: 400 });
    }
    // A form posted from another site is not JSON: refused before anything is checked.
    const form = await fetch(`${server.adminUrl}/api/auth/login`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: `username=admin&password=${encodeURIComponent(ADMIN_PASSWORD)}`,
    });
    expect(form.status).toBe(415);
  });

  it('makes each attempt after a failure wait longer, doubling, then locks logins out; the right password waits too', async () => {
    const client = new AdminClient(server.adminUrl);
    expect((await client.login(wrong)).status).toBe(401);
    // 300 ms after the first failure, 600 ms after the second, 1200 ms after the third.
    for (const delayMs of [300, 600, 1200]) {
      const early = await client.login();
      expect(early.status).toBe(429);
      expect(early.body).toMatchObject({ error_code: 'LOGIN_DELAYED' });
      expect(early.headers.get('retry-after')).toBe(String(Math.ceil(delayMs / 1000)));
      await sleep(delayMs * 0.4);
      // Still too early within the delay.
      expect((await client.login()).status).toBe(429);
      await sleep(delayMs * 0.6 + 100);
      const attempt = await client.login(wrong);
      expect(attempt.status).toBe(attempt.body.error_code === 'LOGIN_LOCKED' ? 429 : 401);
    }
    // The fourth failure locked logins for PLATFORM_ADMIN_LOGIN_LOCKOUT_MINUTES: the right password too.
    const locked = await client.login();
    expect(locked.status).toBe(429);
    expect(locked.body).toMatchObject({ error_code: 'LOGIN_LOCKED' });
    expect(Number(locked.headers.get('retry-after'))).toBeGreaterThan(100);
    expect(Number(locked.headers.get('retry-after'))).toBeLessThanOrEqual(120);
    // Failed logins are logged without what was tried.
    expect(logged).toContain('failed admin login');
    expect(logged).not.toContain('not the password');
  });

  it('keeps the lock-out across a restart: the count is in PostgreSQL', async () => {
    const client = new AdminClient(server.adminUrl);
    await server.database.query("UPDATE admin_login_state SET failures = 4, last_failure_at = now(), locked_until = now() + interval '2 minutes'");
    const restarted = await startAdminServer({}, { database: server.database });
    try {
      expect((await new AdminClient(restarted.adminUrl).login()).body).toMatchObject({ error_code: 'LOGIN_LOCKED' });
    } finally {
      await restarted.close();
    }
    // Lifting it (plinth admin reset) lets the right password in, and a success resets the count.
    await resetAdminLogins(server.server.dataSource);
    expect((await client.login()).status).toBe(200);
    expect(await server.database.query('SELECT failures FROM admin_login_state')).toEqual([{ failures: 0 }]);
  });

  it('ends a session after PLATFORM_ADMIN_SESSION_IDLE_MINUTES without a request; each request keeps it alive', async () => {
    const client = new AdminClient(server.adminUrl);
    await client.login();
    const tokenHash = sha256(client.cookie!.split('=')[1]);
    await server.database.query("UPDATE admin_sessions SET last_seen_at = now() - interval '29 minutes' WHERE token_hash = $1", [tokenHash]);
    expect((await client.request('GET', '/api/auth/session')).status).toBe(200);
    const [{ idle }] = await server.database.query<{ idle: number }>(
      'SELECT extract(epoch FROM now() - last_seen_at)::float8 AS idle FROM admin_sessions WHERE token_hash = $1',
      [tokenHash],
    );
    expect(idle).toBeLessThan(5);
    await server.database.query("UPDATE admin_sessions SET last_seen_at = now() - interval '31 minutes' WHERE token_hash = $1", [tokenHash]);
    const ended = await client.request('GET', '/api/auth/session');
    expect(ended.status).toBe(401);
    expect(ended.body).toMatchObject({ error_code: 'UNAUTHENTICATED' });
  });

  it('logs out with the CSRF token only; the session is gone after', async () => {
    const client = new AdminClient(server.adminUrl);
    await client.login();
    expect((await client.request('POST', '/api/auth/logout', undefined, { 'x-csrf-token': '' })).status).toBe(403);
    const forged = await client.request('POST', '/api/auth/logout', undefined, { 'x-csrf-token': 'A'.repeat(43) });
    expect(forged.status).toBe(403);
    expect(forged.body).toMatchObject({ error_code: 'CSRF_TOKEN_INVALID' });
    const out = await client.request('POST', '/api/auth/logout');
    expect(out.status).toBe(200);
    expect(out.headers.getSetCookie()[0]).toMatch(/^plinth_admin_session=; Path=\/; HttpOnly; SameSite=Strict; Max-Age=0/);
    expect((await client.request('GET', '/api/auth/session')).status).toBe(401);
    expect((await new AdminClient(server.adminUrl).request('POST', '/api/auth/logout')).status).toBe(401);
  });

  it('refuses a forged or malformed session cookie', async () => {
    const client = new AdminClient(server.adminUrl);
    for (const cookie of ['plinth_admin_session=' + 'x'.repeat(43), 'plinth_admin_session=', 'plinth_admin_session=%%%', 'other=1']) {
      client.cookie = cookie;
      expect((await client.request('GET', '/api/auth/session')).status).toBe(401);
    }
  });

  it('is not served on the main port, and serves nothing of the main app on its own', async () => {
    for (const route of ['/_admin/api/health', '/_admin/api/auth/session']) expect((await fetch(`${server.url}${route}`)).status).toBe(404);
    const login = await fetch(`${server.url}/_admin/api/auth/login`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ username: 'admin', password: ADMIN_PASSWORD }),
    });
    expect(login.status).toBe(404);
    for (const route of ['/v1/graphql', '/healthz', '/auth/healthz', '/admin/payment-provider'])
      expect((await fetch(`${server.adminUrl}${route}`)).status).toBe(404);
  });
});

describe('admin login with TOTP', () => {
  let totpServer: AdminTestServer;
  const secret = generateSecret();
  const code = (steps = 0) => generate({ secret, epoch: Math.floor(Date.now() / 1000) + steps * 30 });

  beforeAll(async () => {
    totpServer = await startAdminServer({ PLATFORM_ADMIN_TOTP_SECRET: secret, PLATFORM_ADMIN_LOGIN_DELAY_MS: '0' });
  });
  afterAll(() => totpServer.close());

  it('asks for the code (OTP_REQUIRED, not counted as a failure), refuses a wrong one, accepts the right one once', async () => {
    const client = new AdminClient(totpServer.adminUrl);
    const asked = await client.login();
    expect(asked.status).toBe(401);
    expect(asked.body).toMatchObject({ error_code: 'OTP_REQUIRED' });
    expect(await totpServer.database.query('SELECT failures FROM admin_login_state')).toEqual([{ failures: 0 }]);
    const current = await code();
    const wrongCode = current === '000000' ? '111111' : '000000';
    expect((await client.login({ username: 'admin', password: ADMIN_PASSWORD, otp: wrongCode })).body).toMatchObject({ error_code: 'INVALID_CREDENTIALS' });
    expect((await client.login({ username: 'admin', password: 'wrong', otp: current })).body).toMatchObject({ error_code: 'INVALID_CREDENTIALS' });
    expect((await client.login({ username: 'admin', password: ADMIN_PASSWORD, otp: current })).status).toBe(200);
    // The same code again: refused, as is an older one.
    expect((await new AdminClient(totpServer.adminUrl).login({ username: 'admin', password: ADMIN_PASSWORD, otp: current })).status).toBe(401);
    expect((await new AdminClient(totpServer.adminUrl).login({ username: 'admin', password: ADMIN_PASSWORD, otp: await code(-1) })).status).toBe(401);
  });
});

describe('the admin listener', () => {
  it('listens only with PLATFORM_ADMIN_ENABLED=true', async () => {
    const port = await freePort();
    const off = await startTestServer({ PLATFORM_ADMIN_PORT: String(port), PLATFORM_ADMIN_PASSWORD: await adminPasswordHash() });
    try {
      await expect(fetch(`http://127.0.0.1:${port}/api/health`)).rejects.toThrow('fetch failed');
    } finally {
      await off.close();
    }
  });

  it('closes promptly with a log stream open', async () => {
    const streaming = await startAdminServer();
    const client = new AdminClient(streaming.adminUrl);
    await client.login();
    const response = await fetch(`${streaming.adminUrl}/api/logs/all`, { headers: { cookie: client.cookie! } });
    expect(response.status).toBe(200);
    const started = Date.now();
    await streaming.close();
    expect(Date.now() - started).toBeLessThan(5_000);
    // The stream ended with the server.
    await response.text();
  });
});
