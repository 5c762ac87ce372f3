import { createHmac, generateKeyPairSync } from 'node:crypto';
import jwt from 'jsonwebtoken';
import { Refusal } from '../../src/common/refusal';
import { resolveSession, type SessionSettings } from '../../src/platform/session';
import { SessionDocument } from '../generated/graphql';
import { graphql } from '../support/graphql';
import { heapLeftBehind } from '../support/heap';
import { ADMIN_SECRET, CLAIMS_NAMESPACE, JWT_KEY, startTestServer, type TestServer } from '../support/server';
import { bearer, signToken, unsignedToken } from '../support/tokens';

let server: TestServer;

beforeAll(async () => {
  server = await startTestServer();
});
afterAll(async () => {
  await server.close();
});

const sessionOf = (headers: Record<string, string>, accept = 'application/json') => graphql(server.graphqlUrl, SessionDocument, {}, { accept, ...headers });

/** Swaps the payload of a signed token for another, keeping the original signature. */
function tamper(token: string, change: (payload: Record<string, unknown>) => void): string {
  const [header, payload, signature] = token.split('.');
  const claims = JSON.parse(Buffer.from(payload, 'base64url').toString()) as Record<string, unknown>;
  change(claims);
  return `${header}.${Buffer.from(JSON.stringify(claims)).toString('base64url')}.${signature}`;
}

describe('sessions over HTTP', () => {
  it('gives role anonymous to a request without credentials', async () => {
    const response = await sessionOf({});
    expect(response.body.data!.session).toEqual({
      role: 'anonymous',
      user_id: null,
      allowed_roles: ['anonymous'],
      variables: { 'x-gql-role': 'anonymous' },
    });
  });

  it('takes role, user id and session variables from a valid token', async () => {
    const userId = '0b5c8f57-3b38-4b43-9a41-3c1f3a2f1e10';
    const response = await sessionOf(bearer(signToken({ userId, roles: ['user', 'moderator'], claims: { 'x-gql-plan': 'pro' } })));
    expect(response.status).toBe(200);
    expect(response.body.data!.session).toEqual({
      role: 'user',
      user_id: userId,
      allowed_roles: ['user', 'moderator'],
      variables: {
        'x-gql-role': 'user',
        'x-gql-user-id': userId,
        'x-gql-source-account-id': 'primary',
        'x-gql-plan': 'pro',
      },
    });
  });

  it('lets X-Gql-Role pick another of the allowed roles', async () => {
    const response = await sessionOf({ ...bearer(signToken({ roles: ['user', 'moderator'] })), 'x-gql-role': 'moderator' });
    expect(response.body.data!.session.role).toBe('moderator');
  });

  it('refuses an X-Gql-Role the token does not allow with 403 ROLE_NOT_ALLOWED', async () => {
    const response = await sessionOf({ ...bearer(signToken({ roles: ['user'] })), 'x-gql-role': 'admin' });
    expect(response.status).toBe(403);
    expect(response.body.data).toBeUndefined();
    expect(response.body.errors).toEqual([{ message: expect.stringContaining('admin'), extensions: { code: 'ROLE_NOT_ALLOWED' } }]);
  });

  it.each([
    ['an expired token', () => signToken({ expiresIn: -10 }), 'JWT_EXPIRED'],
    ['a token signed with another key', () => signToken({ key: 'another-signing-key-of-32-bytes-or-more!' }), 'INVALID_JWT'],
    [
      'a token whose claims were changed after signing',
      () =>
        tamper(signToken({ roles: ['user'] }), (claims) => {
          (claims[CLAIMS_NAMESPACE] as Record<string, unknown>)['x-gql-allowed-roles'] = ['admin'];
          (claims[CLAIMS_NAMESPACE] as Record<string, unknown>)['x-gql-default-role'] = 'admin';
        }),
      'INVALID_JWT',
    ],
    ['an unsigned token (alg: none)', () => unsignedToken({ roles: ['admin'], defaultRole: 'admin' }), 'INVALID_JWT'],
    ['a token signed with an algorithm other than the configured HS256', () => signToken({ algorithm: 'HS512' }), 'INVALID_JWT'],
    ['a token that is not a JWT', () => 'not.a.jwt', 'INVALID_JWT'],
    ['a token without claims under the namespace', () => jwt.sign({ sub: 'x' }, JWT_KEY, { expiresIn: 60 }), 'INVALID_JWT_CLAIMS'],
    ['a token whose default role is not allowed', () => signToken({ roles: ['user'], defaultRole: 'admin' }), 'INVALID_JWT_CLAIMS'],
    ['a token with an empty list of allowed roles', () => signToken({ roles: [], defaultRole: 'user' }), 'INVALID_JWT_CLAIMS'],
  ])('refuses %s with 401 and a clear code, never a 500', async (_case, token, code) => {
    for (const accept of ['application/json', 'application/graphql-response+json']) {
      const response = await sessionOf(bearer(token()), accept);
      expect(response.status).toBe(401);
      expect(response.body.data).toBeUndefined();
      expect(response.body.errors).toEqual([{ message: expect.any(String), extensions: { code } }]);
    }
  });

  it('refuses a token once it expires, though it was accepted (and cached) before', async () => {
    const token = signToken({ expiresIn: 2 });
    expect((await sessionOf(bearer(token))).body.data!.session.role).toBe('user');
    const expiry = JSON.parse(Buffer.from(token.split('.')[1], 'base64url').toString()).exp as number;
    await new Promise((resolve) => setTimeout(resolve, expiry * 1000 - Date.now() + 50));

    const late = await sessionOf(bearer(token));
    expect(late.status).toBe(401);
    expect(late.body.errors![0].extensions!.code).toBe('JWT_EXPIRED');
  });

  it.each([['Basic dXNlcjpwYXNz'], ['Bearer'], ['Bearer a b'], ['token']])('refuses the Authorization header "%s"', async (value) => {
    const response = await sessionOf({ authorization: value });
    expect(response.status).toBe(401);
    expect(response.body.errors![0].extensions!.code).toBe('INVALID_JWT');
  });

  it('does not run the operation when the session is refused', async () => {
    const response = await fetch(server.graphqlUrl, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...bearer(signToken({ expiresIn: -1 })) },
      body: JSON.stringify({ query: 'mutation { registerUser(input: {email: "expired@x.io", password: "password123", name: "E"}) { success } }' }),
    });
    expect(response.status).toBe(401);
    expect(await server.database.query("SELECT 1 FROM users WHERE email = 'expired@x.io'")).toHaveLength(0);
  });

  describe('admin secret', () => {
    it('gives role admin', async () => {
      const response = await sessionOf({ 'x-gql-admin-secret': ADMIN_SECRET });
      expect(response.body.data!.session).toMatchObject({ role: 'admin', user_id: null, allowed_roles: ['admin'] });
    });

    it('lets the caller act as another role and user, with any X-Gql-* variable', async () => {
      const response = await sessionOf({
        'x-gql-admin-secret': ADMIN_SECRET,
        'x-gql-role': 'user',
        'x-gql-user-id': 'c3d9a1e2-1111-4a4a-9b9b-123456789abc',
        'x-gql-tenant-id': 'acme',
      });
      expect(response.body.data!.session).toEqual({
        role: 'user',
        user_id: 'c3d9a1e2-1111-4a4a-9b9b-123456789abc',
        allowed_roles: ['user'],
        variables: { 'x-gql-role': 'user', 'x-gql-user-id': 'c3d9a1e2-1111-4a4a-9b9b-123456789abc', 'x-gql-tenant-id': 'acme' },
      });
      expect(JSON.stringify(response.body)).not.toContain(ADMIN_SECRET);
    });

    it.each([
      ['wrong', 'nope'],
      ['a prefix', ADMIN_SECRET.slice(0, 8)],
      ['longer', `${ADMIN_SECRET}x`],
      ['empty', ''],
    ])('is refused with 401 INVALID_ADMIN_SECRET when %s, even next to a valid token', async (_case, secret) => {
      const response = await sessionOf({ 'x-gql-admin-secret': secret, ...bearer(signToken()) });
      expect(response.status).toBe(401);
      expect(response.body.errors).toEqual([{ message: expect.any(String), extensions: { code: 'INVALID_ADMIN_SECRET' } }]);
    });
  });
});

describe('JWT settings beyond the defaults', () => {
  const base: SessionSettings = {
    adminSecret: ADMIN_SECRET,
    unauthorizedRole: 'anonymous',
    jwtSecret: { type: 'HS256', key: JWT_KEY, claims_namespace: CLAIMS_NAMESPACE, claims_format: 'json', allowed_skew: 0 },
  };
  const claims = { 'x-gql-allowed-roles': ['user'], 'x-gql-default-role': 'user', 'x-gql-user-id': 'u1' };

  it('reads claims stored as a JSON string (claims_format stringified_json)', () => {
    const settings = { ...base, jwtSecret: { ...base.jwtSecret, claims_format: 'stringified_json' as const } };
    const token = jwt.sign({ [CLAIMS_NAMESPACE]: JSON.stringify(claims) }, JWT_KEY, { expiresIn: 60 });
    expect(resolveSession({ authorization: `Bearer ${token}` }, settings)).toMatchObject({ role: 'user', userId: 'u1' });
  });

  it('checks audience and issuer when they are configured', () => {
    const settings = { ...base, jwtSecret: { ...base.jwtSecret, audience: 'plinth', issuer: 'https://auth.example' } };
    const good = jwt.sign({ [CLAIMS_NAMESPACE]: claims }, JWT_KEY, { expiresIn: 60, audience: 'plinth', issuer: 'https://auth.example' });
    const wrongAudience = jwt.sign({ [CLAIMS_NAMESPACE]: claims }, JWT_KEY, { expiresIn: 60, audience: 'other', issuer: 'https://auth.example' });
    expect(resolveSession({ authorization: `Bearer ${good}` }, settings).role).toBe('user');
    expect(() => resolveSession({ authorization: `Bearer ${wrongAudience}` }, settings)).toThrow(Refusal);
  });

  it('tolerates clock skew up to allowed_skew', () => {
    const expiredRecently = jwt.sign({ [CLAIMS_NAMESPACE]: claims, exp: Math.floor(Date.now() / 1000) - 5 }, JWT_KEY);
    expect(() => resolveSession({ authorization: `Bearer ${expiredRecently}` }, base)).toThrow('expired');
    const settings = { ...base, jwtSecret: { ...base.jwtSecret, allowed_skew: 30 } };
    expect(resolveSession({ authorization: `Bearer ${expiredRecently}` }, settings).role).toBe('user');
  });

  it('reads a token once per role asked for, refuses a role it does not allow every time, and hands out sessions no one can change', () => {
    const token = jwt.sign({ [CLAIMS_NAMESPACE]: { ...claims, 'x-gql-allowed-roles': ['user', 'me'], 'x-gql-plan': 'pro' } }, JWT_KEY, { expiresIn: 60 });
    const headers = { authorization: `Bearer ${token}` };
    const first = resolveSession(headers, base);
    const again = resolveSession(headers, base);
    expect(again).toEqual(first);
    expect(first).toMatchObject({ role: 'user', userId: 'u1', allowedRoles: ['user', 'me'] });
    expect(first.variables).toEqual({ 'x-gql-user-id': 'u1', 'x-gql-plan': 'pro', 'x-gql-role': 'user' });
    const asMe = resolveSession({ ...headers, 'x-gql-role': 'me' }, base);
    expect(asMe.role).toBe('me');
    expect(asMe.variables['x-gql-role']).toBe('me');
    // The session asked for first is unchanged by the other role's.
    expect(resolveSession(headers, base).variables['x-gql-role']).toBe('user');
    for (let attempt = 0; attempt < 2; attempt++) {
      expect(() => resolveSession({ ...headers, 'x-gql-role': 'admin' }, base)).toThrow('not among the token');
    }
    expect(() => {
      first.variables['x-gql-role'] = 'admin';
    }).toThrow(TypeError);
    expect(() => first.allowedRoles.push('admin')).toThrow(TypeError);
    expect(resolveSession(headers, base).variables['x-gql-role']).toBe('user');
  });

  it('keeps verified tokens within a budget in bytes, however long the tokens', async () => {
    // A secret of its own: a cache of its own. 6,000 distinct valid tokens of 6 KB each, as
    // someone holding a token-issuing key (or a flood of anonymous sign-ins with large claims)
    // sends them; an entry count of 10,000 would keep them all.
    const settings = { ...base, jwtSecret: { ...base.jwtSecret } };
    const padding = 'p'.repeat(4000);
    const left = await heapLeftBehind(() => {
      for (let i = 0; i < 6000; i++) {
        const token = jwt.sign({ [CLAIMS_NAMESPACE]: { ...claims, 'x-gql-user-id': `u${i}`, 'x-gql-padding': padding } }, JWT_KEY, { expiresIn: 60 });
        expect(resolveSession({ authorization: `Bearer ${token}` }, settings).userId).toBe(`u${i}`);
      }
    });
    expect(left).toBeLessThan(12 * 1024 * 1024);
  });

  it('refuses an HMAC-signed token when an RSA key is configured (no algorithm confusion)', () => {
    const { publicKey, privateKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
    const pem = publicKey.export({ type: 'spki', format: 'pem' }).toString();
    const settings = { ...base, jwtSecret: { ...base.jwtSecret, type: 'RS256' as const, key: pem } };
    const genuine = jwt.sign({ [CLAIMS_NAMESPACE]: claims }, privateKey, { algorithm: 'RS256', expiresIn: 60 });
    expect(resolveSession({ authorization: `Bearer ${genuine}` }, settings).role).toBe('user');

    // The classic attack: an HS256 signature made with the public key as the HMAC secret.
    const encode = (value: object) => Buffer.from(JSON.stringify(value)).toString('base64url');
    const unsigned = `${encode({ alg: 'HS256', typ: 'JWT' })}.${encode({ [CLAIMS_NAMESPACE]: claims, exp: Math.floor(Date.now() / 1000) + 60 })}`;
    const forged = `${unsigned}.${createHmac('sha256', pem).update(unsigned).digest('base64url')}`;
    expect(() => resolveSession({ authorization: `Bearer ${forged}` }, settings)).toThrow(Refusal);
  });
});
