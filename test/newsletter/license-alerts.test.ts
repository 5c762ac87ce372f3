import { randomUUID } from 'node:crypto';
import pino from 'pino';
import { loadConfig } from '../../src/config';
import { BillingService } from '../../src/modules/payments/billing.service';
import { LicenseAlerts } from '../../src/modules/newsletter/license-alerts.service';
import { createMailer, mailTemplates } from '../../src/platform/mail/mailer';
import { createTestDatabase, type TestDatabase } from '../support/database';
import { freePort } from '../support/global-setup';
import { header, linkIn, mailsTo, newsletterEnvironment } from '../support/newsletter';
import { until } from '../support/until';
import { startTestServer, testEnvironment, type TestServer } from '../support/server';
import { startSmtpReceiver, type SmtpReceiver } from '../support/smtp';

/**
 * T3-license-alert: the newsletter's scheduler sends it to each license holder
 * NEWSLETTER_LICENSE_ALERT_DAYS (7) days before renewal, once per license and renewal date,
 * reading the licenses through the payments module's services. A day lasts one second here
 * (NEWSLETTER_DAY_SECONDS), so a notice is due 7 s before a renewal; two servers share the
 * database, as two worker processes do.
 */
const ENVIRONMENT = { NEWSLETTER_SCHEDULER_INTERVAL_SECONDS: '1', NEWSLETTER_LICENSE_MANAGE_URL: 'https://plinth.test/account/licenses' };
const SUBJECT = /^Your .* license renews on /;

let receiver: SmtpReceiver;
let database: TestDatabase;
let servers: TestServer[];

const holders = { ada: randomUUID(), bob: randomUUID(), cy: randomUUID() };

beforeAll(async () => {
  receiver = await startSmtpReceiver({ port: await freePort() });
  database = await createTestDatabase();
  servers = [];
  servers.push(await startTestServer(newsletterEnvironment(receiver.port, ENVIRONMENT), { database }));
  servers.push(await startTestServer(newsletterEnvironment(receiver.port, ENVIRONMENT), { database }));
  await database.query(
    `INSERT INTO users (id, email, name) VALUES ($1, 'ada@example.com', 'Ada'), ($2, 'bob@example.com', 'Bob'), ($3, 'cy@example.com', 'Cy')`,
    [holders.ada, holders.bob, holders.cy],
  );
  // Cy left the newsletter: no mail of ours goes to that address.
  await database.query(
    `INSERT INTO newsletter_subscribers (email, is_verified, status, subscribed_at, unsubscribed_at, verification_expires_at)
     VALUES ('cy@example.com', true, 'unsubscribed', now(), now(), now())`,
  );
});
afterAll(async () => {
  for (const server of servers) await server.close();
  await database.drop();
  await receiver.close();
});

async function license(holder: string, product: string, renewsInSeconds: number, status = 'active'): Promise<string> {
  const [row] = await database.query<{ id: string }>(
    `INSERT INTO licenses (license_key, product, customer_user_id, provider, source_id, status, activation_limit, renewal_date)
     VALUES ($1, $2, $3, 'primary', $1, $4, 1, now() + make_interval(secs => $5)) RETURNING id`,
    [randomUUID(), product, holder, status, renewsInSeconds],
  );
  return row.id;
}

const alertsTo = (address: string) => mailsTo(receiver, address).filter((mail) => SUBJECT.test(mail.parsed.subject ?? ''));
const alerts = (licenseId: string) =>
  database.query<{ status: string; renewal_date: Date }>(
    'SELECT status, renewal_date FROM newsletter_license_alerts WHERE license_id = $1 ORDER BY renewal_date',
    [licenseId],
  );
const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe('T3-license-alert', () => {
  let soon: string;

  it('goes to each holder 7 days before renewal, once, from one of two workers; not to an unsubscribed address, nor for a canceled license', async () => {
    soon = await license(holders.ada, 'pro', 4);
    // Read before the insert: the row's renewal is PostgreSQL's now() + 12 s, no earlier than this
    // (taken after it, the insert's latency on a loaded machine would move the bound late).
    const laterRenewal = Date.now() + 12_000;
    const later = await license(holders.bob, 'team', 12);
    const unsubscribed = await license(holders.cy, 'pro', 4);
    await license(holders.ada, 'canceled-plan', 4, 'canceled');

    await until(() => alertsTo('ada@example.com').length === 1, 15_000, "Ada's notice");
    expect(alertsTo('bob@example.com')).toHaveLength(0);
    const mail = alertsTo('ada@example.com')[0];
    expect(mail.parsed.subject).toMatch(/^Your pro license renews on \d{1,2} \w+ \d{4}$/);
    expect(mail.parsed.html).toContain('href="https://plinth.test/account/licenses"');
    expect(linkIn(mail, '/newsletter/unsubscribe', servers[0].url)).toContain('email=ada%40example.com');
    expect(header(mail, 'List-Unsubscribe-Post')).toBe('List-Unsubscribe=One-Click');

    // Bob's renewal is 12 s away: his notice waits until 7 s remain.
    await until(() => alertsTo('bob@example.com').length === 1, 15_000, "Bob's notice");
    expect(Date.now()).toBeGreaterThanOrEqual(laterRenewal - 7_000 - 500);

    // Several scheduler rounds of both workers later, still one notice each.
    await pause(3_000);
    expect(alertsTo('ada@example.com')).toHaveLength(1);
    expect(alertsTo('bob@example.com')).toHaveLength(1);
    expect(alertsTo('cy@example.com')).toHaveLength(0);
    expect((await alerts(soon)).map((row) => row.status)).toEqual(['queued']);
    expect((await alerts(later)).map((row) => row.status)).toEqual(['queued']);
    expect((await alerts(unsubscribed)).map((row) => row.status)).toEqual(['skipped']);
    expect(await database.query("SELECT count(*)::int AS count FROM newsletter_license_alerts WHERE email = 'ada@example.com'")).toEqual([{ count: 1 }]);
  });

  it('sends nothing again after a restart; a renewal that moves the date gets a notice for the new date', async () => {
    await servers.pop()!.close();
    servers.push(await startTestServer(newsletterEnvironment(receiver.port, ENVIRONMENT), { database }));
    await pause(3_000);
    expect(alertsTo('ada@example.com')).toHaveLength(1);

    // The license renewed: its next renewal is another date, due within the notice's days.
    await database.query("UPDATE licenses SET renewal_date = now() + interval '5 seconds', updated_at = now() WHERE id = $1", [soon]);
    await until(() => alertsTo('ada@example.com').length === 2, 15_000, "Ada's notice for the new date");
    await pause(2_000);
    expect(alertsTo('ada@example.com')).toHaveLength(2);
    expect((await alerts(soon)).map((row) => row.status)).toEqual(['queued', 'queued']);
  });

  it('is queued once when workers look at the same moment (the unique key decides)', async () => {
    const config = loadConfig(testEnvironment(database.url, newsletterEnvironment(receiver.port, ENVIRONMENT)));
    const logger = pino({ level: 'silent' });
    const { dataSource, jobs } = servers[0].server;
    const billing = new BillingService(dataSource, { licenseActivationLimit: 1 });
    const renewing = (withinSeconds: number) => billing.licensesRenewingWithin(withinSeconds);
    const worker = () =>
      new LicenseAlerts({
        config,
        dataSource,
        mailer: createMailer({ config, logger, jobs }).mailer,
        jobs,
        templates: mailTemplates(config),
        logger,
        issueLeaseSeconds: 10,
      });
    const raced = await license(holders.bob, 'race', 5);
    const results = await Promise.all([worker(), worker(), worker(), worker()].map((service) => service.queueLicenseAlerts(renewing)));
    // The servers' own schedulers may have taken it first: then none of these did.
    expect(results.reduce((sum, result) => sum + result.queued, 0)).toBeLessThanOrEqual(1);
    await until(() => alertsTo('bob@example.com').some((mail) => mail.parsed.subject?.startsWith('Your race license')), 15_000, 'the raced notice');
    await pause(2_000);
    expect(alertsTo('bob@example.com').filter((mail) => mail.parsed.subject?.startsWith('Your race license'))).toHaveLength(1);
    expect(await alerts(raced)).toHaveLength(1);
  });
});
