import { Writable } from 'node:stream';
import {
  CreateErrorProjectDocument,
  CreateErrorTokenDocument,
  CreateIncidentDocument,
  CreateSloDocument,
  SendNewsletterIssueDocument,
} from '../generated/graphql';
import { specEvent, sendEvent } from '../errortracking/support';
import { createTestDatabase } from '../support/database';
import { freePort } from '../support/global-setup';
import { graphql } from '../support/graphql';
import { createRunsTable, eventually, recorderModule, RECORDER_QUEUE } from '../support/job-recorder';
import { metadataRequest } from '../support/metadata';
import { ISSUE_VARIABLES, linkIn, mailTo, newsletterEnvironment } from '../support/newsletter';
import { ADMIN_SECRET } from '../support/server';
import { startSmtpReceiver, type SmtpReceiver } from '../support/smtp';
import { startWebhookReceiver, type WebhookReceiver } from '../support/webhook-receiver';
import { AdminClient, startAdminServer, type AdminTestServer } from './support';

const ADMIN = { 'x-gql-admin-secret': ADMIN_SECRET };
/** The event trigger the tests deliver through; its webhook is the receiver's NOTES_PATH. */
export const TRIGGER = 'note_added';
export const NOTES_PATH = '/notes';

/** The dashboard's server with everything the areas' views show, and the receivers of its webhooks and mail. */
export interface AreasWorld {
  server: AdminTestServer;
  admin: AdminClient;
  webhooks: WebhookReceiver;
  smtp: SmtpReceiver;
  /** From now on the receiver answers this event's deliveries with a 200 (it refuses every other with a 500). */
  accept(eventId: string): void;
  close(): Promise<void>;
}

export async function startAreasWorld(): Promise<AreasWorld> {
  const smtp = await startSmtpReceiver({ port: await freePort() });
  const webhooks = await startWebhookReceiver();
  const database = await createTestDatabase();
  await createRunsTable(database);
  const server = await startAdminServer(
    newsletterEnvironment(smtp.port, {
      NEWSLETTER_DAY_SECONDS: '86400',
      EVENTS_POLL_INTERVAL_MS: '200',
      EVENTS_RETRY_SECOND_MS: '20',
      JOBS_POLL_INTERVAL_SECONDS: '1',
      LOG_LEVEL: 'warn',
    }),
    // Failed jobs stay failed: no retry after a failed attempt.
    { database, modules: [recorderModule({ retryLimit: 0 })], logTo: new Writable({ write: (_chunk, _encoding, done) => done() }) },
  );
  const admin = new AdminClient(server.adminUrl);
  expect((await admin.login()).status).toBe(200);
  const accepted = new Set<string>();
  webhooks.answer(NOTES_PATH, (request) => (accepted.has(request.body?.id) ? {} : { status: 500 }));
  return {
    server,
    admin,
    webhooks,
    smtp,
    accept: (eventId) => accepted.add(eventId),
    close: async () => {
      await server.close();
      await server.database.drop();
      await webhooks.close();
      await smtp.close();
    },
  };
}

/** A project with two errors (one seen twice), an incident and an SLO, made through the GraphQL API and the ingestion route. */
export async function seedErrors(world: AreasWorld, slug: string): Promise<{ projectId: number; incidentId: string; sloId: string }> {
  const { server, admin } = world;
  const project = await graphql(server.graphqlUrl, CreateErrorProjectDocument, { input: { name: `Shop ${slug}`, slug, service: `${slug}-api` } }, ADMIN);
  const projectId = project.body.data!.createErrorProject.id;
  const token = await graphql(server.graphqlUrl, CreateErrorTokenDocument, { input: { project: String(projectId), kind: 'DSN', name: 'web' } }, ADMIN);
  const key = token.body.data!.createErrorToken.token;
  for (const event of [
    specEvent({ type: 'TypeError', value: 'card is undefined' }),
    specEvent({ type: 'TypeError', value: 'card is undefined' }),
    specEvent({ type: 'RangeError', value: 'quantity out of range', fn: 'addToCart', file: '/app/src/cart.js', level: 'warning', release: '1.1.0' }),
  ]) {
    expect((await sendEvent(server.url, key, event)).status).toBe(200);
  }
  await eventually(async () => {
    const errors = await admin.request<{ items: { occurrenceCount: number }[] }>('GET', `/api/errors/projects/${projectId}/errors`);
    return errors.body.items?.reduce((sum, error) => sum + error.occurrenceCount, 0) === 3;
  });
  const incident = await graphql(
    server.graphqlUrl,
    CreateIncidentDocument,
    { input: { project: slug, title: 'Checkout failing', severity: 'MAJOR', description: 'Card payments fail' } },
    ADMIN,
  );
  expect(incident.body.errors).toBeUndefined();
  const slo = await graphql(
    server.graphqlUrl,
    CreateSloDocument,
    { input: { project: String(projectId), name: 'Checkout availability', service: `${slug}-api`, targetPercentage: 99.5 } },
    ADMIN,
  );
  expect(slo.body.errors).toBeUndefined();
  return { projectId, incidentId: incident.body.data!.createIncident.id, sloId: slo.body.data!.createSlo.id };
}

/**
 * The `notes` table and its trigger (no retry): the receiver refuses each new event with a 500,
 * so it is dead after one attempt, and accepts it once the test calls `world.accept(eventId)`.
 */
export async function seedDeadEvent(world: AreasWorld, text: string): Promise<{ eventId: string }> {
  const { server, webhooks, admin } = world;
  await server.database.query('CREATE TABLE IF NOT EXISTS notes (id serial PRIMARY KEY, text text NOT NULL)');
  if ((await server.database.query<{ n: number }>('SELECT count(*)::int AS n FROM event_triggers WHERE name = $1', [TRIGGER]))[0].n === 0) {
    const created = await metadataRequest(server.url, {
      type: 'pg_create_event_trigger',
      args: {
        name: TRIGGER,
        table: 'notes',
        webhook: `${webhooks.url}${NOTES_PATH}`,
        insert: { columns: '*' },
        retry_conf: { num_retries: 0, interval_sec: 1, timeout_sec: 5 },
      },
    });
    expect(created.status).toBe(200);
  }
  await server.database.query('INSERT INTO notes (text) VALUES ($1)', [text]);
  const dead = await eventually(async () => {
    const page = await admin.request<{ items: { eventId: string; event: { state: string } }[] }>(
      'GET',
      `/api/events/triggers/${TRIGGER}/invocations?limit=100`,
    );
    return page.body.items?.find((item) => item.event.state === 'DEAD' && deliveredText(world, item.eventId) === text);
  });
  return { eventId: dead.eventId };
}

/** The text of the note whose event the receiver got with this id. */
function deliveredText(world: AreasWorld, eventId: string): string | undefined {
  return world.webhooks.at(NOTES_PATH).find((request) => request.body?.id === eventId)?.body?.event?.data?.new?.text;
}

/** A job that failed (its one attempt threw), and one waiting an hour to start. */
export async function seedJobs(world: AreasWorld): Promise<{ failedJobId: string; waitingJobId: string }> {
  const { server } = world;
  const failedJobId = await server.server.jobs.send(RECORDER_QUEUE, { fail: 'card declined' });
  const waitingJobId = await server.server.jobs.send(RECORDER_QUEUE, {}, { startAfter: new Date(Date.now() + 3_600_000) });
  await eventually(async () => (await server.server.jobs.get(failedJobId))?.state === 'failed');
  return { failedJobId, waitingJobId };
}

/** Two subscribers through the subscribe route, one confirmed through its mailed link, and issue 1 sent to it through the GraphQL API. */
export async function seedNewsletter(world: AreasWorld, names: [string, string]): Promise<{ activeEmail: string; pendingEmail: string; issueNumber: number }> {
  const { server, smtp } = world;
  const [activeEmail, pendingEmail] = names.map((name) => `${name}@example.com`);
  for (const [index, email] of [activeEmail, pendingEmail].entries()) {
    const answer = await fetch(`${server.url}/newsletter/subscribe`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-forwarded-for': `203.0.113.${10 + index}` },
      body: JSON.stringify({ email, name: names[index], source: 'blog' }),
    });
    expect(answer.status).toBe(202);
  }
  const mail = await mailTo(smtp, activeEmail, /confirm/i);
  const confirmed = await fetch(linkIn(mail, '/newsletter/confirm', server.url), { redirect: 'manual', headers: { accept: 'application/json' } });
  expect(confirmed.status).toBeLessThan(400);
  const issues = await world.admin.request<{ items: { issue_number: number }[] }>('GET', '/api/newsletter/issues?limit=1');
  const issueNumber = (issues.body.items[0]?.issue_number ?? 0) + 1;
  const sent = await graphql(server.graphqlUrl, SendNewsletterIssueDocument, { issueNumber, variables: ISSUE_VARIABLES }, ADMIN);
  expect(sent.body.errors).toBeUndefined();
  return { activeEmail, pendingEmail, issueNumber };
}
