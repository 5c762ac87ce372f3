import { INVITATION_PATH } from '../../src/modules/users/bulk-create-users.service';
import { BulkCreateUsersDocument } from '../generated/graphql';
import { authPost, GENEROUS_AUTH_LIMITS, linkIn, type AuthErrorBody } from '../support/auth';
import { graphql } from '../support/graphql';
import { ADMIN_SECRET, startTestServer, type TestServer } from '../support/server';
import { startSmtpReceiver, type SmtpReceiver, smtpSettings } from '../support/smtp';
import { bearer } from '../support/tokens';

const AUTH_URL = 'https://auth.plinth.test';
const CLIENT_URL = 'https://app.example.com';

let server: TestServer;
let receiver: SmtpReceiver;

beforeAll(async () => {
  receiver = await startSmtpReceiver();
  server = await startTestServer({
    ...GENEROUS_AUTH_LIMITS,
    ...smtpSettings(receiver.port),
    JOBS_POLL_INTERVAL_SECONDS: '1',
    AUTH_SERVER_URL: AUTH_URL,
    AUTH_CLIENT_URL: CLIENT_URL,
  });
});
afterAll(async () => {
  await server.close();
  await receiver.close();
});

/** Invites the addresses (bulkCreateUsers with send_invitations) and answers each one's invitation link. */
async function invite(...emails: string[]): Promise<Map<string, string>> {
  const response = await graphql(
    server.graphqlUrl,
    BulkCreateUsersDocument,
    { input: { users: emails.map((email) => ({ email, name: email.split('@')[0] })), send_invitations: true } },
    { 'x-gql-admin-secret': ADMIN_SECRET },
  );
  expect(response.body.data!.bulkCreateUsers.created_count).toBe(emails.length);
  const links = new Map<string, string>();
  while (links.size < emails.length) {
    const mail = await receiver.next();
    const email = mail.recipients[0];
    if (emails.includes(email)) links.set(email, linkIn(mail.parsed.text, `${AUTH_URL}${INVITATION_PATH}`));
  }
  return links;
}

/** Follows a link of a mail against the test server; answers where it redirects. */
async function follow(link: string): Promise<URL> {
  const response = await fetch(link.replace(AUTH_URL, `${server.url}/auth`), { redirect: 'manual' });
  expect(response.status).toBe(302);
  return new URL(response.headers.get('location')!);
}

const setPassword = (body: Record<string, unknown>) => authPost<AuthErrorBody>(server.url, '/user/password', body);
const signIn = (email: string, password: string) =>
  authPost<{ session: { accessToken: string; user: { emailVerified: boolean } } } & AuthErrorBody>(server.url, '/signin/email-password', { email, password });

describe('invitation acceptance', () => {
  it('bulkCreateUsers mails a link that leads to the app, where the password is set with the ticket; then the user signs in', async () => {
    const email = 'invitee@example.com';
    const link = (await invite(email)).get(email)!;
    expect(link).toMatch(new RegExp(`^${AUTH_URL}/invitations/accept\\?ticket=[\\w-]+$`));
    expect((await signIn(email, 'chosen by the invitee')).body.error).toBe('invalid-email-password');

    const landing = await follow(link);
    expect(landing.origin).toBe(CLIENT_URL);
    expect(landing.searchParams.get('type')).toBe('invite');
    const ticket = landing.searchParams.get('ticket')!;
    expect(ticket).toBe(new URL(link).searchParams.get('ticket'));
    // Following the link spends nothing (a mail scanner may follow it first).
    expect((await follow(link)).searchParams.get('ticket')).toBe(ticket);

    expect(await setPassword({ newPassword: 'chosen by the invitee', ticket })).toMatchObject({ status: 200, body: 'OK' });
    const signedIn = await signIn(email, 'chosen by the invitee');
    expect(signedIn.status).toBe(200);
    // The invitation went to that address: it counts as verified.
    expect(signedIn.body.session.user.emailVerified).toBe(true);
    expect((await fetch(`${server.url}/auth/user`, { headers: bearer(signedIn.body.session.accessToken) })).status).toBe(200);

    // The ticket worked once, and the link now says so.
    expect(await setPassword({ newPassword: 'someone else now', ticket })).toMatchObject({ status: 401, body: { error: 'invalid-ticket' } });
    const spent = await follow(link);
    expect(spent.searchParams.get('error')).toBe('invalid-ticket');
    expect(spent.searchParams.get('ticket')).toBeNull();
    expect(
      await server.database.query("SELECT 1 FROM user_invitations WHERE user_id = (SELECT id FROM users WHERE email = 'invitee@example.com')"),
    ).toHaveLength(0);
  });

  it('refuses an expired invitation, a short password, and an unknown ticket', async () => {
    const email = 'late@example.com';
    const link = (await invite(email)).get(email)!;
    const ticket = new URL(link).searchParams.get('ticket')!;
    expect(await setPassword({ newPassword: 'short', ticket })).toMatchObject({ status: 400, body: { error: 'password-too-short' } });
    // A refused password does not spend the ticket.
    await server.database.query(
      "UPDATE user_invitations SET expires_at = now() - interval '1 second' WHERE user_id = (SELECT id FROM users WHERE email = $1)",
      [email],
    );
    expect((await follow(link)).searchParams.get('error')).toBe('invalid-ticket');
    expect(await setPassword({ newPassword: 'a perfectly good one', ticket })).toMatchObject({ status: 401, body: { error: 'invalid-ticket' } });
    expect(await setPassword({ newPassword: 'a perfectly good one', ticket: 'no-such-invitation-ticket' })).toMatchObject({
      status: 401,
      body: { error: 'invalid-ticket' },
    });
    expect((await signIn(email, 'a perfectly good one')).status).toBe(401);
  });

  it('refuses a disabled invitee', async () => {
    const email = 'blocked@example.com';
    const ticket = new URL((await invite(email)).get(email)!).searchParams.get('ticket')!;
    await server.database.query('UPDATE users SET disabled = true WHERE email = $1', [email]);
    expect(await setPassword({ newPassword: 'a perfectly good one', ticket })).toMatchObject({ status: 401, body: { error: 'disabled-user' } });
  });
});
