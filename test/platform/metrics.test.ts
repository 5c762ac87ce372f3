import { RegisterUserDocument, SessionDocument } from '../generated/graphql';
import { graphql, postGraphQL } from '../support/graphql';
import { parsePrometheus, sampleValue } from '../support/prometheus';
import { ADMIN_SECRET, startTestServer, type TestServer } from '../support/server';
import { createTestDatabase, type TestDatabase } from '../support/database';
import { isLoopback } from '../../src/http/metrics-route';
import { Metrics } from '../../src/platform/metrics';

const METRICS_TOKEN = 'metrics-token-0123456789abcdef';
let database: TestDatabase;
const servers: TestServer[] = [];

beforeAll(async () => {
  database = await createTestDatabase();
});
// Every test reads each answer's body to its end: an unread /metrics answer leaves its connection
// holding a response the client never took, which may keep a server from closing within its
// shutdown timeout.
afterAll(async () => {
  // Together: one after the other, the servers' shutdowns add up on a loaded machine.
  await Promise.all(servers.map((server) => server.close()));
  await database.drop();
});

async function serverWith(environment: Record<string, string>): Promise<TestServer> {
  const server = await startTestServer(environment, { database });
  servers.push(server);
  return server;
}

describe('GET /metrics', () => {
  let server: TestServer;
  beforeAll(async () => {
    server = await serverWith({});
  });

  it('serves process, HTTP and GraphQL metrics to a loopback client in the text format', async () => {
    await graphql(server.graphqlUrl, RegisterUserDocument, { input: { email: 'metrics@example.com', password: 'password123', name: 'M' } });
    await graphql(server.graphqlUrl, SessionDocument, {}, { 'x-gql-admin-secret': ADMIN_SECRET });
    await graphql(server.graphqlUrl, SessionDocument, {}, { 'x-gql-admin-secret': 'not the secret' });
    await postGraphQL(server.graphqlUrl, { query: '{ nope }' });
    await (await fetch(`${server.url}/no/such/route/123`)).arrayBuffer();

    const response = await fetch(`${server.url}/metrics`);
    expect(response.status).toBe(200);
    expect(response.headers.get('content-type')).toContain('text/plain');
    const samples = parsePrometheus(await response.text());

    expect(sampleValue(samples, 'process_cpu_user_seconds_total')).toBeGreaterThan(0);
    expect(sampleValue(samples, 'nodejs_heap_size_used_bytes')).toBeGreaterThan(0);
    const operations = (labels: Record<string, string>) => sampleValue(samples, 'plinth_graphql_operations_total', labels);
    expect(operations({ operation_name: 'RegisterUser', operation_type: 'mutation' })).toBe(1);
    expect(operations({ operation_name: 'Session', operation_type: 'query' })).toBe(1);
    // An invalid document has no name to trust; a refused session never became an operation
    // (it shows as a 401 below).
    expect(operations({ operation_name: '(unresolved)' })).toBe(1);
    const errors = (labels: Record<string, string>) => sampleValue(samples, 'plinth_graphql_errors_total', labels);
    expect(errors({ operation_name: '(unresolved)', code: 'GRAPHQL_VALIDATION_FAILED' })).toBe(1);

    const requests = (labels: Record<string, string>) => sampleValue(samples, 'plinth_http_request_duration_seconds_count', labels);
    expect(requests({ method: 'POST', route: '/v1/graphql', status_code: '200' })).toBe(3);
    expect(requests({ method: 'POST', route: '/v1/graphql', status_code: '401' })).toBe(1);
    // Cumulative buckets up to +Inf, which is the count; the sum is the seconds observed.
    const graphql200 = { method: 'POST', route: '/v1/graphql', status_code: '200' };
    const buckets = samples.filter(
      (sample) =>
        sample.name === 'plinth_http_request_duration_seconds_bucket' && Object.entries(graphql200).every(([key, value]) => sample.labels[key] === value),
    );
    expect(buckets.map((sample) => sample.labels.le)).toEqual([
      '0.001',
      '0.0025',
      '0.005',
      '0.01',
      '0.025',
      '0.05',
      '0.1',
      '0.25',
      '0.5',
      '1',
      '2.5',
      '5',
      '10',
      '+Inf',
    ]);
    for (let index = 1; index < buckets.length; index++) expect(buckets[index].value).toBeGreaterThanOrEqual(buckets[index - 1].value);
    expect(buckets.at(-1)!.value).toBe(3);
    const seconds = sampleValue(samples, 'plinth_http_request_duration_seconds_sum', graphql200)!;
    expect(seconds).toBeGreaterThan(0);
    expect(seconds).toBeLessThan(60);
    // Unmatched paths share one label: a scanner cannot grow the metric without bound.
    expect(requests({ route: '(unmatched)', status_code: '404' })).toBe(1);
    expect(samples.some((sample) => sample.labels.route?.includes('/no/such'))).toBe(false);
    // Job counts by queue and state, every state present so that the series stay stable.
    for (const state of ['created', 'retry', 'active', 'completed', 'cancelled', 'failed']) {
      expect(sampleValue(samples, 'plinth_jobs', { queue: 'mail', state })).toBe(0);
    }
  });

  it('ignores X-Forwarded-For when no proxy is trusted', async () => {
    const response = await fetch(`${server.url}/metrics`, { headers: { 'x-forwarded-for': '203.0.113.9' } });
    expect(response.status).toBe(200);
    await response.arrayBuffer();
  });

  it('tells a loopback address from any other', () => {
    for (const address of ['127.0.0.1', '127.8.9.10', '::1', '::ffff:127.0.0.1']) expect(isLoopback(address)).toBe(true);
    for (const address of ['10.0.0.1', '203.0.113.9', '::ffff:10.0.0.1', '::2', '1127.0.0.1', 'fe80::1']) expect(isLoopback(address)).toBe(false);
  });
});

describe('behind a trusted proxy (TRUST_PROXY)', () => {
  it('answers 403 to the client address the proxy forwarded when it is not loopback', async () => {
    const server = await serverWith({ TRUST_PROXY: '127.0.0.1' });
    const outside = await fetch(`${server.url}/metrics`, { headers: { 'x-forwarded-for': '203.0.113.9' } });
    expect(outside.status).toBe(403);
    expect(await outside.json()).toEqual({ error: 'forbidden', message: expect.stringContaining('PLINTH_METRICS=loopback') });
    const inside = await fetch(`${server.url}/metrics`, { headers: { 'x-forwarded-for': '127.0.0.1' } });
    expect(inside.status).toBe(200);
    await inside.arrayBuffer();
  });
});

describe('PLINTH_METRICS=token', () => {
  it('answers 401 without the bearer token or with a wrong one, and the metrics with it', async () => {
    const server = await serverWith({ PLINTH_METRICS: 'token', PLINTH_METRICS_TOKEN: METRICS_TOKEN });
    const missing = await fetch(`${server.url}/metrics`);
    expect(missing.status).toBe(401);
    expect(missing.headers.get('www-authenticate')).toContain('Bearer');
    expect(await missing.json()).toEqual({ error: 'unauthorized', message: expect.stringContaining('PLINTH_METRICS_TOKEN') });
    const wrong = await fetch(`${server.url}/metrics`, { headers: { authorization: `Bearer ${METRICS_TOKEN}x` } });
    expect(wrong.status).toBe(401);
    await wrong.arrayBuffer();
    const right = await fetch(`${server.url}/metrics`, { headers: { authorization: `Bearer ${METRICS_TOKEN}` } });
    expect(right.status).toBe(200);
    expect(parsePrometheus(await right.text()).length).toBeGreaterThan(10);
  });
});

describe('PLINTH_METRICS=off', () => {
  it('has no /metrics route', async () => {
    const server = await serverWith({ PLINTH_METRICS: 'off' });
    const response = await fetch(`${server.url}/metrics`);
    expect(response.status).toBe(404);
    await response.arrayBuffer();
  });
});

describe('operation names as label values', () => {
  it('keeps 500 names of at most 128 characters; a longer one, or one past them, counts as (other)', async () => {
    const metrics = new Metrics();
    // A name is the client's text, as long as a document may be: kept, it would stay for the process's life.
    const long = `Q${'x'.repeat(10_000)}`;
    metrics.observeGraphQL(long, 'query', ['BAD_REQUEST']);
    for (let i = 0; i < 600; i++) metrics.observeGraphQL(`Op${i}`, 'query', []);
    const samples = parsePrometheus(await metrics.registry.metrics());
    const names = new Set(samples.filter((sample) => sample.name === 'plinth_graphql_operations_total').map((sample) => sample.labels.operation_name));
    expect(names.has(long)).toBe(false);
    expect(names.size).toBe(501);
    expect(names.has('(other)')).toBe(true);
    expect(Math.max(...[...names].map((name) => name.length))).toBeLessThanOrEqual(128);
    expect(sampleValue(samples, 'plinth_graphql_errors_total', { operation_name: '(other)', code: 'BAD_REQUEST' })).toBe(1);
  });
});
