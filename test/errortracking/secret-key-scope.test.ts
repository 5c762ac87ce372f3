import { print } from 'graphql';
import { GenerateReportDocument, UploadAndProcessFileDocument } from '../generated/graphql';
import { postGraphQL } from '../support/graphql';
import { startTestServer, type TestServer } from '../support/server';
import { ADMIN, projectWithKey, secretKey, sendEvent } from './support';

/** Error tracking's management fields (spec 2 §4.2): what a project's secret key may use, and nothing else. */
const MANAGEMENT_FIELDS = [
  'Query.errors',
  'Query.error',
  'Mutation.resolveError',
  'Mutation.ignoreError',
  'Mutation.reopenError',
  'Mutation.mergeErrors',
  'Subscription.errorReceived',
  'Query.slos',
  'Query.slo',
  'Mutation.createSlo',
  'Mutation.updateSlo',
  'Mutation.deleteSlo',
  'Query.incidents',
  'Query.incident',
  'Mutation.createIncident',
  'Mutation.acknowledgeIncident',
  'Mutation.resolveIncident',
  'Mutation.assignIncident',
  'Subscription.incidentUpdated',
].sort();
const REFUSAL = "A project's secret key (error tracking's errors, SLOs and incidents only) may not use";

let server: TestServer;
let secret: string;
let projectId: number;

beforeAll(async () => {
  // Each root field of the schema is tried: more calls than the default per-key limit.
  server = await startTestServer({ ERRORS_API_RATE_LIMIT_PER_MINUTE: '100000' });
  ({ projectId } = await projectWithKey(server.graphqlUrl, 'scope'));
  secret = await secretKey(server.graphqlUrl, projectId);
});
afterAll(async () => {
  await server.close();
});

const asKey = (body: unknown) => postGraphQL(`${server.url}/api/graphql`, body, { authorization: `Bearer ${secret}` });

const counts = async () =>
  (
    await server.database.query<{ files: string; reports: string; users: string }>(
      'SELECT (SELECT count(*) FROM files) AS files, (SELECT count(*) FROM report_jobs) AS reports, (SELECT count(*) FROM users) AS users',
    )
  )[0];

/** Every root field of the served schema, as `Type.field`, read by introspection. */
async function rootFields(): Promise<{ operation: string; type: string; name: string }[]> {
  const types = ['queryType', 'mutationType', 'subscriptionType'] as const;
  const query = `{ __schema { ${types.map((type) => `${type} { name fields { name } }`).join(' ')} } }`;
  const response = await postGraphQL<{ __schema: Record<(typeof types)[number], { name: string; fields: { name: string }[] }> }>(
    server.graphqlUrl,
    { query },
    ADMIN,
  );
  const operations = { queryType: 'query', mutationType: 'mutation', subscriptionType: 'subscription' };
  return types.flatMap((type) => {
    const root = response.body.data!.__schema[type];
    return root.fields.map((field) => ({ operation: operations[type], type: root.name, name: field.name }));
  });
}

describe("a project's secret key at /api/graphql", () => {
  it('cannot upload a file or generate a report: 403 FORBIDDEN, and no row is made', async () => {
    const before = await counts();
    const upload = await asKey({
      query: print(UploadAndProcessFileDocument),
      variables: { input: { file_name: 'x.txt', file_type: 'text/plain', file_size: 1, file_data: 'eA==' } },
    });
    expect(upload.status).toBe(403);
    expect(upload.body).toEqual({ errors: [{ message: `${REFUSAL} Mutation.uploadAndProcessFile`, extensions: { code: 'FORBIDDEN' } }] });
    const report = await asKey({ query: print(GenerateReportDocument), variables: { input: { kind: 'USERS', format: 'CSV' } } });
    expect(report.status).toBe(403);
    expect(report.body).toEqual({ errors: [{ message: `${REFUSAL} Mutation.generateReport`, extensions: { code: 'FORBIDDEN' } }] });
    expect(await counts()).toEqual(before);
  });

  it('is refused every root field of the schema but error tracking’s management fields, before validation or any resolver', async () => {
    const fields = await rootFields();
    expect(fields.length).toBeGreaterThan(50);
    const allowed: string[] = [];
    for (const { operation, type, name } of fields) {
      // No arguments and no selection: a field the key may use fails validation, one it may not is refused first.
      const response = await asKey({ query: `${operation} { ${name} }` });
      if (response.status === 403) {
        expect(response.body).toEqual({ errors: [{ message: `${REFUSAL} ${type}.${name}`, extensions: { code: 'FORBIDDEN' } }] });
      } else {
        expect([`${type}.${name}`, response.body.errors?.[0]?.extensions?.code]).toEqual([
          `${type}.${name}`,
          expect.stringMatching(/GRAPHQL_VALIDATION_FAILED|SUBSCRIPTION_OVER_HTTP/),
        ]);
        allowed.push(`${type}.${name}`);
      }
    }
    expect(allowed.sort()).toEqual(MANAGEMENT_FIELDS);
  });

  it('is refused a field reached through a fragment, an inline fragment, an alias or another operation of the document', async () => {
    const before = await counts();
    const register = 'registerUser(input: {email: "key@example.com", password: "password123", name: "Key"}) { success }';
    const documents = [
      { query: `mutation { ...Sign } fragment Sign on Mutation { ${register} }` },
      { query: `mutation { ... on Mutation { ...Sign } } fragment Sign on Mutation { signUp: ${register} }` },
      { query: `mutation { ... { ${register} } }` },
      { query: `query Mine { incidents { edges { node { id } } } } mutation Theirs { ${register} }`, operationName: 'Mine' },
      { query: `query Mine { incidents { edges { node { id } } } session { role } }` },
    ];
    for (const document of documents) {
      const response = await asKey(document);
      expect([document.query, response.status, response.body.errors?.[0]?.extensions?.code]).toEqual([document.query, 403, 'FORBIDDEN']);
    }
    expect(await counts()).toEqual(before);
  });

  it('still reads and manages its own project: errors, incidents, __typename and introspection', async () => {
    const { dsnKey } = await projectWithKey(server.graphqlUrl, 'scope-events');
    await sendEvent(server.url, dsnKey, { message: 'someone else’s error' });
    const mine = await projectWithKey(server.graphqlUrl, 'scope-mine');
    await sendEvent(server.url, mine.dsnKey, { message: 'my error' });
    secret = await secretKey(server.graphqlUrl, mine.projectId);
    const errors = await asKey({ query: '{ __typename errors(filter: {}) { edges { node { message } } } }' });
    expect(errors.body).toEqual({ data: { __typename: 'Query', errors: { edges: [{ node: { message: 'my error' } }] } } });
    const incident = await asKey({ query: `mutation { createIncident(input: {project: "${mine.projectId}", title: "down", severity: MINOR}) { title } }` });
    expect(incident.body).toEqual({ data: { createIncident: { title: 'down' } } });
    const introspection = await asKey({ query: '{ __schema { mutationType { name } } }' });
    expect(introspection.body).toEqual({ data: { __schema: { mutationType: { name: 'Mutation' } } } });
  });

  it('needs the query text: a persisted query by its hash alone is refused', async () => {
    const response = await asKey({ query: undefined, extensions: { persistedQuery: { version: 1, sha256Hash: 'ab'.repeat(32) } } });
    expect(response.status).toBe(400);
  });
});

describe('the same fields at /v1/graphql', () => {
  it('are unchanged for other callers: an administrator still generates a report there', async () => {
    const report = await postGraphQL(
      server.graphqlUrl,
      { query: print(GenerateReportDocument), variables: { input: { kind: 'USERS', format: 'CSV' } } },
      ADMIN,
    );
    expect(report.body).toMatchObject({ data: { generateReport: { success: true } } });
  });
});
