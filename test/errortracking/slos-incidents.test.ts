import type { FastifyInstance } from 'fastify';
import {
  AcknowledgeIncidentDocument,
  AssignIncidentDocument,
  CreateErrorProjectDocument,
  CreateIncidentDocument,
  CreateSloDocument,
  DeleteSloDocument,
  IncidentsDocument,
  IncidentUpdatedDocument,
  ResolveIncidentDocument,
  SlosDocument,
  UpdateSloDocument,
} from '../generated/graphql';
import type { AnyModule } from '../../src/platform/module';
import { graphql, postGraphQL } from '../support/graphql';
import { startTestServer, type TestServer } from '../support/server';
import { subscribe, subscriptionClient } from '../support/ws';
import { ADMIN, projectWithKey, secretKey, sendEvent } from './support';

const API_LIMIT = 12;

/** A route that fails, to show that 5xx answers count as bad events of their service. */
const flakyModule: AnyModule = {
  name: 'flaky',
  create: () => ({}),
  routes: (app: FastifyInstance) => {
    app.get('/flaky', { schema: { tags: ['flaky'], summary: 'fails', response: { 200: { type: 'object' } } } }, async (request) => {
      if ((request.query as { fail?: string }).fail) throw new Error('failing on purpose');
      return {};
    });
  },
};

let server: TestServer;

beforeAll(async () => {
  server = await startTestServer(
    {
      ERRORS_MAINTENANCE_INTERVAL_SECONDS: '1',
      ERRORS_SPIKE_THRESHOLD: '5',
      ERRORS_SPIKE_WINDOW_MINUTES: '5',
      ERRORS_API_RATE_LIMIT_PER_MINUTE: String(API_LIMIT),
      ERRORS_STATUS_PAGE_CACHE_SECONDS: '1',
      PLINTH_REQUEST_OUTCOMES_FLUSH_MS: '100',
    },
    { modules: [flakyModule] },
  );
});
afterAll(async () => {
  await server.close();
});

async function project(slug: string, service = `${slug}-svc`): Promise<{ id: number; secret: string; service: string }> {
  const created = await graphql(server.graphqlUrl, CreateErrorProjectDocument, { input: { name: slug, slug, service } }, ADMIN);
  const id = created.body.data!.createErrorProject.id;
  return { id, secret: await secretKey(server.graphqlUrl, id), service };
}

async function slo(projectId: number, service: string, targetPercentage = 99, errorBudgetAlertThreshold?: number) {
  const created = await graphql(
    server.graphqlUrl,
    CreateSloDocument,
    { input: { project: String(projectId), name: `${service} availability`, service, targetPercentage, errorBudgetAlertThreshold } },
    ADMIN,
  );
  expect(created.body.errors).toBeUndefined();
  return created.body.data!.createSlo;
}

/** Good and bad events of a service, `minutesAgo` minutes back. */
async function outcomes(service: string, minutesAgo: number, good: number, bad: number): Promise<void> {
  await server.database.query(
    `INSERT INTO request_outcomes (service, minute, good, bad) VALUES ($1, date_trunc('minute', now()) - make_interval(mins => $2), $3, $4)
     ON CONFLICT (service, minute) DO UPDATE SET good = request_outcomes.good + EXCLUDED.good, bad = request_outcomes.bad + EXCLUDED.bad`,
    [service, minutesAgo, good, bad],
  );
}

const rest = (method: string, path: string, key: string | null, body?: unknown, headers: Record<string, string> = {}) =>
  fetch(`${server.url}${path}`, {
    method,
    headers: { ...(body === undefined ? {} : { 'content-type': 'application/json' }), ...(key ? { authorization: `Bearer ${key}` } : {}), ...headers },
    body: body === undefined ? undefined : JSON.stringify(body),
  });

async function until<T>(probe: () => Promise<T | undefined | null | false>, timeoutMs = 10_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value) return value;
    if (Date.now() > deadline) throw new Error('condition not met in time');
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

describe('SLOs', () => {
  it('computes the error budget, burn rate and status from known counts', async () => {
    const { id } = await project('formulas', 'formula-svc');
    await outcomes('formula-svc', 2 * 24 * 60, 8950, 50);
    await outcomes('formula-svc', 45, 990, 10);
    const steady = await slo(id, 'formula-svc', 99);
    // Window: 60 bad of 10,000 (0.6%) against 1% allowed; last hour: 10 of 1,000 (1%).
    expect(steady.totalEvents).toBe(10_000);
    expect(steady.badEvents).toBe(60);
    expect(steady.errorBudgetRemaining).toBeCloseTo(0.4, 10);
    expect(steady.currentBurnRate).toBeCloseTo(1, 10);
    expect(steady).toMatchObject({ status: 'ON_TRACK', alerts: [], windowDays: 30, errorBudgetAlertThreshold: 0.25 });

    const stricter = await graphql(server.graphqlUrl, UpdateSloDocument, { id: steady.id, input: { errorBudgetAlertThreshold: 0.5 } }, ADMIN);
    expect(stricter.body.data!.updateSlo).toMatchObject({ status: 'AT_RISK', errorBudgetAlertThreshold: 0.5 });

    // A burst: 20% bad in the last minutes burns 20 times the allowed rate in every short window.
    await outcomes('burst-svc', 3 * 24 * 60, 1_000_000, 0);
    await outcomes('burst-svc', 1, 800, 200);
    const burning = await slo(id, 'burst-svc', 99);
    expect(burning.currentBurnRate).toBeCloseTo(20, 10);
    expect(burning.errorBudgetRemaining).toBeCloseTo(1 - 200 / 1_001_000 / 0.01, 10);
    expect(burning).toMatchObject({ status: 'AT_RISK', alerts: ['fast-burn', 'slow-burn'] });

    await outcomes('spent-svc', 3 * 24 * 60, 100, 10);
    const spent = await slo(id, 'spent-svc', 99);
    expect(spent.errorBudgetRemaining).toBeCloseTo(1 - 10 / 110 / 0.01, 10);
    expect(spent).toMatchObject({ status: 'BREACHED', currentBurnRate: 0 });

    const empty = await slo(id, 'quiet-svc', 99.9);
    expect(empty).toMatchObject({ status: 'ON_TRACK', errorBudgetRemaining: 1, currentBurnRate: 0, totalEvents: 0 });
  });

  it('counts the requests Plinth serves per service: 5xx answers are bad events', async () => {
    const { id } = await project('served', 'served-svc');
    const watching = await slo(id, 'flaky', 90);
    for (let index = 0; index < 6; index++) await fetch(`${server.url}/flaky`);
    for (let index = 0; index < 2; index++) expect((await fetch(`${server.url}/flaky?fail=1`)).status).toBe(500);
    await graphql(server.graphqlUrl, SlosDocument, {}, ADMIN);
    const counted = await until(async () => {
      const found = (await graphql(server.graphqlUrl, SlosDocument, { service: 'flaky' }, ADMIN)).body.data!.slos.edges.find(
        (edge) => edge.node.id === watching.id,
      );
      return found && found.node.totalEvents >= 8 ? found.node : null;
    });
    expect(counted).toMatchObject({ totalEvents: 8, badEvents: 2 });
    // 2 bad of 8 against 10% allowed.
    expect(counted.errorBudgetRemaining).toBeCloseTo(1 - 0.25 / 0.1, 10);
    const [graphqlRow] = await server.database.query<{ good: string }>("SELECT sum(good) AS good FROM request_outcomes WHERE service = 'graphql'");
    expect(Number(graphqlRow.good)).toBeGreaterThan(0);
  });

  it('refuses SLOs out of range, and pages them with cursors', async () => {
    const { id } = await project('slo-checks', 'slo-checks-svc');
    for (const [input, field] of [
      [{ targetPercentage: 100 }, 'targetPercentage'],
      [{ targetPercentage: 0 }, 'targetPercentage'],
      [{ targetPercentage: 99, windowDays: 91 }, 'windowDays'],
      [{ targetPercentage: 99, errorBudgetAlertThreshold: 2 }, 'errorBudgetAlertThreshold'],
    ] as const) {
      const refused = await graphql(server.graphqlUrl, CreateSloDocument, { input: { project: String(id), name: 'x', ...input } }, ADMIN);
      expect(refused.body.errors![0]).toMatchObject({ extensions: { code: 'VALIDATION_ERROR', field } });
    }
    for (let index = 0; index < 3; index++) await slo(id, `paged-${index}`);
    const first = await graphql(server.graphqlUrl, SlosDocument, { first: 2 }, ADMIN);
    const second = await graphql(server.graphqlUrl, SlosDocument, { first: 100, after: first.body.data!.slos.pageInfo.endCursor }, ADMIN);
    const ids = [...first.body.data!.slos.edges, ...second.body.data!.slos.edges].map((edge) => edge.node.id);
    expect(new Set(ids).size).toBe(ids.length);
    expect(first.body.data!.slos.pageInfo.hasNextPage).toBe(true);
    expect(second.body.data!.slos.pageInfo.hasNextPage).toBe(false);
    const removed = await graphql(server.graphqlUrl, DeleteSloDocument, { id: ids[ids.length - 1] }, ADMIN);
    expect(removed.body.data!.deleteSlo.id).toBe(ids[ids.length - 1]);
    expect((await graphql(server.graphqlUrl, DeleteSloDocument, { id: ids[ids.length - 1] }, ADMIN)).body.errors![0].extensions!.code).toBe('NOT_FOUND');
  });

  it('PATCH /api/slos/{id} changes the target and threshold with range checks, for the key’s project only', async () => {
    const owner = await project('patching', 'patching-svc');
    const stranger = await project('patching-other');
    const target = await slo(owner.id, 'patching-svc', 99);
    const changed = await rest('PATCH', `/api/slos/${target.id}`, owner.secret, { targetPercentage: 99.5, errorBudgetAlertThreshold: 0.1 });
    expect(changed.status).toBe(200);
    expect(await changed.json()).toMatchObject({
      id: target.id,
      targetPercentage: 99.5,
      errorBudgetAlertThreshold: 0.1,
      status: 'ON_TRACK',
      errorBudgetRemaining: 1,
    });
    for (const body of [{ targetPercentage: 100 }, { targetPercentage: -1 }, { errorBudgetAlertThreshold: 1.5 }, {}, { targetPercentage: 'high' }]) {
      const refused = await rest('PATCH', `/api/slos/${target.id}`, owner.secret, body);
      expect(refused.status).toBe(400);
    }
    expect((await rest('PATCH', `/api/slos/${target.id}`, stranger.secret, { targetPercentage: 98 })).status).toBe(404);
    expect((await rest('PATCH', '/api/slos/00000000-0000-0000-0000-000000000000', owner.secret, { targetPercentage: 98 })).status).toBe(404);
    expect((await rest('PATCH', '/api/slos/not-a-uuid', owner.secret, { targetPercentage: 98 })).status).toBe(404);
    expect((await rest('PATCH', `/api/slos/${target.id}`, null, { targetPercentage: 98 })).status).toBe(401);
    const { dsnKey } = await projectWithKey(server.graphqlUrl, 'patching-dsn');
    expect((await rest('PATCH', `/api/slos/${target.id}`, dsnKey, { targetPercentage: 98 })).status).toBe(403);
    const [row] = await server.database.query<{ target_percentage: number }>('SELECT target_percentage FROM slos WHERE id = $1', [target.id]);
    expect(row.target_percentage).toBe(99.5);
  });

  it('takes good and bad counts a service reports for itself', async () => {
    const owner = await project('reporting', 'reporting-svc');
    const watching = await slo(owner.id, 'reporting-svc', 95);
    const reported = await rest('POST', '/api/outcomes', owner.secret, { service: 'reporting-svc', good: 90, bad: 10 });
    expect(reported.status).toBe(200);
    const node = (await graphql(server.graphqlUrl, SlosDocument, { service: 'reporting-svc' }, ADMIN)).body.data!.slos.edges[0].node;
    // 10% bad against 5% allowed: the budget is spent twice over.
    expect(node).toMatchObject({ id: watching.id, totalEvents: 100, badEvents: 10, status: 'BREACHED' });
    expect(node.currentBurnRate).toBeCloseTo(2, 10);
    expect(node.errorBudgetRemaining).toBeCloseTo(-1, 10);
    expect((await rest('POST', '/api/outcomes', owner.secret, { service: 'someone-else', good: 1, bad: 0 })).status).toBe(403);
    expect((await rest('POST', '/api/outcomes', owner.secret, { service: 'reporting-svc', good: -1, bad: 0 })).status).toBe(400);
    expect((await rest('POST', '/api/outcomes', owner.secret, { service: 'reporting-svc' })).status).toBe(400);
    expect((await rest('POST', '/api/outcomes', null, { service: 'reporting-svc', good: 1, bad: 0 })).status).toBe(401);
  });
});

describe('incidents', () => {
  it('POST /api/incidents opens one; it moves triggered → acknowledged → resolved, stamped with who and when', async () => {
    const owner = await project('incidents', 'incidents-svc');
    const client = subscriptionClient(server.wsUrl, { headers: ADMIN });
    const updates = subscribe(client, IncidentUpdatedDocument);
    // Automatic incidents of the other tests' SLOs are announced too: only this one's count.
    const nextOf = async (id: string) => {
      for (;;) {
        const update = (await updates.next()).data!.incidentUpdated;
        if (update.id === id) return update;
      }
    };
    try {
      await updates.ready;
      const created = await rest('POST', '/api/incidents', owner.secret, {
        title: 'Checkout down',
        severity: 'critical',
        description: 'Payments fail',
        service: 'checkout',
        runbookUrl: 'https://runbooks.example.com/checkout',
      });
      expect(created.status).toBe(201);
      const incident = (await created.json()) as Record<string, unknown>;
      expect(incident).toMatchObject({
        title: 'Checkout down',
        severity: 'critical',
        status: 'triggered',
        service: 'checkout',
        runbookUrl: 'https://runbooks.example.com/checkout',
        cause: 'manual',
        alerts: { count: 0, types: [] },
        assignee: null,
        resolvedAt: null,
        createdBy: expect.stringMatching(/^secret key [0-9a-f]{16}$/),
      });
      expect(await nextOf(incident.id as string)).toMatchObject({ id: incident.id, status: 'TRIGGERED' });

      const id = incident.id as string;
      const assigned = await graphql(server.graphqlUrl, AssignIncidentDocument, { id, assignee: { name: 'Ada', email: 'ada@example.com' } }, ADMIN);
      expect(assigned.body.data!.assignIncident.assignee).toEqual({ name: 'Ada', email: 'ada@example.com' });
      const badEmail = await graphql(server.graphqlUrl, AssignIncidentDocument, { id, assignee: { name: 'Ada', email: 'nope' } }, ADMIN);
      expect(badEmail.body.errors![0].extensions!.code).toBe('VALIDATION_ERROR');
      const acknowledged = await graphql(server.graphqlUrl, AcknowledgeIncidentDocument, { id }, ADMIN);
      expect(acknowledged.body.data!.acknowledgeIncident).toMatchObject({ status: 'ACKNOWLEDGED', acknowledgedBy: 'admin' });
      expect(acknowledged.body.data!.acknowledgeIncident.acknowledgedAt).not.toBeNull();
      const again = await graphql(server.graphqlUrl, AcknowledgeIncidentDocument, { id }, ADMIN);
      expect(again.body.errors![0]).toMatchObject({
        message: `incident ${id} is acknowledged: it cannot become acknowledged`,
        extensions: { code: 'INVALID_TRANSITION' },
      });
      const resolved = await graphql(server.graphqlUrl, ResolveIncidentDocument, { id }, { ...ADMIN, 'x-gql-user-id': '11111111-1111-1111-1111-111111111111' });
      expect(resolved.body.data!.resolveIncident).toMatchObject({ status: 'RESOLVED', resolvedBy: 'user 11111111-1111-1111-1111-111111111111' });
      expect((await graphql(server.graphqlUrl, ResolveIncidentDocument, { id }, ADMIN)).body.errors![0].extensions!.code).toBe('INVALID_TRANSITION');
      expect((await graphql(server.graphqlUrl, AssignIncidentDocument, { id, assignee: null }, ADMIN)).body.errors![0].extensions!.code).toBe(
        'INVALID_TRANSITION',
      );
      // The assignment, the acknowledgement and the resolution; refused moves announce nothing.
      const states = [];
      for (let index = 0; index < 3; index++) states.push((await nextOf(id)).status);
      expect(states).toEqual(['TRIGGERED', 'ACKNOWLEDGED', 'RESOLVED']);
    } finally {
      updates.dispose();
      await client.dispose();
    }
  });

  it('refuses an incident without a title, with an unknown severity or a bad runbook URL, and without a secret key', async () => {
    const owner = await project('incident-checks');
    const cases: [unknown, number][] = [
      [{ severity: 'major' }, 400],
      [{ title: 'x', severity: 'apocalyptic' }, 400],
      [{ title: 'x', severity: 'major', runbookUrl: 'javascript:alert(1)' }, 400],
      [{ title: ' ', severity: 'major' }, 400],
      [{ title: 'x', severity: 'major', service: 'no spaces please' }, 400],
      [{ title: 'nul \u0000 inside', severity: 'major' }, 400],
      [{ title: 'x', severity: 'major', description: 'lone \ud800 surrogate' }, 400],
    ];
    for (const [body, status] of cases) expect((await rest('POST', '/api/incidents', owner.secret, body)).status).toBe(status);
    expect((await rest('POST', '/api/incidents', null, { title: 'x', severity: 'major' })).status).toBe(401);
    expect((await rest('POST', '/api/incidents', 'sk_0000000000000000_' + '0'.repeat(40), { title: 'x', severity: 'major' })).status).toBe(401);
    const [{ count }] = await server.database.query<{ count: string }>('SELECT count(*) FROM incidents WHERE project_id = $1', [owner.id]);
    expect(count).toBe('0');
  });

  it('filters incidents by status and pages them', async () => {
    const owner = await project('incident-list');
    for (const title of ['one', 'two', 'three']) {
      await graphql(server.graphqlUrl, CreateIncidentDocument, { input: { project: 'incident-list', title, severity: 'MINOR' } }, ADMIN);
    }
    const all = (
      await postGraphQL<{ incidents: { edges: { node: { id: string; title: string } }[] } }>(
        `${server.url}/api/graphql`,
        { query: '{ incidents(first: 10) { edges { node { id title } } } }' },
        { authorization: `Bearer ${owner.secret}` },
      )
    ).body.data!.incidents.edges.map((edge) => edge.node);
    expect(all.map((incident) => incident.title)).toEqual(['three', 'two', 'one']);
    await graphql(server.graphqlUrl, ResolveIncidentDocument, { id: all[1].id }, ADMIN);
    const open = await graphql(server.graphqlUrl, IncidentsDocument, { status: 'TRIGGERED', first: 100 }, ADMIN);
    const titles = open.body.data!.incidents.edges.map((edge) => edge.node.title);
    expect(titles).toEqual(expect.arrayContaining(['three', 'one']));
    expect(titles).not.toContain('two');
    const page = await graphql(server.graphqlUrl, IncidentsDocument, { first: 1 }, ADMIN);
    expect(page.body.data!.incidents.pageInfo.hasNextPage).toBe(true);
  });

  it('opens an incident for an SLO burn-rate alert, linked to it, and only one while it is open', async () => {
    const { id } = await project('auto-slo', 'auto-slo-svc');
    await outcomes('auto-slo-svc', 1, 500, 500);
    const burning = await slo(id, 'auto-slo-svc', 99);
    const opened = await until(async () => {
      const found = await server.database.query<{ id: string; alert_types: string[]; severity: string }>(
        "SELECT id, alert_types, severity FROM incidents WHERE cause_kind = 'slo' AND cause_id = $1",
        [burning.id],
      );
      return found.length > 0 && found[0].alert_types.length === 2 ? found : null;
    });
    await new Promise((resolve) => setTimeout(resolve, 2500));
    const after = await server.database.query<{ id: string; alert_types: string[]; alert_count: number }>(
      "SELECT id, alert_types, alert_count FROM incidents WHERE cause_kind = 'slo' AND cause_id = $1",
      [burning.id],
    );
    expect(after).toHaveLength(1);
    expect(after[0]).toMatchObject({ id: opened[0].id, alert_count: 2 });
    expect(after[0].alert_types.sort()).toEqual(['fast-burn', 'slow-burn']);
    expect(opened[0].severity).toBe('critical');
    // Once resolved, a new alert opens a new incident.
    await graphql(server.graphqlUrl, ResolveIncidentDocument, { id: opened[0].id }, ADMIN);
    await until(async () => {
      const found = await server.database.query("SELECT id FROM incidents WHERE cause_kind = 'slo' AND cause_id = $1 AND status = 'triggered'", [burning.id]);
      return found.length === 1;
    });
  });

  it('opens an incident for an error spike past ERRORS_SPIKE_THRESHOLD', async () => {
    const { projectId, dsnKey } = await projectWithKey(server.graphqlUrl, 'spiking', 'spiking-svc');
    for (let index = 0; index < 5; index++) expect((await sendEvent(server.url, dsnKey, { message: `spike ${index}` })).status).toBe(200);
    const incident = await until(async () => {
      const [found] = await server.database.query<{ title: string; service: string; alert_types: string[] }>(
        "SELECT * FROM incidents WHERE cause_kind = 'error_spike' AND cause_id = $1",
        [String(projectId)],
      );
      return found;
    });
    expect(incident).toMatchObject({ title: 'Error spike in spiking-svc', service: 'spiking-svc', alert_types: ['error-spike'] });
  });
});

describe('the status page', () => {
  it('shows components with Statuspage’s statuses from open incidents and SLOs, and the recent incidents, as JSON or HTML', async () => {
    const owner = await project('public', 'public-api');
    await outcomes('public-db', 3 * 24 * 60, 100_000, 0);
    await outcomes('public-db', 1, 900, 100);
    await slo(owner.id, 'public-db', 99);
    await slo(owner.id, 'public-web', 99);
    const critical = await rest('POST', '/api/incidents', owner.secret, { title: 'API <down>', severity: 'critical' });
    const incidentId = ((await critical.json()) as { id: string }).id;
    await rest('POST', '/api/incidents', owner.secret, { title: 'Old hiccup', severity: 'minor', service: 'public-web' }).then(async (response) => {
      const { id } = (await response.json()) as { id: string };
      await graphql(server.graphqlUrl, ResolveIncidentDocument, { id }, ADMIN);
    });

    const response = await fetch(`${server.url}/api/status-page/public`);
    expect(response.status).toBe(200);
    expect(response.headers.get('cache-control')).toBe('public, max-age=1');
    const page = (await response.json()) as {
      status: { indicator: string };
      components: { name: string; status: string; lastUpdate: string }[];
      incidents: Record<string, unknown>[];
    };
    expect(page.components.map(({ name, status }) => [name, status]).sort()).toEqual([
      ['public-api', 'major_outage'],
      ['public-db', 'degraded_performance'],
      ['public-web', 'operational'],
    ]);
    for (const component of page.components) expect(Date.parse(component.lastUpdate)).not.toBeNaN();
    expect(page.status.indicator).toBe('critical');
    expect(page.incidents.map((incident) => [incident.title, incident.status])).toEqual([
      ['Old hiccup', 'resolved'],
      ['API <down>', 'triggered'],
    ]);
    expect(Object.keys(page.incidents[0]).sort()).toEqual(['createdAt', 'id', 'resolvedAt', 'service', 'severity', 'status', 'title', 'updatedAt']);

    const html = await fetch(`${server.url}/api/status-page/public`, { headers: { accept: 'text/html' } });
    expect(html.headers.get('content-type')).toBe('text/html; charset=utf-8');
    const text = await html.text();
    expect(text).toContain('API &#60;down&#62;');
    expect(text).toContain('Major outage');

    // Cached for a second: a change shows after that.
    await graphql(server.graphqlUrl, ResolveIncidentDocument, { id: incidentId }, ADMIN);
    const cached = (await (await fetch(`${server.url}/api/status-page/public`)).json()) as typeof page;
    expect(cached.components.find((c) => c.name === 'public-api')!.status).toBe('major_outage');
    await new Promise((resolve) => setTimeout(resolve, 1100));
    const fresh = (await (await fetch(`${server.url}/api/status-page/public`)).json()) as typeof page;
    expect(fresh.components.find((c) => c.name === 'public-api')!.status).toBe('operational');

    expect((await fetch(`${server.url}/api/status-page/nobody`)).status).toBe(404);
    expect((await fetch(`${server.url}/api/status-page/${'x'.repeat(300)}`)).status).toBe(414);
  });
});

describe('the management API', () => {
  it('/api/graphql answers a secret key with its own project’s data only, and refuses other keys', async () => {
    const mine = await projectWithKey(server.graphqlUrl, 'mgmt-mine');
    const theirs = await projectWithKey(server.graphqlUrl, 'mgmt-theirs');
    await sendEvent(server.url, mine.dsnKey, { message: 'my error' });
    await sendEvent(server.url, theirs.dsnKey, { message: 'their error' });
    const secret = await secretKey(server.graphqlUrl, mine.projectId);
    const query = { query: '{ errors(filter: {}) { edges { node { message } } } }' };
    const answer = await postGraphQL<{ errors: { edges: { node: { message: string } }[] } }>(`${server.url}/api/graphql`, query, {
      authorization: `Bearer ${secret}`,
    });
    expect(answer.status).toBe(200);
    expect(answer.body.data!.errors.edges.map((edge) => edge.node.message)).toEqual(['my error']);
    const admin = await postGraphQL(
      `${server.url}/api/graphql`,
      { query: 'mutation { createErrorProject(input: {name: "x", slug: "x", service: "x"}) { id } }' },
      { authorization: `Bearer ${secret}` },
    );
    expect(admin.body.errors![0].extensions!.code).toBe('FORBIDDEN');
    const foreign = await postGraphQL(
      `${server.url}/api/graphql`,
      { query: `mutation { createIncident(input: {project: "${theirs.projectId}", title: "x", severity: MINOR}) { id } }` },
      { authorization: `Bearer ${secret}` },
    );
    expect(foreign.body.errors![0].extensions!.code).toBe('NOT_FOUND');
    expect((await postGraphQL(`${server.url}/api/graphql`, query, { authorization: `Bearer ${mine.dsnKey}` })).status).toBe(403);
    expect((await postGraphQL(`${server.url}/api/graphql`, query)).status).toBe(401);
    expect((await postGraphQL(`${server.url}/api/graphql`, { variables: {} }, { authorization: `Bearer ${secret}` })).status).toBe(400);
  });

  it('/api/graphql answers a body that is not application/json with 415, as /v1/graphql does', async () => {
    const owner = await project('media-types');
    for (const contentType of ['text/plain', 'application/x-www-form-urlencoded', 'application/json; charset=latin1']) {
      const response = await fetch(`${server.url}/api/graphql`, {
        method: 'POST',
        headers: { 'content-type': contentType, authorization: `Bearer ${owner.secret}` },
        body: '{"query":"{ incidents { edges { node { id } } } }"}',
      });
      expect([contentType, response.status]).toEqual([contentType, 415]);
      expect(await response.json()).toEqual({
        errors: [{ message: `GraphQL requests are read as application/json in UTF-8, not as ${contentType}`, extensions: { code: 'UNSUPPORTED_MEDIA_TYPE' } }],
      });
    }
  });

  it('limits each secret key to ERRORS_API_RATE_LIMIT_PER_MINUTE calls, REST and GraphQL together, with 429 and Retry-After', async () => {
    const owner = await project('limited-api');
    const other = await project('other-api');
    const query = { query: '{ incidents { edges { node { id } } } }' };
    const calls = [];
    for (let index = 0; index < API_LIMIT - 1; index++)
      calls.push((await postGraphQL(`${server.url}/api/graphql`, query, { authorization: `Bearer ${owner.secret}` })).status);
    calls.push((await rest('POST', '/api/outcomes', owner.secret, { service: owner.service, good: 1, bad: 0 })).status);
    expect(calls.every((status) => status === 200)).toBe(true);
    const refused = await postGraphQL(`${server.url}/api/graphql`, query, { authorization: `Bearer ${owner.secret}` });
    expect(refused.status).toBe(429);
    expect(Number(refused.headers.get('retry-after'))).toBeGreaterThan(0);
    expect((await rest('POST', '/api/incidents', owner.secret, { title: 'x', severity: 'minor' })).status).toBe(429);
    expect((await postGraphQL(`${server.url}/api/graphql`, query, { authorization: `Bearer ${other.secret}` })).status).toBe(200);
  });
});

describe('retention', () => {
  it('removes events older than ERRORS_EVENT_RETENTION_DAYS in the background; errors keep their counts', async () => {
    const { projectId, dsnKey } = await projectWithKey(server.graphqlUrl, 'retention');
    await sendEvent(server.url, dsnKey, { message: 'kept and aged' });
    await sendEvent(server.url, dsnKey, { message: 'kept and aged' });
    await server.database.query(
      "UPDATE error_events SET received_at = now() - interval '91 days' WHERE project_id = $1 AND event_id = (SELECT event_id FROM error_events WHERE project_id = $1 LIMIT 1)",
      [projectId],
    );
    await until(async () => {
      const [{ count }] = await server.database.query<{ count: string }>('SELECT count(*) FROM error_events WHERE project_id = $1', [projectId]);
      return count === '1';
    });
    const [group] = await server.database.query<{ occurrence_count: string }>('SELECT occurrence_count FROM error_groups WHERE project_id = $1', [projectId]);
    expect(group.occurrence_count).toBe('2');
  });
});
