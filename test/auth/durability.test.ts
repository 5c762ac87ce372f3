import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { authPost, GENEROUS_AUTH_LIMITS, linkIn } from '../support/auth';
import { createTestDatabase, type TestDatabase } from '../support/database';
import { testEnvironment } from '../support/server';
import { startSmtpReceiver, type SmtpReceiver, smtpSettings } from '../support/smtp';
import { spawnServer, type SpawnedServer } from '../support/spawn';

const AUTH_URL = 'https://auth.plinth.test';

let database: TestDatabase;
let receiver: SmtpReceiver;
let folder: string;
const running: SpawnedServer[] = [];

beforeAll(async () => {
  database = await createTestDatabase();
  receiver = await startSmtpReceiver();
  folder = fs.mkdtempSync(path.join(os.tmpdir(), 'plinth-auth-durability-'));
});
afterAll(async () => {
  for (const server of running) server.child.kill('SIGKILL');
  await receiver.close();
  await database.drop();
  fs.rmSync(folder, { recursive: true, force: true });
});

/** `plinth start` in a process of its own; `roles` api alone runs no job worker. */
async function start(roles: string): Promise<SpawnedServer> {
  const server = await spawnServer({
    ...testEnvironment(database.url, {
      ...GENEROUS_AUTH_LIMITS,
      PLINTH_DATA_DIR: folder,
      PLINTH_PROCESS_ROLES: roles,
      ...smtpSettings(receiver.port),
      JOBS_POLL_INTERVAL_SECONDS: '1',
      AUTH_SERVER_URL: AUTH_URL,
      // No retry window: a rotated token is spent at once.
      AUTH_REFRESH_TOKEN_REUSE_GRACE_SECONDS: '0',
    }),
  });
  running.push(server);
  return server;
}

async function kill(server: SpawnedServer): Promise<void> {
  server.child.kill('SIGKILL');
  await server.exited;
}

describe('what the auth service acknowledged survives kill -9', () => {
  it('a sign-up, its verification mail, and a rotation', async () => {
    // No worker: the verification mail can only be in the queue when the process dies.
    const first = await start('api');
    const signUp = await authPost(first.url, '/signup/email-password', { email: 'durable@example.com', password: 'durable password' });
    expect(signUp).toMatchObject({ status: 200, body: { session: null } });
    await kill(first);

    const second = await start('api,worker');
    const mail = await receiver.next(30_000);
    expect(mail.recipients).toEqual(['durable@example.com']);
    const link = linkIn(mail.parsed.text, `${AUTH_URL}/verify`);
    const followed = await fetch(link.replace(AUTH_URL, `${second.url}/auth`), { redirect: 'manual' });
    expect(followed.status).toBe(302);
    const signIn = await authPost<{ session: { refreshToken: string } }>(second.url, '/signin/email-password', {
      email: 'durable@example.com',
      password: 'durable password',
    });
    expect(signIn.status).toBe(200);
    const rotated = await authPost<{ refreshToken: string }>(second.url, '/token', { refreshToken: signIn.body.session.refreshToken });
    expect(rotated.status).toBe(200);
    await kill(second);

    const third = await start('api');
    // The rotation was committed before it was answered: the new token works, the old one is spent.
    expect((await authPost(third.url, '/token', { refreshToken: rotated.body.refreshToken })).status).toBe(200);
    expect((await authPost(third.url, '/token', { refreshToken: signIn.body.session.refreshToken })).status).toBe(401);
    await kill(third);
  });
});
