import { RegisterUserDocument, type RegisterUserInput } from '../generated/graphql';
import { graphql } from '../support/graphql';
import { startTestServer, type TestServer } from '../support/server';
import { bearer, signToken } from '../support/tokens';

let server: TestServer;

beforeAll(async () => {
  server = await startTestServer();
});
afterAll(async () => {
  await server.close();
});

const register = (input: RegisterUserInput, headers: Record<string, string> = {}) => graphql(server.graphqlUrl, RegisterUserDocument, { input }, headers);

async function userCount(): Promise<number> {
  const [row] = await server.database.query<{ count: string }>('SELECT count(*) FROM users');
  return Number(row.count);
}

describe('registerUser over GraphQL', () => {
  it('creates the user, answers with UserInfo and stores an argon2id hash, never the password', async () => {
    const response = await register({ email: '  Ada@Example.COM ', password: 'correct horse', name: ' Ada ', company: 'Analytical' });

    expect(response.status).toBe(200);
    const result = response.body.data!.registerUser;
    expect(result.success).toBe(true);
    expect(result.errors).toBeNull();
    expect(result.message).toMatch(/registered/i);
    expect(result.user).toEqual({
      id: expect.stringMatching(/^[0-9a-f-]{36}$/),
      email: 'ada@example.com',
      name: 'Ada',
      email_verified: false,
    });

    const [row] = await server.database.query<Record<string, unknown>>('SELECT * FROM users WHERE id = $1', [result.user!.id]);
    expect(row).toMatchObject({ email: 'ada@example.com', name: 'Ada', company: 'Analytical', email_verified: false });
    expect(row.password_hash).toMatch(/^\$argon2id\$v=19\$/);
    expect(String(row.password_hash)).not.toContain('correct horse');
    expect(row.created_at).toBeInstanceOf(Date);
  });

  it('is open to anonymous callers, users and admins alike', async () => {
    const asUser = await register({ email: 'user-role@example.com', password: 'password123', name: 'U' }, bearer(signToken()));
    expect(asUser.body.data!.registerUser.success).toBe(true);
  });

  it.each([
    ['a missing e-mail', { email: '', password: 'password123', name: 'N' }, 'email', 'REQUIRED_FIELD'],
    ['a malformed e-mail', { email: 'not-an-email', password: 'password123', name: 'N' }, 'email', 'INVALID_FORMAT'],
    ['an e-mail over 254 characters', { email: `${'a'.repeat(250)}@x.io`, password: 'password123', name: 'N' }, 'email', 'INVALID_LENGTH'],
    ['a password below AUTH_PASSWORD_MIN_LENGTH', { email: 'short@example.com', password: 'seven77', name: 'N' }, 'password', 'INVALID_LENGTH'],
    ['a password over AUTH_PASSWORD_MAX_LENGTH', { email: 'huge@example.com', password: 'p'.repeat(257), name: 'N' }, 'password', 'INVALID_LENGTH'],
    ['an empty password', { email: 'nopass@example.com', password: '', name: 'N' }, 'password', 'REQUIRED_FIELD'],
    ['a blank name', { email: 'blank@example.com', password: 'password123', name: '   ' }, 'name', 'REQUIRED_FIELD'],
    ['a name over 200 characters', { email: 'long@example.com', password: 'password123', name: 'n'.repeat(201) }, 'name', 'INVALID_LENGTH'],
    ['a company over 200 characters', { email: 'co@example.com', password: 'password123', name: 'N', company: 'c'.repeat(201) }, 'company', 'INVALID_LENGTH'],
  ])('rejects %s with a per-field error and writes nothing', async (_case, input, field, code) => {
    const before = await userCount();
    const response = await register(input);

    expect(response.status).toBe(200);
    const result = response.body.data!.registerUser;
    expect(result).toMatchObject({ success: false, user: null, message: 'Validation failed' });
    expect(result.errors).toEqual([{ field, code, message: expect.any(String) }]);
    expect(await userCount()).toBe(before);
  });

  it('reports every invalid field at once, in input order', async () => {
    const response = await register({ email: 'x', password: 'short', name: '' });
    expect(response.body.data!.registerUser.errors!.map((error) => [error.field, error.code])).toEqual([
      ['email', 'INVALID_FORMAT'],
      ['password', 'INVALID_LENGTH'],
      ['name', 'REQUIRED_FIELD'],
    ]);
  });

  it('refuses an e-mail already registered, whatever its case, with an error on field email', async () => {
    expect((await register({ email: 'twice@example.com', password: 'password123', name: 'First' })).body.data!.registerUser.success).toBe(true);
    const before = await userCount();

    const again = await register({ email: 'TWICE@example.com', password: 'password456', name: 'Second' });

    expect(again.body.data!.registerUser).toMatchObject({ success: false, user: null });
    expect(again.body.data!.registerUser.errors).toEqual([{ field: 'email', code: 'ALREADY_EXISTS', message: expect.any(String) }]);
    expect(await userCount()).toBe(before);
    const rows = await server.database.query('SELECT name FROM users WHERE lower(email) = $1', ['twice@example.com']);
    expect(rows).toEqual([{ name: 'First' }]);
  });

  it('lets exactly one of many simultaneous registrations of one e-mail succeed', async () => {
    const attempts = await Promise.all(
      Array.from({ length: 6 }, (_, index) => register({ email: 'race@example.com', password: 'password123', name: `Racer ${index}` })),
    );
    const results = attempts.map((response) => response.body.data!.registerUser);

    expect(results.filter((result) => result.success)).toHaveLength(1);
    for (const loser of results.filter((result) => !result.success)) {
      expect(loser.errors).toEqual([{ field: 'email', code: 'ALREADY_EXISTS', message: expect.any(String) }]);
    }
    expect(await server.database.query('SELECT id FROM users WHERE email = $1', ['race@example.com'])).toHaveLength(1);
  });

  it('reports an unexpected failure on field general, without details, and writes nothing', async () => {
    // A real failure of the database: the table the service writes to is gone for a moment.
    await server.database.query('ALTER TABLE users RENAME TO users_away');
    try {
      const response = await register({ email: 'general@example.com', password: 'password123', name: 'G' });
      expect(response.status).toBe(200);
      expect(response.body.data!.registerUser).toMatchObject({ success: false, user: null });
      expect(response.body.data!.registerUser.errors).toEqual([{ field: 'general', code: 'INTERNAL_ERROR', message: expect.any(String) }]);
      expect(JSON.stringify(response.body)).not.toMatch(/users|relation|QueryFailedError|at /);
    } finally {
      await server.database.query('ALTER TABLE users_away RENAME TO users');
    }
    expect(await server.database.query('SELECT 1 FROM users WHERE email = $1', ['general@example.com'])).toHaveLength(0);
  });

  it('answers a GraphQL type error (a missing required argument field) with a validation error, not a 500', async () => {
    const response = await fetch(server.graphqlUrl, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'application/graphql-response+json' },
      body: JSON.stringify({ query: 'mutation { registerUser(input: { email: "a@b.co", name: "x" }) { success } }' }),
    });
    expect(response.status).toBe(400);
    const body = (await response.json()) as { errors: { extensions: { code: string } }[] };
    expect(body.errors[0].extensions.code).toBe('GRAPHQL_VALIDATION_FAILED');
  });
});
