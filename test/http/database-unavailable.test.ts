import { randomUUID } from 'node:crypto';
import { graphql } from '../support/graphql';
import { ADMIN, projectWithKey, sendEvent, specEvent } from '../errortracking/support';
import { startTestServer, type TestServer } from '../support/server';
import { CreateErrorProjectDocument } from '../generated/graphql';

/**
 * While the database cannot be reached, a request is refused as "try again later" (503 with
 * Retry-After in the route's error format; SERVICE_UNAVAILABLE in a GraphQL error), not as the
 * server's fault (500), and nothing of the cause reaches the client.
 */
describe('a request while the database cannot be reached', () => {
  let server: TestServer;
  let dsnKey: string;

  beforeAll(async () => {
    server = await startTestServer();
    ({ dsnKey } = await projectWithKey(server.graphqlUrl, 'outage'));
    // Before the outage the routes below answer normally.
    expect((await sendEvent(server.url, dsnKey, specEvent())).status).toBe(200);
    await server.database.drop();
  });

  afterAll(async () => {
    await server.close();
  });

  function expectNoCause(text: string): void {
    expect(text).not.toMatch(/does not exist|terminat|ECONN|at .*\.js|stack/i);
  }

  it('answers 503 with Retry-After in the auth format on /auth', async () => {
    const response = await fetch(`${server.url}/auth/signin/email-password`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ email: 'ada@example.com', password: 'correct horse battery' }),
    });
    const text = await response.text();
    expect(response.status).toBe(503);
    expect(response.headers.get('retry-after')).toBe('5');
    expect(JSON.parse(text)).toEqual({ status: 503, error: 'service-unavailable', message: expect.stringMatching(/temporarily unavailable/) });
    expectNoCause(text);
  });

  it('answers 503 to each of several refreshes written in one batch', async () => {
    const answers = await Promise.all(
      Array.from({ length: 5 }, () =>
        fetch(`${server.url}/auth/token`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ refreshToken: randomUUID() }),
        }),
      ),
    );
    for (const response of answers) {
      const text = await response.text();
      expect(response.status).toBe(503);
      expect(JSON.parse(text)).toMatchObject({ status: 503, error: 'service-unavailable' });
      expectNoCause(text);
    }
  });

  it('answers 503 with Retry-After to error ingestion', async () => {
    const response = await sendEvent(server.url, dsnKey, specEvent({ value: 'during the outage' }));
    const text = await response.text();
    expect(response.status).toBe(503);
    expect(response.headers.get('retry-after')).toBe('5');
    expect(JSON.parse(text)).toMatchObject({ success: false, error_code: 'SERVICE_UNAVAILABLE' });
    expectNoCause(text);
  });

  it('answers 503 in the envelope format on a newsletter route', async () => {
    const response = await fetch(`${server.url}/newsletter/subscribe`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ email: 'grace@example.com' }),
    });
    const text = await response.text();
    expect(response.status).toBe(503);
    expect(response.headers.get('retry-after')).toBe('5');
    expectNoCause(text);
  });

  it('tells a GraphQL client SERVICE_UNAVAILABLE in the field error, not INTERNAL_SERVER_ERROR', async () => {
    const result = await graphql(server.graphqlUrl, CreateErrorProjectDocument, { input: { name: 'later', slug: 'later', service: 'later' } }, ADMIN);
    expect(result.body.errors).toEqual([
      expect.objectContaining({ message: expect.stringMatching(/temporarily unavailable/), extensions: { code: 'SERVICE_UNAVAILABLE' } }),
    ]);
    expectNoCause(JSON.stringify(result.body));
  });
});
