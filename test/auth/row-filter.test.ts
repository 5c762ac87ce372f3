import { resolveSession, type Session } from '../../src/platform/session';
import { filterRows, rowFilterSql, type OwnedTable } from '../../src/platform/row-filter';
import { authPost, GENEROUS_AUTH_LIMITS } from '../support/auth';
import { ADMIN_SECRET, JWT_SECRET, startTestServer, type TestServer } from '../support/server';
import { loadConfig } from '../../src/config';
import { testEnvironment } from '../support/server';

/**
 * The row filters of spec 2 §2.3 (src/platform/row-filter.ts), with sessions resolved from the
 * tokens sign-in issues, on the users table (owner `id`) and on a table of user-owned rows
 * (owner `user_id`), through TypeORM's query builder and through SQL written by hand.
 */
let server: TestServer;
const users: Record<'ann' | 'bob', { id: string; token: string }> = {} as never;
const settings = (() => {
  const config = loadConfig(testEnvironment('postgres://localhost/x'));
  return { adminSecret: ADMIN_SECRET, jwtSecret: config.graphql.jwtSecret!, unauthorizedRole: config.graphql.unauthorizedRole };
})();

beforeAll(async () => {
  server = await startTestServer({ ...GENEROUS_AUTH_LIMITS, AUTH_EMAIL_SIGNIN_EMAIL_VERIFIED_REQUIRED: 'false', GQL_GRAPHQL_JWT_SECRET: JWT_SECRET });
  for (const name of ['ann', 'bob'] as const) {
    const response = await authPost<{ session: { user: { id: string } } }>(server.url, '/signup/email-password', {
      email: `${name}@example.com`,
      password: 'row filter password',
    });
    users[name] = { id: response.body.session.user.id, token: '' };
  }
  // Ann is an administrator of the primary account; Bob's account lives in another source account.
  await server.database.query("UPDATE users SET allowed_roles = '{user,me,admin}' WHERE id = $1", [users.ann.id]);
  await server.database.query("UPDATE users SET source_account_id = 'other' WHERE id = $1", [users.bob.id]);
  for (const name of ['ann', 'bob'] as const) {
    const response = await authPost<{ session: { accessToken: string } }>(server.url, '/signin/email-password', {
      email: `${name}@example.com`,
      password: 'row filter password',
    });
    users[name].token = response.body.session.accessToken;
  }
  await server.database.query('CREATE TABLE notes (id serial PRIMARY KEY, user_id uuid, source_account_id text NOT NULL, body text NOT NULL)');
  await server.database.query(
    `INSERT INTO notes (user_id, source_account_id, body) VALUES ($1, 'primary', 'ann 1'), ($1, 'primary', 'ann 2'), ($2, 'other', 'bob 1'), (NULL, 'primary', 'nobody')`,
    [users.ann.id, users.bob.id],
  );
});
afterAll(() => server.close());

const tokenSession = (name: 'ann' | 'bob', role?: string): Session =>
  resolveSession({ authorization: `Bearer ${users[name].token}`, ...(role ? { 'x-gql-role': role } : {}) }, settings);

const NOTES: OwnedTable = { owner: 'user_id' };
const USERS: OwnedTable = { owner: 'id' };

async function notesSeenBy(session: Session): Promise<string[]> {
  const rows = await filterRows(server.server.dataSource.createQueryBuilder().select('n.body', 'body').from('notes', 'n'), 'n', session, NOTES)
    .orderBy('n.id')
    .getRawMany<{ body: string }>();
  const filter = rowFilterSql(session, NOTES, 'n', 1);
  const bySql = (await server.server.dataSource.query(`SELECT n.body FROM notes n WHERE ${filter.clause} ORDER BY n.id`, filter.parameters)) as {
    body: string;
  }[];
  // Both forms agree.
  expect(bySql).toEqual(rows);
  return rows.map((row) => row.body);
}

async function usersSeenBy(session: Session): Promise<string[]> {
  const rows = await filterRows(server.server.dataSource.createQueryBuilder().select('u.email', 'email').from('users', 'u'), 'u', session, USERS)
    .orderBy('u.email')
    .getRawMany<{ email: string }>();
  return rows.map((row) => row.email);
}

describe('row filters', () => {
  it('role user sees the rows it owns (user_id), and itself in users', async () => {
    expect(await notesSeenBy(tokenSession('ann'))).toEqual(['ann 1', 'ann 2']);
    expect(await notesSeenBy(tokenSession('bob'))).toEqual(['bob 1']);
    expect(await usersSeenBy(tokenSession('bob'))).toEqual(['bob@example.com']);
  });

  it('role me sees the row that is the user itself', async () => {
    expect(await usersSeenBy(tokenSession('ann', 'me'))).toEqual(['ann@example.com']);
    expect(await notesSeenBy(tokenSession('ann', 'me'))).toEqual(['ann 1', 'ann 2']);
  });

  it("role admin sees the rows of its source account (the token's x-gql-source-account-id)", async () => {
    const admin = tokenSession('ann', 'admin');
    expect(admin.variables['x-gql-source-account-id']).toBe('primary');
    expect(await notesSeenBy(admin)).toEqual(['ann 1', 'ann 2', 'nobody']);
    expect(await usersSeenBy(admin)).toEqual(['ann@example.com']);
  });

  it('the admin secret sees every row, or one source account when it names one', async () => {
    expect(await notesSeenBy(resolveSession({ 'x-gql-admin-secret': ADMIN_SECRET }, settings))).toEqual(['ann 1', 'ann 2', 'bob 1', 'nobody']);
    const scoped = resolveSession({ 'x-gql-admin-secret': ADMIN_SECRET, 'x-gql-source-account-id': 'other' }, settings);
    expect(await notesSeenBy(scoped)).toEqual(['bob 1']);
    // The secret acting as a user is filtered as that user.
    const asBob = resolveSession({ 'x-gql-admin-secret': ADMIN_SECRET, 'x-gql-role': 'user', 'x-gql-user-id': users.bob.id }, settings);
    expect(await notesSeenBy(asBob)).toEqual(['bob 1']);
  });

  it('a caller without a user id sees nothing, and a user id that is not a uuid matches nothing', async () => {
    expect(await notesSeenBy(resolveSession({}, settings))).toEqual([]);
    const odd = resolveSession({ 'x-gql-admin-secret': ADMIN_SECRET, 'x-gql-role': 'user', 'x-gql-user-id': "x' OR '1'='1" }, settings);
    expect(await notesSeenBy(odd)).toEqual([]);
    // A uuid owner column is compared as uuid (its index serves): an id that is not one matches nothing before the query.
    expect(rowFilterSql(odd, { owner: 'user_id', uuid: true }, 'n', 1)).toEqual({ clause: 'false', parameters: [] });
    const bob = rowFilterSql(tokenSession('bob'), { owner: 'user_id', uuid: true }, 'n', 1);
    expect(bob.clause).toBe('n."user_id" = $1::uuid');
    const rows = (await server.server.dataSource.query(`SELECT n.body FROM notes n WHERE ${bob.clause}`, bob.parameters)) as { body: string }[];
    expect(rows).toEqual([{ body: 'bob 1' }]);
  });

  it('refuses column names that are not identifiers', () => {
    expect(() => rowFilterSql(tokenSession('ann'), { owner: 'user_id; DROP TABLE notes' }, 'n', 1)).toThrow('is not a column name');
  });
});
