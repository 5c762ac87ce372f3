import { randomUUID } from 'node:crypto';
import { parse } from 'graphql';
import type { TypedDocumentNode } from '@graphql-typed-document-node/core';
import { postGraphQL } from '../support/graphql';
import { ADMIN_SECRET, startTestServer, type TestServer } from '../support/server';
import { bearer, signToken } from '../support/tokens';
import { subscribe, subscriptionClient } from '../support/ws';

/**
 * The row filters of spec 2 §2.3 in each module that returns user-owned rows, through its own
 * GraphQL queries (src/platform/row-filter.ts is the one place they go through): role user sees
 * its own rows, role me the same (its own row in users), role admin the rows of the source
 * account its token names, the admin secret every row.
 *
 * Ann and Bob live in the primary source account, Cara in `other`. The rows name only their
 * owner: the database gives each the owner's source account (migration RowSourceAccounts).
 */
const ANN = randomUUID();
const BOB = randomUUID();
const CARA = randomUUID();
const as = {
  ann: bearer(signToken({ userId: ANN, roles: ['user', 'me'] })),
  annMe: { ...bearer(signToken({ userId: ANN, roles: ['user', 'me'] })), 'x-gql-role': 'me' },
  bob: bearer(signToken({ userId: BOB, roles: ['user'] })),
  primaryAdmin: bearer(signToken({ userId: ANN, roles: ['admin'] })),
  otherAdmin: bearer(signToken({ userId: CARA, roles: ['admin'], claims: { 'x-gql-source-account-id': 'other' } })),
  adminSecret: { 'x-gql-admin-secret': ADMIN_SECRET },
};
type Caller = keyof typeof as;

let server: TestServer;

beforeAll(async () => {
  server = await startTestServer({ JOBS_POLL_INTERVAL_SECONDS: '1' });
  await server.database.query(
    `INSERT INTO users (id, email, name, source_account_id) VALUES
      ($1, 'ann@example.com', 'Ann', 'primary'), ($2, 'bob@example.com', 'Bob', 'primary'), ($3, 'cara@example.com', 'Cara', 'other')`,
    [ANN, BOB, CARA],
  );
});
afterAll(async () => {
  await server.close();
});

async function query<T>(caller: Caller, text: string): Promise<T> {
  const response = await postGraphQL<T>(server.graphqlUrl, { query: text }, as[caller]);
  expect(response.body.errors).toBeUndefined();
  return response.body.data!;
}

/** For each caller, what `see` answers. */
async function seenBy(see: (caller: Caller) => Promise<string[]>): Promise<Record<Caller, string[]>> {
  const seen = {} as Record<Caller, string[]>;
  for (const caller of Object.keys(as) as Caller[]) seen[caller] = (await see(caller)).sort();
  return seen;
}

/** Rows of Ann, Bob and Cara and one of nobody (ids by name), made by `insert` (owner or null). */
async function ownedRows(insert: (owner: string | null, name: string) => Promise<string>): Promise<Record<string, string>> {
  const ids: Record<string, string> = {};
  for (const [name, owner] of [
    ['ann', ANN],
    ['bob', BOB],
    ['cara', CARA],
    ['nobody', null],
  ] as const)
    ids[await insert(owner, name)] = name;
  return ids;
}

/** Every module answers the same: one's own rows, the source account's for its admin. */
const EXPECTED: Record<Caller, string[]> = {
  ann: ['ann'],
  annMe: ['ann'],
  bob: ['bob'],
  primaryAdmin: ['ann', 'bob', 'nobody'],
  otherAdmin: ['cara'],
  adminSecret: ['ann', 'bob', 'cara', 'nobody'],
};

describe('row filters, module by module', () => {
  it('files: file(id)', async () => {
    const names = await ownedRows(async (owner, name) => {
      const [row] = await server.database.query<{ id: string }>(
        `INSERT INTO files (owner_id, file_name, file_type, file_size, storage_key, options) VALUES ($1, $2, 'text/plain', 1, 'files/x/content', '{}') RETURNING id`,
        [owner, name],
      );
      return row.id;
    });
    const rows = await server.database.query<{ file_name: string; source_account_id: string }>(
      'SELECT file_name, source_account_id FROM files ORDER BY file_name',
    );
    expect(rows).toEqual([
      { file_name: 'ann', source_account_id: 'primary' },
      { file_name: 'bob', source_account_id: 'primary' },
      { file_name: 'cara', source_account_id: 'other' },
      { file_name: 'nobody', source_account_id: 'primary' },
    ]);
    const seen = await seenBy(async (caller) => {
      const found: string[] = [];
      for (const id of Object.keys(names)) {
        const data = await query<{ file: { file_name: string } | null }>(caller, `{ file(id: "${id}") { file_name } }`);
        if (data.file) found.push(data.file.file_name);
      }
      return found;
    });
    expect(seen).toEqual(EXPECTED);
  });

  it("reports: reportJob(job_id), and a FILES report's rows", async () => {
    const names = await ownedRows(async (owner) => {
      const [row] = await server.database.query<{ id: string }>(
        `INSERT INTO report_jobs (requested_by, input, estimated_rows, estimated_duration, status) VALUES ($1, '{"kind":"FILES","format":"CSV","from":null,"to":null,"scope":{"kind":"none"}}', 0, 1, 'CANCELLED') RETURNING id`,
        [owner],
      );
      return row.id;
    });
    const seen = await seenBy(async (caller) => {
      const found: string[] = [];
      for (const [id, name] of Object.entries(names)) {
        const data = await query<{ reportJob: { job_id: string } | null }>(caller, `{ reportJob(job_id: "${id}") { job_id } }`);
        if (data.reportJob) found.push(name);
      }
      return found;
    });
    expect(seen).toEqual(EXPECTED);

    // The files the previous test made, as each caller's FILES report lists them.
    for (const caller of ['bob', 'otherAdmin', 'primaryAdmin'] as const) {
      const asked = await query<{ generateReport: { job_id: string } }>(caller, 'mutation { generateReport(input: {kind: FILES, format: JSON}) { job_id } }');
      let link: string | null = null;
      for (let attempt = 0; attempt < 300 && !link; attempt++) {
        const data = await query<{ reportJob: { status: string; result_url: string | null } }>(
          caller,
          `{ reportJob(job_id: "${asked.generateReport.job_id}") { status result_url } }`,
        );
        expect(data.reportJob.status).not.toBe('FAILED');
        link = data.reportJob.result_url;
        if (!link) await new Promise((resolve) => setTimeout(resolve, 100));
      }
      const rows = (await (await fetch(link!.replace(/^http:\/\/localhost:\d+/, server.url))).json()) as { file_name: string }[];
      expect(rows.map((row) => row.file_name).sort()).toEqual(EXPECTED[caller]);
    }
  });

  it('payments: payments, subscriptions and licenses', async () => {
    await ownedRows(async (owner, name) => {
      await server.database.query(
        `INSERT INTO payments (provider, idempotency_key, customer_user_id, amount, currency, description, status) VALUES ('primary', $2, $1, 100, 'usd', $2, 'SUCCEEDED')`,
        [owner, name],
      );
      await server.database.query(
        `INSERT INTO subscriptions (provider, external_id, customer_user_id, product, status) VALUES ('primary', $2, $1, 'pro', 'active')`,
        [owner, name],
      );
      await server.database.query(
        `INSERT INTO licenses (license_key, product, customer_user_id, provider, source_id, status, activation_limit) VALUES ($2, 'pro', $1, 'primary', $2, 'active', 1)`,
        [owner, name],
      );
      return name;
    });
    expect(
      await seenBy(async (caller) =>
        (await query<{ payments: { description: string }[] }>(caller, '{ payments { description } }')).payments.map((row) => row.description),
      ),
    ).toEqual(EXPECTED);
    const owners: Record<string, string> = { [ANN]: 'ann', [BOB]: 'bob', [CARA]: 'cara' };
    const nameOf = (row: { customer_id: string | null }) => (row.customer_id ? owners[row.customer_id] : 'nobody');
    expect(
      await seenBy(async (caller) =>
        (await query<{ subscriptions: { customer_id: string | null }[] }>(caller, '{ subscriptions { customer_id } }')).subscriptions.map(nameOf),
      ),
    ).toEqual(EXPECTED);
    expect(
      await seenBy(async (caller) =>
        (await query<{ licenses: { customer_id: string | null }[] }>(caller, '{ licenses { customer_id } }')).licenses.map(nameOf),
      ),
    ).toEqual(EXPECTED);
    // An admin naming a customer narrows its own rows; it never reaches another account's.
    expect((await query<{ payments: unknown[] }>('otherAdmin', `{ payments(customer_id: "${ANN}") { id } }`)).payments).toEqual([]);
    expect((await query<{ payments: { description: string }[] }>('primaryAdmin', `{ payments(customer_id: "${BOB}") { description } }`)).payments).toEqual([
      { description: 'bob' },
    ]);
  });

  it('actions: the result of an asynchronous action call', async () => {
    const metadata = await fetch(`${server.url}/v1/metadata`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...as.adminSecret },
      body: JSON.stringify({
        type: 'bulk',
        args: [
          { type: 'set_custom_types', args: { objects: [{ name: 'SlowOutput', fields: [{ name: 'ok', type: 'Boolean!' }] }] } },
          {
            type: 'create_action',
            args: { name: 'slowThing', definition: { kind: 'asynchronous', arguments: [], output_type: 'SlowOutput', handler: 'http://127.0.0.1:9/never' } },
          },
          { type: 'create_action_permission', args: { action: 'slowThing', role: 'user' } },
          { type: 'create_action_permission', args: { action: 'slowThing', role: 'me' } },
        ],
      }),
    });
    expect(metadata.status).toBe(200);
    // Calls as each session made them (their results kept), the role being the caller's.
    const names = await ownedRows(async (owner) => {
      const variables: Record<string, string> = { 'x-gql-role': owner ? 'user' : 'admin' };
      if (owner) variables['x-gql-user-id'] = owner;
      if (owner === CARA) variables['x-gql-source-account-id'] = 'other';
      const [row] = await server.database.query<{ id: string }>(
        `INSERT INTO action_log (id, action_name, input, session_variables, client_headers, request_query, status, output, completed_at)
         VALUES (gen_random_uuid(), 'slowThing', '{}', $1, '{}', '', 'completed', '{"ok":true}', now()) RETURNING id`,
        [JSON.stringify(variables)],
      );
      return row.id;
    });
    const seen = await seenBy(async (caller) => {
      const found: string[] = [];
      for (const [id, name] of Object.entries(names)) {
        const data = await query<{ slowThing: { id: string } | null }>(caller, `{ slowThing(id: "${id}") { id } }`);
        if (data.slowThing) found.push(name);
      }
      return found;
    });
    // As everywhere, but role me reads no call made as role user (a result is read with the role that started it).
    expect(seen).toEqual({ ...EXPECTED, annMe: [] });
  });

  it("users: userRegistered reaches the admins of the new account's source account only", async () => {
    type Registered = { userRegistered: { email: string } };
    const document = parse('subscription { userRegistered { email } }') as TypedDocumentNode<Registered, Record<string, never>>;
    const clients = {
      primary: subscriptionClient(server.wsUrl, { headers: as.primaryAdmin }),
      other: subscriptionClient(server.wsUrl, { headers: as.otherAdmin }),
    };
    const primary = subscribe(clients.primary, document);
    const other = subscribe(clients.other, document);
    try {
      await Promise.all([primary.ready, other.ready]);
      const registered = await postGraphQL<{ registerUser: { success: boolean } }>(server.graphqlUrl, {
        query: 'mutation { registerUser(input: {email: "dan@example.com", password: "a long enough password 1", name: "Dan"}) { success } }',
      });
      expect(registered.body.data?.registerUser.success).toBe(true);
      expect((await primary.next()).data).toEqual({ userRegistered: { email: 'dan@example.com' } });
      await expect(other.next(1500)).rejects.toThrow('no subscription result');
    } finally {
      primary.dispose();
      other.dispose();
      await Promise.all([clients.primary.dispose(), clients.other.dispose()]);
    }
  });
});
