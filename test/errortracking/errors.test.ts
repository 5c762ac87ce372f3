import {
  ErrorByIdDocument,
  ErrorReceivedDocument,
  ErrorsDocument,
  ErrorsWithDetailsDocument,
  IgnoreErrorDocument,
  MergeErrorsDocument,
  ReopenErrorDocument,
  ResolveErrorDocument,
  type ErrorFilter,
} from '../generated/graphql';
import { graphql } from '../support/graphql';
import { startTestServer, type TestServer } from '../support/server';
import { bearer, signToken } from '../support/tokens';
import { subscribe, subscriptionClient } from '../support/ws';
import { ADMIN, projectWithKey, sendEvent, specEvent } from './support';

let server: TestServer;

beforeAll(async () => {
  // No background statement may fall into the counted ones (the query-count test).
  server = await startTestServer({ ERRORS_MAINTENANCE_INTERVAL_SECONDS: '3600', PLINTH_REQUEST_OUTCOMES_FLUSH_MS: '600000' });
});
afterAll(async () => {
  await server.close();
});

const list = async (filter: ErrorFilter, first = 100, after?: string) => {
  const response = await graphql(server.graphqlUrl, ErrorsDocument, { filter, first, after }, ADMIN);
  expect(response.body.errors).toBeUndefined();
  return response.body.data!.errors;
};
const messages = async (filter: ErrorFilter) => (await list(filter)).edges.map((edge) => edge.node.message).sort();

async function send(key: string, event: unknown): Promise<void> {
  const response = await sendEvent(server.url, key, event);
  expect(response.status).toBe(200);
}

describe('grouping', () => {
  it('groups one stack thrown at other lines as one error, and another in-app function as another', async () => {
    const { projectId, dsnKey } = await projectWithKey(server.graphqlUrl, 'grouping-stack');
    await send(dsnKey, specEvent({ line: 12 }));
    await send(dsnKey, specEvent({ line: 99, value: 'boom' }));
    // Only a dependency's frame differs: still the same error.
    const library = specEvent({ line: 7 });
    library.exception.values[0].stacktrace.frames[0].function = 'otherLibraryFunction';
    await send(dsnKey, library);
    await send(dsnKey, specEvent({ fn: 'refund' }));
    const errors = (await list({ project: projectId })).edges.map((edge) => edge.node);
    expect(errors.map((error) => [error.message, error.occurrenceCount]).sort()).toEqual([
      ['TypeError: boom', 1],
      ['TypeError: boom', 3],
    ]);
  });

  it('uses the event’s own fingerprint, with {{ default }} standing for the default grouping', async () => {
    const { projectId, dsnKey } = await projectWithKey(server.graphqlUrl, 'grouping-custom');
    await send(dsnKey, { ...specEvent({ fn: 'a', type: 'TimeoutError' }), fingerprint: ['checkout-timeout'] });
    await send(dsnKey, { ...specEvent({ fn: 'b', type: 'OtherError' }), fingerprint: ['checkout-timeout'] });
    await send(dsnKey, { ...specEvent({ fn: 'c', value: 'tenant' }), fingerprint: ['{{ default }}', 'tenant-a'] });
    await send(dsnKey, { ...specEvent({ fn: 'c', value: 'tenant' }), fingerprint: ['{{default}}', 'tenant-b'] });
    await send(dsnKey, { ...specEvent({ fn: 'c', value: 'tenant', line: 80 }), fingerprint: ['{{ default }}', 'tenant-a'] });
    const counts = (await list({ project: projectId })).edges.map((edge) => edge.node.occurrenceCount).sort();
    expect(counts).toEqual([1, 2, 2]);
  });

  it('groups messages by their text with numbers, ids, e-mails, URLs and hex replaced, and exceptions without in-app frames by type and value', async () => {
    const { projectId, dsnKey } = await projectWithKey(server.graphqlUrl, 'grouping-messages');
    await send(dsnKey, { message: 'User 123 not found at https://a.example.com/u/123' });
    await send(dsnKey, { message: 'User 98765 not found at https://b.example.com/x?y=1' });
    await send(dsnKey, { message: 'Payment for ann@example.com failed with 0x1f, order 3f2504e0-4f89-11d3-9a0c-0305e82c3301' });
    await send(dsnKey, { message: 'Payment for bob@example.org failed with 0xff, order 6ba7b810-9dad-11d1-80b4-00c04fd430c8' });
    await send(dsnKey, { message: 'Cache cleared' });
    const library = { filename: '/app/node_modules/pg/lib/client.js', function: 'query', lineno: 1 };
    await send(dsnKey, { exception: { values: [{ type: 'DatabaseError', value: 'relation 42 missing', stacktrace: { frames: [library] } }] } });
    await send(dsnKey, {
      exception: { values: [{ type: 'DatabaseError', value: 'relation 7 missing', stacktrace: { frames: [{ ...library, lineno: 9 }] } }] },
    });
    await send(dsnKey, { exception: { values: [{ type: 'DatabaseError', value: 'deadlock detected' }] } });
    const errors = (await list({ project: projectId })).edges.map((edge) => [edge.node.message, edge.node.occurrenceCount]);
    expect(errors.map(([, count]) => count).sort()).toEqual([1, 1, 2, 2, 2]);
    expect(errors).toContainEqual(['Cache cleared', 1]);
    expect(errors).toContainEqual(['DatabaseError: deadlock detected', 1]);
  });
});

describe('the errors connection', () => {
  it('shows the spec’s node fields, and filters by severity, service and timeRange on the events’ own timestamps', async () => {
    const web = await projectWithKey(server.graphqlUrl, 'filters-web', 'filters-web-api');
    const jobs = await projectWithKey(server.graphqlUrl, 'filters-jobs', 'filters-jobs-api');
    const ago = (ms: number) => new Date(Date.now() - ms).toISOString();
    await send(web.dsnKey, { message: 'recent fatal', level: 'fatal', timestamp: ago(30 * 60_000) });
    await send(web.dsnKey, { message: 'two days old', level: 'error', timestamp: ago(2 * 86_400_000) });
    await send(web.dsnKey, { message: 'ten days old', level: 'warning', timestamp: ago(10 * 86_400_000) });
    await send(jobs.dsnKey, { message: 'a job failed', level: 'error', timestamp: ago(5 * 60_000) });

    expect(await messages({ service: 'filters-web-api' })).toEqual(['recent fatal', 'ten days old', 'two days old']);
    expect(await messages({ service: 'filters-jobs-api' })).toEqual(['a job failed']);
    expect(await messages({ service: 'filters-web-api', severity: 'FATAL' })).toEqual(['recent fatal']);
    expect(await messages({ service: 'filters-web-api', timeRange: '1h' })).toEqual(['recent fatal']);
    expect(await messages({ service: 'filters-web-api', timeRange: '24h' })).toEqual(['recent fatal']);
    expect(await messages({ service: 'filters-web-api', timeRange: '7d' })).toEqual(['recent fatal', 'two days old']);
    expect(await messages({ service: 'filters-web-api', timeRange: '30d' })).toEqual(['recent fatal', 'ten days old', 'two days old']);
    expect(await messages({ severity: 'ERROR', timeRange: '1h' })).toContain('a job failed');

    const [node] = (await list({ service: 'filters-web-api', severity: 'WARNING' })).edges.map((edge) => edge.node);
    expect(node).toMatchObject({ message: 'ten days old', severity: 'WARNING', status: 'UNRESOLVED', occurrenceCount: 1, service: 'filters-web-api' });
    expect(node.firstSeen).toBe(node.lastSeen);
    expect(Math.abs(Date.parse(node.lastSeen) - (Date.now() - 10 * 86_400_000))).toBeLessThan(60_000);
  });

  it('refuses an unknown timeRange (naming the allowed ones), a foreign cursor and a page size out of range', async () => {
    const bad = await graphql(server.graphqlUrl, ErrorsDocument, { filter: { timeRange: '2w' } }, ADMIN);
    expect(bad.body.errors![0]).toMatchObject({ message: 'timeRange must be one of 1h, 6h, 24h, 7d, 14d, 30d, 90d', extensions: { code: 'VALIDATION_ERROR' } });
    const cursor = await graphql(server.graphqlUrl, ErrorsDocument, { filter: {}, after: 'bm90LWEtY3Vyc29y' }, ADMIN);
    expect(cursor.body.errors![0].extensions!.code).toBe('BAD_USER_INPUT');
    for (const first of [0, 101]) {
      const size = await graphql(server.graphqlUrl, ErrorsDocument, { filter: {}, first }, ADMIN);
      expect(size.body.errors![0]).toMatchObject({ message: 'first must be between 1 and 100' });
    }
    const user = bearer(signToken({ roles: ['user'], defaultRole: 'user' }));
    expect((await graphql(server.graphqlUrl, ErrorsDocument, { filter: {} }, user)).body.errors![0].extensions!.code).toBe('FORBIDDEN');
  });

  it('pages with opaque cursors without skipping or repeating an error while events and new errors arrive', async () => {
    const { projectId, dsnKey } = await projectWithKey(server.graphqlUrl, 'paging');
    for (let index = 0; index < 25; index++) await send(dsnKey, { message: `original ${String.fromCharCode(97 + index)}` });
    const seen: string[] = [];
    let after: string | undefined;
    let pages = 0;
    for (;;) {
      const page = await list({ project: projectId }, 10, after);
      seen.push(...page.edges.map((edge) => edge.node.message));
      for (const edge of page.edges) expect(edge.cursor).not.toContain(edge.node.id);
      pages++;
      // Between pages: new errors, and new events for errors on every page (their lastSeen and counts change).
      await send(dsnKey, { message: `arrived during page ${pages}` });
      await send(dsnKey, { message: 'original c' });
      await send(dsnKey, { message: 'original x' });
      if (!page.pageInfo.hasNextPage) break;
      after = page.pageInfo.endCursor!;
    }
    expect(pages).toBe(3);
    expect(seen).toHaveLength(25);
    expect(new Set(seen).size).toBe(25);
    expect(seen.every((message) => message.startsWith('original'))).toBe(true);
  });

  it('loads a page of 100 errors with their projects, stack traces and sources in a fixed number of queries', async () => {
    const { projectId, dsnKey } = await projectWithKey(server.graphqlUrl, 'dataloader');
    for (let batch = 0; batch < 10; batch++) {
      await Promise.all(Array.from({ length: 10 }, (_, index) => send(dsnKey, specEvent({ fn: `handler${batch * 10 + index}` }))));
    }
    const dataSource = server.server.dataSource;
    const original = dataSource.query.bind(dataSource);
    const statements: string[] = [];
    dataSource.query = ((sql: string, parameters?: unknown[]) => {
      // Only the statements on the tables a page reads: the same pool also serves background work
      // meanwhile (the event dispatcher's poll, request-outcome flushes, the subscriptions'
      // NOTIFYs of the events above), which a slow request would otherwise count.
      if (/\berror_(groups|events|projects)\b/.test(sql)) statements.push(sql.replace(/\s+/g, ' ').slice(0, 60));
      return original(sql, parameters);
    }) as typeof dataSource.query;
    try {
      const count = async (first: number) => {
        statements.length = 0;
        const response = await graphql(server.graphqlUrl, ErrorsWithDetailsDocument, { filter: { project: projectId }, first }, ADMIN);
        expect(response.body.errors).toBeUndefined();
        const nodes = response.body.data!.errors.edges.map((edge) => edge.node);
        expect(nodes).toHaveLength(first);
        for (const node of nodes) {
          expect(node.project).toMatchObject({ id: projectId, slug: 'dataloader' });
          expect(node.frames).toHaveLength(3);
          expect(node.frames[2]).toMatchObject({ filename: '/app/src/checkout.js', function: expect.stringMatching(/^handler\d+$/), lineno: 12, inApp: true });
          expect(node.frames[0].inApp).toBe(false);
          expect(node.stackTrace).toBe(
            [
              'TypeError: boom',
              `    at ${node.frames[2].function} (/app/src/checkout.js:12:9)`,
              '    at route (/app/src/server.js:40:5)',
              '    at handle (/app/node_modules/express/lib/router.js:10:3)',
            ].join('\n'),
          );
          expect(node.sourceMap).toEqual({ filename: '/app/src/checkout.js', source: 'card.charge()' });
        }
        return statements;
      };
      expect(await count(100)).toHaveLength(3);
      expect(await count(5)).toHaveLength(3);
    } finally {
      dataSource.query = original;
    }
  });

  it('announces received errors to errorReceived subscribers, filtered', async () => {
    const { dsnKey } = await projectWithKey(server.graphqlUrl, 'subscribed', 'subscribed-api');
    const client = subscriptionClient(server.wsUrl, { headers: ADMIN });
    const subscription = subscribe(client, ErrorReceivedDocument);
    try {
      await subscription.ready;
      await send(dsnKey, { message: 'only an error', level: 'error' });
      await send(dsnKey, { message: 'the process died', level: 'fatal' });
      // A fatal error of an earlier test may still be on its way: every one received is fatal.
      for (;;) {
        const received = (await subscription.next()).data!.errorReceived;
        expect(received.severity).toBe('FATAL');
        if (received.service !== 'subscribed-api') continue;
        expect(received).toMatchObject({ message: 'the process died', occurrenceCount: 1 });
        break;
      }
    } finally {
      subscription.dispose();
      await client.dispose();
    }
  });
});

describe('resolving, ignoring, reopening and merging', () => {
  const only = async (projectId: number) => (await list({ project: projectId })).edges.map((edge) => edge.node);

  it('keeps an error resolved in a release until an event of a newer release arrives', async () => {
    const { projectId, dsnKey } = await projectWithKey(server.graphqlUrl, 'regressions');
    await send(dsnKey, specEvent({ release: '1.0.0' }));
    const [error] = await only(projectId);
    const resolved = await graphql(server.graphqlUrl, ResolveErrorDocument, { id: error.id }, ADMIN);
    expect(resolved.body.data!.resolveError).toMatchObject({ status: 'RESOLVED', release: '1.0.0' });
    await send(dsnKey, specEvent({ release: '1.0.0' }));
    expect((await only(projectId))[0]).toMatchObject({ status: 'RESOLVED', occurrenceCount: 2 });
    await send(dsnKey, specEvent({ release: '1.1.0' }));
    expect((await only(projectId))[0]).toMatchObject({ status: 'UNRESOLVED', occurrenceCount: 3, release: '1.1.0' });
    expect((await list({ project: projectId, status: 'RESOLVED' })).edges).toHaveLength(0);
  });

  it('reopens an error resolved without any release at its next event; ignored errors stay ignored until reopened', async () => {
    const { projectId, dsnKey } = await projectWithKey(server.graphqlUrl, 'statuses');
    await send(dsnKey, { message: 'no release here' });
    await send(dsnKey, { message: 'ignore me' });
    const errors = await only(projectId);
    const plain = errors.find((error) => error.message === 'no release here')!;
    const ignored = errors.find((error) => error.message === 'ignore me')!;
    expect((await graphql(server.graphqlUrl, ResolveErrorDocument, { id: plain.id }, ADMIN)).body.data!.resolveError.status).toBe('RESOLVED');
    expect((await graphql(server.graphqlUrl, IgnoreErrorDocument, { id: ignored.id }, ADMIN)).body.data!.ignoreError.status).toBe('IGNORED');
    await send(dsnKey, { message: 'no release here' });
    await send(dsnKey, { message: 'ignore me' });
    const after = await graphql(server.graphqlUrl, ErrorByIdDocument, { id: plain.id }, ADMIN);
    expect(after.body.data!.error.status).toBe('UNRESOLVED');
    const still = await graphql(server.graphqlUrl, ErrorByIdDocument, { id: ignored.id }, ADMIN);
    expect(still.body.data!.error).toMatchObject({ status: 'IGNORED', occurrenceCount: 2 });
    expect((await graphql(server.graphqlUrl, ReopenErrorDocument, { id: ignored.id }, ADMIN)).body.data!.reopenError.status).toBe('UNRESOLVED');
    const again = await graphql(server.graphqlUrl, ReopenErrorDocument, { id: ignored.id }, ADMIN);
    expect(again.body.errors![0].extensions!.code).toBe('INVALID_TRANSITION');
    for (const id of ['999999999', 'abc']) {
      expect((await graphql(server.graphqlUrl, ResolveErrorDocument, { id }, ADMIN)).body.errors![0].extensions!.code).toBe('NOT_FOUND');
    }
  });

  it('merges errors: counts and events move, the merged error leaves the list, and its fingerprint leads to the target', async () => {
    const { projectId, dsnKey } = await projectWithKey(server.graphqlUrl, 'merging');
    const other = await projectWithKey(server.graphqlUrl, 'merging-other');
    await send(dsnKey, { message: 'first kind' });
    await send(dsnKey, { message: 'first kind' });
    await send(dsnKey, { message: 'second kind' });
    await send(other.dsnKey, { message: 'elsewhere' });
    const errors = await only(projectId);
    const target = errors.find((error) => error.message === 'first kind')!;
    const source = errors.find((error) => error.message === 'second kind')!;
    const foreign = (await only(other.projectId))[0];

    expect((await graphql(server.graphqlUrl, MergeErrorsDocument, { into: target.id, sources: [target.id] }, ADMIN)).body.errors![0].extensions!.code).toBe(
      'VALIDATION_ERROR',
    );
    expect((await graphql(server.graphqlUrl, MergeErrorsDocument, { into: target.id, sources: [foreign.id] }, ADMIN)).body.errors![0].message).toBe(
      'only errors of one project can be merged',
    );
    const merged = await graphql(server.graphqlUrl, MergeErrorsDocument, { into: target.id, sources: [source.id] }, ADMIN);
    expect(merged.body.data!.mergeErrors).toMatchObject({ id: target.id, occurrenceCount: 3 });
    expect((await only(projectId)).map((error) => error.id)).toEqual([target.id]);
    const [moved] = await server.database.query<{ count: string }>('SELECT count(*) FROM error_events WHERE group_id = $1', [target.id]);
    expect(moved.count).toBe('3');
    await send(dsnKey, { message: 'second kind' });
    expect((await only(projectId)).map((error) => [error.id, error.occurrenceCount])).toEqual([[target.id, 4]]);
    expect((await graphql(server.graphqlUrl, MergeErrorsDocument, { into: target.id, sources: [source.id] }, ADMIN)).body.errors![0].extensions!.code).toBe(
      'NOT_FOUND',
    );
  });
});
