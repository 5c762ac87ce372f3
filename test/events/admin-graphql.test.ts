import {
  CronTriggersDocument,
  EventAttemptsDocument,
  EventTriggersDocument,
  GraphqlViewDeliveriesDocument,
  InvokeEventTriggerDocument,
  RedeliverEventDocument,
  ScheduledEventsDocument,
  TriggerEventsDocument,
} from '../generated/graphql';
import { graphql } from '../support/graphql';
import { ADMIN_SECRET, startTestServer, type TestServer } from '../support/server';
import { bearer, signToken } from '../support/tokens';
import { startWebhookReceiver, type WebhookReceiver } from '../support/webhook-receiver';
import { subscribe, subscriptionClient } from '../support/ws';
import { metadataRequest } from '../support/metadata';
import { eventually } from './support';

let server: TestServer;
let receiver: WebhookReceiver;
const ADMIN = { 'x-gql-admin-secret': ADMIN_SECRET };

beforeAll(async () => {
  receiver = await startWebhookReceiver();
  server = await startTestServer({ EVENTS_POLL_INTERVAL_MS: '200', EVENTS_RETRY_SECOND_MS: '20' });
  await server.database.query('CREATE TABLE notes (id serial PRIMARY KEY, text text NOT NULL)');
  const created = await metadataRequest(server.url, {
    type: 'pg_create_event_trigger',
    args: {
      name: 'graphql_view',
      table: 'notes',
      webhook: `${receiver.url}/graphql_view`,
      insert: { columns: '*' },
      enable_manual: true,
      retry_conf: { num_retries: 1, interval_sec: 1, timeout_sec: 5 },
    },
  });
  expect(created.status).toBe(200);
  await metadataRequest(server.url, {
    type: 'create_cron_trigger',
    args: { name: 'weekly', webhook: `${receiver.url}/weekly`, schedule: '0 9 * * 1', payload: { a: 1 } },
  });
});
afterAll(async () => {
  await server.close();
  await receiver.close();
});

describe('the admin GraphQL API of events', () => {
  it('shows triggers, events and their attempts, and streams each delivery outcome to subscribers', async () => {
    receiver.answer('/graphql_view', { status: 500 });
    const client = subscriptionClient(server.wsUrl, { headers: ADMIN });
    const subscription = subscribe(client, GraphqlViewDeliveriesDocument);
    try {
      await subscription.ready;
      await server.database.query("INSERT INTO notes (text) VALUES ('first')");
      const retrying = await subscription.next();
      expect(retrying.data!.eventDeliveries).toEqual([
        expect.objectContaining({ kind: 'event_trigger', trigger: 'graphql_view', state: 'retrying', status: 500, tries: 1 }),
      ]);
      const dead = await subscription.next();
      expect(dead.data!.eventDeliveries).toEqual([expect.objectContaining({ state: 'dead', status: 500, tries: 2 })]);
      const eventId = dead.data!.eventDeliveries[0].eventId;

      const triggers = await graphql(server.graphqlUrl, EventTriggersDocument, {}, ADMIN);
      expect(triggers.body.data!.eventTriggers).toEqual([
        {
          name: 'graphql_view',
          table: 'public.notes',
          operations: ['INSERT', 'MANUAL'],
          webhook: `${receiver.url}/graphql_view`,
          webhookFromEnv: null,
          numRetries: 1,
          intervalSec: 1,
          timeoutSec: 5,
          inOrder: false,
          pending: 0,
          dead: 1,
        },
      ]);
      const events = await graphql(server.graphqlUrl, TriggerEventsDocument, { state: 'DEAD' }, ADMIN);
      expect(events.body.data!.triggerEvents).toEqual([
        expect.objectContaining({
          id: eventId,
          trigger: 'graphql_view',
          op: 'INSERT',
          state: 'DEAD',
          tries: 2,
          data: { old: null, new: { id: 1, text: 'first' } },
        }),
      ]);
      const attempts = await graphql(server.graphqlUrl, EventAttemptsDocument, { eventId }, ADMIN);
      expect(attempts.body.data!.eventAttempts.map((attempt) => attempt.status)).toEqual([500, 500]);

      receiver.answer('/graphql_view', { status: 200 });
      expect((await graphql(server.graphqlUrl, RedeliverEventDocument, { id: eventId }, ADMIN)).body.data).toEqual({ redeliverEvent: true });
      expect((await subscription.next()).data!.eventDeliveries).toEqual([expect.objectContaining({ eventId, state: 'delivered', status: 200, tries: 1 })]);
      const invoked = await graphql(server.graphqlUrl, InvokeEventTriggerDocument, { name: 'graphql_view', payload: { by: 'hand' } }, ADMIN);
      const manualId = invoked.body.data!.invokeEventTrigger;
      expect((await subscription.next()).data!.eventDeliveries).toEqual([expect.objectContaining({ eventId: manualId, state: 'delivered' })]);
    } finally {
      subscription.dispose();
      await client.dispose();
    }
  });

  it('shows cron triggers with their next time, and their scheduled events', async () => {
    const crons = await graphql(server.graphqlUrl, CronTriggersDocument, {}, ADMIN);
    expect(crons.body.data!.cronTriggers).toEqual([
      { name: 'weekly', schedule: '0 9 * * 1', webhook: `${receiver.url}/weekly`, comment: null, payload: { a: 1 }, nextScheduledTime: expect.any(String) },
    ]);
    expect(new Date(crons.body.data!.cronTriggers[0].nextScheduledTime!).getUTCDay()).toBe(1);
    const scheduled = await eventually(async () => {
      const result = await graphql(server.graphqlUrl, ScheduledEventsDocument, { cronTrigger: 'weekly', first: 3 }, ADMIN);
      return result.body.data!.scheduledEvents.length === 3 ? result.body.data!.scheduledEvents : undefined;
    });
    expect(scheduled.every((event) => event.cronTrigger === 'weekly' && event.status === 'scheduled')).toBe(true);
  });

  it('refuses non-admins and bad arguments with a code', async () => {
    const token = signToken({ roles: ['user'] });
    const forbidden = await graphql(server.graphqlUrl, EventTriggersDocument, {}, bearer(token));
    expect(forbidden.body.errors![0].extensions!.code).toBe('FORBIDDEN');
    const badPage = await graphql(server.graphqlUrl, TriggerEventsDocument, { first: 0 }, ADMIN);
    expect(badPage.body.errors![0]).toMatchObject({ message: 'first must be from 1 to 500', extensions: { code: 'BAD_USER_INPUT' } });
    const badId = await graphql(server.graphqlUrl, EventAttemptsDocument, { eventId: 'nope' }, ADMIN);
    expect(badId.body.errors![0].extensions!.code).toBe('BAD_USER_INPUT');
    const missing = await graphql(server.graphqlUrl, RedeliverEventDocument, { id: '00000000-0000-4000-8000-000000000000' }, ADMIN);
    expect(missing.body.errors![0].extensions!.code).toBe('NOT_FOUND');
    const notManual = await graphql(server.graphqlUrl, InvokeEventTriggerDocument, { name: 'nope', payload: {} }, ADMIN);
    expect(notManual.body.errors![0].extensions!.code).toBe('NOT_FOUND');
  });
});
