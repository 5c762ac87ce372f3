import fs from 'node:fs';
import { postGraphQL } from '../support/graphql';
import { ADMIN_SECRET, startTestServer, type TestServer } from '../support/server';
import { spawnServerOnNewDatabase, type SpawnedServer } from '../support/spawn';
import { rawSocket } from '../support/ws';

const LIMITS = {
  GQL_GRAPHQL_MAX_TOKENS: '300',
  GQL_GRAPHQL_MAX_DOCUMENT_BYTES: '4096',
  GQL_GRAPHQL_MAX_ALIASES: '5',
  GQL_GRAPHQL_MAX_ROOT_FIELDS: '4',
  GQL_GRAPHQL_MAX_COMPLEXITY: '100000',
};
const STRICT = { accept: 'application/graphql-response+json' };
let server: TestServer;

beforeAll(async () => {
  server = await startTestServer(LIMITS);
});
afterAll(async () => {
  await server.close();
});

const aliases = (n: number) => Array.from({ length: n }, (_, i) => `a${i}: session { role }`).join(' ');
const roots = (n: number) => Array(n).fill('session { role }').join(' ');

/** The first error a graphql-ws subscribe of `query` is answered with. */
async function overWebSocket(query: string): Promise<{ message: string; extensions?: { code?: string } }> {
  const { received } = await rawSocket(
    `${server.url.replace('http', 'ws')}/v1/graphql/subscriptions`,
    [
      { type: 'connection_init', payload: { headers: { 'x-gql-admin-secret': ADMIN_SECRET } } },
      { id: '1', type: 'subscribe', payload: { query } },
    ],
    { closeAfterMs: 500 },
  );
  const answer = received[1] as { type: string; payload: { message: string; extensions?: { code?: string } }[] };
  expect(answer.type).toBe('error');
  return answer.payload[0];
}

describe('document limits', () => {
  it.each([
    ['more tokens than GQL_GRAPHQL_MAX_TOKENS', `{ ${Array(400).fill('a').join(' ')} }`, 'GRAPHQL_PARSE_FAILED', /Document contains more tha[nt] 300 tokens/],
    [
      'more bytes than GQL_GRAPHQL_MAX_DOCUMENT_BYTES',
      `{ session { role } } # ${'x'.repeat(5000)}`,
      'DOCUMENT_TOO_LARGE',
      /is 50\d\d bytes; the limit is 4096/,
    ],
    ['more aliases than GQL_GRAPHQL_MAX_ALIASES', `{ ${aliases(6)} }`, 'GRAPHQL_VALIDATION_FAILED', /Aliases limit of 5 exceeded, found 6/],
    ['more root fields than GQL_GRAPHQL_MAX_ROOT_FIELDS', `{ ${roots(5)} }`, 'GRAPHQL_VALIDATION_FAILED', /selects 5 root fields; the limit is 4/],
    [
      'root fields hidden in fragments',
      `{ ...F ... on Query { ...F session { role } } } fragment F on Query { session { role } __typename a: __typename b: __typename }`,
      'GRAPHQL_VALIDATION_FAILED',
      /selects 5 root fields/,
    ],
  ])('refuse %s over HTTP with a 400 and its code', async (_case, query, code, message) => {
    const response = await postGraphQL(server.graphqlUrl, { query }, STRICT);
    expect(response.status).toBe(400);
    expect(response.body.errors![0].extensions!.code).toBe(code);
    expect(response.body.errors![0].message).toMatch(message);
  });

  it('let documents within every limit through', async () => {
    const response = await postGraphQL(server.graphqlUrl, { query: `{ ${aliases(4)} }` });
    expect(response.status).toBe(200);
    expect(Object.keys(response.body.data as object)).toHaveLength(4);
  });

  it.each([
    ['tokens', `subscription { ${Array(400).fill('a').join(' ')} }`, 'GRAPHQL_PARSE_FAILED'],
    ['bytes', `subscription { userRegistered { id } } # ${'x'.repeat(5000)}`, 'DOCUMENT_TOO_LARGE'],
    ['aliases', `subscription { ${Array.from({ length: 6 }, (_, i) => `a${i}: userRegistered { id }`).join(' ')} }`, 'GRAPHQL_VALIDATION_FAILED'],
  ])('apply to subscriptions over WebSocket too (%s)', async (_case, query, code) => {
    expect((await overWebSocket(query)).extensions?.code).toBe(code);
  });
});

/** Resident memory of a process, from /proc. */
function residentBytes(pid: number): number {
  const match = /VmRSS:\s+(\d+) kB/.exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'));
  return Number(match![1]) * 1024;
}

describe('memory under a stream of huge documents', () => {
  let spawned: SpawnedServer;
  let stop: () => Promise<void>;
  beforeAll(async () => {
    ({ server: spawned, stop } = await spawnServerOnNewDatabase());
  });
  afterAll(() => stop());

  it('stays under twice its warmed-up size, and the server keeps answering', async () => {
    const pid = spawned.child.pid!;
    const url = `${spawned.url}/v1/graphql`;
    // Hostile documents: about 500 KB, 10,000 fields or aliases, repeated fields.
    const huge = [
      `{ ${Array.from({ length: 10_000 }, (_, i) => `a${i}: session { role }`).join(' ')} }`,
      `{ session { ${Array(10_000).fill('role').join(' ')} } }`,
      `{ ${Array(10_000).fill('__typename').join(' ')} }`,
      `query { ${'session { role } '.repeat(8000)} }`,
      // Just within the default byte and token limits, so that parsing and validation run in full.
      `{ session { ${Array(1990).fill('role').join(' ')} } }`,
      `{ ${Array.from({ length: 660 }, (_, i) => `a${i}: __typename`).join(' ')} }`,
    ];
    const send = (query: string) => postGraphQL(url, { query }, STRICT);
    // Warm-up is ordinary traffic: the bound is against the server as it runs normally.
    for (let round = 0; round < 200; round++) await postGraphQL(url, { query: `{ session { role } r${round}: __typename }` });
    const warm = residentBytes(pid);
    let peak = warm;
    for (let round = 0; round < 25; round++) {
      await Promise.all(
        huge.map(async (query) => {
          const response = await send(query);
          expect(response.status).toBe(400);
        }),
      );
      peak = Math.max(peak, residentBytes(pid));
    }
    expect(peak).toBeLessThan(2 * warm);
    const fine = await postGraphQL(url, { query: '{ session { role } }' });
    expect(fine.body).toEqual({ data: { session: { role: 'anonymous' } } });
  });
});

describe('GQL_GRAPHQL_DOCUMENT_CACHE_BYTES=0', () => {
  it('starts without a document cache and answers every query (it crashed start-up before)', async () => {
    const uncached = await startTestServer({ GQL_GRAPHQL_DOCUMENT_CACHE_BYTES: '0' });
    try {
      for (let i = 0; i < 2; i++) {
        const response = await postGraphQL(uncached.graphqlUrl, { query: '{ session { role } }' });
        expect(response.body).toEqual({ data: { session: { role: 'anonymous' } } });
      }
    } finally {
      await uncached.close();
    }
  });
});
