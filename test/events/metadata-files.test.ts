import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { runCli } from '../support/spawn';
import { startTestServer, testEnvironment, type TestServer } from '../support/server';
import { startWebhookReceiver, type WebhookReceiver } from '../support/webhook-receiver';
import { metadataRequest } from '../support/metadata';

let server: TestServer;
let receiver: WebhookReceiver;
let folder: string;

beforeAll(async () => {
  receiver = await startWebhookReceiver();
  server = await startTestServer({ EVENTS_POLL_INTERVAL_MS: '200' });
  await server.database.query('CREATE TABLE posts (id serial PRIMARY KEY, title text NOT NULL, body text)');
  folder = fs.mkdtempSync(path.join(os.tmpdir(), 'plinth-events-metadata-'));
});
afterAll(async () => {
  await server.close();
  await receiver.close();
  fs.rmSync(folder, { recursive: true, force: true });
});

function write(root: string, files: Record<string, string>): void {
  for (const [file, text] of Object.entries(files)) {
    fs.mkdirSync(path.dirname(path.join(root, file)), { recursive: true });
    fs.writeFileSync(path.join(root, file), text);
  }
}

const cli = (command: string, dir: string) => runCli(['metadata', command, '--endpoint', server.url, '--dir', dir], testEnvironment(server.database.url));

/** A project's metadata as the Hasura CLI lays it out (the trigger in spec 1 §2.5's shape: retry_conf, webhook and headers in definition). */
const PROJECT = (webhook: string) => ({
  'version.yaml': 'version: 3\n',
  'databases/databases.yaml': `- name: default
  kind: postgres
  configuration:
    connection_info:
      database_url:
        from_env: DATABASE_URL
  tables: "!include default/tables/tables.yaml"
`,
  'databases/default/tables/tables.yaml': '- "!include public_posts.yaml"\n',
  'databases/default/tables/public_posts.yaml': `table:
  name: posts
  schema: public
event_triggers:
  - name: post_published
    definition:
      enable_manual: true
      insert:
        columns: "*"
      update:
        columns:
          - title
      retry_conf:
        num_retries: 3
        interval_sec: 10
        timeout_sec: 60
      webhook: ${webhook}/post_published
      headers:
        - name: X-Api-Key
          value: key-1
`,
  'cron_triggers.yaml': `- name: daily_digest
  webhook: ${webhook}/digest
  schedule: 0 9 * * *
  include_in_metadata: true
  payload:
    kind: digest
  comment: every morning
`,
});

describe('plinth metadata apply|export|diff', () => {
  it("applies Hasura's layout, then the triggers work", async () => {
    const project = path.join(folder, 'project');
    write(project, PROJECT(receiver.url));
    const applied = await cli('apply', project);
    expect(applied).toMatchObject({ code: 0, stdout: `applied the metadata of ${project}\n` });
    await server.database.query("INSERT INTO posts (title) VALUES ('Hello')");
    const [request] = await receiver.waitFor('/post_published', 1);
    expect(request.headers['x-api-key']).toBe('key-1');
    expect(request.body.event.data.new.title).toBe('Hello');
    const crons = await metadataRequest(server.url, { type: 'get_cron_triggers', args: {} });
    expect(crons.body.cron_triggers.map((trigger: { name: string }) => trigger.name)).toEqual(['daily_digest']);
  });

  it("exports the server's metadata to the same layout, which diff finds equal; a change shows and exits 1", async () => {
    const exported = path.join(folder, 'exported');
    expect(await cli('export', exported)).toMatchObject({ code: 0 });
    expect(fs.readFileSync(path.join(exported, 'databases/default/tables/tables.yaml'), 'utf8')).toBe('- "!include public_posts.yaml"\n');
    const table = fs.readFileSync(path.join(exported, 'databases/default/tables/public_posts.yaml'), 'utf8');
    expect(table).toContain('event_triggers:\n  - name: post_published\n    definition:\n      enable_manual: true\n');
    expect(table).toContain(`webhook: ${receiver.url}/post_published`);
    expect(fs.readFileSync(path.join(exported, 'cron_triggers.yaml'), 'utf8')).toContain('schedule: 0 9 * * *');
    expect(await cli('diff', exported)).toMatchObject({ code: 0, stdout: 'the files match the server\n' });

    fs.writeFileSync(
      path.join(exported, 'cron_triggers.yaml'),
      fs.readFileSync(path.join(exported, 'cron_triggers.yaml'), 'utf8').replace('0 9 * * *', '0 10 * * *'),
    );
    const diff = await cli('diff', exported);
    expect(diff.code).toBe(1);
    expect(diff.stdout).toContain('--- server/cron_triggers.yaml');
    expect(diff.stdout).toContain('-   schedule: 0 9 * * *');
    expect(diff.stdout).toContain('+   schedule: 0 10 * * *');
  });

  it('refuses files with a bad entry, naming it, and changes nothing', async () => {
    const broken = path.join(folder, 'broken');
    write(broken, { ...PROJECT(receiver.url), 'cron_triggers.yaml': '- name: broken\n  webhook: http://127.0.0.1:1/x\n  schedule: every day\n' });
    const applied = await cli('apply', broken);
    expect(applied.code).toBe(1);
    expect(applied.stderr).toContain('the cron trigger "broken": the schedule "every day" is not a valid cron expression');
    const unknownColumn = path.join(folder, 'unknown-column');
    write(unknownColumn, { ...PROJECT(receiver.url) });
    fs.writeFileSync(
      path.join(unknownColumn, 'databases/default/tables/public_posts.yaml'),
      fs.readFileSync(path.join(unknownColumn, 'databases/default/tables/public_posts.yaml'), 'utf8').replace('- title', '- headline'),
    );
    const refused = await cli('apply', unknownColumn);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain('the event trigger "post_published": the table public.posts has no column "headline"');
    const crons = await metadataRequest(server.url, { type: 'get_cron_triggers', args: {} });
    expect(crons.body.cron_triggers.map((trigger: { name: string }) => trigger.name)).toEqual(['daily_digest']);
    const missing = path.join(folder, 'missing-include');
    write(missing, { ...PROJECT(receiver.url), 'databases/default/tables/tables.yaml': '- "!include public_gone.yaml"\n' });
    expect((await cli('apply', missing)).stderr).toContain('databases/default/tables/public_gone.yaml is included but does not exist');
  });
});

describe('plinth events list|redeliver|invoke', () => {
  const events = (...args: string[]) => runCli(['events', ...args], testEnvironment(server.database.url));

  it('raises a manual event, lists events, and redelivers one; refusals exit 1 with the reason', async () => {
    const before = receiver.at('/post_published').length;
    const invoked = await events('invoke', 'post_published', '{"id": 42}');
    expect(invoked).toMatchObject({ code: 0, stdout: expect.stringMatching(/^raised event [0-9a-f-]{36} of post_published\n$/) });
    const id = /event ([0-9a-f-]{36})/.exec(invoked.stdout)![1];
    const [manual] = (await receiver.waitFor('/post_published', before + 1)).slice(before);
    expect(manual.body.event).toEqual({ op: 'MANUAL', data: { old: null, new: { id: 42 } }, session_variables: null });

    const listed = await events('list', '--trigger', 'post_published', '--json');
    expect(listed.code).toBe(0);
    const rows = JSON.parse(listed.stdout) as { id: string; payload: { op: string } }[];
    expect(rows.map((row) => row.id)).toContain(id);
    const text = await events('list', '--trigger', 'post_published');
    expect(text.stdout.split('\n')[0]).toMatch(/^ID\s+TRIGGER\s+OP\s+STATE\s+TRIES\s+CREATED\s+NEXT RETRY$/);
    expect(text.stdout).toMatch(new RegExp(`${id}\\s+post_published\\s+MANUAL\\s+(DELIVERED|PENDING|DELIVERING)`));

    expect(await events('redeliver', id)).toMatchObject({ code: 0, stdout: `event ${id} will be delivered again\n` });
    await receiver.waitFor('/post_published', before + 2);
    expect(
      receiver
        .at('/post_published')
        .slice(before)
        .map((request) => request.body.id),
    ).toEqual([id, id]);

    expect(await events('invoke', 'no_such_trigger')).toMatchObject({
      code: 1,
      stderr: expect.stringContaining('the event trigger "no_such_trigger" does not exist'),
    });
    expect(await events('redeliver', 'not-a-uuid')).toMatchObject({ code: 1, stderr: expect.stringContaining('event_id must be the UUID of an event') });
    expect(await events('invoke', 'post_published', '{oops')).toMatchObject({ code: 1, stderr: expect.stringContaining('the payload must be JSON') });
    expect(await events('list', '--status', 'sideways')).toMatchObject({
      code: 1,
      stderr: expect.stringContaining('status must be pending, processed, dead or all'),
    });
  });
});
