import Fastify from 'fastify';
import { graphql as execute, GraphQLObjectType, GraphQLSchema, GraphQLString } from 'graphql';
import { unstorableTextPaths } from '../../src/common/text';
import { guardRootArgumentText } from '../../src/graphql/input-text';
import { installErrorHandling } from '../../src/http/errors';
import { installInputTextCheck } from '../../src/http/input-text';
import { RegisterUserDocument } from '../generated/graphql';
import { graphql } from '../support/graphql';
import { ADMIN_SECRET, startTestServer, type TestServer } from '../support/server';

let server: TestServer;

beforeAll(async () => {
  server = await startTestServer();
});
afterAll(async () => {
  await server.close();
});

const LONE_SURROGATE_EMAIL = '\ud800x@example.com';
const userCount = async () => Number((await server.database.query<{ n: string }>('SELECT count(*) AS n FROM users'))[0].n);

async function callRegisterAction(input: Record<string, unknown>) {
  const response = await fetch(`${server.url}/actions/register-user`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-gql-admin-secret': ADMIN_SECRET },
    body: JSON.stringify({ action: { name: 'registerUser' }, input: { input } }),
  });
  return { status: response.status, body: (await response.json()) as { success: boolean; errors?: { field: string; code: string }[] } };
}

describe('text PostgreSQL cannot store, or that is not Unicode', () => {
  it.each([
    ['a lone surrogate in the e-mail', { email: LONE_SURROGATE_EMAIL, password: 'password123', name: 'Ada' }, 'email'],
    ['a lone low surrogate in the e-mail', { email: 'a\udc00@example.com', password: 'password123', name: 'Ada' }, 'email'],
    ['a NUL in the name', { email: 'nul@example.com', password: 'password123', name: 'Ada\u0000Lovelace' }, 'name'],
    ['a NUL in the company', { email: 'nul2@example.com', password: 'password123', name: 'Ada', company: '\u0000' }, 'company'],
  ])('%s is an INVALID_FORMAT field error on the handler route and on GraphQL, and nothing is written', async (_, input, field) => {
    const before = await userCount();
    const action = await callRegisterAction(input);
    expect(action.status).toBe(200);
    expect(action.body.success).toBe(false);
    expect(action.body.errors).toEqual([expect.objectContaining({ field, code: 'INVALID_FORMAT' })]);

    const viaGraphQL = await graphql(server.graphqlUrl, RegisterUserDocument, { input: input as never });
    expect(viaGraphQL.status).toBe(200);
    expect(viaGraphQL.body.errors).toBeUndefined();
    expect(viaGraphQL.body.data!.registerUser.success).toBe(false);
    expect(viaGraphQL.body.data!.registerUser.errors).toEqual([expect.objectContaining({ field, code: 'INVALID_FORMAT' })]);
    expect(await userCount()).toBe(before);
  });

  it("keeps the other fields' errors next to the text error", async () => {
    const action = await callRegisterAction({ email: LONE_SURROGATE_EMAIL, password: 'short', name: '' });
    expect(action.body.errors!.map((error) => [error.field, error.code])).toEqual([
      ['email', 'INVALID_FORMAT'],
      ['password', 'INVALID_LENGTH'],
      ['name', 'REQUIRED_FIELD'],
    ]);
  });

  it('accepts well-formed text outside the Basic Multilingual Plane', async () => {
    const action = await callRegisterAction({ email: 'emoji@example.com', password: 'password123', name: 'Ada 🧮 Lovelace' });
    expect(action.body.success).toBe(true);
  });

  it('finds every bad string of a nested value, keys included, by its path', () => {
    expect(unstorableTextPaths({ a: 'ok', b: ['x', 'y\u0000'], c: { d: '\udfff', 'e\ud800': 1 }, f: '😀' })).toEqual(['b.1', 'c.d', 'c.e\ufffd']);
    expect(unstorableTextPaths(['\ud83d\ude00', 'fine'])).toEqual([]);
  });
});

describe('the root-field argument guard', () => {
  const schema = new GraphQLSchema({
    query: new GraphQLObjectType({
      name: 'Query',
      fields: {
        echo: { type: GraphQLString, args: { text: { type: GraphQLString } }, resolve: (_, args: { text: string }) => args.text },
      },
    }),
  });
  guardRootArgumentText(schema);

  it('refuses an argument with NUL or a lone surrogate with BAD_USER_INPUT naming it, before the resolver', async () => {
    for (const text of ['a\u0000b', '\ud800']) {
      const result = await execute({ schema, source: 'query ($t: String) { echo(text: $t) }', variableValues: { t: text } });
      expect(result.errors?.[0].extensions).toEqual({ code: 'BAD_USER_INPUT', argument: 'text' });
      expect(result.data).toEqual({ echo: null });
    }
    const fine = await execute({ schema, source: 'query ($t: String) { echo(text: $t) }', variableValues: { t: 'a b' } });
    expect(fine).toEqual({ data: { echo: 'a b' } });
  });
});

describe('REST routes', () => {
  it('answer 400 naming the parameter, query or body field, before the handler runs', async () => {
    const app = Fastify();
    installErrorHandling(app);
    installInputTextCheck(app);
    let handled = 0;
    app.post('/things/:id', async () => ({ handled: ++handled }));
    const base = await app.listen({ host: '127.0.0.1', port: 0 });
    const call = async (path: string, body: unknown) => {
      const response = await fetch(`${base}${path}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
      return { status: response.status, body: (await response.json()) as Record<string, unknown> };
    };
    try {
      const param = await call('/things/a%00b', {});
      expect(param.status).toBe(400);
      expect(param.body.errors).toEqual([expect.objectContaining({ field: 'params.id', code: 'INVALID_FORMAT' })]);
      const query = await call('/things/1?q=%00', {});
      expect(query.body.errors).toEqual([expect.objectContaining({ field: 'query.q' })]);
      const body = await call('/things/1', { list: ['ok', '\ud800'] });
      expect(body.status).toBe(400);
      expect(body.body).toMatchObject({ success: false, error_code: 'VALIDATION_ERROR', errors: [{ field: 'body.list.1', code: 'INVALID_FORMAT' }] });
      expect(handled).toBe(0);
      expect((await call('/things/1', { list: ['ok'] })).body).toEqual({ handled: 1 });
    } finally {
      await app.close();
    }
  });
});
