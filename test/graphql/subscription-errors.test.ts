import http from 'node:http';
import { GraphQLError } from 'graphql';
import pino from 'pino';
import { buildSchema, Field, Int, ObjectType, Query, Resolver, Root, Subscription } from 'type-graphql';
import { authChecker } from '../../src/graphql/auth-checker';
import { rawSocket, startSubscriptionServer } from '../support/ws';

@ObjectType()
class Tick {
  @Field(() => Int)
  n!: number;

  @Field(() => Tick, { nullable: true })
  self?: Tick | null;
}

async function* once<T>(value: T): AsyncGenerator<T> {
  yield value;
}

@Resolver()
class TickResolver {
  @Query(() => Int, { description: 'A schema needs a query' })
  answer(): number {
    return 42;
  }

  @Subscription(() => Tick, { subscribe: () => once({ n: 1, self: { n: 2, self: null } }) })
  ticks(@Root() tick: Tick): Tick {
    return tick;
  }

  @Subscription(() => String, { subscribe: () => once('x') })
  brokenTicks(): string {
    throw new Error('upstream timed out (internal detail)');
  }

  @Subscription(() => String, { subscribe: () => once('x') })
  refusedTicks(): string {
    throw new GraphQLError('Not for you', { extensions: { code: 'FORBIDDEN' } });
  }
}

const logLines: string[] = [];
let server: http.Server;
let url: string;
let subscriptions: { close(): Promise<void> };

beforeAll(async () => {
  // type-graphql requires a PubSub for a schema with subscriptions; these bring their own streams.
  const pubSub = { publish: () => undefined, subscribe: () => once(undefined) };
  const schema = await buildSchema({ resolvers: [TickResolver], validate: false, authChecker, pubSub });
  ({ server, subscriptions, url } = await startSubscriptionServer(schema, {
    limits: { maxDepth: 3, maxComplexity: 4, maxTokens: 200, maxDocumentBytes: 2000, maxAliases: 3, maxRootFields: 2, maxVariablesDepth: 64 },
    logger: pino({ level: 'error' }, { write: (line: string) => void logLines.push(line) }),
  }));
});
afterAll(async () => {
  await subscriptions.close();
  await new Promise((resolve) => server.close(resolve));
});

/** Subscribes once and returns the first message the server sends for it (after the ack). */
async function firstAnswer(query: string): Promise<{ type: string; payload: unknown }> {
  const { received } = await rawSocket(url, [{ type: 'connection_init' }, { id: '1', type: 'subscribe', payload: { query } }], {
    closeAfterMs: 500,
  });
  expect(received[0]).toEqual({ type: 'connection_ack' });
  return received[1] as { type: string; payload: unknown };
}

describe('operations over graphql-ws', () => {
  it('run when within the limits', async () => {
    expect(await firstAnswer('subscription { ticks { n self { n } } }')).toEqual({
      id: '1',
      type: 'next',
      payload: { data: { ticks: { n: 1, self: { n: 2 } } } },
    });
  });

  it.each([
    ['a syntax error', 'subscription {', 'GRAPHQL_PARSE_FAILED', /Syntax Error/],
    ['an unknown field', 'subscription { nope }', 'GRAPHQL_VALIDATION_FAILED', /Cannot query field "nope"/],
    [
      'a query deeper than the limit',
      'subscription { ticks { self { self { n } } } }',
      'GRAPHQL_VALIDATION_FAILED',
      /^Query depth limit of 3 exceeded, found 4\.$/,
    ],
    [
      'a query costlier than the limit',
      'subscription { ticks { n a: n b: n c: n } }',
      'GRAPHQL_VALIDATION_FAILED',
      /^Query complexity of 5 exceeds the limit of 4$/,
    ],
  ])('are refused with the HTTP code for %s', async (_case, query, code, message) => {
    const answer = await firstAnswer(query);
    expect(answer.type).toBe('error');
    const [error] = answer.payload as { message: string; extensions: { code: string } }[];
    expect(error.extensions.code).toBe(code);
    expect(error.message).toMatch(message);
  });

  it('mask an error a resolver did not mean to show, and log it', async () => {
    const answer = await firstAnswer('subscription { brokenTicks }');
    expect(answer).toEqual({
      id: '1',
      type: 'next',
      payload: { data: null, errors: [{ message: 'Internal server error', path: ['brokenTicks'], extensions: { code: 'INTERNAL_SERVER_ERROR' } }] },
    });
    expect(JSON.stringify(answer)).not.toContain('internal detail');
    const log = logLines.join('');
    expect(log).toContain('unexpected GraphQL error');
    expect(log).toContain('upstream timed out (internal detail)');
  });

  it('keep an error a resolver means to show', async () => {
    const answer = (await firstAnswer('subscription { refusedTicks }')) as { payload: { errors: unknown[] } };
    expect(answer.payload.errors[0]).toMatchObject({ message: 'Not for you', extensions: { code: 'FORBIDDEN' } });
  });
});

describe('protocol violations', () => {
  const init = { type: 'connection_init' };
  it.each([
    ['a server message (next) after the handshake', [init, { id: '1', type: 'next', payload: { data: {} } }]],
    ['a connection_ack from the client', [init, { type: 'connection_ack' }]],
    ['an error message from the client', [init, { id: '1', type: 'error', payload: [] }]],
    ['an unknown type', [init, { type: 'hello' }]],
    ['a subscribe without a payload', [init, { id: '1', type: 'subscribe' }]],
    ['a subscribe whose query is not a string', [init, { id: '1', type: 'subscribe', payload: { query: 42 } }]],
    ['a message that is not an object', [init, ['connection_init']]],
    ['a message without a type', [init, { id: '1' }]],
    ['a server message before the handshake', [{ type: 'next', id: '1', payload: {} }]],
  ])('close with 4400 for %s, and log no error', async (_case, messages) => {
    const before = logLines.length;
    const { code, reason } = await rawSocket(url, messages);
    expect(code).toBe(4400);
    expect(reason).toBe('Invalid message received');
    expect(logLines.slice(before)).toEqual([]);
  });

  it('still close with their own 44xx codes for a second connection_init and a subscribe before the ack', async () => {
    expect((await rawSocket(url, [init, init])).code).toBe(4429);
    expect((await rawSocket(url, [{ id: '1', type: 'subscribe', payload: { query: 'subscription { ticks { n } }' } }])).code).toBe(4401);
  });
});

describe('operation selection', () => {
  it.each([
    ['an operationName the document does not have', 'subscription A { ticks { n } }', 'B'],
    ['no operationName for a document with two operations', 'subscription A { ticks { n } } subscription B { ticks { n } }', null],
  ])('answers OPERATION_RESOLUTION_FAILURE for %s, and keeps the connection', async (_case, query, operationName) => {
    const before = logLines.length;
    const { code, received } = await rawSocket(url, [{ type: 'connection_init' }, { id: '1', type: 'subscribe', payload: { query, operationName } }], {
      closeAfterMs: 300,
    });
    expect(received[1]).toMatchObject({ id: '1', type: 'error', payload: [{ extensions: { code: 'OPERATION_RESOLUTION_FAILURE' } }] });
    expect(code).toBe(1000);
    expect(logLines.slice(before)).toEqual([]);
  });
});
