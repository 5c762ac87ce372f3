import { freePort } from '../support/global-setup';
import { header, linkIn, mailsTo, mailTo, newsletterEnvironment } from '../support/newsletter';
import { until } from '../support/until';
import { startTestServer, type TestServer } from '../support/server';
import { startSmtpReceiver, type SmtpReceiver } from '../support/smtp';

let server: TestServer;
let receiver: SmtpReceiver;
let clients = 0;

beforeAll(async () => {
  receiver = await startSmtpReceiver({ port: await freePort() });
  // Series days of two seconds: W2 comes 2 s after the confirmation, W5 8 s after.
  server = await startTestServer(newsletterEnvironment(receiver.port, { NEWSLETTER_DAY_SECONDS: '2' }));
});
afterAll(async () => {
  await server.close();
  await receiver.close();
});

const statusOf = async (email: string) =>
  (await server.database.query<{ status: string }>('SELECT status FROM newsletter_subscribers WHERE email = $1', [email]))[0]?.status;

/** Subscribes and confirms through the mails, as a person would; resolves with W1. */
async function confirmedSubscriber(email: string) {
  const response = await fetch(`${server.url}/newsletter/subscribe`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-forwarded-for': `198.51.100.${++clients}` },
    body: JSON.stringify({ email }),
  });
  expect(response.status).toBe(202);
  const t1 = await mailTo(receiver, email, /Confirm your subscription/);
  expect((await fetch(linkIn(t1, '/newsletter/confirm', server.url))).status).toBe(200);
  return mailTo(receiver, email, /^Welcome/);
}

/** The List-Unsubscribe address of a mail, moved to the test server. */
function oneClickUrl(mail: Parameters<typeof header>[0]): string {
  const value = header(mail, 'List-Unsubscribe')!;
  const url = new URL(/^<(.+)>$/.exec(value)![1]);
  return `${server.url}${url.pathname}${url.search}`;
}

describe('unsubscribe', () => {
  it('by the link of a mail: the page changes nothing, its button unsubscribes, T2 confirms, the pending series is cancelled', async () => {
    const email = 'link@example.com';
    const welcome = await confirmedSubscriber(email);
    const link = linkIn(welcome, '/newsletter/unsubscribe', server.url);

    const page = await fetch(link, { headers: { accept: 'text/html' } });
    expect(page.status).toBe(200);
    const html = await page.text();
    expect(html).toContain('Unsubscribe from the newsletter?');
    expect(await statusOf(email)).toBe('active');

    // The page's form posts to the same address, as a browser would send it.
    const action = /<form method="post" action="([^"]+)"/.exec(html)![1].replace(/&amp;/g, '&');
    // Taken before the request: T2 may reach the receiver before the answer reaches the test.
    const sentAt = Date.now();
    const done = await fetch(`${server.url}${action}`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded', accept: 'text/html' },
      body: '',
    });
    expect(done.status).toBe(200);
    expect(await done.text()).toContain('You are unsubscribed');
    expect(await statusOf(email)).toBe('unsubscribed');

    const t2 = await mailTo(receiver, email, /You are unsubscribed/);
    expect(t2.parsed.text).toContain('This is the last one');
    const mails = await server.database.query<{ template: string; status: string }>(
      `SELECT m.template, m.status FROM newsletter_mails m JOIN newsletter_subscribers s ON s.id = m.subscriber_id
       WHERE s.email = $1 AND m.template LIKE 'W%' ORDER BY m.template`,
      [email],
    );
    expect(mails.map((mail) => `${mail.template}:${mail.status}`)).toEqual([
      'W1-welcome:sent',
      'W2-first-plugin:cancelled',
      'W3-case-study:cancelled',
      'W4-nclaw:cancelled',
      'W5-cloud-preview:cancelled',
    ]);
    const jobs = await server.database.query<{ state: string }>(
      `SELECT j.state FROM pgboss.job j JOIN newsletter_mails m ON m.job_id = j.id JOIN newsletter_subscribers s ON s.id = m.subscriber_id
       WHERE s.email = $1 AND m.status = 'cancelled'`,
      [email],
    );
    expect(jobs.map((job) => job.state)).toEqual(['cancelled', 'cancelled', 'cancelled', 'cancelled']);
    // W5 would have come 8 s after the confirmation: nothing but T2 after the unsubscription.
    await new Promise((resolve) => setTimeout(resolve, 9000));
    const after = mailsTo(receiver, email).filter((mail) => mail.receivedAt >= sentAt);
    expect(after.map((mail) => mail.parsed.subject)).toEqual(['You are unsubscribed from the Plinth News newsletter']);
  });

  it('by RFC 8058 one-click POST to the List-Unsubscribe address (url-encoded or multipart), stopping a series mail already due', async () => {
    const email = 'oneclick@example.com';
    const welcome = await confirmedSubscriber(email);
    // W2's job is due: its worker reads the status before delivering.
    await server.database.query(
      `UPDATE newsletter_mails SET due_at = now() WHERE template = 'W2-first-plugin' AND subscriber_id = (SELECT id FROM newsletter_subscribers WHERE email = $1)`,
      [email],
    );
    const response = await fetch(oneClickUrl(welcome), {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: 'List-Unsubscribe=One-Click',
    });
    expect(response.status).toBe(200);
    expect(await statusOf(email)).toBe('unsubscribed');
    await mailTo(receiver, email, /You are unsubscribed/);

    const multipart = new FormData();
    multipart.set('List-Unsubscribe', 'One-Click');
    const again = await fetch(oneClickUrl(welcome), { method: 'POST', body: multipart, headers: { accept: 'application/json' } });
    expect(again.status).toBe(200);
    expect(await again.json()).toEqual({ status: 'unsubscribed', email });
    await new Promise((resolve) => setTimeout(resolve, 3000));
    // Unsubscribing twice sends one T2, and W2 never went out.
    const subjects = mailsTo(receiver, email).map((mail) => mail.parsed.subject);
    expect(subjects.filter((subject) => /unsubscribed/.test(subject ?? ''))).toHaveLength(1);
    expect(subjects.some((subject) => /first plugin/.test(subject ?? ''))).toBe(false);
  });

  it('with a forged or altered token changes nothing', async () => {
    const email = 'keep@example.com';
    const welcome = await confirmedSubscriber(email);
    const genuine = new URL(oneClickUrl(welcome));
    const token = genuine.searchParams.get('token')!;
    const forgeries = [
      { email, token: `${token.slice(0, -1)}${token.endsWith('0') ? '1' : '0'}` },
      { email, token: 'abc' },
      { email: 'someone-else@example.com', token },
      { email, token: '' },
    ];
    for (const forged of forgeries) {
      const url = `${server.url}/newsletter/unsubscribe?${new URLSearchParams(forged)}`;
      const post = await fetch(url, { method: 'POST', headers: { accept: 'application/json' } });
      expect({ forged, status: post.status }).toEqual({ forged, status: 400 });
      expect(await post.json()).toMatchObject({ success: false, error_code: 'INVALID_TOKEN' });
      expect((await fetch(url, { headers: { accept: 'text/html' } })).status).toBe(400);
    }
    expect((await fetch(`${server.url}/newsletter/unsubscribe`, { method: 'POST' })).status).toBe(400);
    expect(await statusOf(email)).toBe('active');
    // The genuine link, read as JSON.
    const status = await fetch(genuine.toString(), { headers: { accept: 'application/json' } });
    expect(await status.json()).toEqual({ status: 'active', email });
  });

  it('lets an unsubscribed address subscribe again, with a new confirmation', async () => {
    await until(async () => (await statusOf('oneclick@example.com')) === 'unsubscribed');
    const before = mailsTo(receiver, 'oneclick@example.com').length;
    const response = await fetch(`${server.url}/newsletter/subscribe`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-forwarded-for': '198.51.100.250' },
      body: JSON.stringify({ email: 'oneclick@example.com' }),
    });
    expect(response.status).toBe(202);
    await until(() => mailsTo(receiver, 'oneclick@example.com').length === before + 1, 10_000, 'a new T1');
    expect(mailsTo(receiver, 'oneclick@example.com').at(-1)!.parsed.subject).toMatch(/Confirm your subscription/);
    expect(await statusOf('oneclick@example.com')).toBe('pending');
  });
});
