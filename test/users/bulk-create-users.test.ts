import { BulkCreateUsersDocument, type BulkCreateUsersInput } from '../generated/graphql';
import { sha256 } from '../../src/common/sha256';
import { graphql, postGraphQL } from '../support/graphql';
import { ADMIN_SECRET, compiledExecutionEnabled, startTestServer, type TestServer } from '../support/server';
import { startSmtpReceiver, type SmtpReceiver, smtpSettings } from '../support/smtp';
import { bearer, signToken } from '../support/tokens';

const MAX_USERS = 5;
const ADMIN = { 'x-gql-admin-secret': ADMIN_SECRET };

let server: TestServer;
let receiver: SmtpReceiver;

beforeAll(async () => {
  receiver = await startSmtpReceiver();
  server = await startTestServer({
    ACTIONS_BULK_CREATE_MAX_USERS: String(MAX_USERS),
    ...smtpSettings(receiver.port),
    AUTH_SERVER_URL: 'https://auth.plinth.test',
    JOBS_POLL_INTERVAL_SECONDS: '1',
  });
});
afterAll(async () => {
  await server.close();
  await receiver.close();
});

const bulkCreate = (input: BulkCreateUsersInput, headers: Record<string, string> = ADMIN) =>
  graphql(server.graphqlUrl, BulkCreateUsersDocument, { input }, headers);

async function userCount(): Promise<number> {
  const [row] = await server.database.query<{ count: string }>('SELECT count(*) FROM users');
  return Number(row.count);
}

describe('bulkCreateUsers over GraphQL', () => {
  it('creates the valid entries, fails the others alone, and keeps the input order', async () => {
    await bulkCreate({ users: [{ email: 'taken@example.com', name: 'Taken' }] });

    const response = await bulkCreate({
      users: [
        { email: ' Good@Example.com ', name: ' Good ', company: 'Acme' },
        { email: 'not-an-email', name: 'Bad' },
        { email: 'TAKEN@example.com', name: 'Again' },
        { email: 'twice@example.com', name: 'First' },
        { email: 'Twice@Example.COM', name: 'Second' },
      ],
    });

    expect(response.status).toBe(200);
    const result = response.body.data!.bulkCreateUsers;
    expect(result).toMatchObject({ success: true, created_count: 2, failed_count: 3, errors: null });
    expect(result.results.map(({ email, success, error }) => ({ email, success, error }))).toEqual([
      { email: 'good@example.com', success: true, error: null },
      { email: 'not-an-email', success: false, error: 'email must be a valid e-mail address' },
      { email: 'TAKEN@example.com', success: false, error: 'This e-mail address is already registered' },
      { email: 'twice@example.com', success: true, error: null },
      { email: 'Twice@Example.COM', success: false, error: 'This e-mail address appears earlier in the batch' },
    ]);
    expect(result.results[0].user).toEqual({ id: expect.stringMatching(/^[0-9a-f-]{36}$/), email: 'good@example.com', name: 'Good', email_verified: false });

    const [row] = await server.database.query<Record<string, unknown>>('SELECT * FROM users WHERE id = $1', [result.results[0].user!.id]);
    // No password until the invitation is accepted: a null hash matches none.
    expect(row).toMatchObject({ email: 'good@example.com', name: 'Good', company: 'Acme', password_hash: null, email_verified: false });
    expect(await server.database.query("SELECT 1 FROM users WHERE lower(email) = 'twice@example.com'")).toHaveLength(1);
  });

  it('fails only the entry holding text PostgreSQL cannot store', async () => {
    const response = await bulkCreate({
      users: [
        { email: 'nul-neighbour@example.com', name: 'Fine' },
        { email: 'nul@example.com', name: 'Bad\u0000Name' },
      ],
    });
    expect(response.body.errors).toBeUndefined();
    const result = response.body.data!.bulkCreateUsers;
    expect(result).toMatchObject({ success: true, created_count: 1, failed_count: 1 });
    expect(result.results[1]).toMatchObject({ email: 'nul@example.com', success: false, error: expect.stringMatching(/^name /) });
    expect(await server.database.query("SELECT 1 FROM users WHERE email = 'nul@example.com'")).toHaveLength(0);
  });

  it(`refuses a batch over ACTIONS_BULK_CREATE_MAX_USERS (${MAX_USERS} here) whole, creating nothing`, async () => {
    const before = await userCount();
    const users = Array.from({ length: MAX_USERS + 1 }, (_, index) => ({ email: `over${index}@example.com`, name: 'Over' }));
    const result = (await bulkCreate({ users })).body.data!.bulkCreateUsers;
    expect(result).toMatchObject({ success: false, created_count: 0, failed_count: MAX_USERS + 1, results: [] });
    expect(result.errors).toEqual([{ field: 'users', code: 'INVALID_LENGTH', message: expect.stringContaining(`at most ${MAX_USERS}`) }]);
    expect(await userCount()).toBe(before);
  });

  it('answers an empty list with nothing to do', async () => {
    const result = (await bulkCreate({ users: [] })).body.data!.bulkCreateUsers;
    expect(result).toMatchObject({ success: true, created_count: 0, failed_count: 0, results: [] });
  });

  it.each([
    ['a user', bearer(signToken())],
    ['an anonymous caller', {}],
  ])('is FORBIDDEN to %s', async (_who, headers) => {
    const before = await userCount();
    const response = await bulkCreate({ users: [{ email: 'forbidden@example.com', name: 'No' }] }, headers);
    expect(response.body.data).toBeNull();
    expect(response.body.errors![0].extensions!.code).toBe('FORBIDDEN');
    expect(await userCount()).toBe(before);
  });

  it('mails one invitation per created user, none for failed entries, each with a ticket whose hash is stored', async () => {
    receiver.received.splice(0);
    const response = await bulkCreate({
      users: [
        { email: 'invitee1@example.com', name: 'One' },
        { email: 'broken', name: 'Broken' },
        { email: 'taken@example.com', name: 'Taken' },
        { email: 'invitee2@example.com', name: 'Two' },
      ],
      send_invitations: true,
    });
    const result = response.body.data!.bulkCreateUsers;
    expect(result).toMatchObject({ created_count: 2, failed_count: 2 });

    const mails = [await receiver.next(30_000), await receiver.next(30_000)];
    expect(mails.map((mail) => mail.recipients[0]).sort()).toEqual(['invitee1@example.com', 'invitee2@example.com']);
    for (const mail of mails) {
      const [link] = String(mail.parsed.text).match(/https:\/\/auth\.plinth\.test\/invitations\/accept\?ticket=[\w-]+/) ?? [];
      expect(link).toBeDefined();
      const ticket = new URL(link!).searchParams.get('ticket')!;
      const rows = await server.database.query<{ email: string; ttl: number }>(
        `SELECT u.email, extract(epoch FROM i.expires_at - i.created_at)::int AS ttl
         FROM user_invitations i JOIN users u ON u.id = i.user_id WHERE i.ticket_hash = $1`,
        [sha256(ticket)],
      );
      expect(rows).toEqual([{ email: mail.recipients[0], ttl: 7 * 86_400 }]);
    }
    // The ticket itself is stored nowhere.
    expect(await server.database.query('SELECT count(*)::int AS count FROM user_invitations')).toEqual([{ count: 2 }]);
    await new Promise((resolve) => setTimeout(resolve, 1500));
    expect(receiver.received).toHaveLength(2);
  });
});

describe('bulkCreateUsers failing unexpectedly', () => {
  it('rolls the whole batch back: no user, no invitation, no mail, INTERNAL_ERROR', async () => {
    // The second invitation mail cannot be queued: the first one, already queued, must go too.
    await server.database.query(`
      CREATE FUNCTION refuse_mail() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN
        IF NEW.data->>'to' = 'doomed2@example.com' THEN RAISE EXCEPTION 'refused by the test'; END IF;
        RETURN NEW;
      END $$`);
    await server.database.query('CREATE TRIGGER refuse_mail BEFORE INSERT ON pgboss.job FOR EACH ROW EXECUTE FUNCTION refuse_mail()');
    try {
      const before = await userCount();
      const jobs = await server.database.query("SELECT 1 FROM pgboss.job WHERE name = 'mail'");
      const response = await bulkCreate({
        users: [
          { email: 'doomed1@example.com', name: 'One' },
          { email: 'doomed2@example.com', name: 'Two' },
        ],
        send_invitations: true,
      });
      const result = response.body.data!.bulkCreateUsers;
      expect(result).toMatchObject({ success: false, created_count: 0, failed_count: 2 });
      expect(result.errors).toEqual([{ field: 'general', code: 'INTERNAL_ERROR', message: expect.any(String) }]);
      expect(result.results.every((entry) => !entry.success && entry.user === null)).toBe(true);
      expect(await userCount()).toBe(before);
      expect(await server.database.query("SELECT 1 FROM pgboss.job WHERE name = 'mail'")).toHaveLength(jobs.length);
      expect(await server.database.query("SELECT 1 FROM user_invitations i JOIN users u ON u.id = i.user_id WHERE u.email LIKE 'doomed%'")).toHaveLength(0);
    } finally {
      await server.database.query('DROP TRIGGER refuse_mail ON pgboss.job');
      await server.database.query('DROP FUNCTION refuse_mail()');
    }
  });
});

describe('POST /actions/bulk-create-users (engine-compatible handler)', () => {
  async function callAction(input: unknown, role = 'admin') {
    const response = await fetch(`${server.url}/actions/bulk-create-users`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-gql-admin-secret': ADMIN_SECRET, 'x-gql-role': role },
      body: JSON.stringify({ action: { name: 'bulkCreateUsers' }, input: { input }, session_variables: { 'x-gql-role': role } }),
    });
    return { status: response.status, body: (await response.json()) as Record<string, unknown> };
  }

  it('answers with the spec envelope: success, message and the output fields', async () => {
    const response = await callAction({
      users: [
        { email: 'route@example.com', name: 'Route' },
        { email: 42, name: 'Typed' },
      ],
    });
    expect(response.status).toBe(200);
    expect(response.body).toEqual({
      success: true,
      message: '1 of 2 users created',
      created_count: 1,
      failed_count: 1,
      errors: null,
      results: [
        {
          email: 'route@example.com',
          success: true,
          error: null,
          user: { id: expect.any(String), email: 'route@example.com', name: 'Route', email_verified: false },
        },
        { email: '', success: false, user: null, error: 'email must be a string' },
      ],
    });
  });

  it('refuses an over-limit batch with success=false and VALIDATION_ERROR', async () => {
    const users = Array.from({ length: MAX_USERS + 1 }, (_, index) => ({ email: `route-over${index}@example.com`, name: 'Over' }));
    const response = await callAction({ users });
    expect(response.status).toBe(200);
    expect(response.body).toMatchObject({ success: false, error_code: 'VALIDATION_ERROR', created_count: 0 });
  });

  it('answers 400 when users is not a list', async () => {
    const response = await callAction({ users: 'everyone' });
    expect(response.status).toBe(400);
  });

  it('is 403 for a role other than admin', async () => {
    const before = await userCount();
    const response = await callAction({ users: [{ email: 'route-user@example.com', name: 'User' }] }, 'user');
    expect(response.status).toBe(403);
    expect(response.body).toMatchObject({ success: false, error_code: 'FORBIDDEN' });
    expect(await userCount()).toBe(before);
  });
});

describe('send_invitations: null (spec 1 §2.2 types it Boolean, default false)', () => {
  /** This file's server, and one with the other executor (graphql-jit or graphql-js) on the same database. */
  let executors: [string, TestServer][];
  let other: TestServer;

  beforeAll(async () => {
    const compiled = compiledExecutionEnabled();
    other = await startTestServer(
      { ...smtpSettings(receiver.port), AUTH_SERVER_URL: 'https://auth.plinth.test', GQL_GRAPHQL_COMPILED_EXECUTION: compiled ? 'false' : 'true' },
      { database: server.database },
    );
    executors = compiled
      ? [
          ['compiled', server],
          ['graphql-js', other],
        ]
      : [
          ['compiled', other],
          ['graphql-js', server],
        ];
  });
  afterAll(async () => {
    await other?.close();
  });

  let serial = 0;
  const users = () => [{ email: `nullable-${(serial += 1)}@example.com`, name: 'Nullable' }];
  const invitations = async (email: string) =>
    (await server.database.query('SELECT 1 FROM user_invitations i JOIN users u ON u.id = i.user_id WHERE u.email = $1', [email])).length;

  // Null as a literal, inside the input variable, as a variable of its own, and the variable left out.
  const requests: [string, string, (batch: { email: string; name: string }[]) => Record<string, unknown>][] = [
    [
      'a null literal',
      'mutation ($users: [CreateUserInput!]!) { bulkCreateUsers(input: {users: $users, send_invitations: null}) { success created_count } }',
      (batch) => ({ users: batch }),
    ],
    [
      'null in the input variable',
      'mutation ($input: BulkCreateUsersInput!) { bulkCreateUsers(input: $input) { success created_count } }',
      (batch) => ({ input: { users: batch, send_invitations: null } }),
    ],
    [
      'a null variable',
      'mutation ($users: [CreateUserInput!]!, $send: Boolean) { bulkCreateUsers(input: {users: $users, send_invitations: $send}) { success created_count } }',
      (batch) => ({ users: batch, send: null }),
    ],
    [
      'an unset variable',
      'mutation ($users: [CreateUserInput!]!, $send: Boolean) { bulkCreateUsers(input: {users: $users, send_invitations: $send}) { success created_count } }',
      (batch) => ({ users: batch }),
    ],
  ];

  it.each(['compiled', 'graphql-js'])('is taken as false by the %s executor, whichever way null comes', async (name) => {
    const target = executors.find(([executor]) => executor === name)![1];
    for (const [, query, variables] of requests) {
      const batch = users();
      const response = await postGraphQL(target.graphqlUrl, { query, variables: variables(batch) }, ADMIN);
      expect(response.body).toEqual({ data: { bulkCreateUsers: { success: true, created_count: 1 } } });
      expect(await invitations(batch[0].email)).toBe(0);
    }
  });

  it('is taken as false by the handler route', async () => {
    const batch = users();
    const response = await fetch(`${server.url}/actions/bulk-create-users`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...ADMIN },
      body: JSON.stringify({ action: { name: 'bulkCreateUsers' }, input: { input: { users: batch, send_invitations: null } } }),
    });
    expect(response.status).toBe(200);
    expect(await response.json()).toMatchObject({ success: true, created_count: 1 });
    expect(await invitations(batch[0].email)).toBe(0);
  });
});
