import { RegisterUserDocument, SessionDocument } from './generated/graphql';
import { graphql } from './support/graphql';
import { ADMIN_SECRET, startTestServer, type TestServer } from './support/server';
import { bearer, signToken } from './support/tokens';

const lines: string[] = [];
let server: TestServer;

beforeAll(async () => {
  server = await startTestServer({ LOG_LEVEL: 'debug' }, { logTo: { write: (line: string) => void lines.push(line) } });
});
afterAll(async () => {
  await server.close();
});

describe('logs', () => {
  it('never hold a secret: admin secret, token, password, password hash or query-string variables', async () => {
    const password = 'Correct-Horse-Battery-9';
    const token = signToken();
    await graphql(server.graphqlUrl, SessionDocument, {}, { 'x-gql-admin-secret': ADMIN_SECRET });
    await graphql(server.graphqlUrl, SessionDocument, {}, { 'x-gql-admin-secret': 'wrong-secret-guess' });
    await graphql(server.graphqlUrl, SessionDocument, {}, bearer(token));
    await fetch(`${server.graphqlUrl}?query=${encodeURIComponent('{ session { role } }')}&variables=${encodeURIComponent(JSON.stringify({ password }))}`);
    const registered = await graphql(server.graphqlUrl, RegisterUserDocument, { input: { email: 'logs@example.com', password, name: 'L' } });
    expect(registered.body.data!.registerUser.success).toBe(true);
    const [{ password_hash: hash }] = await server.database.query<{ password_hash: string }>('SELECT password_hash FROM users');

    // An unexpected database failure is logged with the error, but not with the statement's values.
    await server.database.query('ALTER TABLE users ADD CONSTRAINT no_more CHECK (false) NOT VALID');
    const failed = await graphql(server.graphqlUrl, RegisterUserDocument, { input: { email: 'fail@example.com', password, name: 'F' } });
    expect(failed.body.data!.registerUser.errors![0].field).toBe('general');

    const log = lines.join('');
    expect(log).toContain('registerUser failed unexpectedly');
    expect(log).toContain('no_more');
    expect(log).toContain('"path":"/v1/graphql"');
    for (const secret of [ADMIN_SECRET, 'wrong-secret-guess', token, password, hash, '$argon2id$']) {
      expect(log).not.toContain(secret);
    }
  });
});
