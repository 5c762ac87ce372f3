import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { unsubscribeToken } from '../../src/modules/newsletter/newsletter.tokens';
import { createTestDatabase, type TestDatabase } from '../support/database';
import { freePort } from '../support/global-setup';
import { postGraphQL } from '../support/graphql';
import { newsletterEnvironment, UNSUBSCRIBE_SECRET } from '../support/newsletter';
import { until } from '../support/until';
import { ADMIN_SECRET, testEnvironment } from '../support/server';
import { startSmtpReceiver, type ReceivedMail, type SmtpReceiver } from '../support/smtp';
import { runCli, spawnServer, type SpawnedServer } from '../support/spawn';

const READERS = 1500;
let database: TestDatabase;
let receiver: SmtpReceiver;
let environment: Record<string, string>;
let varsFile: string;
const running = new Set<SpawnedServer>();

const VARIABLES = {
  HEADLINE: 'Faster jobs',
  RELEASE_HEADLINE: 'Plinth 1.4 is out',
  RELEASE_SUMMARY: 'Workers claim jobs in batches.',
  CLI_SNIPPET: 'npm install plinth@1.4.0',
  CHANGELOG_URL: 'https://example.com/changelog',
  COMMUNITY_SHOWCASE: 'A recipe app built in a weekend.',
  DOCS_URL: 'https://example.com/docs/jobs',
  DOCS_TITLE: 'Background jobs',
  DOCS_TEASER: 'Retries and timeouts.',
  ROADMAP_TEASER: 'Scheduled reports.',
};

// A send of READERS mails across a kill or an unsubscription: its waits allow up to 150 s on a
// loaded machine (more than Jest's default 60 s for the whole test).
const ISSUE_SEND_TIMEOUT_MS = 180_000;

async function start(overrides: Record<string, string> = {}): Promise<SpawnedServer> {
  const server = await spawnServer({ ...environment, ...overrides });
  running.add(server);
  void server.exited.then(() => running.delete(server));
  return server;
}

beforeAll(async () => {
  database = await createTestDatabase();
  receiver = await startSmtpReceiver({ port: await freePort() });
  environment = testEnvironment(
    database.url,
    newsletterEnvironment(receiver.port, {
      NEWSLETTER_SEND_BATCH_SIZE: '50',
      NEWSLETTER_SEND_CONCURRENCY: '10',
      // A dead worker's claims are taken again 4 + 2 s after they were made.
      JOBS_NEWSLETTER_ISSUE_TIMEOUT_SECONDS: '4',
      JOBS_NEWSLETTER_ISSUE_RETRY_DELAY_SECONDS: '1',
      JOBS_MAINTENANCE_INTERVAL_SECONDS: '1',
    }),
  );
  varsFile = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'plinth-issue-')), 'vars.json');
  fs.writeFileSync(varsFile, JSON.stringify(VARIABLES));
});
afterAll(async () => {
  for (const server of running) server.child.kill('SIGKILL');
  await Promise.all([...running].map((server) => server.exited));
  await receiver.close();
  await database.drop();
});

const issueMails = (issue: number): ReceivedMail[] => receiver.received.filter((mail) => mail.parsed.subject?.startsWith(`#${issue}: `));
const readers = () => Array.from({ length: READERS }, (_, index) => `reader${index + 1}@example.com`);

describe('the bi-weekly issue', () => {
  let first: SpawnedServer;

  it('counts its recipients with --dry-run, sending nothing', async () => {
    first = await start();
    await database.query(
      `INSERT INTO newsletter_subscribers (email, is_verified, status, subscribed_at, verification_expires_at)
       SELECT 'reader' || g || '@example.com', true, 'active', now(), now() FROM generate_series(1, ${READERS}) g`,
    );
    await database.query(
      `INSERT INTO newsletter_subscribers (email, is_verified, status, verification_expires_at) VALUES
         ('pending@example.com', false, 'pending', now() + interval '1 day'),
         ('gone@example.com', true, 'unsubscribed', now())`,
    );
    const dry = await runCli(['newsletter', 'send-issue', '--issue', '1', '--vars', varsFile, '--dry-run'], environment);
    expect(dry).toMatchObject({ code: 0, stdout: `dry run: issue 1 would go to ${READERS} subscribers\n` });
    expect(await database.query('SELECT * FROM newsletter_issues')).toEqual([]);
  });

  it('refuses variables N1 does not take or lacks, naming them', async () => {
    const bad = path.join(path.dirname(varsFile), 'bad.json');
    fs.writeFileSync(bad, JSON.stringify({ ...VARIABLES, HEADLNE: 'typo', HEADLINE: undefined }));
    const refused = await runCli(['newsletter', 'send-issue', '--issue', '1', '--vars', bad], environment);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain('unknown variables HEADLNE');
    fs.writeFileSync(bad, JSON.stringify({ ...VARIABLES, HEADLINE: undefined }));
    expect((await runCli(['newsletter', 'send-issue', '--issue', '1', '--vars', bad], environment)).stderr).toContain('variable HEADLINE is missing');
    expect(await database.query('SELECT * FROM newsletter_issues')).toEqual([]);
  });

  it(
    'survives a kill -9 in the middle of the send: resumed by another process, no recipient skipped, none sent two different mails',
    async () => {
      const queued = await runCli(['newsletter', 'send-issue', '--issue', '1', '--vars', varsFile], environment);
      expect(queued).toMatchObject({ code: 0, stdout: expect.stringContaining(`queued issue 1: sending, ${READERS} recipients`) });

      await until(() => issueMails(1).length >= 300, 60_000, '300 mails of issue 1');
      first.child.kill('SIGKILL');
      await first.exited;
      const atKill = issueMails(1).length;
      expect(atKill).toBeLessThan(READERS);
      const recorded = await database.query<{ status: string; count: number }>(
        `SELECT status, count(*)::int AS count FROM newsletter_issue_recipients GROUP BY status ORDER BY status`,
      );
      expect(recorded.find((row) => row.status === 'pending')?.count ?? 0).toBeGreaterThan(0);

      await start();
      await until(
        async () => (await database.query<{ status: string }>('SELECT status FROM newsletter_issues WHERE issue_number = 1'))[0].status === 'sent',
        90_000,
        'issue 1 to finish',
      );
      await until(() => new Set(issueMails(1).flatMap((mail) => mail.recipients)).size === READERS, 10_000, 'every mail to arrive');
      await new Promise((resolve) => setTimeout(resolve, 1000));

      const mails = issueMails(1);
      const byRecipient = new Map<string, Set<string>>();
      for (const mail of mails) {
        for (const to of mail.recipients) byRecipient.set(to, (byRecipient.get(to) ?? new Set()).add(mail.parsed.messageId ?? ''));
      }
      // Nobody skipped, nobody else.
      expect([...byRecipient.keys()].sort()).toEqual(readers().sort());
      // A mail that was delivered but not yet recorded when the process died is delivered again
      // as the same message (same Message-ID): mailboxes show it once.
      const twoDifferent = [...byRecipient.entries()].filter(([, ids]) => ids.size !== 1);
      expect(twoDifferent).toEqual([]);
      const resent = mails.length - READERS;
      // At most what was in flight: 4 jobs x 10 sends at once.
      expect(resent).toBeLessThanOrEqual(40);
      process.stdout.write(`kill -9 after ${atKill} of ${READERS} mails; ${resent} delivered again with the same Message-ID\n`);

      const rows = await database.query<{ status: string; count: number }>(
        'SELECT status, count(*)::int AS count FROM newsletter_issue_recipients GROUP BY status',
      );
      expect(rows).toEqual([{ status: 'sent', count: READERS }]);
      expect(receiver.received.some((mail) => mail.recipients.includes('pending@example.com') || mail.recipients.includes('gone@example.com'))).toBe(false);
    },
    ISSUE_SEND_TIMEOUT_MS,
  );

  it('sends an issue number once: asking again is refused, and the CLI shows the progress', async () => {
    const again = await runCli(['newsletter', 'send-issue', '--issue', '1', '--vars', varsFile], environment);
    expect(again.code).toBe(1);
    expect(again.stderr).toContain('issue 1 was already sent');
    const listed = await runCli(['newsletter', 'issues'], environment);
    expect(listed.stdout).toBe(`issue 1: sent, ${READERS} recipients (${READERS} sent, 0 to go, 0 skipped, 0 failed)\n`);
  });

  it(
    'stops mail to addresses unsubscribed on another instance while the issue is being sent (admin mutation)',
    async () => {
      const apiOnly = await start({ PLINTH_PROCESS_ROLES: 'api' });
      const admin = { 'x-gql-admin-secret': ADMIN_SECRET };
      const started = await postGraphQL<{ sendNewsletterIssue: { dryRun: boolean; recipients: number; issue: { issueNumber: number; status: string } } }>(
        `${apiOnly.url}/v1/graphql`,
        {
          query: 'mutation($v: JSONObject!) { sendNewsletterIssue(issueNumber: 2, variables: $v) { dryRun recipients issue { issueNumber status } } }',
          variables: { v: { ...VARIABLES, HEADLINE: 'Second issue' } },
        },
        admin,
      );
      expect(started.body).toEqual({ data: { sendNewsletterIssue: { dryRun: false, recipients: READERS, issue: { issueNumber: 2, status: 'sending' } } } });

      await until(() => issueMails(2).length >= 200, 60_000, '200 mails of issue 2');
      const reached = new Set(issueMails(2).flatMap((mail) => mail.recipients));
      const leaving = readers()
        .filter((email) => !reached.has(email))
        .slice(-25);
      const answeredAt = new Map<string, number>();
      await Promise.all(
        leaving.map(async (email) => {
          const url = `${apiOnly.url}/newsletter/unsubscribe?${new URLSearchParams({ email, token: unsubscribeToken(UNSUBSCRIBE_SECRET, email) })}`;
          const response = await fetch(url, {
            method: 'POST',
            headers: { 'content-type': 'application/x-www-form-urlencoded' },
            body: 'List-Unsubscribe=One-Click',
          });
          expect(response.status).toBe(200);
          answeredAt.set(email, Date.now());
        }),
      );
      await until(
        async () => (await database.query<{ status: string }>('SELECT status FROM newsletter_issues WHERE issue_number = 2'))[0].status === 'sent',
        90_000,
        'issue 2 to finish',
      );
      await new Promise((resolve) => setTimeout(resolve, 1000));
      const late = issueMails(2).filter((mail) => mail.recipients.some((to) => answeredAt.has(to) && mail.receivedAt > answeredAt.get(to)! + 10_000));
      expect(late).toEqual([]);
      const lags = issueMails(2)
        .flatMap((mail) => mail.recipients.filter((to) => answeredAt.has(to)).map((to) => mail.receivedAt - answeredAt.get(to)!))
        .filter((lag) => lag > 0);
      process.stdout.write(
        `unsubscribed during the send: ${leaving.length}; mails to them after their answer: ${lags.length} (latest ${Math.max(0, ...lags)} ms after)\n`,
      );
      const skipped = await database.query<{ count: number }>(
        `SELECT count(*)::int AS count FROM newsletter_issue_recipients r JOIN newsletter_issues i ON i.id = r.issue_id WHERE i.issue_number = 2 AND r.status = 'skipped'`,
      );
      // Each of them got the issue (delivered before the unsubscription took hold) or was skipped.
      const got = new Set(issueMails(2).flatMap((mail) => mail.recipients.filter((to) => answeredAt.has(to))));
      expect(skipped[0].count + got.size).toBe(leaving.length);
      expect(skipped[0].count).toBeGreaterThan(0);

      const progress = await postGraphQL<{
        newsletterIssues: { issueNumber: number; status: string; recipients: number; sent: number; skipped: number; pending: number }[];
      }>(`${apiOnly.url}/v1/graphql`, { query: '{ newsletterIssues { issueNumber status recipients sent skipped pending } }' }, admin);
      expect(progress.body.data!.newsletterIssues).toEqual([
        { issueNumber: 2, status: 'sent', recipients: READERS, sent: READERS - skipped[0].count, skipped: skipped[0].count, pending: 0 },
        { issueNumber: 1, status: 'sent', recipients: READERS, sent: READERS, skipped: 0, pending: 0 },
      ]);
    },
    ISSUE_SEND_TIMEOUT_MS,
  );
});
