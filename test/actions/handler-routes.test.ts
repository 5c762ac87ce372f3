import { ADMIN_SECRET, startTestServer, type TestServer } from '../support/server';

let server: TestServer;
beforeAll(async () => {
  server = await startTestServer({ RATE_LIMIT_ACTION_HANDLERS_POINTS: '5', RATE_LIMIT_ACTION_HANDLERS_DURATION_SECONDS: '60' });
});
afterAll(async () => {
  await server.close();
});

const call = (userId: string) =>
  fetch(`${server.url}/actions/register-user`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-gql-admin-secret': ADMIN_SECRET, 'x-gql-role': 'admin', 'x-gql-user-id': userId },
    body: JSON.stringify({ action: { name: 'registerUser' }, input: { input: { email: 'not-an-email', password: 'x', name: '' } } }),
  });

it("Plinth's own handler routes allow each user 5 calls a minute (RATE_LIMIT_ACTION_HANDLERS_*), then 429 with Retry-After", async () => {
  const statuses: number[] = [];
  let last: Response | undefined;
  for (let attempt = 0; attempt < 6; attempt += 1) {
    last = await call('0b4c4b1e-62a5-4c0e-9b53-5a8a3b8c2f01');
    statuses.push(last.status);
  }
  expect(statuses).toEqual([200, 200, 200, 200, 200, 429]);
  expect(Number(last!.headers.get('retry-after'))).toBeGreaterThan(0);
  expect(await last!.json()).toMatchObject({ success: false, error: 'rate-limited', error_code: 'RATE_LIMITED' });
  // Another user has calls of its own.
  expect((await call('6f1d3c2b-8a7e-4b9d-a0c1-2e3f4a5b6c7d')).status).toBe(200);
});
