import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { gunzipSync } from 'node:zlib';
import { buildSchema, parse, validate } from 'graphql';
import { request } from 'undici';
import { GRAPHQL_PATH } from '../../src/http/graphql-route';
import { ADMIN_PAGES } from '../../src/modules/admin/admin.pages';
import { SECURITY_SCHEMES } from '../../src/platform/fastify/security-schemes';
import { createTestDatabase, type TestDatabase } from '../support/database';
import { operationsOf, validateOpenApi, type OpenApiDocument } from '../support/openapi';
import { ADMIN_SECRET, startTestServer, type TestServer } from '../support/server';

/** The admin dashboard's views of Plinth's own areas (admin-areas.routes.ts). */
const ADMIN_AREA_ROUTES = [
  'get /api/errors/projects',
  'get /api/errors/projects/{projectId}/errors',
  'get /api/errors/errors/{errorId}',
  'post /api/errors/errors/{errorId}/{action}',
  'get /api/errors/projects/{projectId}/incidents',
  'post /api/errors/incidents/{incidentId}/{action}',
  'get /api/errors/projects/{projectId}/slos',
  'get /api/events/triggers',
  'get /api/events/triggers/{name}/invocations',
  'post /api/events/events/{eventId}/redeliver',
  'get /api/events/cron-triggers',
  'get /api/events/scheduled',
  'get /api/jobs/queues',
  'get /api/jobs/queues/{queue}/jobs',
  'post /api/jobs/{jobId}/{action}',
  'get /api/newsletter/subscribers',
  'get /api/newsletter/subscribers/{subscriberId}',
  'get /api/newsletter/issues',
];

const SCHEMA_FILE = path.resolve(__dirname, '..', '..', '..', 'schema', 'schema.graphql');
const BROWSER_ACCEPT = 'text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8';

let database: TestDatabase;
let folder: string;
const servers: TestServer[] = [];

beforeAll(async () => {
  database = await createTestDatabase();
  folder = fs.mkdtempSync(path.join(os.tmpdir(), 'plinth-apidocs-'));
});
afterAll(async () => {
  for (const server of servers) await server.close();
  await database.drop();
  fs.rmSync(folder, { recursive: true, force: true });
});

/** A server whose plugins, services and build folders are empty folders of this test, unless `environment` says otherwise. */
async function serverWith(environment: Record<string, string> = {}, logTo?: { write(line: string): void }): Promise<TestServer> {
  const server = await startTestServer(
    {
      PLINTH_PLUGINS_DIR: path.join(folder, 'no-plugins'),
      PLINTH_SERVICES_DIR: path.join(folder, 'no-services'),
      PLINTH_DIST_DIR: path.join(folder, 'no-build'),
      ...environment,
    },
    { database, logTo },
  );
  servers.push(server);
  return server;
}

async function specOf(server: TestServer): Promise<OpenApiDocument> {
  const response = await fetch(`${server.url}/api-docs`);
  expect(response.status).toBe(200);
  expect(response.headers.get('content-type')).toBe('application/json; charset=utf-8');
  return (await response.json()) as OpenApiDocument;
}

function writeJson(file: string, value: unknown): void {
  fs.mkdirSync(path.dirname(file), { recursive: true });
  fs.writeFileSync(file, typeof value === 'string' ? value : JSON.stringify(value));
}

describe('the OpenAPI document at /api-docs', () => {
  let server: TestServer;
  let spec: OpenApiDocument;
  beforeAll(async () => {
    server = await serverWith({
      PLINTH_METRICS: 'token',
      PLINTH_METRICS_TOKEN: 'metrics-token-0123456789',
      GQL_GRAPHQL_CORS_DOMAIN: 'https://app.example.com',
    });
    spec = await specOf(server);
  });

  it('is valid OpenAPI 3.1 by the official schema', async () => {
    expect(spec.openapi).toBe('3.1.0');
    const result = await validateOpenApi(spec);
    expect(result).toEqual({ valid: true, version: '3.1', errors: null });
  });

  it('documents every route the server registered, from the schemas in its definition', () => {
    const documented = new Set(operationsOf(spec).map(({ path: route, method }) => `${method.toUpperCase()} ${route}`));
    const routes = server.server.app.routeTable;
    const gets = new Set(routes.filter((route) => [route.method].flat().includes('GET')).map((route) => route.url));
    const handDocumented: string[] = [];
    for (const route of routes) {
      for (const method of [route.method].flat()) {
        // Fastify answers HEAD for every GET: documenting the GET documents both.
        if (method === 'HEAD' && gets.has(route.url)) continue;
        const key = `${method} ${route.url}`;
        const schema = (route.schema ?? {}) as Record<string, unknown>;
        if (schema.hide) {
          handDocumented.push(key);
          continue;
        }
        // The admin dashboard's routes are documented at its own port, without the prefix of the main router.
        const openApiPath = route.url.replace(/^\/_admin(?=\/)/, '').replace(/:(\w+)/g, '{$1}');
        expect({ key, documented: documented.has(`${method} ${openApiPath}`) }).toEqual({ key, documented: true });
        expect({ key, tags: Array.isArray(schema.tags) && schema.tags.length > 0, summary: typeof schema.summary }).toEqual({
          key,
          tags: true,
          summary: 'string',
        });
        const responses = Object.keys((schema.response ?? {}) as object);
        // A redirect is the success of a route that leads a browser on (the auth service's links).
        expect({ key, success: responses.some((status) => /^[23]\d\d$/.test(status)) }).toEqual({ key, success: true });
        if (['POST', 'PUT', 'PATCH'].includes(method)) expect({ key, body: 'body' in schema }).toEqual({ key, body: true });
        if (route.url.includes(':')) expect({ key, params: 'params' in schema }).toEqual({ key, params: true });
      }
    }
    // Hidden from the generated part, on purpose: the CORS preflight route is how every path
    // answers browsers, the GraphQL route is documented by hand from the GraphQL schema, and the
    // admin dashboard's pages and their assets are HTML, scripts and styles, not API.
    expect(handDocumented.sort()).toEqual(
      [
        ...ADMIN_PAGES.map(({ path }) => `GET /_admin${path === '/' ? '' : path}`),
        'GET /_admin/assets/:version/:file',
        'GET /v1/graphql',
        'OPTIONS *',
        'POST /v1/graphql',
      ].sort(),
    );
    expect(documented.has('GET /v1/graphql')).toBe(true);
    expect(documented.has('POST /v1/graphql')).toBe(true);
  });

  it('groups the routes by tag, and names a declared security scheme wherever one is required', () => {
    const byTag = (tag: string) =>
      operationsOf(spec)
        .filter(({ operation }) => (operation.tags as string[]).includes(tag))
        .map(({ method, path: route }) => `${method} ${route}`);
    expect(spec.tags!.map((tag) => tag.name)).toEqual([
      'graphql',
      'actions',
      'metadata',
      'auth',
      'events',
      'errors',
      'billing',
      'newsletter',
      'admin',
      'files',
      'health',
      'docs',
    ]);
    expect(byTag('metadata')).toEqual(['post /v1/metadata', 'post /v2/query']);
    expect(byTag('events')).toEqual(['post /actions/external/{provider}']);
    expect(spec.paths['/v1/metadata'].post.security).toEqual([{ adminSecret: [] }]);
    expect(spec.paths['/v2/query'].post.security).toEqual([{ adminSecret: [] }]);
    expect(byTag('actions').sort()).toEqual([
      'post /actions/bulk-create-users',
      'post /actions/generate-report',
      'post /actions/process-payment',
      'post /actions/register-user',
      'post /actions/upload-and-process-file',
    ]);
    expect(byTag('billing').sort()).toEqual([
      'get /admin/payment-provider',
      'get /billing/health',
      'post /admin/payment-provider',
      'post /billing/checkout',
      'post /webhooks/backup',
      'post /webhooks/primary',
    ]);
    // The admin dashboard's API, at its own port.
    expect(byTag('admin').sort()).toEqual(
      [
        'get /api/auth/session',
        'get /api/config',
        'get /api/data/tables',
        'get /api/database/backups',
        'get /api/database/migrations',
        'get /api/database/schema',
        'get /api/env',
        'get /api/health',
        'get /api/logs/{service}',
        'get /api/metrics/history',
        'get /api/services',
        'post /api/auth/login',
        'post /api/auth/logout',
        'post /api/config',
        'post /api/data/graphql',
        'post /api/database/backups',
        'post /api/database/backups/restore',
        'post /api/database/migrations/run',
        'post /api/services/{name}/{action}',
        'delete /api/plugins/{name}',
        'get /api/certificates',
        'get /api/deploy/environments',
        'get /api/deploy/runs',
        'get /api/deploy/runs/{id}',
        'get /api/deploy/runs/{id}/output',
        'get /api/plugins',
        'get /api/plugins/{name}',
        'get /api/plugins/{name}/webhooks',
        'post /api/deploy/production',
        'post /api/deploy/staging',
        'post /api/plugins/install',
        'post /api/plugins/{name}/sync',
        ...ADMIN_AREA_ROUTES,
      ].sort(),
    );
    expect(spec.paths['/api/health'].servers).toEqual([{ url: 'http://127.0.0.1:3021', description: expect.stringContaining('PLATFORM_ADMIN_PORT') }]);
    expect(byTag('files').sort()).toEqual(['get /files/{id}/content', 'get /files/{id}/thumbnail', 'get /reports/{id}/result']);
    expect(byTag('health').sort()).toEqual(['get /healthz', 'get /metrics', 'get /readyz']);
    expect(byTag('docs').sort()).toEqual(['get /api-docs', 'get /docs']);
    expect(byTag('newsletter').sort()).toEqual([
      'get /newsletter/confirm',
      'get /newsletter/unsubscribe',
      'post /api/newsletter',
      'post /newsletter/subscribe',
      'post /newsletter/unsubscribe',
    ]);

    expect(Object.keys(spec.components!.securitySchemes)).toEqual(Object.keys(SECURITY_SCHEMES));
    expect(spec.components!.securitySchemes.adminSecret).toEqual({ type: 'apiKey', in: 'header', name: 'X-Gql-Admin-Secret', description: expect.any(String) });
    for (const { operation } of operationsOf(spec)) {
      for (const requirement of (operation.security ?? []) as Record<string, string[]>[]) {
        for (const scheme of Object.keys(requirement)) expect(Object.keys(SECURITY_SCHEMES)).toContain(scheme);
      }
    }
    expect(spec.paths['/actions/register-user'].post.security).toEqual([{ adminSecret: [] }]);
    expect(spec.paths['/metrics'].get.security).toEqual([{ metricsToken: [] }]);
    expect(spec.paths['/v1/graphql'].post.security).toEqual([{ bearerAuth: [] }, { adminSecret: [] }, {}]);
    expect(spec.paths['/healthz'].get.security).toBeUndefined();
  });

  it('answers with the route schemas it documents: the action route with its GraphQL output type', async () => {
    const response = await fetch(`${server.url}/actions/register-user`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-gql-admin-secret': ADMIN_SECRET },
      body: JSON.stringify({ input: { input: { email: 'schema@example.com', password: 'correct horse', name: 'Schema' } } }),
    });
    const body = (await response.json()) as Record<string, unknown>;
    expect(Object.keys(body).sort()).toEqual(['message', 'success', 'user']);
    const documented = spec.paths['/actions/register-user'].post.responses as Record<
      string,
      { content: Record<string, { schema: { properties: object; required: string[] } }> }
    >;
    const schema = documented['200'].content['application/json'].schema;
    expect(Object.keys(schema.properties)).toEqual(['success', 'user', 'message', 'errors', 'error_code']);
    expect(schema.required).toEqual(['success', 'message']);
  });

  it('documents GraphQL: POST with an example per query and mutation, GET, and the WebSocket endpoint with a 101', async () => {
    const post = spec.paths[GRAPHQL_PATH].post;
    const examples = (
      post.requestBody as { content: Record<string, { examples: Record<string, { value: { query: string; variables: object; operationName: string } }> }> }
    ).content['application/json'].examples;
    // One per query and mutation of the committed schema; the try-out panel opens with the first.
    const schema = buildSchema(fs.readFileSync(SCHEMA_FILE, 'utf8'));
    const rootFields = [schema.getQueryType(), schema.getMutationType()].flatMap((root) => Object.keys(root?.getFields() ?? {}));
    expect(Object.keys(examples).sort()).toEqual(rootFields.sort());
    expect(Object.keys(examples)[0]).toBe('session');
    // Every example is a valid request of the committed schema, and the first one runs as it is.
    for (const { value } of Object.values(examples)) expect(validate(schema, parse(value.query))).toEqual([]);
    const ran = await fetch(`${server.url}${GRAPHQL_PATH}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-gql-admin-secret': ADMIN_SECRET },
      body: JSON.stringify(examples.session.value),
    });
    expect(await ran.json()).toEqual({ data: { session: expect.objectContaining({ role: 'admin' }) } });

    const subscriptions = spec.paths[`${GRAPHQL_PATH}/subscriptions`].get;
    expect(subscriptions['x-platform-websocket']).toBe(true);
    expect(Object.keys(subscriptions.responses as object)).toEqual(['101']);
    expect(spec.paths[GRAPHQL_PATH].get.summary).toContain('GraphiQL');
  });

  it('lists every GraphQL operation with its arguments, result and types, generated from the schema', () => {
    const section = spec.tags!.find((tag) => tag.name === 'graphql')!.description!;
    const schema = buildSchema(fs.readFileSync(SCHEMA_FILE, 'utf8'));
    const [queries, mutations, subscriptions] = section.split(/^## (?:Queries|Mutations|Subscriptions)$/m).slice(1);
    const headings = (part: string) => [...part.matchAll(/^### (\w+)$/gm)].map(([, name]) => name).sort();
    expect(headings(queries)).toEqual(Object.keys(schema.getQueryType()!.getFields()).sort());
    expect(headings(mutations)).toEqual(Object.keys(schema.getMutationType()!.getFields()).sort());
    expect(headings(subscriptions)).toEqual(Object.keys(schema.getSubscriptionType()!.getFields()).sort());
    expect(section).toContain('registerUser(input: RegisterUserInput!): RegisterUserOutput!');
    expect(section).toContain('An action: its engine-compatible handler is `POST /actions/register-user`.');
    expect(section).toContain('input RegisterUserInput {');
    expect(section).toContain('type ValidationError {');
  });

  it('may be read from any origin, whatever GQL_GRAPHQL_CORS_DOMAIN allows', async () => {
    const read = await fetch(`${server.url}/api-docs`, { headers: { origin: 'https://elsewhere.example.org' } });
    await read.arrayBuffer();
    expect(read.headers.get('access-control-allow-origin')).toBe('*');
    const preflight = await fetch(`${server.url}/api-docs`, {
      method: 'OPTIONS',
      headers: { origin: 'https://elsewhere.example.org', 'access-control-request-method': 'GET', 'access-control-request-headers': 'x-client' },
    });
    expect(preflight.status).toBe(204);
    expect(preflight.headers.get('access-control-allow-origin')).toBe('*');
    // Other paths keep the configured origins.
    const graphql = await fetch(`${server.url}${GRAPHQL_PATH}?query=%7B__typename%7D`, { headers: { origin: 'https://elsewhere.example.org' } });
    await graphql.arrayBuffer();
    expect(graphql.headers.get('access-control-allow-origin')).toBeNull();
  });

  it('gzips the spec and the page for clients that take it', async () => {
    for (const encoding of ['gzip', 'identity']) {
      const response = await request(`${server.url}/docs`, { headers: { 'accept-encoding': encoding } });
      const body = Buffer.from(await response.body.arrayBuffer());
      expect(response.headers['content-encoding']).toBe(encoding === 'gzip' ? 'gzip' : undefined);
      expect(response.headers.vary).toBe('Accept-Encoding');
      const html = (encoding === 'gzip' ? gunzipSync(body) : body).toString();
      expect(html.startsWith('<!doctype html>')).toBe(true);
      if (encoding === 'gzip') expect(body.length).toBeLessThan(html.length / 2);
    }
  });

  it('lets browsers revalidate the spec and the page (ETag, 304)', async () => {
    for (const route of ['/api-docs', '/docs']) {
      const first = await fetch(`${server.url}${route}`);
      await first.arrayBuffer();
      expect(first.headers.get('cache-control')).toBe('no-cache');
      const etag = first.headers.get('etag')!;
      const again = await fetch(`${server.url}${route}`, { headers: { 'if-none-match': etag } });
      expect(again.status).toBe(304);
      expect(await again.text()).toBe('');
    }
  });

  it('serves the reference page with the spec inside and a policy that keeps it on this host', async () => {
    const response = await fetch(`${server.url}/docs`);
    expect(response.status).toBe(200);
    expect(response.headers.get('content-type')).toBe('text/html; charset=utf-8');
    // The page may call the API's own host and the admin dashboard's (whose routes it documents there).
    expect(response.headers.get('content-security-policy')).toContain("connect-src 'self' http://127.0.0.1:3021 http://localhost:0");
    const html = await response.text();
    expect(html).toContain('<title>Plinth API</title>');
    expect(html).toContain('"withDefaultFonts":false');
    // One file: its own markup refers to no other (the scripts are inline; the browser test watches what they fetch).
    const markup = html.replace(/(<script[^>]*>)[\s\S]*?<\/script>/g, '$1</script>');
    expect(markup.match(/\b(src|href)="(?!data:)[^"]*"/g)).toBeNull();
  });
});

describe('GraphiQL at the GraphQL endpoint', () => {
  it('is what a browser gets; API clients keep GraphQL over HTTP', async () => {
    const server = await serverWith();
    const page = await fetch(`${server.url}${GRAPHQL_PATH}`, { headers: { accept: BROWSER_ACCEPT } });
    expect(page.status).toBe(200);
    expect(page.headers.get('content-type')).toBe('text/html; charset=utf-8');
    const html = await page.text();
    expect(html).toContain('<title>GraphiQL · Plinth API</title>');
    const markup = html.replace(/(<(script|style)[^>]*>)[\s\S]*?<\/\2>/g, '$1</$2>');
    expect(markup.match(/\b(src|href)="(?!data:)[^"]*"/g)).toBeNull();

    for (const accept of [undefined, '*/*', 'application/json', 'application/graphql-response+json']) {
      const response = await fetch(`${server.url}${GRAPHQL_PATH}?query=%7B__typename%7D`, { headers: accept ? { accept } : {} });
      expect({ accept, body: await response.json() }).toEqual({ accept, body: { data: { __typename: 'Query' } } });
    }
  });
});

describe('the API_DOCS_* settings', () => {
  it('API_DOCS_ENABLED=false removes /api-docs, the page and GraphiQL', async () => {
    const server = await serverWith({ API_DOCS_ENABLED: 'false' });
    expect((await fetch(`${server.url}/api-docs`)).status).toBe(404);
    expect((await fetch(`${server.url}/docs`)).status).toBe(404);
    const graphql = await fetch(`${server.url}${GRAPHQL_PATH}`, { headers: { accept: BROWSER_ACCEPT } });
    expect(graphql.headers.get('content-type')).not.toContain('text/html');
    expect(server.server.app.routeTable.some((route) => route.url === '/api-docs' || route.url === '/docs')).toBe(false);
  });

  it('API_DOCS_PATH, API_DOCS_TITLE and PLINTH_PROJECT_NAME name the page', async () => {
    const server = await serverWith({ API_DOCS_PATH: '/reference', PLINTH_PROJECT_NAME: 'Acme & Co' });
    expect((await fetch(`${server.url}/docs`)).status).toBe(404);
    expect(await (await fetch(`${server.url}/reference`)).text()).toContain('<title>Acme &#38; Co API</title>');
    const spec = await specOf(server);
    expect(spec.info.title).toBe('Acme & Co API');
    expect(Object.keys(spec.paths)).toContain('/reference');
    const titled = await serverWith({ API_DOCS_TITLE: 'Acme reference' });
    expect((await specOf(titled)).info.title).toBe('Acme reference');
  });

  it('API_DOCS_THEME and API_DOCS_AUTH_ENV_VAR configure the page; the token pre-fills GraphiQL too', async () => {
    const token = 'eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJhbm9uIn0.c2lnbmF0dXJl';
    const server = await serverWith({ API_DOCS_THEME: 'purple', API_DOCS_AUTH_ENV_VAR: 'DOCS_ANON_JWT', DOCS_ANON_JWT: token });
    const html = await (await fetch(`${server.url}/docs`)).text();
    expect(html).toContain('"theme":"purple","forceDarkModeState":"dark"');
    expect(html).toContain(`"securitySchemes":{"bearerAuth":{"token":"${token}"}}`);
    const graphiql = await (await fetch(`${server.url}${GRAPHQL_PATH}`, { headers: { accept: BROWSER_ACCEPT } })).text();
    expect(graphiql).toContain(`Bearer ${token}`);
  });

  it('API_DOCS_GRAPHQL_ENABLED=false leaves GraphQL out; API_DOCS_GRAPHQL_ENDPOINT moves it', async () => {
    const without = await specOf(await serverWith({ API_DOCS_GRAPHQL_ENABLED: 'false' }));
    // /api/graphql is error tracking's route for secret keys and /api/data/graphql the admin dashboard's, documented as REST routes.
    const engine = (route: string) => route.includes('graphql') && route !== '/api/graphql' && route !== '/api/data/graphql';
    expect(Object.keys(without.paths).filter(engine)).toEqual([]);
    expect(without.tags!.map((tag) => tag.name)).not.toContain('graphql');
    expect(without.components!.schemas).toBeUndefined();
    expect((await validateOpenApi(without)).valid).toBe(true);

    const moved = await specOf(await serverWith({ API_DOCS_GRAPHQL_ENDPOINT: '/graphql' }));
    expect(Object.keys(moved.paths).filter(engine)).toEqual(['/graphql', '/graphql/subscriptions']);
  });

  it('API_DOCS_HIDE_ENDPOINTS leaves out every path under its prefixes', async () => {
    const spec = await specOf(
      await serverWith({ API_DOCS_HIDE_ENDPOINTS: '/actions,/v1/graphql,/health,/admin,/billing,/webhooks,/newsletter,/api,/files,/reports,/auth' }),
    );
    expect(Object.keys(spec.paths)).toEqual(['/api-docs', '/docs', '/healthz', '/metrics', '/readyz', '/v1/metadata', '/v2/query']);
    expect(spec.tags!.map((tag) => tag.name)).toEqual(['metadata', 'health', 'docs']);
    // Routes stay served: only the spec leaves them out.
    expect((await validateOpenApi(spec)).valid).toBe(true);
  });
});

describe('plugins and custom services', () => {
  it("documents each plugin's routes under its name and each custom service's own openapi.json at its server; a bad manifest is a warning", async () => {
    const plugins = path.join(folder, 'plugins');
    writeJson(path.join(plugins, 'reports', 'plugin.json'), {
      name: 'reports',
      version: '1.2.0',
      rest_routes: [
        { method: 'get', path: '/reports/:id', summary: 'One report' },
        { method: 'POST', path: '/reports', summary: 'Start a report' },
      ],
    });
    writeJson(path.join(plugins, 'broken', 'plugin.json'), { name: 'broken', rest_routes: [{ method: 'FETCH', path: 'x' }] });
    writeJson(path.join(plugins, 'clashing', 'plugin.json'), { name: 'clashing', rest_routes: [{ method: 'GET', path: '/healthz', summary: 'Mine' }] });
    writeJson(path.join(plugins, 'health-checks', 'plugin.json'), { name: 'health', rest_routes: [{ method: 'GET', path: '/deep-health', summary: 'Deep' }] });
    fs.mkdirSync(path.join(plugins, 'no-manifest'));
    const services = path.join(folder, 'services');
    writeJson(path.join(services, 'invoices', 'openapi.json'), {
      openapi: '3.1.0',
      info: { title: 'Invoices', version: '1' },
      paths: {
        '/invoices/{id}': {
          get: {
            summary: 'An invoice',
            parameters: [{ name: 'id', in: 'path', required: true, schema: { type: 'string' } }],
            security: [{ apiKey: [] }],
            responses: { 200: { description: 'The invoice', content: { 'application/json': { schema: { $ref: '#/components/schemas/Invoice' } } } } },
          },
        },
      },
      components: {
        schemas: { Invoice: { type: 'object', properties: { id: { type: 'string' }, total: { type: 'integer' } } } },
        securitySchemes: { apiKey: { type: 'apiKey', in: 'header', name: 'X-Api-Key' } },
      },
    });
    const lines: string[] = [];
    const server = await serverWith(
      {
        LOG_LEVEL: 'warn',
        PLINTH_PLUGINS_DIR: plugins,
        PLINTH_SERVICES_DIR: services,
        CS_1: 'invoices:express-ts:4000:/invoices',
        CS_2: 'mailer:fastapi:4001:/mail',
      },
      { write: (line: string) => void lines.push(line) },
    );
    const spec = await specOf(server);
    expect((await validateOpenApi(spec)).valid).toBe(true);

    expect(spec.paths['/reports/{id}'].get).toEqual({
      tags: ['reports'],
      summary: 'One report',
      parameters: [{ name: 'id', in: 'path', required: true, schema: { type: 'string' } }],
      responses: { default: { description: 'Answered by the reports plugin' } },
    });
    expect(spec.paths['/reports'].post.tags).toEqual(['reports']);
    expect(spec.tags!.map((tag) => tag.name)).toEqual([
      'graphql',
      'actions',
      'metadata',
      'auth',
      'events',
      'errors',
      'billing',
      'newsletter',
      'admin',
      'files',
      'health',
      'docs',
      'invoices',
      'reports',
    ]);

    const invoice = spec.paths['/invoices/{id}'];
    expect(invoice.servers).toEqual([{ url: 'http://invoices:4000', description: 'CS_1 (invoices)' }]);
    expect(invoice.get.tags).toEqual(['invoices']);
    expect(invoice.get.security).toEqual([{ 'invoices.apiKey': [] }]);
    expect(JSON.stringify(invoice.get.responses)).toContain('"$ref":"#/components/schemas/invoices.Invoice"');
    expect(spec.components!.schemas['invoices.Invoice']).toBeDefined();
    expect(spec.components!.securitySchemes['invoices.apiKey']).toEqual({ type: 'apiKey', in: 'header', name: 'X-Api-Key' });

    // Reported by name and skipped, as warnings; the server serves the rest.
    const warnings = lines.map((line) => JSON.parse(line) as { level: number; problem?: string }).filter((line) => line.problem);
    expect(warnings.every((line) => line.level === 40)).toBe(true);
    const problems = warnings.map((line) => line.problem!.replace(`${folder}${path.sep}`, ''));
    expect(problems).toEqual([
      'plugins/broken/plugin.json: rest_routes.0.method must be one of GET, PUT, POST, DELETE, OPTIONS, HEAD, PATCH',
      'plugins/broken/plugin.json: rest_routes.0.path must be a path starting with /, such as /reports/{id}',
      'plugins/broken/plugin.json: rest_routes.0.summary is required',
      'plugins/no-manifest/plugin.json is missing',
      'plugins/clashing/plugin.json: GET /healthz is already documented',
      'plugins/health-checks/plugin.json: the name health is already a tag of the reference',
    ]);
    expect(spec.paths['/deep-health']).toBeUndefined();
    expect(spec.paths['/healthz'].get.tags).toEqual(['health']);
  });
});
