import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { freePort } from '../support/global-setup';
import { postGraphQL } from '../support/graphql';
import { newsletterEnvironment } from '../support/newsletter';
import { until } from '../support/until';
import { ADMIN_SECRET, PRODUCTION, startTestServer, type TestServer } from '../support/server';
import { startSmtpReceiver, type SmtpReceiver } from '../support/smtp';

const VARIABLES = {
  HEADLINE: 'Scheduled',
  RELEASE_HEADLINE: 'r',
  RELEASE_SUMMARY: 's',
  CLI_SNIPPET: 'c',
  CHANGELOG_URL: 'https://example.com/c',
  COMMUNITY_SHOWCASE: 'x',
  DOCS_URL: 'https://example.com/d',
  DOCS_TITLE: 't',
  DOCS_TEASER: 'y',
  ROADMAP_TEASER: 'z',
};

let receiver: SmtpReceiver;
let server: TestServer;
let varsFile: string;

beforeAll(async () => {
  receiver = await startSmtpReceiver({ port: await freePort() });
  varsFile = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'plinth-schedule-')), 'next-issue.json');
  fs.writeFileSync(varsFile, JSON.stringify(VARIABLES));
  // An issue every 2 days of one second each, looked for every second.
  server = await startTestServer(
    newsletterEnvironment(receiver.port, {
      NEWSLETTER_ISSUE_SCHEDULE_VARS_FILE: varsFile,
      NEWSLETTER_ISSUE_INTERVAL_DAYS: '2',
      NEWSLETTER_SCHEDULER_INTERVAL_SECONDS: '1',
    }),
  );
  await server.database.query(
    `INSERT INTO newsletter_subscribers (email, is_verified, status, subscribed_at, verification_expires_at)
     VALUES ('one@example.com', true, 'active', now(), now()), ('two@example.com', true, 'active', now(), now())`,
  );
});
afterAll(async () => {
  await server.close();
  await receiver.close();
});

const issues = () =>
  server.database.query<{ issue_number: number; status: string; requested_by: string }>(
    'SELECT issue_number, status, requested_by FROM newsletter_issues ORDER BY issue_number',
  );
const subjects = () => receiver.received.map((mail) => `${mail.recipients[0]} ${mail.parsed.subject}`).sort();

describe('the bi-weekly schedule (NEWSLETTER_ISSUE_SCHEDULE_VARS_FILE)', () => {
  it('sends the next issue every interval with the file as it is then, and never the same content twice', async () => {
    await until(async () => (await issues()).length === 1, 15_000, 'the first scheduled issue');
    await until(() => receiver.received.length === 2, 15_000, 'its two mails');
    expect(subjects()).toEqual(['one@example.com #1: Scheduled', 'two@example.com #1: Scheduled']);
    expect(await issues()).toEqual([{ issue_number: 1, status: 'sent', requested_by: 'schedule' }]);

    // The next interval comes and goes: the file has not changed, so nothing is sent.
    await new Promise((resolve) => setTimeout(resolve, 3500));
    expect(await issues()).toHaveLength(1);

    fs.writeFileSync(varsFile, JSON.stringify({ ...VARIABLES, HEADLINE: 'Next one' }));
    await until(async () => (await issues()).length === 2, 15_000, 'the second scheduled issue');
    await until(() => receiver.received.length === 4, 15_000, 'its two mails');
    expect(subjects().filter((subject) => subject.includes('#2'))).toEqual(['one@example.com #2: Next one', 'two@example.com #2: Next one']);
  });
});

describe('without its secrets in production', () => {
  let unconfigured: TestServer;
  beforeAll(async () => {
    const { NEWSLETTER_CONFIRM_SECRET: _confirm, NEWSLETTER_UNSUBSCRIBE_SECRET: _unsubscribe, ...environment } = newsletterEnvironment(receiver.port);
    unconfigured = await startTestServer({ ...environment, ...PRODUCTION });
  });
  afterAll(async () => {
    await unconfigured.close();
  });

  it('the server starts, and the newsletter answers 503 NOT_CONFIGURED', async () => {
    const subscribe = await fetch(`${unconfigured.url}/newsletter/subscribe`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ email: 'ada@example.com' }),
    });
    expect(subscribe.status).toBe(503);
    expect(await subscribe.json()).toMatchObject({ success: false, error_code: 'NOT_CONFIGURED' });
    const confirm = await fetch(`${unconfigured.url}/newsletter/confirm?email=a%40example.com&token=1.2`, { headers: { accept: 'text/html' } });
    expect(confirm.status).toBe(503);
    expect(await confirm.text()).toContain('The newsletter is unavailable');
    const issue = await postGraphQL<unknown>(
      `${unconfigured.url}/v1/graphql`,
      { query: 'mutation($v: JSONObject!) { sendNewsletterIssue(issueNumber: 1, variables: $v) { recipients } }', variables: { v: VARIABLES } },
      { 'x-gql-admin-secret': ADMIN_SECRET },
    );
    expect(issue.body.errors![0].extensions!.code).toBe('NOT_CONFIGURED');
    expect(await unconfigured.database.query('SELECT * FROM newsletter_subscribers')).toEqual([]);
  });
});
