import type { PlinthModule } from '../../src/platform/module';
import type { Mailer } from '../../src/platform/mail/mailer';
import { freePort } from '../support/global-setup';
import { startTestServer, type TestServer } from '../support/server';
import { startSmtpReceiver, type SmtpReceiver, smtpSettings } from '../support/smtp';

/** A module that only hands the test the platform's mailer, as a module that sends mail gets it. */
let mailer: Mailer;
const mailingModule: PlinthModule<Record<string, never>> = {
  name: 'test-mailing',
  create: (platform) => {
    mailer = platform.mailer;
    return {};
  },
};

let server: TestServer;
let smtpPort: number;
let receiver: SmtpReceiver | undefined;

beforeAll(async () => {
  smtpPort = await freePort();
  server = await startTestServer(
    {
      ...smtpSettings(smtpPort),
      AUTH_EMAIL_FROM: 'hello@plinth.test',
      AUTH_EMAIL_FROM_NAME: 'Plinth Tests',
      MAIL_RETRY_DELAY_SECONDS: '1',
      SMTP_CONNECTION_TIMEOUT_MS: '1000',
      JOBS_POLL_INTERVAL_SECONDS: '1',
    },
    { modules: [mailingModule] },
  );
});
afterAll(async () => {
  await server.close();
  await receiver?.close();
});

const mailJobs = () =>
  server.database.query<{ state: string; retry_count: number }>("SELECT state, retry_count FROM pgboss.job WHERE name = 'mail' ORDER BY created_on");

describe('mail through the job queue (pg-boss), SMTP down then up', () => {
  it('keeps the mail while the SMTP server is down, retries, and delivers it once the server is up', async () => {
    const jobId = await mailer.send({ to: 'ada@example.com', template: 'test', variables: {} });
    expect(jobId).toMatch(/^[0-9a-f-]{36}$/);

    // Nothing listens on the port: the first attempts fail and the job waits for a retry.
    await until(async () => (await mailJobs()).some((job) => job.retry_count >= 1));
    const waiting = await mailJobs();
    expect(waiting).toHaveLength(1);
    expect(['retry', 'created', 'active']).toContain(waiting[0].state);

    receiver = await startSmtpReceiver({ port: smtpPort });
    const mail = await receiver.next(30_000);
    expect(mail.recipients).toEqual(['ada@example.com']);
    expect(mail.parsed.from?.value[0]).toEqual({ address: 'hello@plinth.test', name: 'Plinth Tests' });
    expect(mail.parsed.html).toBeTruthy();
    expect(mail.parsed.text).toBeTruthy();
    await until(async () => (await mailJobs())[0].state === 'completed');
  });

  it('sends nothing when the transaction that queued the mail rolls back', async () => {
    const before = (await mailJobs()).length;
    await server.server.dataSource
      .transaction(async (manager) => {
        await mailer.send({ to: 'rollback@example.com', template: 'test', variables: {} }, { transaction: manager });
        throw new Error('roll back');
      })
      .catch(() => undefined);
    expect((await mailJobs()).length).toBe(before);
  });
});

async function until(condition: () => Promise<boolean>, timeoutMs = 30_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error('condition not met in time');
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}
