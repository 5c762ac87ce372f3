import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { metadataRequest } from '../support/metadata';
import { until } from '../support/until';
import { startWebhookReceiver, type WebhookReceiver } from '../support/webhook-receiver';
import { AdminClient, startAdminServer, type AdminTestServer } from './support';

let server: AdminTestServer;
let admin: AdminClient;
let receiver: WebhookReceiver;
/** PLINTH_PLUGINS_DIR of the server, and a folder of sources to install from. */
let pluginsDir: string;
let sources: string;

const ROUTES: { method: string; route: string; body?: unknown }[] = [
  { method: 'GET', route: '/api/plugins' },
  { method: 'GET', route: '/api/plugins/reports' },
  { method: 'POST', route: '/api/plugins/install', body: { source: '/nonexistent' } },
  { method: 'DELETE', route: '/api/plugins/reports' },
  { method: 'POST', route: '/api/plugins/reports/sync' },
  { method: 'GET', route: '/api/plugins/reports/webhooks' },
];

function writePlugin(dir: string, manifest: unknown, extra: Record<string, string> = {}): string {
  fs.mkdirSync(dir, { recursive: true });
  fs.writeFileSync(path.join(dir, 'plugin.json'), typeof manifest === 'string' ? manifest : JSON.stringify(manifest));
  for (const [file, text] of Object.entries(extra)) {
    fs.mkdirSync(path.dirname(path.join(dir, file)), { recursive: true });
    fs.writeFileSync(path.join(dir, file), text);
  }
  return dir;
}

/** tar -czf `archive` of `dir`'s entries (`entries`, relative to dir), as a person packs a plugin (-P keeps `..` and absolute names). */
function pack(archive: string, dir: string, entries: string[], options: string[] = []): string {
  execFileSync('tar', ['-czf', archive, ...options, '-C', dir, ...entries]);
  return archive;
}

async function apiDocsPaths(): Promise<string[]> {
  const answer = await fetch(`${server.url}/api-docs`);
  expect(answer.status).toBe(200);
  return Object.keys(((await answer.json()) as { paths: Record<string, unknown> }).paths);
}

beforeAll(async () => {
  receiver = await startWebhookReceiver();
  const root = fs.mkdtempSync(path.join(os.tmpdir(), 'plinth-plugins-'));
  pluginsDir = path.join(root, 'plugins');
  sources = path.join(root, 'sources');
  writePlugin(path.join(pluginsDir, 'reports'), {
    name: 'reports',
    version: '1.2.0',
    description: 'Monthly reports',
    rest_routes: [{ method: 'get', path: '/reports/:id', summary: 'A report' }],
    sync: `${receiver.url}/sync`,
    webhooks: ['report_requested', 'never_defined'],
  });
  writePlugin(path.join(pluginsDir, 'broken'), '{"name": "broken", "rest_routes": "nope"}');
  server = await startAdminServer({ PLINTH_PLUGINS_DIR: pluginsDir, EVENTS_POLL_INTERVAL_MS: '200' });
  admin = new AdminClient(server.adminUrl);
  expect((await admin.login()).status).toBe(200);
  await server.database.query('CREATE TABLE report_requests (id serial PRIMARY KEY, month text NOT NULL)');
  const created = await metadataRequest(server.url, {
    type: 'pg_create_event_trigger',
    args: { name: 'report_requested', table: 'report_requests', webhook: `${receiver.url}/report_requested`, insert: { columns: '*' } },
  });
  expect(created.status).toBe(200);
});
afterAll(async () => {
  await server?.close();
  await receiver?.close();
});

describe('the plugins API', () => {
  it('answers 401 without a session and 403 without the CSRF token on changes', async () => {
    const anonymous = new AdminClient(server.adminUrl);
    for (const { method, route, body } of ROUTES) {
      const answer = await anonymous.request(method, route, body);
      expect({ route, method, status: answer.status, code: answer.body.error_code }).toEqual({ route, method, status: 401, code: 'UNAUTHENTICATED' });
    }
    for (const { method, route, body } of ROUTES.filter((entry) => entry.method !== 'GET')) {
      const answer = await admin.request(method, route, body, { 'x-csrf-token': '' });
      expect({ route, status: answer.status, code: answer.body.error_code }).toEqual({ route, status: 403, code: 'CSRF_TOKEN_INVALID' });
    }
    // Nothing was removed or synced.
    expect(fs.existsSync(path.join(pluginsDir, 'reports', 'plugin.json'))).toBe(true);
  });

  it('lists each plugin with its manifest, or what is wrong with it', async () => {
    const answer = await admin.request<{ plugins: Record<string, unknown>[] }>('GET', '/api/plugins');
    expect(answer.status).toBe(200);
    expect(answer.body.plugins).toEqual([
      expect.objectContaining({
        name: 'broken',
        folder: 'broken',
        valid: false,
        routes: [],
        problems: [expect.stringContaining('rest_routes must be a list')],
      }),
      expect.objectContaining({
        name: 'reports',
        folder: 'reports',
        path: path.join(pluginsDir, 'reports'),
        valid: true,
        problems: [],
        version: '1.2.0',
        description: 'Monthly reports',
        routes: [{ method: 'GET', path: '/reports/{id}', summary: 'A report' }],
        sync: `${receiver.url}/sync`,
        webhooks: ['report_requested', 'never_defined'],
        lastSync: null,
      }),
    ]);
    const one = await admin.request('GET', '/api/plugins/reports');
    expect(one).toMatchObject({ status: 200, body: { name: 'reports', valid: true } });
    expect((await admin.request('GET', '/api/plugins/nothing-here')).body).toMatchObject({ error_code: 'UNKNOWN_PLUGIN' });
    expect((await admin.request('GET', '/api/plugins/nothing-here')).status).toBe(404);
    for (const bad of ['..', '.hidden', '%2e%2e%2fetc', 'a%2Fb']) {
      const answer = await admin.request('GET', `/api/plugins/${bad}`);
      expect({ bad, status: answer.status }).toEqual({ bad, status: expect.any(Number) });
      expect([400, 404]).toContain(answer.status);
      expect(answer.body).toHaveProperty('error_code');
    }
  });

  it('installs from a folder, shows the routes in the API reference at once, refuses the same name again, and removes it', async () => {
    expect(await apiDocsPaths()).not.toContain('/invoices');
    const folder = writePlugin(
      path.join(sources, 'invoices-src'),
      {
        name: 'invoices',
        rest_routes: [{ method: 'POST', path: '/invoices', summary: 'Create an invoice' }],
      },
      { 'lib/index.js': 'module.exports = {};\n', 'lib/link.js': '' },
    );
    fs.symlinkSync('index.js', path.join(folder, 'lib', 'alias.js'));
    const installed = await admin.request('POST', '/api/plugins/install', { source: folder });
    expect(installed).toMatchObject({
      status: 201,
      body: { name: 'invoices', folder: 'invoices', valid: true, routes: [{ method: 'POST', path: '/invoices' }] },
    });
    expect(fs.readFileSync(path.join(pluginsDir, 'invoices', 'lib', 'index.js'), 'utf8')).toBe('module.exports = {};\n');
    expect(fs.readlinkSync(path.join(pluginsDir, 'invoices', 'lib', 'alias.js'))).toBe('index.js');
    expect(await apiDocsPaths()).toContain('/invoices');

    const again = await admin.request('POST', '/api/plugins/install', { source: folder });
    expect(again).toMatchObject({ status: 409, body: { error_code: 'PLUGIN_EXISTS' } });

    const removed = await admin.request('DELETE', '/api/plugins/invoices');
    expect(removed).toMatchObject({ status: 200, body: { removed: { name: 'invoices' } } });
    expect(fs.existsSync(path.join(pluginsDir, 'invoices'))).toBe(false);
    expect(await apiDocsPaths()).not.toContain('/invoices');
    expect((await admin.request('DELETE', '/api/plugins/invoices')).status).toBe(404);
    // The source folder is untouched.
    expect(fs.existsSync(path.join(folder, 'plugin.json'))).toBe(true);
  });

  it('installs from a .tar.gz (at its top, or in one folder as npm pack makes) and a relative path under the project', async () => {
    const flat = writePlugin(
      path.join(sources, 'flat'),
      { name: 'flat', rest_routes: [{ method: 'GET', path: '/flat', summary: 'Flat' }] },
      { 'a/b.txt': 'b' },
    );
    const flatArchive = pack(path.join(sources, 'flat.tgz'), flat, ['plugin.json', 'a']);
    expect(await admin.request('POST', '/api/plugins/install', { source: flatArchive })).toMatchObject({ status: 201, body: { name: 'flat' } });
    expect(fs.readFileSync(path.join(pluginsDir, 'flat', 'a', 'b.txt'), 'utf8')).toBe('b');

    writePlugin(path.join(sources, 'nested', 'package'), { name: 'nested', rest_routes: [] }, { 'x.js': '1' });
    const nestedArchive = pack(path.join(server.project, 'nested.tar.gz'), path.join(sources, 'nested'), ['package']);
    const nested = await admin.request('POST', '/api/plugins/install', { source: 'nested.tar.gz' });
    expect(nested).toMatchObject({ status: 201, body: { name: 'nested', routes: [] } });
    expect(fs.existsSync(path.join(pluginsDir, 'nested', 'x.js'))).toBe(true);
    expect(fs.existsSync(nestedArchive)).toBe(true);
    for (const name of ['flat', 'nested']) expect((await admin.request('DELETE', `/api/plugins/${name}`)).status).toBe(200);
  });

  it('refuses bad sources, invalid manifests and archives that would write outside, writing nothing', async () => {
    const before = fs.readdirSync(pluginsDir).sort();
    const expectRefused = async (source: unknown, status: number, code: string) => {
      const answer = await admin.request('POST', '/api/plugins/install', source);
      expect({ source, status: answer.status, code: answer.body.error_code }).toEqual({ source, status, code });
      expect(fs.readdirSync(pluginsDir).sort()).toEqual(before);
    };
    await expectRefused({}, 400, 'VALIDATION_ERROR');
    await expectRefused({ source: '' }, 400, 'VALIDATION_ERROR');
    await expectRefused({ source: path.join(sources, 'missing') }, 422, 'SOURCE_NOT_FOUND');
    const text = path.join(sources, 'notes.txt');
    fs.writeFileSync(text, 'not a plugin');
    await expectRefused({ source: text }, 422, 'UNSUPPORTED_SOURCE');
    await expectRefused({ source: writePlugin(path.join(sources, 'bad-json'), '{ nope') }, 422, 'INVALID_MANIFEST');
    await expectRefused({ source: writePlugin(path.join(sources, 'bad-name'), { name: '../escape', rest_routes: [] }) }, 422, 'INVALID_MANIFEST');
    await expectRefused(
      { source: writePlugin(path.join(sources, 'bad-route'), { name: 'badroute', rest_routes: [{ method: 'FETCH', path: 'x', summary: '' }] }) },
      422,
      'INVALID_MANIFEST',
    );
    await expectRefused(
      { source: writePlugin(path.join(sources, 'bad-sync'), { name: 'badsync', rest_routes: [], sync: 'file:///etc/passwd' }) },
      422,
      'INVALID_MANIFEST',
    );
    const twice = {
      name: 'twice',
      rest_routes: [
        { method: 'GET', path: '/t', summary: 'a' },
        { method: 'get', path: '/t', summary: 'b' },
      ],
    };
    await expectRefused({ source: writePlugin(path.join(sources, 'twice'), twice) }, 422, 'INVALID_MANIFEST');
    fs.mkdirSync(path.join(sources, 'no-manifest'), { recursive: true });
    await expectRefused({ source: path.join(sources, 'no-manifest') }, 422, 'INVALID_MANIFEST');
    // The name of a plugin already there (under another folder name in the source).
    await expectRefused({ source: writePlugin(path.join(sources, 'reports-copy'), { name: 'reports', rest_routes: [] }) }, 409, 'PLUGIN_EXISTS');

    // A folder with a link leading out of it.
    const leaking = writePlugin(path.join(sources, 'leaking'), { name: 'leaking', rest_routes: [] });
    fs.symlinkSync('/etc/passwd', path.join(leaking, 'passwd'));
    await expectRefused({ source: leaking }, 422, 'UNSAFE_ARCHIVE');

    // Archives: not gzip, `..` entries, absolute paths, links leading out, a device-like entry.
    const garbage = path.join(sources, 'garbage.tgz');
    fs.writeFileSync(garbage, 'this is not gzip at all');
    await expectRefused({ source: garbage }, 422, 'BAD_ARCHIVE');
    const stage = path.join(sources, 'stage');
    writePlugin(path.join(stage, 'inner'), { name: 'dotdot', rest_routes: [] });
    fs.writeFileSync(path.join(stage, 'evil.txt'), 'evil');
    const dotdot = pack(path.join(sources, 'dotdot.tgz'), path.join(stage, 'inner'), ['plugin.json', '../evil.txt'], ['-P']);
    await expectRefused({ source: dotdot }, 422, 'UNSAFE_ARCHIVE');
    const absolute = pack(path.join(sources, 'absolute.tgz'), path.join(stage, 'inner'), ['plugin.json', path.join(stage, 'evil.txt')], ['-P']);
    await expectRefused({ source: absolute }, 422, 'UNSAFE_ARCHIVE');
    fs.symlinkSync('../../../../etc', path.join(stage, 'inner', 'etc-link'));
    const linkOut = pack(path.join(sources, 'link-out.tgz'), path.join(stage, 'inner'), ['plugin.json', 'etc-link']);
    await expectRefused({ source: linkOut }, 422, 'UNSAFE_ARCHIVE');
    fs.rmSync(path.join(stage, 'inner', 'etc-link'));
    // In one top folder, a link to that folder's parent leads out once the folder is stripped.
    writePlugin(path.join(stage, 'top', 'package'), { name: 'stripped', rest_routes: [] });
    fs.symlinkSync('../other', path.join(stage, 'top', 'package', 'up'));
    await expectRefused({ source: pack(path.join(sources, 'strip-out.tgz'), path.join(stage, 'top'), ['package']) }, 422, 'UNSAFE_ARCHIVE');
    execFileSync('mkfifo', [path.join(stage, 'inner', 'fifo')]);
    await expectRefused({ source: pack(path.join(sources, 'fifo.tgz'), path.join(stage, 'inner'), ['plugin.json', 'fifo']) }, 422, 'UNSAFE_ARCHIVE');
    const noManifest = pack(path.join(sources, 'no-manifest.tgz'), stage, ['evil.txt']);
    await expectRefused({ source: noManifest }, 422, 'INVALID_MANIFEST');
    // Nothing was written beside the plugins folder either.
    expect(fs.existsSync(path.join(path.dirname(pluginsDir), 'evil.txt'))).toBe(false);
    expect(fs.readdirSync(pluginsDir).filter((name) => name.startsWith('.'))).toEqual([]);
  });

  it('syncs: reads the manifest again, calls the declared endpoint and records each outcome', async () => {
    receiver.answer('/sync', { status: 200, body: { synced: 12 } });
    const synced = await admin.request<{ sync: Record<string, unknown>; plugin: Record<string, unknown> }>('POST', '/api/plugins/reports/sync');
    expect(synced.status).toBe(200);
    expect(synced.body.sync).toMatchObject({ ok: true, routes: 1, endpoint: `${receiver.url}/sync`, httpStatus: 200, syncedBy: 'admin' });
    expect(synced.body.sync.message).toContain('"synced":12');
    const [call] = receiver.at('/sync');
    expect(call.body).toEqual({ plugin: 'reports', version: '1.2.0', requestedBy: 'admin' });

    receiver.answer('/sync', { status: 503, body: { error: 'down' } });
    const failed = await admin.request<{ sync: Record<string, unknown> }>('POST', '/api/plugins/reports/sync', {});
    expect(failed).toMatchObject({ status: 200, body: { sync: { ok: false, httpStatus: 503 } } });
    expect((await admin.request('GET', '/api/plugins/reports')).body).toMatchObject({ lastSync: { ok: false, httpStatus: 503 } });

    // A manifest edited in place: sync reads it again, and the reference follows.
    const file = path.join(pluginsDir, 'reports', 'plugin.json');
    const manifest = JSON.parse(fs.readFileSync(file, 'utf8'));
    manifest.rest_routes.push({ method: 'DELETE', path: '/reports/{id}', summary: 'Delete a report' });
    delete manifest.sync;
    fs.writeFileSync(file, JSON.stringify(manifest));
    const reread = await admin.request<{ sync: Record<string, unknown> }>('POST', '/api/plugins/reports/sync');
    expect(reread).toMatchObject({ status: 200, body: { sync: { ok: true, routes: 2, endpoint: null, httpStatus: null } } });
    const spec = (await (await fetch(`${server.url}/api-docs`)).json()) as { paths: Record<string, Record<string, unknown>> };
    expect(Object.keys(spec.paths['/reports/{id}'])).toEqual(expect.arrayContaining(['get', 'delete']));

    expect(await admin.request('POST', '/api/plugins/broken/sync')).toMatchObject({ status: 422, body: { error_code: 'INVALID_MANIFEST' } });
    expect((await admin.request('GET', '/api/plugins/broken')).body).toMatchObject({ lastSync: { ok: false } });
    expect(await admin.request('POST', '/api/plugins/nobody/sync')).toMatchObject({ status: 404, body: { error_code: 'UNKNOWN_PLUGIN' } });
    expect((await admin.request('POST', '/api/plugins/reports/sync', { command: 'rm -rf /' })).status).toBe(400);
  });

  it('shows the webhook events with the event trigger that delivers each and its recent events', async () => {
    await server.database.query("INSERT INTO report_requests (month) VALUES ('2026-10'), ('2026-11')");
    await receiver.waitFor('/report_requested', 2, 10_000);
    type Webhooks = { webhooks: { event: string; trigger: unknown; recent: { state: string }[] }[] };
    let answer = await admin.request<Webhooks>('GET', '/api/plugins/reports/webhooks');
    await until(async () => {
      answer = await admin.request<Webhooks>('GET', '/api/plugins/reports/webhooks');
      return answer.body.webhooks?.[0]?.recent.filter((event) => event.state === 'DELIVERED').length === 2;
    });
    expect(answer.status).toBe(200);
    expect(answer.body.webhooks).toEqual([
      {
        event: 'report_requested',
        trigger: {
          table: 'public.report_requests',
          operations: ['INSERT'],
          webhook: `${receiver.url}/report_requested`,
          webhookFromEnv: null,
          pending: 0,
          dead: 0,
        },
        recent: [expect.objectContaining({ op: 'INSERT', state: 'DELIVERED', tries: 1 }), expect.objectContaining({ op: 'INSERT', state: 'DELIVERED' })],
      },
      { event: 'never_defined', trigger: null, recent: [] },
    ]);
    expect(await admin.request('GET', '/api/plugins/nobody/webhooks')).toMatchObject({ status: 404, body: { error_code: 'UNKNOWN_PLUGIN' } });
    expect(await admin.request('GET', '/api/plugins/broken/webhooks')).toMatchObject({ status: 200, body: { plugin: 'broken', webhooks: [] } });
  });
});
