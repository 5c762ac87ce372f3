import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { buildClientSchema, buildSchema, getIntrospectionQuery, lexicographicSortSchema, printSchema, type IntrospectionQuery } from 'graphql';
import { startActionHandler, type ActionHandlerServer } from '../support/action-handler';
import { postGraphQL } from '../support/graphql';
import { metadataRequest } from '../support/metadata';
import { ADMIN_SECRET, startTestServer, testEnvironment, type TestServer } from '../support/server';
import { runCli } from '../support/spawn';
import { bearer, signToken } from '../support/tokens';

let server: TestServer;
let handler: ActionHandlerServer;
let folder: string;

/** A Hasura project's action files, as the Hasura CLI writes them. */
const ACTIONS_GRAPHQL = `type Mutation {
  "Signs a user up"
  signUp(
    "who signs up"
    input: SignUpInput!
  ): SignUpOutput
}

type Query {
  quote(symbol: String!): Quote
}

input SignUpInput {
  email: String!
  plan: Plan
}

type SignUpOutput {
  id: uuid!
  email: String!
  plan: Plan!
}

type Quote {
  symbol: String!
  price: Float!
}

enum Plan {
  FREE
  PRO
}
`;

const ACTIONS_YAML = `actions:
  - name: signUp
    definition:
      kind: synchronous
      handler: '{{ACTIONS_FILES_BASE}}/sign-up'
      forward_client_headers: true
      headers:
        - name: X-Service-Key
          value_from_env: ACTIONS_FILES_KEY
      timeout: 5
    permissions:
      - role: user
    comment: Signs a user up
  - name: quote
    definition:
      handler: '{{ACTIONS_FILES_BASE}}/quote'
custom_types:
  enums:
    - name: Plan
  input_objects:
    - name: SignUpInput
  objects:
    - name: SignUpOutput
    - name: Quote
  scalars: []
`;

const env = () => ({ ...testEnvironment(server.database.url), ACTIONS_FILES_BASE: handler.url, ACTIONS_FILES_KEY: 'files-key' });
const serverOptions = () => ['--endpoint', server.url, '--admin-secret', ADMIN_SECRET];

beforeAll(async () => {
  handler = await startActionHandler();
  handler.route('/sign-up', (call) => ({
    status: 200,
    body: { id: '0f8fad5b-d9cb-469f-a165-70867728950e', email: (call.body.input.input as { email: string }).email, plan: 'FREE' },
  }));
  handler.route('/quote', () => ({ status: 200, body: { symbol: 'PLN', price: 4.2 } }));
  process.env.ACTIONS_FILES_BASE = handler.url;
  process.env.ACTIONS_FILES_KEY = 'files-key';
  server = await startTestServer();
  folder = fs.mkdtempSync(path.join(os.tmpdir(), 'plinth-actions-files-'));
});

afterAll(async () => {
  await server?.close();
  await handler?.close();
  fs.rmSync(folder, { recursive: true, force: true });
});

function writeProject(directory: string, files: Record<string, string>): void {
  fs.mkdirSync(directory, { recursive: true });
  fs.writeFileSync(path.join(directory, 'version.yaml'), 'version: 3\n');
  for (const [file, text] of Object.entries(files)) fs.writeFileSync(path.join(directory, file), text);
}

it("plinth metadata apply takes a Hasura project's actions.graphql and actions.yaml unchanged", async () => {
  const project = path.join(folder, 'project');
  writeProject(project, { 'actions.graphql': ACTIONS_GRAPHQL, 'actions.yaml': ACTIONS_YAML });
  const applied = await runCli(['metadata', 'apply', '--dir', project, ...serverOptions()], env());
  expect(applied).toMatchObject({ code: 0 });

  const userToken = signToken({ roles: ['user'] });
  const signUp = await postGraphQL(
    server.graphqlUrl,
    { query: 'mutation { signUp(input: {email: "a@example.com", plan: PRO}) { id email plan } }' },
    bearer(userToken),
  );
  expect(signUp.body).toEqual({ data: { signUp: { id: '0f8fad5b-d9cb-469f-a165-70867728950e', email: 'a@example.com', plan: 'FREE' } } });
  const received = handler.calls.find((call) => call.path === '/sign-up')!;
  expect(received.body.input).toEqual({ input: { email: 'a@example.com', plan: 'PRO' } });
  expect(received.headers['x-service-key']).toBe('files-key');

  // No permission for quote: only admin.
  expect(
    (await postGraphQL(server.graphqlUrl, { query: 'query { quote(symbol: "PLN") { price } }' }, bearer(userToken))).body.errors?.[0].extensions?.code,
  ).toBe('FORBIDDEN');
  const quote = await postGraphQL(server.graphqlUrl, { query: 'query { quote(symbol: "PLN") { symbol price } }' }, { 'x-gql-admin-secret': ADMIN_SECRET });
  expect(quote.body).toEqual({ data: { quote: { symbol: 'PLN', price: 4.2 } } });
});

it('plinth metadata export writes them back, diff finds no difference, then finds an edit', async () => {
  const exported = path.join(folder, 'exported');
  expect(await runCli(['metadata', 'export', '--dir', exported, ...serverOptions()], env())).toMatchObject({ code: 0 });
  const graphql = fs.readFileSync(path.join(exported, 'actions.graphql'), 'utf8');
  expect(graphql).toContain('type Mutation {\n  "Signs a user up"\n  signUp(');
  expect(graphql).toContain('input SignUpInput {\n  email: String!\n  plan: Plan\n}');
  expect(graphql).toContain('type Query {\n  quote(symbol: String!): Quote\n}');
  expect(graphql).toContain('enum Plan {\n  FREE\n  PRO\n}');
  const yaml = fs.readFileSync(path.join(exported, 'actions.yaml'), 'utf8');
  expect(yaml).toContain('{{ACTIONS_FILES_BASE}}/sign-up');
  expect(yaml).toMatch(/value_from_env: ACTIONS_FILES_KEY/);
  expect(yaml).toMatch(/permissions:\n\s+- role: user/);
  expect(yaml).not.toContain('output_type');

  const project = path.join(folder, 'project');
  expect(await runCli(['metadata', 'diff', '--dir', exported, ...serverOptions()], env())).toMatchObject({ code: 0, stdout: 'the files match the server\n' });
  expect(await runCli(['metadata', 'diff', '--dir', project, ...serverOptions()], env())).toMatchObject({ code: 0 });
  fs.writeFileSync(path.join(exported, 'actions.yaml'), yaml.replace('timeout: 5', 'timeout: 9'));
  const diff = await runCli(['metadata', 'diff', '--dir', exported, ...serverOptions()], env());
  expect(diff.code).toBe(1);
  expect(diff.stdout).toContain('+       timeout: 9');
});

it('refuses files that do not fit, naming the entry, and changes nothing', async () => {
  const before = await runCli(['metadata', 'diff', '--dir', path.join(folder, 'project'), ...serverOptions()], env());
  expect(before.code).toBe(0);
  const cases: [Record<string, string>, RegExp][] = [
    [{ 'actions.graphql': ACTIONS_GRAPHQL, 'actions.yaml': ACTIONS_YAML.replace('name: quote', 'name: quotes') }, /quotes has no field/],
    [{ 'actions.graphql': ACTIONS_GRAPHQL.replace('price: Float!', 'price: Money!'), 'actions.yaml': ACTIONS_YAML }, /Quote\.price.*unknown type Money/],
    [
      { 'actions.graphql': ACTIONS_GRAPHQL.replace('signUp(', 'registerUser('), 'actions.yaml': ACTIONS_YAML.replace('name: signUp', 'name: registerUser') },
      /registerUser.*clashes/,
    ],
    [{ 'actions.graphql': 'type Mutation {', 'actions.yaml': ACTIONS_YAML }, /actions\.graphql is not valid GraphQL/],
  ];
  for (const [index, [files, message]] of cases.entries()) {
    const project = path.join(folder, `bad-${index}`);
    writeProject(project, files);
    const applied = await runCli(['metadata', 'apply', '--dir', project, ...serverOptions()], env());
    expect({ index, code: applied.code }).toEqual({ index, code: 1 });
    expect(applied.stderr).toMatch(message);
  }
  expect(await runCli(['metadata', 'diff', '--dir', path.join(folder, 'project'), ...serverOptions()], env())).toMatchObject({ code: 0 });
});

it("plinth schema prints Plinth's own schema, and with --with-metadata the served one", async () => {
  const own = await runCli(['schema'], env());
  expect(own.code).toBe(0);
  expect(own.stdout).not.toContain('signUp');
  expect(own.stdout).toBe(fs.readFileSync(path.join(__dirname, '..', '..', '..', 'schema', 'schema.graphql'), 'utf8'));
  const served = await runCli(['schema', '--with-metadata'], env());
  expect(served).toMatchObject({ code: 0 });
  expect(served.stdout).toContain('signUp(\n    """who signs up"""\n    input: SignUpInput!\n  ): SignUpOutput');
  expect(served.stdout).toContain('quote(symbol: String!): Quote');
  expect(served.stdout).toContain('scalar uuid');
});

it("plinth schema --with-metadata prints the schema served to the admin, with the custom types' relationships to tables", async () => {
  await server.database.query(`
    CREATE TABLE files_accounts (id uuid PRIMARY KEY, email text NOT NULL);
    CREATE TABLE files_signups (id serial PRIMARY KEY, account_id uuid NOT NULL, at timestamptz NOT NULL DEFAULT now());
  `);
  const exported = await metadataRequest(server.url, { type: 'export_metadata', args: {} });
  const customTypes = exported.body.custom_types as { objects: { name: string; relationships?: unknown[] }[] };
  const relationships = [
    { name: 'account', type: 'object', remote_table: 'files_accounts', field_mapping: { id: 'id' } },
    { name: 'signups', type: 'array', remote_table: { schema: 'public', name: 'files_signups' }, field_mapping: { id: 'account_id' } },
  ];
  const changed = await metadataRequest(server.url, {
    type: 'bulk',
    args: [
      ...['files_accounts', 'files_signups'].map((table) => ({ type: 'pg_track_table', args: { table } })),
      {
        type: 'set_custom_types',
        args: { ...customTypes, objects: customTypes.objects.map((object) => (object.name === 'SignUpOutput' ? { ...object, relationships } : object)) },
      },
    ],
  });
  expect(changed).toMatchObject({ status: 200 });

  const printed = await runCli(['schema', '--with-metadata'], env());
  expect(printed).toMatchObject({ code: 0 });
  const introspection = await postGraphQL<IntrospectionQuery>(
    server.graphqlUrl,
    { query: getIntrospectionQuery({ specifiedByUrl: true }) },
    { 'x-gql-admin-secret': ADMIN_SECRET },
  );
  expect(introspection.body.errors).toBeUndefined();
  const servedToAdmin = printSchema(lexicographicSortSchema(buildClientSchema(introspection.body.data!)));
  expect(servedToAdmin).toMatch(/type SignUpOutput \{[^}]*account: files_accounts\n[^}]*signups\([^}]*\): \[files_signups!\]!/);
  expect(printSchema(lexicographicSortSchema(buildSchema(printed.stdout)))).toBe(servedToAdmin);
});
