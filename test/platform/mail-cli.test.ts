import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { freePort } from '../support/global-setup';
import { ADMIN_SECRET, PRODUCTION } from '../support/server';
import { selfSignedCertificate, startSmtpReceiver, type SmtpReceiver, smtpSettings } from '../support/smtp';
import { runCli } from '../support/spawn';

const STACK_TRACE = /\n\s+at \S+/;

let folder: string;
beforeEach(() => {
  folder = fs.mkdtempSync(path.join(os.tmpdir(), 'plinth-mail-cli-'));
});
afterEach(() => fs.rmSync(folder, { recursive: true, force: true }));

describe('plinth mail render', () => {
  it('writes the HTML part to --out and prints the subject and the text part', async () => {
    const vars = path.join(folder, 'vars.json');
    fs.writeFileSync(vars, JSON.stringify({ display_name: 'Ada <3', link: 'https://auth.example.com/reset?ticket=abc&x=1' }));
    const out = path.join(folder, 'reset.html');

    const result = await runCli(['mail', 'render', 'reset-password', '--vars', vars, '--out', out], { PLINTH_PUBLIC_URL: 'https://api.example.com' }, folder);

    expect(result.code).toBe(0);
    expect(result.stdout).toMatch(/^Subject: Reset your password\nHTML part: .*reset\.html\n\n/);
    expect(result.stdout).toContain('Hi Ada <3,');
    expect(result.stdout).toContain('https://auth.example.com/reset?ticket=abc&x=1');
    const html = fs.readFileSync(out, 'utf8');
    expect(html).toMatch(/^<!doctype html>/);
    expect(html).toContain('Hi Ada &lt;3,');
    expect(html).toContain('href="https://api.example.com"');
  });

  it('reads an override from AUTH_EMAIL_TEMPLATES_DIR (./email-templates by default)', async () => {
    fs.mkdirSync(path.join(folder, 'email-templates'));
    fs.writeFileSync(path.join(folder, 'email-templates', 'invite.html'), '<title>Join us</title><p>Ask {{sender_name}}</p>');
    const out = path.join(folder, 'invite.html');
    const result = await runCli(['mail', 'render', 'invite', '--out', out], { AUTH_EMAIL_FROM_NAME: 'Acme' }, folder);
    expect(result.stdout).toMatch(/^Subject: Join us\n/);
    expect(fs.readFileSync(out, 'utf8')).toBe('<title>Join us</title><p>Ask Acme</p>');
  });

  it.each([
    [
      'a missing variable',
      ['mail', 'render', 'magic-link'],
      /^plinth: mail template "magic-link" \(.*\) needs variables "display_name", "link", which were not given$/m,
    ],
    ['an unknown template', ['mail', 'render', 'welcome'], /^plinth: there is no mail template "welcome"/m],
    ['a --vars file that is no JSON', ['mail', 'render', 'magic-link', '--vars', 'broken.json'], /^plinth: --vars broken\.json: .*JSON/m],
    [
      'a --vars file that is no object of strings',
      ['mail', 'render', 'magic-link', '--vars', 'list.json'],
      /^plinth: --vars list\.json: must be a JSON object whose values are strings or numbers$/m,
    ],
  ])('stops on %s with a clear message and writes nothing', async (_case, args, message) => {
    fs.writeFileSync(path.join(folder, 'broken.json'), '{"link": ');
    fs.writeFileSync(path.join(folder, 'list.json'), '["link"]');
    const out = path.join(folder, 'out.html');
    const result = await runCli([...args, '--out', out], {}, folder);
    expect(result.code).toBe(1);
    expect(result.stderr).toMatch(message);
    expect(result.stderr).not.toMatch(STACK_TRACE);
    expect(fs.existsSync(out)).toBe(false);
  });
});

describe('plinth mail send-test', () => {
  let receiver: SmtpReceiver;
  beforeEach(async () => {
    receiver = await startSmtpReceiver();
  });
  afterEach(() => receiver.close());

  it('sends the test mail through SMTP at once and says so', async () => {
    const result = await runCli(['mail', 'send-test', 'ops@example.com'], { ...smtpSettings(receiver.port), AUTH_EMAIL_FROM: 'plinth@example.com' }, folder);

    expect(result.stderr).toBe('');
    expect(result.code).toBe(0);
    expect(result.stdout).toMatch(new RegExp(`^test mail sent to ops@example\\.com through smtp://127\\.0\\.0\\.1:${receiver.port} \\(message id <.+>\\)\\n$`));
    const mail = await receiver.next();
    expect(mail.recipients).toEqual(['ops@example.com']);
    expect(mail.parsed.from?.value).toEqual([{ name: 'Plinth', address: 'plinth@example.com' }]);
    expect(mail.parsed.subject).toBe('Test mail from Plinth');
    expect(mail.parsed.text).toContain('Mail delivery works');
  });

  describe.each([
    ['STARTTLS (the default)', 'starttls', false],
    ['TLS from the start', 'tls', true],
  ])('over %s', (_case, secure, implicit) => {
    let tlsReceiver: SmtpReceiver;
    let certFile: string;
    beforeEach(async () => {
      const certificate = selfSignedCertificate(folder);
      certFile = certificate.certFile;
      tlsReceiver = await startSmtpReceiver({ tls: { ...certificate, implicit } });
    });
    afterEach(() => tlsReceiver.close());
    const env = () => ({ ...smtpSettings(tlsReceiver.port), SMTP_SECURE: secure });

    it('sends the test mail to a server whose certificate it trusts', async () => {
      const result = await runCli(['mail', 'send-test', 'ops@example.com'], { ...env(), NODE_EXTRA_CA_CERTS: certFile }, folder);
      expect(result.stderr).toBe('');
      expect(result.code).toBe(0);
      expect((await tlsReceiver.next()).parsed.subject).toBe('Test mail from Plinth');
    });

    it('refuses a server whose certificate it does not trust', async () => {
      const result = await runCli(['mail', 'send-test', 'ops@example.com'], env(), folder);
      expect(result.code).toBe(1);
      expect(result.stderr).toMatch(/^plinth: the test mail to ops@example\.com was not sent through smtp:\/\/127\.0\.0\.1:\d+: .*self-signed certificate/);
      expect(tlsReceiver.received).toHaveLength(0);
    });
  });

  it('fails with a clear message, without a stack trace, when the SMTP server is down', async () => {
    const port = await freePort();
    const result = await runCli(['mail', 'send-test', 'ops@example.com'], smtpSettings(port), folder);
    expect(result.code).toBe(1);
    expect(result.stderr).toBe(
      `plinth: the test mail to ops@example.com was not sent through smtp://127.0.0.1:${port}: connect ECONNREFUSED 127.0.0.1:${port}\n`,
    );
    expect(result.stdout).toBe('');
  });

  it('fails with a clear message when the SMTP server refuses the credentials, and does not print the password', async () => {
    const result = await runCli(['mail', 'send-test', 'ops@example.com'], { ...smtpSettings(receiver.port), SMTP_PASSWORD: 'not-the-password' }, folder);
    expect(result.code).toBe(1);
    expect(result.stderr).toMatch(
      /^plinth: the test mail to ops@example\.com was not sent through smtp:\/\/127\.0\.0\.1:\d+: Invalid login: 535 Invalid username or password\n$/,
    );
    expect(result.stderr + result.stdout).not.toContain('not-the-password');
    expect(receiver.received).toHaveLength(0);
  });

  it('without SMTP_HOST, writes the test mail to an .eml file and says where', async () => {
    const result = await runCli(['mail', 'send-test', 'ops@example.com'], { PLINTH_DATA_DIR: path.join(folder, 'data') }, folder);
    expect(result.code).toBe(0);
    const [file] = fs.readdirSync(path.join(folder, 'data', 'mail'));
    expect(result.stdout).toBe(`test mail to ops@example.com written to ${path.join(folder, 'data', 'mail', file)} (SMTP_HOST is unset)\n`);
  });

  it('in production without SMTP_HOST, refuses', async () => {
    const env = { ...PRODUCTION, GQL_GRAPHQL_ADMIN_SECRET: ADMIN_SECRET, GQL_GRAPHQL_JWT_SECRET: JSON.stringify({ type: 'HS256', key: 'k'.repeat(32) }) };
    const result = await runCli(['mail', 'send-test', 'ops@example.com'], env, folder);
    expect(result.code).toBe(1);
    expect(result.stderr).toBe('plinth: SMTP_HOST (or EMAIL_DELIVERY_API_KEY) is required when NODE_ENV=production\n');
  });
});
