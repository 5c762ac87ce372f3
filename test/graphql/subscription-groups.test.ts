import http from 'node:http';
import { GraphQLBoolean, GraphQLInt, GraphQLNonNull, GraphQLObjectType, GraphQLSchema, parse } from 'graphql';
import pino from 'pino';
import { Arg, Authorized, buildSchema, Ctx, Field, ObjectType, Query, Resolver, Root, Subscription } from 'type-graphql';
import type { DataSource } from 'typeorm';
import { createDataSource, runMigrations } from '../../src/db/data-source';
import { authChecker } from '../../src/graphql/auth-checker';
import type { GraphQLContext } from '../../src/graphql/context';
import { PostgresPubSub } from '../../src/platform/pubsub';
import { markSharedEventFields, SHARED_EVENTS_EXTENSION } from '../../src/graphql/subscription-groups';
import { attachSubscriptions } from '../../src/graphql/subscriptions';
import { createTestDatabase, type TestDatabase } from '../support/database';
import { ADMIN_SECRET } from '../support/server';
import { rawSocket, startSubscriptionServer, subscribe, subscriptionClient, type Subscription as ClientSubscription } from '../support/ws';

/** What is published on a channel: a text for one user, or for everyone ('*'). */
interface Published {
  text: string;
  audience: string;
}

@ObjectType()
class Notice {
  @Field()
  text!: string;

  @Field({ description: 'The user the result was made for: it depends on the session' })
  viewer!: string;
}

/** Executions of the subscription field's resolver, one per event per group. */
let resolverCalls = 0;

@Resolver()
class NoticeResolver {
  @Query(() => String, { description: 'A schema needs a query' })
  answer(): string {
    return '42';
  }

  @Authorized()
  @Subscription(() => Notice, {
    topics: 'NOTICE',
    topicId: ({ args }: { args: { channel: string } }) => args.channel,
    filter: ({ payload, context }: { payload: Published; context: GraphQLContext }) => payload.audience === '*' || payload.audience === context.session.userId,
  })
  notices(@Arg('channel') _channel: string, @Root() published: Published, @Ctx() context: GraphQLContext): Notice {
    resolverCalls++;
    return { text: published.text, viewer: context.session.userId ?? '(none)' };
  }
}

type NoticeData = { notices: Notice };
const NOTICES = parse('subscription ($channel: String!) { notices(channel: $channel) { text viewer } }');

let database: TestDatabase;
let dataSource: DataSource;
let pubSub: PostgresPubSub;
const servers: { server: http.Server; subscriptions: ReturnType<typeof attachSubscriptions>; url: string }[] = [];

/** A graphql-ws server on the shared schema and PubSub, with multiplexing on or off. */
async function startServer(multiplexing: boolean) {
  const schema = await buildSchema({ resolvers: [NoticeResolver], validate: false, authChecker, pubSub });
  markSharedEventFields(schema);
  const started = await startSubscriptionServer(schema, {
    multiplexing,
    limits: { maxDepth: 5, maxComplexity: 100, maxTokens: 1000, maxDocumentBytes: 10_000, maxAliases: 10, maxRootFields: 5, maxVariablesDepth: 64 },
  });
  servers.push(started);
  return started;
}

beforeAll(async () => {
  database = await createTestDatabase();
  dataSource = createDataSource(database.url, 4);
  await dataSource.initialize();
  await runMigrations(dataSource);
  pubSub = new PostgresPubSub({
    url: database.url,
    query: (sql, parameters) => dataSource.query(sql, parameters),
    logger: pino({ level: 'silent' }),
    shutdown: new AbortController().signal,
  });
  await pubSub.start();
});
afterAll(async () => {
  for (const { server, subscriptions } of servers) {
    await subscriptions.close();
    await new Promise((resolve) => server.close(resolve));
  }
  await pubSub.close();
  await dataSource.destroy();
  await database.drop();
});

/** Subscribers on connections of their own, acting as `userId` (role user, through the admin secret's asserted session). */
async function subscribers(url: string, userId: string, channel: string, count: number) {
  const opened = Array.from({ length: count }, () => {
    const client = subscriptionClient(url, { headers: { 'x-gql-admin-secret': ADMIN_SECRET, 'x-gql-role': 'user', 'x-gql-user-id': userId } });
    return { client, subscription: subscribe(client, NOTICES, { channel }) as ClientSubscription<NoticeData> };
  });
  await Promise.all(opened.map(({ subscription }) => subscription.ready));
  return {
    subscriptions: opened.map(({ subscription }) => subscription),
    async close() {
      for (const { client, subscription } of opened) {
        subscription.dispose();
        await client.dispose();
      }
    },
  };
}

async function publishAndWait(channel: string, published: Published): Promise<void> {
  pubSub.publish('NOTICE', channel, published);
  // Published through PostgreSQL and back: wait until the resolver calls settle.
  let calls = -1;
  while (calls !== resolverCalls) {
    calls = resolverCalls;
    await new Promise((resolve) => setTimeout(resolve, 300));
  }
}

describe('subscription multiplexing', () => {
  it('executes an event once for subscribers sharing document, variables and session, each getting it', async () => {
    const { url, subscriptions } = await startServer(true);
    const alice = await subscribers(url, 'alice', 'news', 3);
    try {
      expect(subscriptions.groups()).toEqual({ groups: 1, members: 3 });
      resolverCalls = 0;
      await publishAndWait('news', { text: 'hello all', audience: '*' });
      expect(resolverCalls).toBe(1);
      for (const subscription of alice.subscriptions) {
        expect(await subscription.next()).toEqual({ data: { notices: { text: 'hello all', viewer: 'alice' } } });
      }
    } finally {
      await alice.close();
    }
  });

  it('gives subscribers with other session values or other variables their own execution and their own results', async () => {
    const { url, subscriptions } = await startServer(true);
    const alice = await subscribers(url, 'alice', 'news', 2);
    const bob = await subscribers(url, 'bob', 'news', 2);
    const aliceSports = await subscribers(url, 'alice', 'sports', 1);
    try {
      expect(subscriptions.groups()).toEqual({ groups: 3, members: 5 });
      resolverCalls = 0;
      await publishAndWait('news', { text: 'for everyone', audience: '*' });
      // Once per group on the channel: alice's and bob's (sports hears nothing).
      expect(resolverCalls).toBe(2);
      await publishAndWait('news', { text: 'for bob only', audience: 'bob' });
      expect(resolverCalls).toBe(3);
      await publishAndWait('sports', { text: 'goal', audience: '*' });
      expect(resolverCalls).toBe(4);

      for (const subscription of alice.subscriptions) {
        expect(await subscription.next()).toEqual({ data: { notices: { text: 'for everyone', viewer: 'alice' } } });
        await expect(subscription.next(300)).rejects.toThrow('no subscription result');
      }
      for (const subscription of bob.subscriptions) {
        expect(await subscription.next()).toEqual({ data: { notices: { text: 'for everyone', viewer: 'bob' } } });
        expect(await subscription.next()).toEqual({ data: { notices: { text: 'for bob only', viewer: 'bob' } } });
      }
      expect(await aliceSports.subscriptions[0].next()).toEqual({ data: { notices: { text: 'goal', viewer: 'alice' } } });
    } finally {
      await Promise.all([alice.close(), bob.close(), aliceSports.close()]);
    }
  });

  it('keeps a group for the members that stay, and closes it when the last one leaves', async () => {
    const { url, subscriptions } = await startServer(true);
    const leaving = await subscribers(url, 'carol', 'news', 2);
    const staying = await subscribers(url, 'carol', 'news', 1);
    await leaving.close();
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect(subscriptions.groups()).toEqual({ groups: 1, members: 1 });
    resolverCalls = 0;
    await publishAndWait('news', { text: 'still here', audience: 'carol' });
    expect(resolverCalls).toBe(1);
    expect(await staying.subscriptions[0].next()).toEqual({ data: { notices: { text: 'still here', viewer: 'carol' } } });
    await staying.close();
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect(subscriptions.groups()).toEqual({ groups: 0, members: 0 });
  });

  it('refuses an anonymous subscriber with FORBIDDEN as without multiplexing, and opens no group', async () => {
    const { url, subscriptions } = await startServer(true);
    const client = subscriptionClient(url, {});
    const refused = subscribe(client, NOTICES, { channel: 'news' }) as ClientSubscription<NoticeData>;
    try {
      const answer = await refused.next();
      expect(answer.errors?.[0].extensions?.code).toBe('FORBIDDEN');
      expect(subscriptions.groups()).toEqual({ groups: 0, members: 0 });
    } finally {
      refused.dispose();
      await client.dispose();
    }
  });

  it('executes once per subscriber with GQL_GRAPHQL_SUBSCRIPTION_MULTIPLEXING off', async () => {
    const { url, subscriptions } = await startServer(false);
    const dave = await subscribers(url, 'dave', 'news', 3);
    try {
      resolverCalls = 0;
      await publishAndWait('news', { text: 'one each', audience: '*' });
      expect(resolverCalls).toBe(3);
      expect(subscriptions.groups()).toEqual({ groups: 0, members: 0 });
      for (const subscription of dave.subscriptions) {
        expect(await subscription.next()).toEqual({ data: { notices: { text: 'one each', viewer: 'dave' } } });
      }
    } finally {
      await dave.close();
    }
  });
});

/** Opened by a test once its subscribers joined: the countdown's events start then. */
let openGate: () => void = () => undefined;

/** A shared-events field whose source counts down from `from`, then ends (or fails, with `fail`). */
const countdownSchema = new GraphQLSchema({
  query: new GraphQLObjectType({ name: 'Query', fields: { answer: { type: GraphQLInt, resolve: () => 42 } } }),
  subscription: new GraphQLObjectType({
    name: 'Subscription',
    fields: {
      countdown: {
        type: GraphQLInt,
        args: { from: { type: new GraphQLNonNull(GraphQLInt) }, fail: { type: GraphQLBoolean } },
        extensions: { [SHARED_EVENTS_EXTENSION]: true },
        subscribe: async function* (_root: unknown, { from, fail }: { from: number; fail?: boolean }) {
          await new Promise<void>((resolve) => (openGate = resolve));
          for (let count = from; count > 0; count--) yield count;
          if (fail) throw new Error('the source failed');
        },
        resolve: (count: unknown) => count,
      },
    },
  }),
});

describe('a group whose source ends', () => {
  /** Two subscribers of one group on raw sockets: the types of the messages each received, in order. */
  async function countdown(fail: boolean) {
    const started = await startSubscriptionServer(countdownSchema, {
      limits: { maxDepth: 5, maxComplexity: 100, maxTokens: 1000, maxDocumentBytes: 10_000, maxAliases: 10, maxRootFields: 5, maxVariablesDepth: 64 },
    });
    servers.push(started);
    const { url, subscriptions } = started;
    const query = `subscription { countdown(from: 3, fail: ${fail}) }`;
    const sockets = ['first', 'second'].map((id) =>
      rawSocket(
        url,
        [
          { type: 'connection_init', payload: { headers: { 'x-gql-admin-secret': ADMIN_SECRET } } },
          { id, type: 'subscribe', payload: { query } },
        ],
        {
          closeAfterMs: 2000,
        },
      ),
    );
    while (subscriptions.groups().members < 2) await new Promise((resolve) => setTimeout(resolve, 20));
    expect(subscriptions.groups()).toEqual({ groups: 1, members: 2 });
    openGate();
    return (await Promise.all(sockets)).map(({ received }) =>
      (received as { id?: string; type: string; payload?: { data?: unknown } }[]).map((message) => [message.type, message.id, message.payload?.data]),
    );
  }

  it('sends each member every event, then complete after the last (never before it)', async () => {
    const [first, second] = await countdown(false);
    for (const [received, id] of [
      [first, 'first'],
      [second, 'second'],
    ] as const) {
      expect(received).toEqual([
        ['connection_ack', undefined, undefined],
        ['next', id, { countdown: 3 }],
        ['next', id, { countdown: 2 }],
        ['next', id, { countdown: 1 }],
        ['complete', id, undefined],
      ]);
    }
  });

  it('sends each member the events, then an error when the source fails', async () => {
    const results = await countdown(true);
    for (const received of results) {
      expect(received.map(([type]) => type)).toEqual(['connection_ack', 'next', 'next', 'next', 'error']);
    }
  });
});
