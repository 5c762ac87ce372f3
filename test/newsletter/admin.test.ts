import {
  NewsletterIssuesDocument,
  NewsletterSubscriberDocument,
  NewsletterSubscriberMailsDocument,
  NewsletterSubscribersDocument,
  RunNewsletterCleanupDocument,
  SendNewsletterIssueDocument,
  SendNewsletterSeriesMailDocument,
} from '../generated/graphql';
import { freePort } from '../support/global-setup';
import { graphql } from '../support/graphql';
import { mailTo, newsletterEnvironment } from '../support/newsletter';
import { until } from '../support/until';
import { ADMIN_SECRET, startTestServer, testEnvironment, type TestServer } from '../support/server';
import { startSmtpReceiver, type SmtpReceiver } from '../support/smtp';
import { runCli } from '../support/spawn';
import { bearer, signToken } from '../support/tokens';

let server: TestServer;
let receiver: SmtpReceiver;
let cliEnvironment: Record<string, string>;
const admin = { 'x-gql-admin-secret': ADMIN_SECRET };

beforeAll(async () => {
  receiver = await startSmtpReceiver({ port: await freePort() });
  // Real days, so the clean-up's age and the series are as in production; the scheduler looks every second.
  const environment = newsletterEnvironment(receiver.port, { NEWSLETTER_DAY_SECONDS: '86400', NEWSLETTER_SCHEDULER_INTERVAL_SECONDS: '1' });
  server = await startTestServer(environment);
  cliEnvironment = testEnvironment(server.database.url, environment);
  await server.database.query(
    `INSERT INTO newsletter_subscribers (email, name, source, is_verified, status, subscribed_at, verification_expires_at, created_at) VALUES
       ('active1@example.com', 'One', 'blog', true, 'active', now(), now(), now() - interval '3 days'),
       ('active2@example.com', NULL, NULL, true, 'active', now(), now(), now() - interval '2 days'),
       ('waiting@example.com', NULL, 'home', false, 'pending', NULL, now() + interval '1 day', now() - interval '1 day'),
       ('left@example.com', NULL, NULL, true, 'unsubscribed', now(), now(), now() - interval '10 days')`,
  );
});
afterAll(async () => {
  await server.close();
  await receiver.close();
});

const ISSUE = {
  HEADLINE: 'h',
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

describe('the newsletter admin API', () => {
  it('lists subscribers with filters, a total and counts per status', async () => {
    const all = await graphql(server.graphqlUrl, NewsletterSubscribersDocument, {}, admin);
    expect(all.body.errors).toBeUndefined();
    expect(all.body.data!.newsletterSubscribers.total).toBe(4);
    expect(all.body.data!.newsletterSubscribers.items.map((item) => item.email)).toEqual([
      'waiting@example.com',
      'active2@example.com',
      'active1@example.com',
      'left@example.com',
    ]);
    expect(all.body.data!.newsletterSubscriberCounts).toEqual([
      { status: 'PENDING', count: 1, verified: 0 },
      { status: 'ACTIVE', count: 2, verified: 2 },
      { status: 'UNSUBSCRIBED', count: 1, verified: 1 },
    ]);
    const active = await graphql(server.graphqlUrl, NewsletterSubscribersDocument, { status: 'ACTIVE', first: 1, offset: 1 }, admin);
    expect(active.body.data!.newsletterSubscribers).toMatchObject({
      total: 2,
      items: [{ email: 'active1@example.com', name: 'One', source: 'blog', isVerified: true }],
    });
    const search = await graphql(server.graphqlUrl, NewsletterSubscribersDocument, { search: 'WAIT', verified: false }, admin);
    expect(search.body.data!.newsletterSubscribers.items.map((item) => item.email)).toEqual(['waiting@example.com']);
    const wildcard = await graphql(server.graphqlUrl, NewsletterSubscribersDocument, { search: '%' }, admin);
    expect(wildcard.body.data!.newsletterSubscribers.total).toBe(0);
    const past = await graphql(server.graphqlUrl, NewsletterSubscribersDocument, { offset: 100 }, admin);
    expect(past.body.data!.newsletterSubscribers).toEqual({ total: 4, items: [] });
  });

  it('refuses bad pages and every caller but the admin', async () => {
    for (const variables of [{ first: 0 }, { first: 501 }, { offset: -1 }]) {
      const refused = await graphql(server.graphqlUrl, NewsletterSubscribersDocument, variables, admin);
      expect(refused.body.errors![0].extensions!.code).toBe('BAD_REQUEST');
    }
    const anonymous = await graphql(server.graphqlUrl, NewsletterSubscribersDocument, {});
    expect(anonymous.body.errors![0].extensions!.code).toMatch(/FORBIDDEN|UNAUTHENTICATED/);
    const user = await graphql(server.graphqlUrl, NewsletterIssuesDocument, {}, bearer(signToken()));
    expect(user.body.errors![0].extensions!.code).toMatch(/FORBIDDEN|UNAUTHENTICATED/);
    const mutation = await graphql(server.graphqlUrl, RunNewsletterCleanupDocument, {}, bearer(signToken()));
    expect(mutation.body.errors![0].extensions!.code).toMatch(/FORBIDDEN|UNAUTHENTICATED/);
  });

  it("sends a series mail by hand to an active subscriber, and shows it among the subscriber's mails", async () => {
    const sent = await graphql(server.graphqlUrl, SendNewsletterSeriesMailDocument, { email: 'Active1@example.com', template: 'W3-case-study' }, admin);
    // The answer reads the mail after the commit: a fast worker may already be sending it.
    expect(sent.body.data!.sendNewsletterSeriesMail).toEqual({ template: 'W3-case-study', status: expect.stringMatching(/^(scheduled|sending|sent)$/) });
    const mail = await mailTo(receiver, 'active1@example.com', /How a small team/);
    expect(mail.parsed.text).toContain('Hi One');

    const byCli = await runCli(['newsletter', 'send-series', '--email', 'active2@example.com', '--template', 'W4-nclaw'], cliEnvironment);
    expect(byCli).toMatchObject({ code: 0, stdout: expect.stringContaining('W4-nclaw queued for active2@example.com') });
    await mailTo(receiver, 'active2@example.com', /Meet nClaw/);

    await until(async () => {
      const mails = await graphql(server.graphqlUrl, NewsletterSubscriberMailsDocument, { email: 'active1@example.com' }, admin);
      return mails.body.data!.newsletterSubscriberMails[0]?.status === 'sent';
    });
    const mails = await graphql(server.graphqlUrl, NewsletterSubscriberMailsDocument, { email: 'active1@example.com' }, admin);
    expect(mails.body.data!.newsletterSubscriberMails).toEqual([
      { template: 'W3-case-study', status: 'sent', dueAt: expect.any(String), sentAt: expect.any(String), issueNumber: null },
    ]);
  });

  it('shows a confirmation mail as sent once the mail queue delivered it', async () => {
    const response = await fetch(`${server.url}/newsletter/subscribe`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-forwarded-for': '192.0.2.77' },
      body: JSON.stringify({ email: 'fresh@example.com' }),
    });
    expect(response.status).toBe(202);
    await mailTo(receiver, 'fresh@example.com', /Confirm your subscription/);
    await until(async () => {
      const mails = await graphql(server.graphqlUrl, NewsletterSubscriberMailsDocument, { email: 'fresh@example.com' }, admin);
      return mails.body.data!.newsletterSubscriberMails[0]?.status === 'sent';
    });
    const mails = await graphql(server.graphqlUrl, NewsletterSubscriberMailsDocument, { email: 'fresh@example.com' }, admin);
    expect(mails.body.data!.newsletterSubscriberMails).toEqual([
      { template: 'T1-confirm', status: 'sent', dueAt: expect.any(String), sentAt: expect.any(String), issueNumber: null },
    ]);
    await server.database.query("DELETE FROM newsletter_subscribers WHERE email = 'fresh@example.com'");
  });

  it('refuses series mails to subscribers who are not active, unknown templates and unknown addresses', async () => {
    const cases = [
      { email: 'waiting@example.com', template: 'W2-first-plugin', code: 'CONFLICT' },
      { email: 'left@example.com', template: 'W2-first-plugin', code: 'CONFLICT' },
      { email: 'active1@example.com', template: 'N1-biweekly', code: 'BAD_REQUEST' },
      { email: 'nobody@example.com', template: 'W2-first-plugin', code: 'NOT_FOUND' },
    ];
    for (const { code, ...variables } of cases) {
      const refused = await graphql(server.graphqlUrl, SendNewsletterSeriesMailDocument, variables, admin);
      expect({ variables, code: refused.body.errors?.[0].extensions?.code }).toEqual({ variables, code });
    }
    const unknown = await graphql(server.graphqlUrl, NewsletterSubscriberMailsDocument, { email: 'nobody@example.com' }, admin);
    expect(unknown.body.errors![0].extensions!.code).toBe('NOT_FOUND');
    expect((await graphql(server.graphqlUrl, NewsletterSubscriberDocument, { email: 'nobody@example.com' }, admin)).body.data).toEqual({
      newsletterSubscriber: null,
    });
    expect((await graphql(server.graphqlUrl, NewsletterSubscriberDocument, { email: 'LEFT@example.com' }, admin)).body.data).toEqual({
      newsletterSubscriber: { email: 'left@example.com', status: 'UNSUBSCRIBED', isVerified: true },
    });
  });

  it("counts an issue's recipients with dryRun, and refuses bad issues without creating them", async () => {
    const dry = await graphql(server.graphqlUrl, SendNewsletterIssueDocument, { issueNumber: 7, variables: ISSUE, dryRun: true }, admin);
    expect(dry.body.data!.sendNewsletterIssue).toEqual({ dryRun: true, recipients: 2, resumed: false, issue: null });
    const cases = [
      { issueNumber: 0, variables: ISSUE },
      { issueNumber: 7, variables: { ...ISSUE, HEADLINE: '' } },
      { issueNumber: 7, variables: { ...ISSUE, EXTRA: 'x' } },
      { issueNumber: 7, variables: { ...ISSUE, ISSUE_NUMBER: 8 } },
      { issueNumber: 7, variables: { ...ISSUE, DOCS_URL: 'javascript:alert(1)' } },
      { issueNumber: 7, variables: { ...ISSUE, HEADLINE: { nested: true } } },
    ];
    for (const variables of cases) {
      const refused = await graphql(server.graphqlUrl, SendNewsletterIssueDocument, variables, admin);
      expect({ variables, code: refused.body.errors?.[0].extensions?.code }).toEqual({ variables, code: 'BAD_REQUEST' });
    }
    expect((await graphql(server.graphqlUrl, NewsletterIssuesDocument, {}, admin)).body.data).toEqual({ newsletterIssues: [] });
  });
});

describe('clean-up', () => {
  const emails = async () =>
    (await server.database.query<{ email: string }>('SELECT email FROM newsletter_subscribers ORDER BY email')).map((row) => row.email);

  it('plinth newsletter cleanup deletes unverified rows whose link expired and that are older than 7 days, and prints the count', async () => {
    await server.database.query(
      `INSERT INTO newsletter_subscribers (email, is_verified, status, verification_expires_at, created_at) VALUES
         ('old-expired@example.com', false, 'pending', now() - interval '6 days', now() - interval '8 days'),
         ('old-unsub@example.com', false, 'unsubscribed', now() - interval '6 days', now() - interval '8 days'),
         ('young-expired@example.com', false, 'pending', now() - interval '1 hour', now() - interval '6 days'),
         ('old-renewed@example.com', false, 'pending', now() + interval '1 hour', now() - interval '9 days')`,
    );
    const result = await runCli(['newsletter', 'cleanup'], cliEnvironment);
    expect(result).toMatchObject({ code: 0, stdout: 'deleted 2 unconfirmed subscribers\n' });
    expect(await emails()).toEqual([
      'active1@example.com',
      'active2@example.com',
      'left@example.com',
      'old-renewed@example.com',
      'waiting@example.com',
      'young-expired@example.com',
    ]);
    expect(await runCli(['newsletter', 'cleanup', '--json'], cliEnvironment)).toMatchObject({ code: 0, stdout: '{"deleted":0}\n' });
  });

  it('runs as a scheduled job, once a day, across processes', async () => {
    await server.database.query(
      `INSERT INTO newsletter_subscribers (email, is_verified, status, verification_expires_at, created_at)
       VALUES ('scheduled@example.com', false, 'pending', now() - interval '6 days', now() - interval '8 days')`,
    );
    const schedule = await server.database.query<{ next_run_at: Date }>("SELECT next_run_at FROM newsletter_schedule WHERE task = 'cleanup'");
    // The first run came at start-up; the next is a day later.
    expect(schedule[0].next_run_at.getTime()).toBeGreaterThan(Date.now() + 86_000_000);
    await server.database.query("UPDATE newsletter_schedule SET next_run_at = now() WHERE task = 'cleanup'");
    await until(async () => !(await emails()).includes('scheduled@example.com'), 15_000, 'the scheduled clean-up');
    const jobs = await server.database.query<{ output: { deleted: number } }>(
      "SELECT output FROM pgboss.job WHERE name = 'newsletter-cleanup' AND state = 'completed' ORDER BY completed_on DESC LIMIT 1",
    );
    expect(jobs[0].output).toEqual({ deleted: 1 });
    expect((await graphql(server.graphqlUrl, RunNewsletterCleanupDocument, {}, admin)).body.data).toEqual({ runNewsletterCleanup: 0 });
  });
});
