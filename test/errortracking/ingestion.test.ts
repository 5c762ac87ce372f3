import { promisify } from 'node:util';
import zlib from 'node:zlib';
import * as Sentry from '@sentry/node';
import fc from 'fast-check';
import {
  CreateErrorProjectDocument,
  CreateErrorTokenDocument,
  ErrorProjectsDocument,
  ErrorTokensDocument,
  RevokeErrorTokenDocument,
} from '../generated/graphql';
import { graphql } from '../support/graphql';
import { runCli } from '../support/spawn';
import { startTestServer, testEnvironment, type TestServer } from '../support/server';
import { bearer, signToken } from '../support/tokens';
import { ADMIN, projectWithKey, secretKey, sendEvent, specEvent } from './support';

const gzip = promisify(zlib.gzip);
const deflate = promisify(zlib.deflate);
const RATE_LIMIT = 30;

let server: TestServer;

beforeAll(async () => {
  server = await startTestServer({ ERRORS_INGEST_RATE_LIMIT_PER_MINUTE: String(RATE_LIMIT), ERRORS_MAX_EVENT_BYTES: String(256 * 1024) });
});
afterAll(async () => {
  await server.close();
});

const eventRows = (projectId: number) =>
  server.database.query<{ event_id: string; level: string; message: string; occurred_at: Date; release: string; frames: unknown[] }>(
    'SELECT * FROM error_events WHERE project_id = $1 ORDER BY received_at',
    [projectId],
  );

function envelope(dsn: string | null, items: { header: Record<string, unknown>; payload: string }[], eventId = 'a'.repeat(32)): string {
  const header = JSON.stringify({ event_id: eventId, sent_at: new Date().toISOString(), ...(dsn ? { dsn } : {}) });
  return [header, ...items.flatMap((item) => [JSON.stringify(item.header), item.payload])].join('\n') + '\n';
}

const postEnvelope = (projectId: number, body: string | Buffer, headers: Record<string, string> = {}, query = '') =>
  fetch(`${server.url}/api/${projectId}/envelope/${query}`, { method: 'POST', headers, body });

describe('projects and keys', () => {
  it('creates a project with a numeric id, and refuses a taken or malformed slug and non-administrators', async () => {
    const created = await graphql(server.graphqlUrl, CreateErrorProjectDocument, { input: { name: 'Shop', slug: 'shop', service: 'shop-api' } }, ADMIN);
    expect(created.body.data!.createErrorProject).toMatchObject({ name: 'Shop', slug: 'shop', service: 'shop-api' });
    expect(Number.isInteger(created.body.data!.createErrorProject.id)).toBe(true);

    const again = await graphql(server.graphqlUrl, CreateErrorProjectDocument, { input: { name: 'Shop 2', slug: 'shop', service: 'x' } }, ADMIN);
    expect(again.body.errors![0].extensions!.code).toBe('SLUG_TAKEN');
    const bad = await graphql(server.graphqlUrl, CreateErrorProjectDocument, { input: { name: 'Bad', slug: 'Not A Slug', service: 'x' } }, ADMIN);
    expect(bad.body.errors![0]).toMatchObject({ extensions: { code: 'VALIDATION_ERROR', field: 'slug' } });
    const badService = await graphql(server.graphqlUrl, CreateErrorProjectDocument, { input: { name: 'Bad', slug: 'bad', service: 'no spaces' } }, ADMIN);
    expect(badService.body.errors![0]).toMatchObject({ extensions: { code: 'VALIDATION_ERROR', field: 'service' } });
    const user = bearer(signToken({ roles: ['user'], defaultRole: 'user' }));
    const refused = await graphql(server.graphqlUrl, CreateErrorProjectDocument, { input: { name: 'X', slug: 'x', service: 'x' } }, user);
    expect(refused.body.errors![0].extensions!.code).toBe('FORBIDDEN');

    const listed = await graphql(server.graphqlUrl, ErrorProjectsDocument, {}, ADMIN);
    expect(listed.body.data!.errorProjects.map((p) => p.slug)).toContain('shop');
    expect(listed.body.data!.errorProjects.map((p) => p.slug)).not.toContain('bad');
  });

  it('creates DSN and secret keys of the documented format, shown once and stored only as hashes', async () => {
    const project = await graphql(server.graphqlUrl, CreateErrorProjectDocument, { input: { name: 'Keys', slug: 'keys', service: 'keys' } }, ADMIN);
    const projectId = project.body.data!.createErrorProject.id;
    const dsn = (await graphql(server.graphqlUrl, CreateErrorTokenDocument, { input: { project: 'keys', kind: 'DSN', name: 'web' } }, ADMIN)).body.data!
      .createErrorToken;
    expect(dsn.token).toMatch(/^dsn_[0-9a-f]{16}_[0-9a-f]{40}$/);
    expect(dsn.token).toMatch(/^\w+$/);
    expect(dsn.dsn).toBe(`http://${dsn.token}@localhost:0/${projectId}`);
    const secret = (await graphql(server.graphqlUrl, CreateErrorTokenDocument, { input: { project: String(projectId), kind: 'SECRET', name: 'ci' } }, ADMIN))
      .body.data!.createErrorToken;
    expect(secret.token).toMatch(/^sk_[0-9a-f]{16}_[0-9a-f]{40}$/);
    expect(secret.dsn).toBeNull();

    const stored = await server.database.query<Record<string, unknown>>('SELECT * FROM error_tokens WHERE project_id = $1', [projectId]);
    expect(stored).toHaveLength(2);
    for (const row of stored) expect(JSON.stringify(row)).not.toContain(dsn.token.split('_')[2]);

    const listed = await graphql(server.graphqlUrl, ErrorTokensDocument, { project: 'keys' }, ADMIN);
    expect(listed.body.data!.errorTokens.map((t) => [t.kind, t.name])).toEqual([
      ['DSN', 'web'],
      ['SECRET', 'ci'],
    ]);
    const unknown = await graphql(server.graphqlUrl, CreateErrorTokenDocument, { input: { project: 'nope', kind: 'DSN', name: 'x' } }, ADMIN);
    expect(unknown.body.errors![0].extensions!.code).toBe('NOT_FOUND');
    const noName = await graphql(server.graphqlUrl, CreateErrorTokenDocument, { input: { project: 'keys', kind: 'DSN', name: ' ' } }, ADMIN);
    expect(noName.body.errors![0].extensions!.code).toBe('VALIDATION_ERROR');
  });

  it('revokes a key at once, and refuses revoking it again or an unknown one', async () => {
    const { dsnKey, tokenId } = await projectWithKey(server.graphqlUrl, 'revoking');
    expect((await sendEvent(server.url, dsnKey, specEvent())).status).toBe(200);
    const revoked = await graphql(server.graphqlUrl, RevokeErrorTokenDocument, { id: tokenId }, ADMIN);
    expect(revoked.body.data!.revokeErrorToken.revokedAt).not.toBeNull();
    const refused = await sendEvent(server.url, dsnKey, specEvent());
    expect(refused.status).toBe(401);
    expect(await refused.json()).toMatchObject({ error_code: 'UNAUTHENTICATED', message: 'the DSN key has been revoked' });
    expect((await graphql(server.graphqlUrl, RevokeErrorTokenDocument, { id: tokenId }, ADMIN)).body.errors![0].extensions!.code).toBe('ALREADY_REVOKED');
    expect((await graphql(server.graphqlUrl, RevokeErrorTokenDocument, { id: 'feedfeedfeedfeed' }, ADMIN)).body.errors![0].extensions!.code).toBe('NOT_FOUND');
  });
});

describe('plinth errors', () => {
  const env = () => testEnvironment(server.database.url, { PLINTH_PUBLIC_URL: 'https://errors.example.com' });

  it('creates and lists projects, and creates, lists and revokes keys', async () => {
    const created = await runCli(['errors', 'project', 'create', '--name', 'CLI', '--slug', 'cli', '--service', 'cli-api', '--json'], env());
    expect(created.code).toBe(0);
    const project = JSON.parse(created.stdout) as { id: number; slug: string };
    expect(project.slug).toBe('cli');
    const list = await runCli(['errors', 'project', 'list'], env());
    expect(list.stdout.split('\n')[0].split(/\s+/)).toEqual(['ID', 'SLUG', 'NAME', 'SERVICE', 'CREATED']);
    expect(list.stdout).toMatch(new RegExp(`^${project.id}\\s+cli\\s+CLI\\s+cli-api`, 'm'));

    const token = await runCli(['errors', 'token', 'create', '--project', 'cli', '--kind', 'dsn', '--name', 'web'], env());
    expect(token.code).toBe(0);
    const dsn = /dsn:\s+(\S+)/.exec(token.stdout)![1];
    expect(dsn).toMatch(new RegExp(`^https://dsn_[0-9a-f]{16}_[0-9a-f]{40}@errors\\.example\\.com/${project.id}$`));
    const id = /created dsn key ([0-9a-f]{16})/.exec(token.stdout)![1];
    const tokens = JSON.parse((await runCli(['errors', 'token', 'list', '--project', 'cli', '--json'], env())).stdout) as {
      id: string;
      revokedAt: string | null;
    }[];
    expect(tokens).toEqual([expect.objectContaining({ id, revokedAt: null })]);
    const revoke = await runCli(['errors', 'token', 'revoke', id], env());
    expect(revoke.stdout.trim()).toBe(`revoked dsn key ${id}`);

    const again = await runCli(['errors', 'token', 'revoke', id], env());
    expect(again.code).toBe(1);
    expect(again.stderr).toContain('already revoked');
    const badKind = await runCli(['errors', 'token', 'create', '--project', 'cli', '--kind', 'other', '--name', 'x'], env());
    expect(badKind.code).toBe(1);
    expect(badKind.stderr).toContain('--kind must be dsn or secret');
    const taken = await runCli(['errors', 'project', 'create', '--name', 'CLI', '--slug', 'cli', '--service', 'cli-api'], env());
    expect(taken.code).toBe(1);
    expect(taken.stderr).toContain('slug "cli" exists');
  });
});

describe('POST /api/errors/events', () => {
  it('stores the spec’s event and answers {id, received: true} once it is committed', async () => {
    const { projectId, dsnKey } = await projectWithKey(server.graphqlUrl, 'spec-shape');
    const response = await sendEvent(server.url, dsnKey, specEvent({ timestamp: new Date(Date.now() - 3_600_000).toISOString() }));
    expect(response.status).toBe(200);
    const body = (await response.json()) as { id: string; received: boolean };
    expect(body).toEqual({ id: expect.stringMatching(/^[0-9a-f]{32}$/), received: true });
    const [row] = await eventRows(projectId);
    expect(row).toMatchObject({
      event_id: body.id.replace(/(.{8})(.{4})(.{4})(.{4})(.{12})/, '$1-$2-$3-$4-$5'),
      level: 'error',
      release: '1.0.0',
      message: 'TypeError: boom',
    });
    expect(Math.abs(row.occurred_at.getTime() - (Date.now() - 3_600_000))).toBeLessThan(60_000);
    expect(row.frames).toHaveLength(3);
    expect(row.frames[2]).toMatchObject({ filename: '/app/src/checkout.js', function: 'charge', lineno: 12, colno: 9, source: 'card.charge()', inApp: true });
  });

  it('stores an event id seen before only once', async () => {
    const { projectId, dsnKey } = await projectWithKey(server.graphqlUrl, 'dedup');
    const event = { ...specEvent(), event_id: 'b'.repeat(32) };
    const answers = await Promise.all([1, 2, 3].map(() => sendEvent(server.url, dsnKey, event)));
    expect(answers.map((answer) => answer.status)).toEqual([200, 200, 200]);
    expect(await sendEvent(server.url, dsnKey, event).then((r) => r.json())).toEqual({ id: 'b'.repeat(32), received: true });
    expect(await eventRows(projectId)).toHaveLength(1);
    const [group] = await server.database.query<{ occurrence_count: string }>('SELECT occurrence_count FROM error_groups WHERE project_id = $1', [projectId]);
    expect(group.occurrence_count).toBe('1');
  });

  it('refuses invalid events with 400 and the reason, storing nothing', async () => {
    const { projectId, dsnKey } = await projectWithKey(server.graphqlUrl, 'invalid');
    const cases: [unknown, string][] = [
      ['{not json', 'the body is not valid JSON'],
      [[1, 2], 'the event must be a JSON object'],
      [{ level: 'error' }, 'the event must have a message or an exception'],
      [{ message: 'x', level: 'loud' }, 'level must be one of fatal, error, warning, info, debug'],
      [{ message: 'x', timestamp: 'yesterday' }, 'timestamp must be an ISO 8601 date-time or a number of seconds since the epoch'],
      [{ message: 'x', event_id: 'xyz' }, 'event_id must be 32 hexadecimal digits (a UUID, with or without hyphens)'],
      [{ exception: { values: 'no' } }, 'exception.values must be a list'],
      [
        { exception: { values: [{ type: 'E', stacktrace: { frames: [{ lineno: -1 }] } }] } },
        'exception.values.0.stacktrace.frames.0.lineno must be a non-negative integer',
      ],
      [{ message: 'x', fingerprint: [] }, 'fingerprint must be a list of 1 to 50 strings'],
    ];
    for (const [event, reason] of cases) {
      const response = await sendEvent(server.url, dsnKey, typeof event === 'string' ? event : JSON.stringify(event));
      expect({ status: response.status, body: await response.json() }).toEqual({
        status: 400,
        body: { success: false, error_code: 'INVALID_EVENT', message: reason },
      });
    }
    expect(await eventRows(projectId)).toHaveLength(0);
  });

  it('keeps text PostgreSQL cannot store as replacement characters rather than refusing the event', async () => {
    const { projectId, dsnKey } = await projectWithKey(server.graphqlUrl, 'nul-text');
    expect((await sendEvent(server.url, dsnKey, { message: 'bad \u0000 byte \ud800' })).status).toBe(200);
    expect((await eventRows(projectId))[0].message).toBe('bad \uFFFD byte \uFFFD');
  });

  it('answers any event shape, however odd, with 200 or 400 and never a server error', async () => {
    const { dsnKey, projectId } = await projectWithKey(server.graphqlUrl, 'shapes');
    // More keys of the project, so that the per-key limit of this file's server is never reached.
    const keys = [dsnKey];
    while (keys.length < 12) {
      const more = await graphql(
        server.graphqlUrl,
        CreateErrorTokenDocument,
        { input: { project: String(projectId), kind: 'DSN', name: `k${keys.length}` } },
        ADMIN,
      );
      keys.push(more.body.data!.createErrorToken.token);
    }
    let sent = 0;
    const anyValue = fc.oneof(
      fc.string(),
      fc.integer(),
      fc.double(),
      fc.boolean(),
      fc.constant(null),
      fc.array(fc.string(), { maxLength: 3 }),
      fc.object({ maxDepth: 2 }),
    );
    // Mostly a value of the right kind, sometimes anything.
    const maybe = <T>(valid: fc.Arbitrary<T>) => fc.oneof({ arbitrary: valid, weight: 6 }, { arbitrary: anyValue, weight: 1 });
    const text = fc.string({ unit: 'binary', maxLength: 40 });
    const frame = fc.record(
      {
        filename: maybe(text),
        function: maybe(text),
        lineno: maybe(fc.nat()),
        colno: maybe(fc.nat()),
        in_app: maybe(fc.boolean()),
        module: maybe(text),
        source: maybe(text),
        context_line: maybe(text),
        pre_context: maybe(fc.array(text, { maxLength: 3 })),
      },
      { requiredKeys: [] },
    );
    const exception = fc.record(
      { type: maybe(text), value: maybe(text), stacktrace: maybe(fc.record({ frames: maybe(fc.array(maybe(frame), { maxLength: 4 })) })) },
      { requiredKeys: [] },
    );
    const event = fc.record(
      {
        event_id: maybe(fc.uuid()),
        message: maybe(fc.oneof(text, fc.record({ message: maybe(text), formatted: maybe(text) }, { requiredKeys: [] }))),
        level: maybe(fc.constantFrom('fatal', 'error', 'warning', 'info', 'debug', 'log', 'critical')),
        timestamp: maybe(
          fc.oneof(
            fc.date({ noInvalidDate: true }).map((date) => date.toISOString()),
            fc.double({ min: 0, max: 4e9, noNaN: true }),
          ),
        ),
        release: maybe(text),
        environment: maybe(text),
        fingerprint: maybe(fc.array(fc.oneof(text, fc.constant('{{ default }}')), { minLength: 1, maxLength: 3 })),
        exception: maybe(fc.oneof(fc.record({ values: maybe(fc.array(exception, { maxLength: 3 })) }), fc.array(exception, { maxLength: 2 }))),
      },
      { requiredKeys: [] },
    );
    const statuses = new Set<number>();
    await fc.assert(
      fc.asyncProperty(event, async (body) => {
        const response = await sendEvent(server.url, keys[sent++ % keys.length], body);
        statuses.add(response.status);
        return response.status === 200 || response.status === 400;
      }),
      { numRuns: 200, seed: 12 },
    );
    expect([...statuses].sort()).toEqual([200, 400]);
    expect((await eventRows(projectId)).length).toBeGreaterThan(0);
  });

  it('answers 401 without a key or with a wrong one, and 403 for a secret key', async () => {
    const { dsnKey, projectId } = await projectWithKey(server.graphqlUrl, 'auth');
    const none = await fetch(`${server.url}/api/errors/events`, { method: 'POST', body: JSON.stringify(specEvent()) });
    expect(none.status).toBe(401);
    expect((await sendEvent(server.url, 'not-a-key', specEvent())).status).toBe(401);
    const forged = dsnKey.slice(0, -4) + (dsnKey.endsWith('0000') ? '1111' : '0000');
    expect((await sendEvent(server.url, forged, specEvent())).status).toBe(401);
    const secret = await secretKey(server.graphqlUrl, projectId);
    const wrongKind = await sendEvent(server.url, secret, specEvent());
    expect(wrongKind.status).toBe(403);
    expect(await wrongKind.json()).toMatchObject({ message: 'a secret key cannot send events; use a DSN key' });
    expect(await eventRows(projectId)).toHaveLength(0);
  });

  it('answers 413 past ERRORS_MAX_EVENT_BYTES, and 415 for an unknown Content-Encoding', async () => {
    const { dsnKey } = await projectWithKey(server.graphqlUrl, 'sizes');
    const large = await sendEvent(server.url, dsnKey, { message: 'x'.repeat(300 * 1024) });
    expect(large.status).toBe(413);
    const bomb = await gzip(Buffer.from(JSON.stringify({ message: 'y'.repeat(2 * 1024 * 1024) })));
    const inflated = await sendEvent(server.url, dsnKey, bomb, { 'content-encoding': 'gzip' });
    expect(inflated.status).toBe(413);
    const unknown = await sendEvent(server.url, dsnKey, specEvent(), { 'content-encoding': 'zstd' });
    expect(unknown.status).toBe(415);
    const corrupt = await sendEvent(server.url, dsnKey, 'not gzip', { 'content-encoding': 'gzip' });
    expect(corrupt.status).toBe(400);
  });

  it('limits each DSN key to its events per minute with 429, Retry-After and X-Sentry-Rate-Limits', async () => {
    const limited = await projectWithKey(server.graphqlUrl, 'limited');
    const other = await projectWithKey(server.graphqlUrl, 'unlimited');
    const statuses = await Promise.all(Array.from({ length: RATE_LIMIT }, () => sendEvent(server.url, limited.dsnKey, specEvent()).then((r) => r.status)));
    expect(statuses.every((status) => status === 200)).toBe(true);
    const refused = await sendEvent(server.url, limited.dsnKey, specEvent());
    expect(refused.status).toBe(429);
    const retryAfter = Number(refused.headers.get('retry-after'));
    expect(retryAfter).toBeGreaterThan(0);
    expect(retryAfter).toBeLessThanOrEqual(60);
    expect(refused.headers.get('x-sentry-rate-limits')).toBe(`${retryAfter}::key`);
    expect(await refused.json()).toMatchObject({ error_code: 'RATE_LIMITED' });
    // The Sentry endpoints share the key's count; another key has its own.
    const envelopeRefused = await postEnvelope(
      limited.projectId,
      envelope(limited.dsn, [{ header: { type: 'event' }, payload: JSON.stringify({ message: 'm' }) }]),
    );
    expect(envelopeRefused.status).toBe(429);
    expect((await sendEvent(server.url, other.dsnKey, specEvent())).status).toBe(200);
    expect(await eventRows(limited.projectId)).toHaveLength(RATE_LIMIT);
  });
});

describe('Sentry endpoints', () => {
  it('takes events from the official @sentry/node SDK, initialised with a DSN from createErrorToken', async () => {
    const { projectId, dsn } = await projectWithKey(server.graphqlUrl, 'sentry-sdk');
    const local = dsn.replace('@localhost:0/', `@${new URL(server.url).host}/`);
    Sentry.init({ dsn: local, defaultIntegrations: false, release: 'web@2.0.0', environment: 'staging' });
    try {
      function chargeCard(): never {
        throw new RangeError('amount must be positive');
      }
      try {
        chargeCard();
      } catch (error) {
        Sentry.captureException(error);
      }
      // Larger than the SDK's 32 KiB threshold: it arrives gzipped.
      Sentry.captureMessage('a big message', { level: 'warning', extra: { padding: 'p'.repeat(64 * 1024) } });
      expect(await Sentry.flush(10_000)).toBe(true);
    } finally {
      await Sentry.close(2000);
    }
    const stored = await eventRows(projectId);
    expect(stored.map((row) => [row.level, row.message, row.release])).toEqual(
      expect.arrayContaining([
        ['error', 'RangeError: amount must be positive', 'web@2.0.0'],
        ['warning', 'a big message', 'web@2.0.0'],
      ]),
    );
    const thrown = stored.find((row) => row.level === 'error')!;
    expect(thrown.frames.some((frame) => (frame as { function: string }).function === 'chargeCard')).toBe(true);
  });

  it('reads the key from X-Sentry-Auth, sentry_key or the envelope header, gunzips, inflates, and skips other item types', async () => {
    const { projectId, dsnKey, dsn } = await projectWithKey(server.graphqlUrl, 'envelopes');
    const event = (message: string) => ({
      header: { type: 'event', content_type: 'application/json' },
      payload: JSON.stringify({ message, platform: 'node' }),
    });
    const session = { header: { type: 'session' }, payload: JSON.stringify({ sid: 'x', status: 'ok' }) };
    const report = { header: { type: 'client_report' }, payload: JSON.stringify({ discarded_events: [] }) };
    const transaction = { header: { type: 'transaction' }, payload: JSON.stringify({ type: 'transaction', spans: [] }) };

    const withAuth = await postEnvelope(projectId, envelope(null, [event('from auth header'), session]), {
      'x-sentry-auth': `Sentry sentry_version=7, sentry_client=test/1.0, sentry_key=${dsnKey}`,
    });
    expect(withAuth.status).toBe(200);
    expect(await withAuth.json()).toEqual({ id: expect.stringMatching(/^[0-9a-f]{32}$/) });
    const withQuery = await postEnvelope(
      projectId,
      await gzip(envelope(null, [report, event('gzipped')])),
      { 'content-encoding': 'gzip' },
      `?sentry_key=${dsnKey}&sentry_version=7`,
    );
    expect(withQuery.status).toBe(200);
    const withDsn = await postEnvelope(projectId, await deflate(envelope(dsn, [transaction, event('deflated')])), { 'content-encoding': 'deflate' });
    expect(withDsn.status).toBe(200);
    const onlySkipped = await postEnvelope(projectId, envelope(dsn, [session]), {}, '');
    expect(onlySkipped.status).toBe(200);
    // Lengths: a payload with a newline inside is read by its declared length.
    const payload = JSON.stringify({ message: 'line one\nline two' }).replace('\\n', '\n');
    const sized = `${JSON.stringify({ dsn })}\n${JSON.stringify({ type: 'event', length: Buffer.byteLength(payload) })}\n${payload}\n`;
    expect((await postEnvelope(projectId, sized)).status).toBe(400); // a raw newline in a JSON string is not JSON
    const sizedOk = `${JSON.stringify({ dsn })}\n${JSON.stringify({ type: 'attachment', length: 9 })}\nab\ncd\nef\n${JSON.stringify({ type: 'event' })}\n${JSON.stringify({ message: 'after attachment' })}\n`;
    expect((await postEnvelope(projectId, sizedOk)).status).toBe(200);

    const messages = (await eventRows(projectId)).map((row) => row.message).sort();
    expect(messages).toEqual(['after attachment', 'deflated', 'from auth header', 'gzipped']);
    const store = await fetch(`${server.url}/api/${projectId}/store/?sentry_key=${dsnKey}`, { method: 'POST', body: JSON.stringify({ message: 'stored' }) });
    expect(store.status).toBe(200);
    expect(await store.json()).toEqual({ id: expect.stringMatching(/^[0-9a-f]{32}$/) });
  });

  it('refuses malformed envelopes, a missing key, and a key of another project', async () => {
    const { projectId, dsnKey, dsn } = await projectWithKey(server.graphqlUrl, 'envelope-errors');
    const other = await projectWithKey(server.graphqlUrl, 'envelope-other');
    const ok = envelope(dsn, [{ header: { type: 'event' }, payload: JSON.stringify({ message: 'x' }) }]);
    expect((await postEnvelope(projectId, 'not json\n')).status).toBe(400);
    expect((await postEnvelope(projectId, `${JSON.stringify({ dsn })}\n{"length":3}\nabc\n`)).status).toBe(400);
    expect((await postEnvelope(projectId, `${JSON.stringify({ dsn })}\n{"type":"event","length":999}\nabc\n`)).status).toBe(400);
    expect((await postEnvelope(projectId, envelope(dsn, [{ header: { type: 'event' }, payload: JSON.stringify({ level: 'x' }) }]))).status).toBe(400);
    expect((await postEnvelope(projectId, envelope(null, [{ header: { type: 'event' }, payload: '{}' }]))).status).toBe(401);
    const foreign = await postEnvelope(other.projectId, ok);
    expect(foreign.status).toBe(403);
    const wrongProject = await postEnvelope(projectId, ok, { 'x-sentry-auth': `Sentry sentry_key=${other.dsnKey}` });
    expect(wrongProject.status).toBe(403);
    expect((await fetch(`${server.url}/api/abc/envelope/?sentry_key=${dsnKey}`, { method: 'POST', body: ok })).status).toBe(400);
    expect(await eventRows(projectId)).toHaveLength(0);
  });
});
