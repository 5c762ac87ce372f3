import { postGraphQL } from '../support/graphql';
import { startActionHandler, type ActionHandlerServer } from '../support/action-handler';
import { ADMIN_SECRET, startTestServer, type TestServer } from '../support/server';
import { metadataRequest } from '../support/metadata';
import { eventually } from '../events/support';

// Who gets X-Gql-Admin-Secret (docs/decisions.md, "the admin-secret rule"): the CS_<N> services
// (their handler URL is http://<name>:<port>), and any other handler or webhook only when its
// metadata configures the header (`{name: X-Gql-Admin-Secret, value: "{{ADMIN_SECRET}}"}`).
let server: TestServer;
/** CS_1 `localhost:...:<port>`: a declared service whose name resolves, so other ports of it can be tried. */
let local: ActionHandlerServer;
/** CS_2 `svc:...:<port>` called at CS_2_HOST=127.0.0.1. */
let svc: ActionHandlerServer;
/** A handler that is no declared service. */
let thirdParty: ActionHandlerServer;
/** Where a service's redirect points. */
let elsewhere: ActionHandlerServer;

const admin = { 'x-gql-admin-secret': ADMIN_SECRET };
const port = (handler: ActionHandlerServer) => new URL(handler.url).port;
const metadata = (body: unknown) => metadataRequest(server.url, body);

async function createAction(name: string, handler: string, extra: Record<string, unknown> = {}) {
  const created = await metadata({
    type: 'create_action',
    args: { name, definition: { kind: 'synchronous', arguments: [], output_type: 'EchoOutput', handler, ...extra } },
  });
  expect(created).toEqual({ status: 200, body: { message: 'success' } });
}

/** Calls the action as admin (the client's own admin secret must not be passed on either) and returns what each handler server received. */
async function callAction(name: string) {
  for (const handler of [local, svc, thirdParty, elsewhere]) handler.calls.length = 0;
  const response = await postGraphQL<Record<string, { ok: boolean }>>(server.graphqlUrl, { query: `mutation { ${name} { ok } }` }, admin);
  return response.body;
}

beforeAll(async () => {
  [local, svc, thirdParty, elsewhere] = await Promise.all([startActionHandler(), startActionHandler(), startActionHandler(), startActionHandler()]);
  for (const handler of [local, svc, thirdParty, elsewhere]) {
    handler.route('/echo', () => ({ status: 200, body: { ok: true } }));
    handler.route('/event', () => ({ status: 200, body: { status: 'ok' } }));
  }
  local.route('/redirect', () => ({ status: 307, body: '', headers: { location: `${elsewhere.url}/echo` } }));
  server = await startTestServer({
    CS_1: `localhost:express-ts:${port(local)}:/`,
    CS_2: `svc:fastify-ts:${port(svc)}:/`,
    CS_2_HOST: '127.0.0.1',
    EVENTS_POLL_INTERVAL_MS: '200',
  });
  expect(await metadata({ type: 'set_custom_types', args: { objects: [{ name: 'EchoOutput', fields: [{ name: 'ok', type: 'Boolean!' }] }] } })).toEqual({
    status: 200,
    body: { message: 'success' },
  });
});

afterAll(async () => {
  await server?.close();
  await Promise.all([local, svc, thirdParty, elsewhere].map((handler) => handler?.close()));
});

describe('the admin secret of action calls', () => {
  it('goes to a CS_<N> service, called by its name or at its CS_<N>_HOST', async () => {
    await createAction('viaLocal', `http://localhost:${port(local)}/echo`);
    await createAction('viaSvc', `http://svc:${port(svc)}/echo`);
    expect(await callAction('viaLocal')).toEqual({ data: { viaLocal: { ok: true } } });
    expect(local.calls).toHaveLength(1);
    expect(local.calls[0].headers['x-gql-admin-secret']).toBe(ADMIN_SECRET);
    expect(await callAction('viaSvc')).toEqual({ data: { viaSvc: { ok: true } } });
    expect(svc.calls).toHaveLength(1);
    expect(svc.calls[0].headers['x-gql-admin-secret']).toBe(ADMIN_SECRET);
  });

  it('does not go to a handler that is no declared service, which still gets its configured and forwarded headers and the session', async () => {
    process.env.ADMIN_SECRET_TEST_KEY = 'third-party-key';
    await createAction('viaThirdParty', `${thirdParty.url}/echo`, {
      headers: [{ name: 'X-Api-Key', value_from_env: 'ADMIN_SECRET_TEST_KEY' }],
      forward_client_headers: true,
    });
    expect(await callAction('viaThirdParty')).toEqual({ data: { viaThirdParty: { ok: true } } });
    expect(thirdParty.calls).toHaveLength(1);
    const { headers } = thirdParty.calls[0];
    expect(headers['x-gql-admin-secret']).toBeUndefined();
    expect(JSON.stringify(headers)).not.toContain(ADMIN_SECRET);
    expect(headers).toMatchObject({ 'x-api-key': 'third-party-key', 'x-gql-role': 'admin', 'content-type': 'application/json' });
    expect(JSON.parse(headers['x-gql-session-variables'] as string)).toMatchObject({ 'x-gql-role': 'admin' });
  });

  it('goes to any handler whose metadata configures it: {name: X-Gql-Admin-Secret, value: "{{ADMIN_SECRET}}"}', async () => {
    await createAction('optedIn', `${thirdParty.url}/echo`, { headers: [{ name: 'X-Gql-Admin-Secret', value: '{{ADMIN_SECRET}}' }] });
    expect(await callAction('optedIn')).toEqual({ data: { optedIn: { ok: true } } });
    expect(thirdParty.calls[0].headers['x-gql-admin-secret']).toBe(ADMIN_SECRET);
    // Exported as written: the secret itself never enters the metadata.
    const exported = await metadata({ type: 'export_metadata', args: {} });
    const action = exported.body.actions.find((entry: { name: string }) => entry.name === 'optedIn');
    expect(action.definition.headers).toEqual([{ name: 'X-Gql-Admin-Secret', value: '{{ADMIN_SECRET}}' }]);
    expect(JSON.stringify(exported.body)).not.toContain(ADMIN_SECRET);
  });

  it('does not go to a URL that only looks like a service: another port, userinfo', async () => {
    // The service's name on another port: a different server.
    await createAction('otherPort', `http://localhost:${port(thirdParty)}/echo`);
    expect(await callAction('otherPort')).toEqual({ data: { otherPort: { ok: true } } });
    expect(thirdParty.calls).toHaveLength(1);
    expect(thirdParty.calls[0].headers['x-gql-admin-secret']).toBeUndefined();
    // `http://localhost@<other host>/`: the service's name as userinfo; the host is the other one.
    await createAction('userinfoName', `http://localhost@127.0.0.1:${port(thirdParty)}/echo`);
    expect(await callAction('userinfoName')).toEqual({ data: { userinfoName: { ok: true } } });
    expect(thirdParty.calls).toHaveLength(1);
    expect(thirdParty.calls[0].headers['x-gql-admin-secret']).toBeUndefined();
    // Userinfo on the service's own address is not its handler URL either.
    await createAction('userinfoOnService', `http://someone:pw@localhost:${port(local)}/echo`);
    expect(await callAction('userinfoOnService')).toEqual({ data: { userinfoOnService: { ok: true } } });
    expect(local.calls).toHaveLength(1);
    expect(local.calls[0].headers['x-gql-admin-secret']).toBeUndefined();
  });

  it('is not carried along a redirect: a service answering 307 to another server is not followed', async () => {
    await createAction('redirected', `http://localhost:${port(local)}/redirect`);
    const body = await callAction('redirected');
    expect(body.errors?.[0].extensions).toMatchObject({ code: 'ACTION_HANDLER_ERROR', status: 307 });
    expect(local.calls).toHaveLength(1);
    expect(elsewhere.calls).toHaveLength(0);
  });
});

describe('the admin secret of event triggers and scheduled events', () => {
  it('goes only where a header configures it, as in Hasura, even to a CS_<N> service', async () => {
    await server.database.query('CREATE TABLE secret_rule_items (id serial PRIMARY KEY, note text)');
    const plain = await metadata({
      type: 'pg_create_event_trigger',
      args: { name: 'secret_rule_plain', table: 'secret_rule_items', webhook: `http://localhost:${port(local)}/event`, insert: { columns: '*' } },
    });
    expect(plain.status).toBe(200);
    await server.database.query("INSERT INTO secret_rule_items (note) VALUES ('one')");
    const scheduled = await metadata({
      type: 'create_scheduled_event',
      args: { webhook: `${thirdParty.url}/event`, schedule_at: new Date().toISOString(), payload: { n: 1 } },
    });
    expect(scheduled.status).toBe(200);
    const [event] = await eventually(async () =>
      local.calls.some((call) => call.path === '/event') ? local.calls.filter((call) => call.path === '/event') : undefined,
    );
    expect(event.headers['x-gql-admin-secret']).toBeUndefined();
    const [oneOff] = await eventually(async () =>
      thirdParty.calls.some((call) => call.path === '/event') ? thirdParty.calls.filter((call) => call.path === '/event') : undefined,
    );
    expect(oneOff.headers['x-gql-admin-secret']).toBeUndefined();
  });
});
