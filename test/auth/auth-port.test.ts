import net from 'node:net';
import { authPost, GENEROUS_AUTH_LIMITS } from '../support/auth';
import { freePort } from '../support/global-setup';
import { startTestServer, type TestServer } from '../support/server';
import { bearer } from '../support/tokens';

let server: TestServer;
let authPort: number;

beforeAll(async () => {
  authPort = await freePort();
  server = await startTestServer({ ...GENEROUS_AUTH_LIMITS, AUTH_EMAIL_SIGNIN_EMAIL_VERIFIED_REQUIRED: 'false', AUTH_PORT: String(authPort) });
});
afterAll(() => server.close());

describe('AUTH_PORT', () => {
  it('serves the auth service at the root of 127.0.0.1:<AUTH_PORT>, as well as under /auth on the main port', async () => {
    const base = `http://127.0.0.1:${authPort}`;
    const signUp = await fetch(`${base}/signup/email-password`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ email: 'port@example.com', password: 'auth port password' }),
    });
    expect(signUp.status).toBe(200);
    const { session } = (await signUp.json()) as { session: { accessToken: string; refreshToken: string } };
    const user = await fetch(`${base}/user`, { headers: bearer(session.accessToken) });
    expect(user.status).toBe(200);
    expect(await user.json()).toMatchObject({ email: 'port@example.com' });
    // The same service on the main port: a session from one works on the other.
    expect((await authPost(server.url, '/token', { refreshToken: session.refreshToken })).status).toBe(200);
    const wrong = await fetch(`${base}/signin/email-password`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ email: 'port@example.com', password: 'not it' }),
    });
    expect(wrong.status).toBe(401);
    expect(await wrong.json()).toMatchObject({ error: 'invalid-email-password' });
  });

  it("serves its own health check there and nothing else: GraphQL, the server's probes and the /auth prefix itself are not found", async () => {
    expect(await (await fetch(`http://127.0.0.1:${authPort}/healthz`)).json()).toBe('OK');
    for (const path of ['/v1/graphql', '/readyz', '/auth/user', '/metrics']) {
      const response = await fetch(`http://127.0.0.1:${authPort}${path}`);
      expect({ path, status: response.status }).toEqual({ path, status: 404 });
    }
  });

  it('gives its answers a request id and CORS headers as the main port does, and answers preflights', async () => {
    const response = await fetch(`http://127.0.0.1:${authPort}/healthz`, { headers: { 'x-request-id': 'auth-port-trace-1', origin: 'https://app.example' } });
    expect(response.headers.get('x-request-id')).toBe('auth-port-trace-1');
    expect(response.headers.get('access-control-allow-origin')).toBe('*');
    const made = await fetch(`http://127.0.0.1:${authPort}/healthz`);
    expect(made.headers.get('x-request-id')).toMatch(/^[0-9a-f-]{36}$/);
    expect(made.headers.get('access-control-allow-origin')).toBeNull();
    const preflight = await fetch(`http://127.0.0.1:${authPort}/signin/email-password`, {
      method: 'OPTIONS',
      headers: { origin: 'https://app.example', 'access-control-request-method': 'POST', 'access-control-request-headers': 'content-type' },
    });
    expect(preflight.status).toBe(204);
    expect(preflight.headers.get('access-control-allow-headers')).toBe('content-type');
  });

  it('listens on loopback only', async () => {
    const refused = await new Promise<string>((resolve) => {
      const socket = net.connect(authPort, '127.0.0.2');
      socket.once('connect', () => (socket.destroy(), resolve('connected')));
      socket.once('error', (error: NodeJS.ErrnoException) => resolve(error.code ?? 'error'));
    });
    expect(refused).toBe('ECONNREFUSED');
  });

  it('stops listening when the server closes', async () => {
    const other = await freePort();
    const second = await startTestServer({ ...GENEROUS_AUTH_LIMITS, AUTH_PORT: String(other) }, { database: server.database });
    expect((await fetch(`http://127.0.0.1:${other}/user`)).status).toBe(401);
    await second.close();
    await expect(fetch(`http://127.0.0.1:${other}/user`)).rejects.toThrow();
  });
});
