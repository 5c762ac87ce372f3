import { confirmToken } from '../../src/modules/newsletter/newsletter.tokens';
import { freePort } from '../support/global-setup';
import { CONFIRM_SECRET, header, linkIn, mailsTo, mailTo, newsletterEnvironment } from '../support/newsletter';
import { until } from '../support/until';
import { startTestServer, type TestServer } from '../support/server';
import { startSmtpReceiver, type SmtpReceiver } from '../support/smtp';

let server: TestServer;
let receiver: SmtpReceiver;
let clients = 0;

beforeAll(async () => {
  receiver = await startSmtpReceiver({ port: await freePort() });
  server = await startTestServer(newsletterEnvironment(receiver.port, { GQL_GRAPHQL_CORS_DOMAIN: 'https://www.example.com' }));
});
afterAll(async () => {
  await server.close();
  await receiver.close();
});

/** A client address of its own (TRUST_PROXY=loopback), so tests do not share the subscribe limit. */
const newClient = () => `203.0.113.${++clients}`;

async function post(path: string, body: string, headers: Record<string, string>, ip = newClient()) {
  const response = await fetch(`${server.url}${path}`, { method: 'POST', body, headers: { 'x-forwarded-for': ip, ...headers }, redirect: 'manual' });
  return { status: response.status, headers: response.headers, text: await response.text() };
}
const subscribeJson = (body: Record<string, unknown>, ip?: string) =>
  post('/newsletter/subscribe', JSON.stringify(body), { 'content-type': 'application/json' }, ip);
const subscribeForm = (fields: Record<string, string>, headers: Record<string, string> = {}, ip?: string) =>
  post('/newsletter/subscribe', new URLSearchParams(fields).toString(), { 'content-type': 'application/x-www-form-urlencoded', ...headers }, ip);

const row = async (email: string) =>
  (
    await server.database.query<{
      status: string;
      is_verified: boolean;
      subscribed_at: Date | null;
      created_at: Date;
      verification_expires_at: Date;
      confirmations_sent: number;
      name: string | null;
      source: string | null;
    }>('SELECT * FROM newsletter_subscribers WHERE email = $1', [email])
  )[0];

async function get(url: string, accept = 'text/html') {
  const response = await fetch(url, { headers: { accept } });
  return { status: response.status, type: response.headers.get('content-type'), text: await response.text() };
}

describe('subscribe', () => {
  it('stores a pending subscriber for 48 hours and sends T1 with the confirmation link and the unsubscribe headers', async () => {
    const answer = await subscribeJson({ email: ' Ada@Example.com ', name: 'Ada', source: 'homepage' });
    expect(answer.status).toBe(202);
    expect(JSON.parse(answer.text)).toEqual({ status: 'pending', message: expect.stringContaining('confirmation link') });

    const stored = await row('ada@example.com');
    expect(stored).toMatchObject({ status: 'pending', is_verified: false, subscribed_at: null, name: 'Ada', source: 'homepage' });
    const ttl = stored.verification_expires_at.getTime() - stored.created_at.getTime();
    expect(Math.abs(ttl - 48 * 3600 * 1000)).toBeLessThan(2000);

    const mail = await mailTo(receiver, 'ada@example.com', /Confirm your subscription/);
    expect(linkIn(mail, '/newsletter/confirm', server.url)).toMatch(/token=\d+\.[0-9a-f]{64}&email=ada%40example.com$/);
    expect(mail.parsed.text).toContain('/newsletter/confirm?token=');
    expect(header(mail, 'List-Unsubscribe')).toMatch(/^<http:\/\/localhost:0\/newsletter\/unsubscribe\?email=ada%40example.com&token=[0-9a-f]{64}>$/);
    expect(header(mail, 'List-Unsubscribe-Post')).toBe('List-Unsubscribe=One-Click');
    expect(linkIn(mail, '/newsletter/unsubscribe', server.url)).toContain('token=');
  });

  it('answers a form post with a page', async () => {
    const answer = await subscribeForm({ email: 'form@example.com', name: 'Form' }, { accept: 'text/html' });
    expect(answer.status).toBe(202);
    expect(answer.headers.get('content-type')).toContain('text/html');
    expect(answer.text).toContain('Check your inbox');
    expect(await row('form@example.com')).toMatchObject({ status: 'pending', name: 'Form' });
    await mailTo(receiver, 'form@example.com', /Confirm your subscription/);
  });

  it('answers the same for a new, a pending and a confirmed address; only the pending one gets a fresh link', async () => {
    const fresh = await subscribeJson({ email: 'same-new@example.com' });
    await mailTo(receiver, 'same-new@example.com', /Confirm/);
    const pendingAgain = await subscribeJson({ email: 'same-new@example.com' });
    await until(() => mailsTo(receiver, 'same-new@example.com').length === 2, 10_000, 'a fresh link');
    expect((await row('same-new@example.com')).confirmations_sent).toBe(2);

    await server.database.query(
      "UPDATE newsletter_subscribers SET status = 'active', is_verified = true, subscribed_at = now() WHERE email = 'ada@example.com'",
    );
    const before = mailsTo(receiver, 'ada@example.com').length;
    const confirmed = await subscribeJson({ email: 'ada@example.com' });

    for (const answer of [pendingAgain, confirmed]) {
      expect({ status: answer.status, body: answer.text }).toEqual({ status: fresh.status, body: fresh.text });
    }
    await new Promise((resolve) => setTimeout(resolve, 1500));
    expect(mailsTo(receiver, 'ada@example.com')).toHaveLength(before);
    expect(await row('ada@example.com')).toMatchObject({ status: 'active', is_verified: true });
  });

  it('sends a pending address a bounded number of fresh links (NEWSLETTER_CONFIRM_RESEND_LIMIT, 3)', async () => {
    const email = 'bounded@example.com';
    for (let attempt = 0; attempt < 6; attempt++) expect((await subscribeJson({ email })).status).toBe(202);
    await until(() => mailsTo(receiver, email).length >= 4, 10_000, 'four links');
    await new Promise((resolve) => setTimeout(resolve, 1500));
    expect(mailsTo(receiver, email)).toHaveLength(4);
    expect((await row(email)).confirmations_sent).toBe(4);
  });

  it('refuses what is not an e-mail address, and stores nothing', async () => {
    for (const email of ['', 'not-an-address', 'two@@example.com', 'a b@example.com', `${'x'.repeat(250)}@example.com`, 42]) {
      const answer = await subscribeJson({ email });
      expect({ email, status: answer.status }).toEqual({ email, status: 400 });
      expect(JSON.parse(answer.text)).toMatchObject({ success: false, error_code: expect.stringMatching(/INVALID_EMAIL|VALIDATION_ERROR/) });
    }
    const page = await subscribeForm({ email: 'nope' }, { accept: 'text/html' });
    expect(page.status).toBe(400);
    expect(page.text).toContain('e-mail address');
    const multiline = await subscribeJson({ email: 'name@example.com', name: 'two\nlines' });
    expect(multiline.status).toBe(400);
    expect(await row('name@example.com')).toBeUndefined();
    expect((await post('/newsletter/subscribe', '{"email":', { 'content-type': 'application/json' })).status).toBe(400);
    expect((await post('/newsletter/subscribe', 'email=x%40example.com', { 'content-type': 'text/plain' })).status).toBe(400);
    expect(await row('x@example.com')).toBeUndefined();
  });

  it('allows 3 attempts per client address per hour, then answers 429 with Retry-After', async () => {
    const ip = newClient();
    for (let attempt = 1; attempt <= 3; attempt++) expect((await subscribeJson({ email: `limit${attempt}@example.com` }, ip)).status).toBe(202);
    const refused = await subscribeJson({ email: 'limit4@example.com' }, ip);
    expect(refused.status).toBe(429);
    expect(Number(refused.headers.get('retry-after'))).toBeGreaterThan(3500);
    expect(JSON.parse(refused.text)).toMatchObject({ error_code: 'RATE_LIMITED' });
    expect(await row('limit4@example.com')).toBeUndefined();
    // The form proxy counts against the same limit.
    const proxied = await post('/api/newsletter', 'email=limit5%40example.com', { 'content-type': 'application/x-www-form-urlencoded' }, ip);
    expect(proxied.status).toBe(303);
    expect(proxied.headers.get('location')).toContain('newsletter=rate-limited');
    expect(proxied.headers.get('retry-after')).toMatch(/^\d+$/);
    // Another address is not limited.
    expect((await subscribeJson({ email: 'limit6@example.com' })).status).toBe(202);
  });
});

describe('the web front-end form proxy, POST /api/newsletter', () => {
  const form = (fields: Record<string, string>, headers: Record<string, string> = {}) =>
    post('/api/newsletter', new URLSearchParams(fields).toString(), { 'content-type': 'application/x-www-form-urlencoded', ...headers });

  it('subscribes and redirects back to the page of an allowed origin', async () => {
    const answer = await form({ email: 'proxy@example.com' }, { referer: 'https://www.example.com/blog/post?x=1' });
    expect(answer.status).toBe(303);
    expect(answer.headers.get('location')).toBe('https://www.example.com/blog/post?x=1&newsletter=pending#newsletter');
    expect(await row('proxy@example.com')).toMatchObject({ status: 'pending' });
  });

  it('never redirects to another origin, and reports an invalid address in the query', async () => {
    const answer = await form({ email: 'bad', redirect_to: 'https://evil.example.net/' }, { referer: 'https://evil.example.net/x' });
    expect(answer.status).toBe(303);
    expect(answer.headers.get('location')).toBe('http://localhost:0/?newsletter=invalid#newsletter');
  });

  it('answers JSON when asked', async () => {
    const answer = await form({ email: 'proxy-json@example.com' }, { accept: 'application/json' });
    expect(answer.status).toBe(202);
    expect(JSON.parse(answer.text)).toMatchObject({ status: 'pending' });
    const bad = await form({ email: 'bad' }, { accept: 'application/json' });
    expect(bad.status).toBe(400);
  });
});

describe('confirm', () => {
  it('verifies the address from the link of T1, sends W1 and then W2 to W5 on their days', async () => {
    expect((await subscribeJson({ email: 'grace@example.com', name: 'Grace' })).status).toBe(202);
    const t1 = await mailTo(receiver, 'grace@example.com', /Confirm your subscription/);
    const page = await get(linkIn(t1, '/newsletter/confirm', server.url));
    expect(page.status).toBe(200);
    expect(page.type).toContain('text/html');
    expect(page.text).toContain('You are subscribed');
    const confirmedAt = Date.now();
    expect(await row('grace@example.com')).toMatchObject({ status: 'active', is_verified: true, subscribed_at: expect.any(Date) });

    const welcome = await mailTo(receiver, 'grace@example.com', /^Welcome to the Plinth News newsletter$/);
    expect(welcome.parsed.text).toContain('Hi Grace');
    expect(header(welcome, 'List-Unsubscribe-Post')).toBe('List-Unsubscribe=One-Click');
    const series = [/Install your first plugin/, /How a small team/, /Meet nClaw/, /A preview of the cloud/];
    const arrivals: number[] = [];
    for (const subject of series) {
      await mailTo(receiver, 'grace@example.com', subject, 20_000);
      arrivals.push(Date.now() - confirmedAt);
    }
    // Days 1, 2, 3 and 4 of one second each (polled every second): in order, none early.
    expect(arrivals[0]).toBeGreaterThanOrEqual(900);
    expect(arrivals[3]).toBeGreaterThanOrEqual(3900);
    const subjects = mailsTo(receiver, 'grace@example.com').map((mail) => mail.parsed.subject);
    expect(subjects.slice(1)).toEqual([
      'Welcome to the Plinth News newsletter',
      'Install your first plugin',
      'How a small team shipped its backend in a week',
      'Meet nClaw',
      'A preview of the cloud',
    ]);
    const mails = await server.database.query<{ template: string; status: string }>(
      `SELECT template, m.status FROM newsletter_mails m JOIN newsletter_subscribers s ON s.id = m.subscriber_id WHERE s.email = 'grace@example.com' ORDER BY due_at, template`,
    );
    expect(mails.map((mail) => `${mail.template}:${mail.status}`)).toEqual([
      'T1-confirm:queued',
      'W1-welcome:sent',
      'W2-first-plugin:sent',
      'W3-case-study:sent',
      'W4-nclaw:sent',
      'W5-cloud-preview:sent',
    ]);
  });

  it('is harmless twice, and answers JSON when asked', async () => {
    const t1 = await mailTo(receiver, 'grace@example.com', /Confirm your subscription/);
    const again = await get(linkIn(t1, '/newsletter/confirm', server.url), 'application/json');
    expect(again).toMatchObject({ status: 200, type: expect.stringContaining('application/json') });
    expect(JSON.parse(again.text)).toEqual({ status: 'already-confirmed', email: 'grace@example.com' });
    await new Promise((resolve) => setTimeout(resolve, 1500));
    expect(mailsTo(receiver, 'grace@example.com').filter((mail) => /Welcome/.test(mail.parsed.subject ?? ''))).toHaveLength(1);
  });

  it('changes nothing with a forged, altered or missing token, and offers a new link', async () => {
    expect((await subscribeJson({ email: 'forged@example.com' })).status).toBe(202);
    const t1 = await mailTo(receiver, 'forged@example.com', /Confirm/);
    const genuine = new URL(linkIn(t1, '/newsletter/confirm', server.url));
    const token = genuine.searchParams.get('token')!;
    const [expiry, digest] = token.split('.');
    const attempts = [
      `${expiry}.${digest.slice(0, -1)}${digest.endsWith('0') ? '1' : '0'}`,
      `${Number(expiry) + 3600}.${digest}`,
      confirmToken('ff'.repeat(32), 'forged@example.com', new Date(Date.now() + 3600_000)),
      'garbage',
      '',
    ];
    for (const attempt of attempts) {
      const page = await get(`${server.url}/newsletter/confirm?${new URLSearchParams({ token: attempt, email: 'forged@example.com' })}`);
      expect({ attempt, status: page.status }).toEqual({ attempt, status: 400 });
      expect(page.text).toContain('Send me a new link');
      expect(page.text).toContain('action="/newsletter/subscribe"');
    }
    // A genuine token for another address.
    const other = await get(`${server.url}/newsletter/confirm?${new URLSearchParams({ token, email: 'other@example.com' })}`, 'application/json');
    expect(other.status).toBe(400);
    expect(JSON.parse(other.text)).toMatchObject({ success: false, error_code: 'INVALID_TOKEN' });
    expect((await get(`${server.url}/newsletter/confirm`)).status).toBe(400);
    expect(await row('forged@example.com')).toMatchObject({ status: 'pending', is_verified: false, subscribed_at: null });
  });

  it('changes nothing after 48 hours: the expired link offers a new one, which works', async () => {
    expect((await subscribeJson({ email: 'late@example.com' })).status).toBe(202);
    // The link a subscriber would hold 48 hours and a second later: signed with the real secret, past its deadline.
    const expired = confirmToken(CONFIRM_SECRET, 'late@example.com', new Date(Date.now() - 1000));
    const page = await get(`${server.url}/newsletter/confirm?${new URLSearchParams({ token: expired, email: 'late@example.com' })}`);
    expect(page.status).toBe(410);
    expect(page.text).toContain('expired');
    expect(page.text).toContain('name="email" value="late@example.com"');
    const json = await get(`${server.url}/newsletter/confirm?${new URLSearchParams({ token: expired, email: 'late@example.com' })}`, 'application/json');
    expect(JSON.parse(json.text)).toMatchObject({ error_code: 'EXPIRED_TOKEN' });
    expect(await row('late@example.com')).toMatchObject({ status: 'pending', is_verified: false });

    // The page's form: a new link, then confirmed.
    expect((await subscribeForm({ email: 'late@example.com' })).status).toBe(202);
    await until(() => mailsTo(receiver, 'late@example.com').length === 2, 10_000, 'the new link');
    const fresh = mailsTo(receiver, 'late@example.com')[1];
    expect((await get(linkIn(fresh, '/newsletter/confirm', server.url))).status).toBe(200);
    expect(await row('late@example.com')).toMatchObject({ status: 'active', is_verified: true });
  });
});
