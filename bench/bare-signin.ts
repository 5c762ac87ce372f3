import { createHash, randomUUID } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import { verify } from '@node-rs/argon2';
import { createSigner } from 'fast-jwt';
import Fastify from 'fastify';
import pg from 'pg';
import { toAuthUser, type UserRow } from '../src/modules/auth/auth-user';
import { USER_WITH_PASSWORD_BY_EMAIL } from '../src/modules/auth/email-sign-in.service';
import { START_SESSION } from '../src/modules/auth/session-tokens.service';

/** AUTH_REFRESH_TOKEN_EXPIRES_IN's default. */
const REFRESH_TOKEN_MINUTES = 43_200;

/**
 * The floor of a sign-in on this machine: the least a server can do for POST
 * /auth/signin/email-password with the same database rows and answer. Fastify, a pg pool, Plinth's
 * own two statements, prepared (the user by address; the refresh token's hash and last_seen), argon2id verify of the same hash on the same thread pool, an HS256 token from
 * fast-jwt and Nhost's session body. No rate limits, session variables, error handling, logging,
 * metrics or request ids. It runs in the server's process, so its hash shares Plinth's thread pool
 * and its CPU is read the same way.
 */
export async function startBareSignIn(databaseUrl: string, jwtKey: string, poolSize: number): Promise<{ url: string; close(): Promise<void> }> {
  const pool = new pg.Pool({ connectionString: databaseUrl, max: poolSize });
  const sign = createSigner({ key: jwtKey, algorithm: 'HS256', expiresIn: 900_000 });
  const app = Fastify({ logger: false });
  app.post('/signin', async (request, reply) => {
    const { email, password } = request.body as { email: string; password: string };
    const { rows } = await pool.query<UserRow & { password_hash: string }>({
      name: 'bare_select_user',
      text: USER_WITH_PASSWORD_BY_EMAIL,
      values: [email.toLowerCase()],
    });
    const user = rows[0];
    if (!user || !(await verify(user.password_hash, password))) return reply.code(401).send({ status: 401, error: 'invalid-email-password' });
    const refreshToken = randomUUID();
    const hash = createHash('sha256').update(refreshToken).digest();
    const started = await pool.query<{ id: string }>({ name: 'bare_start_session', text: START_SESSION, values: [hash, user.id, REFRESH_TOKEN_MINUTES] });
    const claims = {
      'x-gql-allowed-roles': user.allowed_roles,
      'x-gql-default-role': user.default_role,
      'x-gql-user-id': user.id,
      'x-gql-source-account-id': user.source_account_id,
    };
    const { password_hash: _hash, ...row } = user;
    return {
      session: {
        accessToken: sign({ sub: user.id, 'https://plinth.dev/jwt/claims': claims }),
        accessTokenExpiresIn: 900,
        refreshToken,
        refreshTokenId: started.rows[0].id,
        user: toAuthUser(row),
      },
      mfa: null,
    };
  });
  await app.listen({ port: 0, host: '127.0.0.1' });
  return {
    url: `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`,
    close: async () => {
      await app.close();
      await pool.end();
    },
  };
}
