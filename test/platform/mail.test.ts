import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { simpleParser } from 'mailparser';
import type { EntityManager } from 'typeorm';
import { ConfigError, loadConfig } from '../../src/config';
import { createLogger } from '../../src/platform/logger';
import type { JobDefinition, JobSender, SendOptions } from '../../src/platform/jobs';
import { createMailer, MAIL_QUEUE, MailError, type MailMessage, type MailService } from '../../src/platform/mail/mailer';
import { freePort } from '../support/global-setup';
import { ADMIN_SECRET, PRODUCTION } from '../support/server';
import { SMTP_PASSWORD, SMTP_USER, startSmtpReceiver, type SmtpReceiver, smtpSettings } from '../support/smtp';

const LINK = 'http://localhost:8080/auth/verify?ticket=otp:0b1c&type=signinPasswordless&redirectTo=http%3A%2F%2Fapp.test%2F';
const VERIFY: MailMessage = {
  to: 'ada@example.com',
  template: 'verify-email',
  variables: { display_name: 'Ada Lovelace', email: 'ada@example.com', link: LINK },
};

interface SentJob {
  queue: string;
  data: MailMessage;
  options: SendOptions | undefined;
}

/**
 * Stands in for the pg-boss queue, which is built elsewhere: it keeps what is sent, and `drain`
 * runs each job through the real worker of its queue, retrying on failure as the queue does
 * (`beforeRetry` runs between attempts, where a test can bring the SMTP server up).
 */
class RetryingJobSender implements JobSender {
  readonly sent: SentJob[] = [];
  readonly failures: unknown[] = [];
  definitions: JobDefinition<MailMessage>[] = [];

  async send<Data extends object>(queue: string, data: Data, options?: SendOptions): Promise<string> {
    this.sent.push({ queue, data: data as unknown as MailMessage, options });
    return `job-${this.sent.length}`;
  }

  async drain(beforeRetry: (attempt: number) => Promise<void> = async () => undefined): Promise<void> {
    for (const [index, job] of this.sent.splice(0).entries()) {
      const definition = this.definitions.find((candidate) => candidate.queue === job.queue)!;
      const retryLimit = definition.settings?.retryLimit ?? 0;
      for (let retryCount = 0; ; retryCount++) {
        try {
          await definition.work(job.data, { id: `job-${index + 1}`, queue: job.queue, retryCount, signal: new AbortController().signal });
          break;
        } catch (error) {
          this.failures.push(error);
          if (retryCount >= retryLimit) throw error;
          await beforeRetry(retryCount + 1);
        }
      }
    }
  }
}

let folder: string;
let logLines: string[];
let services: MailService[];

beforeEach(() => {
  folder = fs.mkdtempSync(path.join(os.tmpdir(), 'plinth-mail-'));
  logLines = [];
  services = [];
});
afterEach(() => {
  closeMailers();
  fs.rmSync(folder, { recursive: true, force: true });
});

/** Before the SMTP receiver closes: it waits for its clients (the mailers' pooled connections). */
function closeMailers(): void {
  services.splice(0).forEach((service) => service.close());
}

function mailerWith(env: Record<string, string>) {
  const config = loadConfig({
    NODE_ENV: 'test',
    LOG_LEVEL: 'info',
    PLINTH_DATA_DIR: path.join(folder, 'data'),
    AUTH_EMAIL_TEMPLATES_DIR: path.join(folder, 'templates'),
    AUTH_EMAIL_FROM: 'hello@plinth.test',
    AUTH_EMAIL_FROM_NAME: 'Plinth Test',
    ...env,
  });
  const logger = createLogger(config, { write: (line: string) => logLines.push(line) });
  const queue = new RetryingJobSender();
  const service = createMailer({ config, logger, jobs: queue });
  queue.definitions = service.jobs;
  services.push(service);
  return { mailer: service.mailer, definitions: service.jobs, queue };
}

describe('the mailer over SMTP', () => {
  let receiver: SmtpReceiver;
  beforeEach(async () => {
    receiver = await startSmtpReceiver();
  });
  afterEach(async () => {
    closeMailers();
    await receiver.close();
  });

  it('queues a mail, and the mail worker delivers it rendered: sender, recipient, subject, HTML and text', async () => {
    const { mailer, queue } = mailerWith(smtpSettings(receiver.port));

    const jobId = await mailer.send(VERIFY);
    expect(jobId).toBe('job-1');
    expect(queue.sent).toEqual([{ queue: 'mail', data: VERIFY, options: { transaction: undefined } }]);
    expect(receiver.received).toHaveLength(0);
    await queue.drain();

    const mail = await receiver.next();
    expect(mail.user).toBe(SMTP_USER);
    expect(mail.recipients).toEqual(['ada@example.com']);
    expect(mail.parsed.from?.value).toEqual([{ name: 'Plinth Test', address: 'hello@plinth.test' }]);
    expect(mail.parsed.to).toMatchObject({ value: [{ address: 'ada@example.com' }] });
    expect(mail.parsed.subject).toBe('Verify your e-mail address');
    expect(mail.parsed.html).toContain('Hi Ada Lovelace,');
    // The link survives as an attribute (HTML-escaped there, as it must be) and as text.
    expect(mail.parsed.html).toContain(`href="${LINK.replace(/&/g, '&amp;')}"`);
    expect(mail.parsed.html).toContain('<table'); // compiled from MJML, not the source
    expect(mail.parsed.html).not.toContain('<mj-');
    expect(mail.parsed.text).toContain('Hi Ada Lovelace,');
    expect(mail.parsed.text).toContain(LINK);
    expect(mail.parsed.text).not.toContain('<');
  });

  it('passes the caller’s transaction to the queue, so a rolled-back change sends nothing', async () => {
    const { mailer, queue } = mailerWith(smtpSettings(receiver.port));
    const transaction = { marker: 'the caller’s EntityManager' } as unknown as EntityManager;
    await mailer.send(VERIFY, { transaction });
    expect(queue.sent[0].options?.transaction).toBe(transaction);
  });

  it('declares the mail queue with its retry settings', () => {
    const { definitions } = mailerWith({ ...smtpSettings(receiver.port), MAIL_RETRY_LIMIT: '7', MAIL_RETRY_DELAY_SECONDS: '45' });
    expect(definitions.map((definition) => [definition.queue, definition.settings])).toEqual([
      [MAIL_QUEUE, { retryLimit: 7, retryDelaySeconds: 45, retryBackoff: true }],
    ]);
  });

  it('delays mail while the SMTP server is down and delivers it once it is back', async () => {
    const port = await freePort();
    const { mailer, queue } = mailerWith(smtpSettings(port));
    await mailer.send(VERIFY);

    let revived: SmtpReceiver | undefined;
    await queue.drain(async (attempt) => {
      // Two failed attempts against a closed port, then the server comes up.
      if (attempt === 2) revived = await startSmtpReceiver({ port });
    });
    try {
      expect(queue.failures).toHaveLength(2);
      expect(queue.failures.map((error) => (error as { code?: string }).code)).toEqual(['ECONNREFUSED', 'ECONNREFUSED']);
      const mail = await revived!.next();
      expect(mail.parsed.subject).toBe('Verify your e-mail address');
      expect(mail.recipients).toEqual(['ada@example.com']);
      const warnings = logLines.filter((line) => line.includes('mail not delivered'));
      expect(warnings).toHaveLength(2);
      expect(JSON.parse(warnings[1])).toMatchObject({ level: 40, template: 'verify-email', to: 'ada@example.com', attempt: 2 });
    } finally {
      closeMailers();
      await revived?.close();
    }
  });

  it('never logs the SMTP password or any part of the body, even when authentication fails', async () => {
    const good = mailerWith(smtpSettings(receiver.port));
    await good.mailer.send(VERIFY);
    await good.queue.drain();
    const bad = mailerWith({ ...smtpSettings(receiver.port), SMTP_PASSWORD: 'wrong-password-1a2b3c', MAIL_RETRY_LIMIT: '0' });
    await bad.mailer.send(VERIFY);
    await expect(bad.queue.drain()).rejects.toMatchObject({ code: 'EAUTH' });

    const log = logLines.join('');
    expect(log).toContain('"msg":"mail sent"');
    expect(log).toContain('"code":"EAUTH"');
    for (const secret of [SMTP_PASSWORD, 'wrong-password-1a2b3c', 'otp:0b1c', 'Ada Lovelace', 'finish signing up']) expect(log).not.toContain(secret);
  });

  it('gives up on a server that accepts the connection but never greets, after SMTP_GREETING_TIMEOUT_MS', async () => {
    const silent = net.createServer(() => undefined);
    await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
    try {
      const port = (silent.address() as net.AddressInfo).port;
      const { mailer, queue } = mailerWith({ ...smtpSettings(port), SMTP_GREETING_TIMEOUT_MS: '300', MAIL_RETRY_LIMIT: '0' });
      await mailer.send(VERIFY);
      const started = Date.now();
      await expect(queue.drain()).rejects.toMatchObject({ code: 'ETIMEDOUT', message: expect.stringContaining('Greeting never received') });
      expect(Date.now() - started).toBeLessThan(5000);
    } finally {
      closeMailers();
      silent.close();
    }
  });

  it('refuses to send in the clear when STARTTLS (the default) is not offered', async () => {
    const { mailer, queue } = mailerWith({ ...smtpSettings(receiver.port), SMTP_SECURE: 'starttls', MAIL_RETRY_LIMIT: '0' });
    await mailer.send(VERIFY);
    await expect(queue.drain()).rejects.toThrow(/STARTTLS/);
    expect(receiver.received).toHaveLength(0);
  });
});

describe('templates', () => {
  const templatesDir = () => path.join(folder, 'templates');
  const override = (file: string, content: string) => {
    fs.mkdirSync(templatesDir(), { recursive: true });
    fs.writeFileSync(path.join(templatesDir(), file), content);
  };
  const mjml = (title: string, body: string) =>
    `<mjml><mj-head><mj-title>${title}</mj-title></mj-head><mj-body><mj-section><mj-column><mj-text>${body}</mj-text></mj-column></mj-section></mj-body></mjml>`;

  it('fails a send whose template lacks a variable, naming the variable and the template, and queues nothing', async () => {
    const { mailer, queue } = mailerWith({});
    const { link: _link, ...withoutLink } = VERIFY.variables!;
    const sending = mailer.send({ ...VERIFY, variables: withoutLink });
    await expect(sending).rejects.toThrow(MailError);
    await expect(sending).rejects.toThrow(/mail template "verify-email" \(.*verify-email\.mjml\) needs variable "link", which was not given/);
    await expect(mailer.send({ ...VERIFY, variables: {} })).rejects.toThrow(/needs variables "email", "display_name", "link"/);
    expect(queue.sent).toHaveLength(0);
  });

  it.each([
    ['an address that is none', { to: 'ada at example.com' }, /"ada at example.com" is not an e-mail address/],
    ['a header smuggled into the address', { to: 'ada@example.com\r\nBcc: eve@example.com' }, /is not an e-mail address/],
    ['an unknown template', { template: 'no-such-template' }, /there is no mail template "no-such-template"/],
    ['a template name that is a path', { template: '../../etc/passwd' }, /"..\/..\/etc\/passwd" is not a mail template name/],
  ])('refuses %s and queues nothing', async (_case, change, message) => {
    const { mailer, queue } = mailerWith({});
    await expect(mailer.send({ ...VERIFY, ...change })).rejects.toThrow(message);
    expect(queue.sent).toHaveLength(0);
  });

  it('escapes variables in the HTML part, and keeps them as given in the text part', async () => {
    const { mailer, queue } = mailerWith({});
    await mailer.send({ ...VERIFY, variables: { ...VERIFY.variables, display_name: '<script>alert("x")</script> & Co' } });
    await queue.drain();
    const [file] = fs.readdirSync(path.join(folder, 'data', 'mail'));
    const parsed = await simpleParser(fs.readFileSync(path.join(folder, 'data', 'mail', file)));
    expect(parsed.html).toContain('Hi &lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt; &amp; Co,');
    expect(parsed.html).not.toContain('<script');
    expect(parsed.text).toContain('Hi <script>alert("x")</script> & Co,');
  });

  it('keeps the subject on one line whatever a variable holds', async () => {
    override('greeting.mjml', mjml('Hello {{ name }}', 'Hi {{name}}'));
    const { mailer, queue } = mailerWith({});
    await mailer.send({ to: 'ada@example.com', template: 'greeting', variables: { name: 'Ada\r\nBcc: eve@example.com' } });
    await queue.drain();
    const [file] = fs.readdirSync(path.join(folder, 'data', 'mail'));
    const parsed = await simpleParser(fs.readFileSync(path.join(folder, 'data', 'mail', file)));
    expect(parsed.subject).toBe('Hello Ada Bcc: eve@example.com');
    expect(parsed.bcc).toBeUndefined();
  });

  it('lets a template in AUTH_EMAIL_TEMPLATES_DIR replace a built-in one, as MJML or as HTML', async () => {
    override('verify-email.mjml', mjml('Welcome to {{sender_name}} &amp; friends', 'Confirm here: <a href="{{link}}">verify</a> (from {{public_url}})'));
    override('reset-password.html', '<html><head><title>New password for {{display_name}}</title></head><body><p>Go to {{link}}</p></body></html>');
    const { mailer, queue } = mailerWith({ PLINTH_PUBLIC_URL: 'https://api.plinth.test' });
    await mailer.send(VERIFY);
    await mailer.send({ to: 'ada@example.com', template: 'reset-password', variables: { display_name: 'Ada', link: LINK } });
    await queue.drain();

    const files = fs.readdirSync(path.join(folder, 'data', 'mail')).sort((a, b) => a.localeCompare(b));
    const [verify, reset] = await Promise.all(
      ['verify-email', 'reset-password'].map((name) =>
        simpleParser(
          fs.readFileSync(
            path.join(
              folder,
              'data',
              'mail',
              files.find((file) => file.includes(name))!,
            ),
          ),
        ),
      ),
    );
    expect(verify.subject).toBe('Welcome to Plinth Test & friends');
    expect(verify.text).toContain('Confirm here: verify');
    expect(verify.text).toContain('(from https://api.plinth.test)');
    expect(verify.html).not.toContain('finish signing up'); // the built-in text
    expect(reset.subject).toBe('New password for Ada');
    expect(reset.html).toContain(`<p>Go to ${LINK.replace(/&/g, '&amp;')}</p>`);
    expect(reset.text?.trim()).toBe(`Go to ${LINK}`);
  });

  it('compiles a template once, and drops the least recently used beyond MAIL_TEMPLATE_CACHE_SIZE', async () => {
    override('one.mjml', mjml('First', 'one'));
    override('two.mjml', mjml('Second', 'two'));
    const { mailer, queue } = mailerWith({ MAIL_TEMPLATE_CACHE_SIZE: '1' });
    const subjects = async () => {
      await queue.drain();
      const mailDir = path.join(folder, 'data', 'mail');
      const files = fs.readdirSync(mailDir).sort((a, b) => a.localeCompare(b));
      const parsed = await Promise.all(files.map((file) => simpleParser(fs.readFileSync(path.join(mailDir, file)))));
      fs.rmSync(mailDir, { recursive: true });
      return parsed.map((mail) => mail.subject);
    };
    const send = (template: string) => mailer.send({ to: 'ada@example.com', template });

    await send('one');
    override('one.mjml', mjml('First, edited', 'one'));
    await send('one');
    expect(await subjects()).toEqual(['First', 'First']); // cached: the edit is not read

    await send('two'); // the cache holds one template: "one" is dropped
    await send('one');
    expect(await subjects()).toEqual(['Second', 'First, edited']);
  });

  it.each([
    ['invalid MJML', mjml('Hi', '</mj-text><mj-bogus>'), /mail template "broken" \(.*broken\.mjml\) is not valid MJML/],
    [
      'no subject',
      '<mjml><mj-body><mj-section><mj-column><mj-text>x</mj-text></mj-column></mj-section></mj-body></mjml>',
      /mail template "broken" .* has no subject: give it an <mj-title>/,
    ],
    ['a placeholder that is none', mjml('Hi', 'Dear {{ first-name }}'), /mail template "broken" .*: \{\{ first-name \}\} is not a placeholder/],
  ])('refuses a template with %s, naming it', async (_case, source, message) => {
    override('broken.mjml', source);
    const { mailer } = mailerWith({});
    await expect(mailer.send({ to: 'ada@example.com', template: 'broken' })).rejects.toThrow(message);
  });

  it('ships the templates auth sends, each rendering a subject, HTML and text with its link', async () => {
    const variables = { display_name: 'Ada', email: 'ada@example.com', new_email: 'ada@new.example', link: LINK };
    const { mailer, queue } = mailerWith({});
    const names = ['verify-email', 'reset-password', 'magic-link', 'confirm-email-change', 'invite', 'test'];
    for (const template of names) await mailer.send({ to: 'ada@example.com', template, variables });
    await queue.drain();
    const mailDir = path.join(folder, 'data', 'mail');
    const parsed = await Promise.all(
      names.map((name) =>
        simpleParser(
          fs.readFileSync(
            path.join(
              mailDir,
              fs.readdirSync(mailDir).find((file) => file.includes(`-${name}-`))!,
            ),
          ),
        ),
      ),
    );
    expect(parsed.map((mail) => mail.subject)).toEqual([
      'Verify your e-mail address',
      'Reset your password',
      'Your sign-in link',
      'Confirm your new e-mail address',
      'You are invited to Plinth Test',
      'Test mail from Plinth Test',
    ]);
    for (const mail of parsed.slice(0, 5)) {
      expect(mail.text).toContain(LINK);
      expect(mail.html).toContain(LINK.replace(/&/g, '&amp;'));
    }
    expect(parsed[5].text).toContain('Authentication address: http://localhost:8080/auth');
  });
});

describe('without SMTP_HOST', () => {
  it('writes each mail as an .eml file under PLINTH_DATA_DIR/mail and logs its recipient and subject, not its body', async () => {
    const { mailer, queue } = mailerWith({});
    await mailer.send(VERIFY);
    await queue.drain();

    const mailDir = path.join(folder, 'data', 'mail');
    const files = fs.readdirSync(mailDir);
    expect(files).toEqual([expect.stringMatching(/^\d{4}-\d\d-\d\dT[\d-]+Z-verify-email-[0-9a-f]{8}\.eml$/)]);
    const file = path.join(mailDir, files[0]);
    expect(fs.statSync(file).mode & 0o777).toBe(0o600);
    const parsed = await simpleParser(fs.readFileSync(file));
    expect(parsed.from?.value).toEqual([{ name: 'Plinth Test', address: 'hello@plinth.test' }]);
    expect(parsed.to).toMatchObject({ value: [{ address: 'ada@example.com' }] });
    expect(parsed.subject).toBe('Verify your e-mail address');
    expect(parsed.text).toContain(LINK);

    const lines = logLines.map((line) => JSON.parse(line) as Record<string, unknown>);
    expect(lines).toEqual([
      expect.objectContaining({
        level: 30,
        msg: 'mail written to a file (SMTP_HOST is unset)',
        to: 'ada@example.com',
        subject: 'Verify your e-mail address',
        file,
        template: 'verify-email',
      }),
    ]);
    for (const body of ['otp:0b1c', 'Ada Lovelace', 'finish signing up']) expect(logLines.join('')).not.toContain(body);
  });

  it('in production: start-up refuses a feature that sends mail, and nothing is sent', async () => {
    const production = {
      ...PRODUCTION,
      GQL_GRAPHQL_ADMIN_SECRET: ADMIN_SECRET,
      GQL_GRAPHQL_JWT_SECRET: JSON.stringify({ type: 'HS256', key: 'k'.repeat(32) }),
    };
    const { mailer, queue } = mailerWith(production);
    expect(() => mailer.requireDelivery('password reset')).toThrow(ConfigError);
    expect(() => mailer.requireDelivery('password reset')).toThrow(
      'SMTP_HOST (or EMAIL_DELIVERY_API_KEY) is required when NODE_ENV=production (password reset sends mail)',
    );
    await expect(mailer.send(VERIFY)).rejects.toThrow('SMTP_HOST (or EMAIL_DELIVERY_API_KEY) is required when NODE_ENV=production');
    expect(queue.sent).toHaveLength(0);
    expect(fs.existsSync(path.join(folder, 'data', 'mail'))).toBe(false);

    const configured = mailerWith({ ...production, SMTP_HOST: '127.0.0.1' });
    expect(() => configured.mailer.requireDelivery('password reset')).not.toThrow();
  });
});
