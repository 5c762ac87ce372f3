import { createHash } from 'node:crypto';
import { postGraphQL } from '../support/graphql';
import { ADMIN_SECRET, startTestServer, type TestServer } from '../support/server';

const lines: string[] = [];
let server: TestServer;

beforeAll(async () => {
  server = await startTestServer({ LOG_LEVEL: 'debug' }, { logTo: { write: (line: string) => void lines.push(line) } });
});
afterAll(async () => {
  await server.close();
});

const errorLines = (from: number) => lines.slice(from).filter((line) => (JSON.parse(line) as { level: number }).level >= 50);
const GRAPHQL_RESPONSE = 'application/graphql-response+json';

describe('a subscription sent over HTTP', () => {
  it.each([
    ['application/json', 200],
    [GRAPHQL_RESPONSE, 400],
  ])('is a request error pointing at the WebSocket endpoint (Accept: %s gives %i)', async (accept, status) => {
    const before = lines.length;
    const response = await postGraphQL(server.graphqlUrl, { query: 'subscription { userRegistered { id } }' }, { accept, 'x-gql-admin-secret': ADMIN_SECRET });
    expect(response.status).toBe(status);
    expect(response.body.data).toBeUndefined();
    expect(response.body.errors).toEqual([
      {
        message: 'Subscriptions are served over WebSocket (graphql-transport-ws) at /v1/graphql/subscriptions, not over HTTP',
        extensions: { code: 'SUBSCRIPTION_OVER_HTTP' },
      },
    ]);
    expect(errorLines(before)).toEqual([]);
  });

  it('is refused by GET too, without running', async () => {
    const response = await fetch(`${server.graphqlUrl}?query=${encodeURIComponent('subscription { userRegistered { id } }')}`, {
      headers: { 'x-gql-admin-secret': ADMIN_SECRET },
    });
    expect(response.status).toBeGreaterThanOrEqual(400);
    expect(response.status).toBeLessThan(500);
    expect(JSON.stringify(await response.json())).not.toContain('INTERNAL_SERVER_ERROR');
  });
});

describe('persisted queries', () => {
  const query = '{ session { role } }';
  const sha = createHash('sha256').update(query).digest('hex');

  it.each([
    ['an unsupported version', { version: 2, sha256Hash: sha }, 'Unsupported persisted query version'],
    ['a hash that does not match the query', { version: 1, sha256Hash: 'ab'.repeat(32) }, 'provided sha does not match query'],
  ])('answer 400 BAD_REQUEST with the reason for %s, and log no error', async (_case, persistedQuery, message) => {
    const before = lines.length;
    const response = await postGraphQL(server.graphqlUrl, { query, extensions: { persistedQuery } });
    expect(response.status).toBe(400);
    expect(response.body.errors).toEqual([{ message, extensions: { code: 'BAD_REQUEST' } }]);
    expect(errorLines(before)).toEqual([]);
  });

  it('register a query with its right hash and run it by hash alone', async () => {
    const registered = await postGraphQL(server.graphqlUrl, { query, extensions: { persistedQuery: { version: 1, sha256Hash: sha } } });
    expect(registered.body).toEqual({ data: { session: { role: 'anonymous' } } });
    const byHash = await postGraphQL(server.graphqlUrl, { extensions: { persistedQuery: { version: 1, sha256Hash: sha } } });
    expect(byHash.body).toEqual({ data: { session: { role: 'anonymous' } } });
  });
});
