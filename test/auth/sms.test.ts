import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { ConfigError, loadConfig } from '../../src/config';
import { AUTH_ERRORS } from '../../src/modules/auth/auth-errors';
import { authCall, authPost, GENEROUS_AUTH_LIMITS } from '../support/auth';
import { startTestServer, testEnvironment, type TestServer } from '../support/server';

const ACCOUNT_SID = 'AC0123456789abcdef0123456789abcdef';
const AUTH_TOKEN = 'twilio-auth-token';
const MESSAGING_SERVICE = 'MG0123456789abcdef0123456789abcdef';
const PASSWORD = 'a sound passphrase';
const MAX_ATTEMPTS = 3;
const SENDS_PER_NUMBER = 4;

interface Message {
  To: string;
  Body: string;
  MessagingServiceSid: string;
}

let server: TestServer;
let environment: Record<string, string>;
let twilio: http.Server;
/** Messages the local Twilio server accepted, in order. */
const messages: Message[] = [];
let twilioFails = false;

beforeAll(async () => {
  // Twilio's Messages API: basic auth with the account SID and token, a form body, 201 with the message.
  twilio = http.createServer((request, response) => {
    let body = '';
    request.on('data', (chunk: Buffer) => (body += chunk.toString('utf8')));
    request.on('end', () => {
      const expectedAuth = `Basic ${Buffer.from(`${ACCOUNT_SID}:${AUTH_TOKEN}`).toString('base64')}`;
      if (request.method !== 'POST' || request.url !== `/2010-04-01/Accounts/${ACCOUNT_SID}/Messages.json` || request.headers.authorization !== expectedAuth) {
        return void response.writeHead(401, { 'content-type': 'application/json' }).end('{"code":20003,"message":"Authenticate"}');
      }
      if (twilioFails) return void response.writeHead(500).end();
      const form = Object.fromEntries(new URLSearchParams(body)) as unknown as Message;
      messages.push(form);
      response.writeHead(201, { 'content-type': 'application/json' }).end(JSON.stringify({ sid: 'SM1', status: 'accepted', to: form.To }));
    });
  });
  await new Promise<void>((resolve) => twilio.listen(0, '127.0.0.1', resolve));
  environment = {
    ...GENEROUS_AUTH_LIMITS,
    AUTH_EMAIL_SIGNIN_EMAIL_VERIFIED_REQUIRED: 'false',
    AUTH_MFA_SMS_ENABLED: 'true',
    AUTH_SMS_PROVIDER: 'twilio',
    AUTH_SMS_GATEWAY_ACCOUNT_SID: ACCOUNT_SID,
    AUTH_SMS_GATEWAY_AUTH_TOKEN: AUTH_TOKEN,
    AUTH_SMS_GATEWAY_MESSAGING_SERVICE_ID: MESSAGING_SERVICE,
    AUTH_SMS_GATEWAY_API_URL: `http://127.0.0.1:${(twilio.address() as AddressInfo).port}`,
    AUTH_MFA_MAX_ATTEMPTS_PER_TICKET: String(MAX_ATTEMPTS),
    AUTH_RATE_LIMIT_SMS_BURST: String(SENDS_PER_NUMBER),
    AUTH_RATE_LIMIT_MFA_BURST: '1000',
    AUTH_RATE_LIMIT_SMS_ADDRESS_BURST: '1000',
  };
  server = await startTestServer(environment);
});
afterAll(async () => {
  await server.close();
  await new Promise((resolve) => twilio.close(resolve));
});

function expectAuthError(response: { status: number; body: unknown }, code: keyof typeof AUTH_ERRORS): void {
  expect({ status: response.status, body: response.body }).toEqual({
    status: AUTH_ERRORS[code].status,
    body: { status: AUTH_ERRORS[code].status, error: code, message: expect.any(String) },
  });
}

let counter = 0;
const bearer = (token: string) => ({ authorization: `Bearer ${token}` });
/** The code of the last message to `phone`. */
function lastCodeTo(phone: string): string {
  const message = [...messages].reverse().find((entry) => entry.To === phone);
  expect(message?.MessagingServiceSid).toBe(MESSAGING_SERVICE);
  return /(\d{6})/.exec(message!.Body)![1];
}

async function signUp(): Promise<{ email: string; accessToken: string; userId: string }> {
  counter += 1;
  const email = `sms${counter}@example.com`;
  const response = await authPost<{ session: { accessToken: string; user: { id: string } } }>(server.url, '/signup/email-password', {
    email,
    password: PASSWORD,
  });
  return { email, accessToken: response.body.session.accessToken, userId: response.body.session.user.id };
}

/** A user with a verified phone number (and so the SMS second factor on). */
async function enrolled(): Promise<{ email: string; accessToken: string; userId: string; phone: string }> {
  const user = await signUp();
  const phone = `+1415555${String(1000 + counter).padStart(4, '0')}`;
  expect((await authPost(server.url, '/user/phone', { phoneNumber: phone }, bearer(user.accessToken))).status).toBe(200);
  expect((await authPost(server.url, '/user/phone/verify', { code: lastCodeTo(phone) }, bearer(user.accessToken))).status).toBe(200);
  return { ...user, phone };
}

const signIn = (email: string) =>
  authPost<{ session: unknown; mfa: { ticket: string } | null }>(server.url, '/signin/email-password', { email, password: PASSWORD });

describe('enrolment', () => {
  it('sends a code to the number; the right code verifies it and turns the SMS factor on', async () => {
    const user = await signUp();
    const phone = '+447700900123';
    const sent = await authPost(server.url, '/user/phone', { phoneNumber: phone }, bearer(user.accessToken));
    expect(sent).toMatchObject({ status: 200, body: 'OK' });
    const code = lastCodeTo(phone);
    // Only a hash of the code is kept.
    const [row] = await server.database.query<{ code_hash: Buffer }>('SELECT code_hash FROM auth_sms_codes WHERE user_id = $1', [user.userId]);
    expect(row.code_hash.toString('latin1')).not.toContain(code);

    const wrong = code === '000000' ? '111111' : '000000';
    expectAuthError(await authPost(server.url, '/user/phone/verify', { code: wrong }, bearer(user.accessToken)), 'invalid-otp');
    expect(await authPost(server.url, '/user/phone/verify', { code }, bearer(user.accessToken))).toMatchObject({ status: 200, body: 'OK' });
    const me = await authCall<{ phoneNumber: string; phoneNumberVerified: boolean; activeMfaType: string }>(
      server.url,
      'GET',
      '/user',
      undefined,
      bearer(user.accessToken),
    );
    expect(me.body).toMatchObject({ phoneNumber: phone, phoneNumberVerified: true, activeMfaType: 'sms' });
    // Used up.
    expectAuthError(await authPost(server.url, '/user/phone/verify', { code }, bearer(user.accessToken)), 'invalid-otp');
  });

  it('refuses a number not in E.164, without a bearer token, and answers 503 when the gateway fails', async () => {
    const user = await signUp();
    for (const phoneNumber of ['4155550100', '+0415555', 'not a number', '+1 415 555 0100']) {
      expectAuthError(await authPost(server.url, '/user/phone', { phoneNumber }, bearer(user.accessToken)), 'invalid-request');
    }
    expectAuthError(await authPost(server.url, '/user/phone', { phoneNumber: '+14155550100' }), 'unauthenticated-user');
    twilioFails = true;
    try {
      expectAuthError(await authPost(server.url, '/user/phone', { phoneNumber: '+14155550199' }, bearer(user.accessToken)), 'sms-delivery-failed');
    } finally {
      twilioFails = false;
    }
    expect(await server.database.query('SELECT 1 FROM auth_sms_codes WHERE user_id = $1', [user.userId])).toHaveLength(0);
  });

  it('limits the codes sent to one number', async () => {
    const user = await signUp();
    const phone = '+14155550777';
    for (let send = 0; send < SENDS_PER_NUMBER; send += 1) {
      expect((await authPost(server.url, '/user/phone', { phoneNumber: phone }, bearer(user.accessToken))).status).toBe(200);
    }
    const limited = await authPost(server.url, '/user/phone', { phoneNumber: phone }, bearer(user.accessToken));
    expectAuthError(limited, 'too-many-requests');
    expect(Number(limited.headers.get('retry-after'))).toBeGreaterThan(0);
  });
});

describe('sends per client address', () => {
  const SENDS_PER_ADDRESS = 3;
  let limited: TestServer;
  beforeAll(async () => {
    // The same database and gateway, a small per-address limit, and addresses told by X-Forwarded-For.
    limited = await startTestServer(
      { ...environment, TRUST_PROXY: 'true', AUTH_RATE_LIMIT_SMS_ADDRESS_BURST: String(SENDS_PER_ADDRESS) },
      { database: server.database },
    );
  });
  afterAll(() => limited.close());

  it('counts enrolment and sign-in codes to any number against the sender, who is refused past the limit while others are not', async () => {
    const from = (ip: string, headers: Record<string, string> = {}) => ({ ...headers, 'x-forwarded-for': ip });
    const first = await signUp();
    const second = await signUp();
    const [firstPhone, secondPhone, thirdPhone] = ['+14155552001', '+14155552002', '+14155552003'];
    const sendCode = (user: { accessToken: string }, phoneNumber: string, ip: string) =>
      authPost(limited.url, '/user/phone', { phoneNumber }, from(ip, bearer(user.accessToken)));

    expect((await sendCode(first, firstPhone, '203.0.113.7')).status).toBe(200);
    expect((await authPost(limited.url, '/user/phone/verify', { code: lastCodeTo(firstPhone) }, from('203.0.113.7', bearer(first.accessToken)))).status).toBe(
      200,
    );
    const signedIn = await authPost<{ mfa: { ticket: string } }>(
      limited.url,
      '/signin/email-password',
      { email: first.email, password: PASSWORD },
      from('203.0.113.7'),
    );
    expect(signedIn.body.mfa.ticket).toMatch(/^mfaSms:/);
    expect((await sendCode(second, secondPhone, '203.0.113.7')).status).toBe(200);

    const sent = messages.length;
    expectAuthError(await sendCode(second, thirdPhone, '203.0.113.7'), 'too-many-requests');
    // A sign-in whose code cannot be sent gives no ticket.
    expectAuthError(
      await authPost(limited.url, '/signin/email-password', { email: first.email, password: PASSWORD }, from('203.0.113.7')),
      'too-many-requests',
    );
    expect(messages.length).toBe(sent);
    expect((await sendCode(second, thirdPhone, '198.51.100.4')).status).toBe(200);
  });
});

describe('sign-in with an SMS code', () => {
  it('answers an mfaSms ticket and sends a code; the code gives the session once', async () => {
    const user = await enrolled();
    const before = messages.length;
    const first = await signIn(user.email);
    expect(first.body.session).toBeNull();
    expect(first.body.mfa!.ticket).toMatch(/^mfaSms:/);
    expect(messages.length).toBe(before + 1);
    const code = lastCodeTo(user.phone);
    const signedIn = await authPost<{ session: { user: { id: string } } }>(server.url, '/signin/mfa/sms', { ticket: first.body.mfa!.ticket, otp: code });
    expect(signedIn.status).toBe(200);
    expect(signedIn.body.session.user.id).toBe(user.userId);
    expectAuthError(await authPost(server.url, '/signin/mfa/sms', { ticket: first.body.mfa!.ticket, otp: code }), 'invalid-ticket');
  });

  it('refuses wrong and expired codes, and voids the code and the ticket after the attempt limit', async () => {
    const user = await enrolled();
    const { ticket } = (await signIn(user.email)).body.mfa!;
    const code = lastCodeTo(user.phone);
    const wrong = code === '000000' ? '111111' : '000000';
    for (let attempt = 0; attempt < MAX_ATTEMPTS; attempt += 1) {
      expectAuthError(await authPost(server.url, '/signin/mfa/sms', { ticket, otp: wrong }), 'invalid-otp');
    }
    expectAuthError(await authPost(server.url, '/signin/mfa/sms', { ticket, otp: code }), 'invalid-ticket');

    const again = (await signIn(user.email)).body.mfa!.ticket;
    await server.database.query("UPDATE auth_sms_codes SET expires_at = now() - interval '1 second' WHERE user_id = $1", [user.userId]);
    expectAuthError(await authPost(server.url, '/signin/mfa/sms', { ticket: again, otp: lastCodeTo(user.phone) }), 'invalid-otp');
    expectAuthError(await authPost(server.url, '/signin/mfa/sms', { ticket: 'mfaTotp:00000000-0000-4000-8000-000000000000', otp: '123456' }), 'invalid-ticket');
  });
});

describe('settings', () => {
  it('requires the provider and every gateway credential when SMS is on', () => {
    let problems: string[] = [];
    try {
      loadConfig(testEnvironment('postgres://127.0.0.1/unused', { AUTH_MFA_SMS_ENABLED: 'true' }));
    } catch (error) {
      if (!(error instanceof ConfigError)) throw error;
      problems = error.problems;
    }
    expect(problems).toEqual([
      'AUTH_SMS_PROVIDER is required when AUTH_MFA_SMS_ENABLED=true (twilio)',
      'AUTH_SMS_GATEWAY_ACCOUNT_SID is required when AUTH_MFA_SMS_ENABLED=true',
      'AUTH_SMS_GATEWAY_AUTH_TOKEN is required when AUTH_MFA_SMS_ENABLED=true',
      'AUTH_SMS_GATEWAY_MESSAGING_SERVICE_ID is required when AUTH_MFA_SMS_ENABLED=true',
    ]);
    expect(() => loadConfig(testEnvironment('postgres://127.0.0.1/unused', { AUTH_SMS_PROVIDER: 'nexmo' }))).toThrow(/AUTH_SMS_PROVIDER must be twilio/);
  });
});
