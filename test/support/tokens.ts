import { randomUUID } from 'node:crypto';
import jwt from 'jsonwebtoken';
import { CLAIMS_NAMESPACE, JWT_KEY } from './server';

export interface TokenOptions {
  roles?: string[];
  defaultRole?: string;
  userId?: string;
  claims?: Record<string, unknown>;
  /** Seconds from now; negative for a token that has already expired. */
  expiresIn?: number;
  key?: string;
  algorithm?: jwt.Algorithm;
  /** The session the token names (`sid`); none by default, as a token another holder of the secret signs. */
  sessionId?: string;
}

/** An access token as the auth service issues it (spec 2 §2.2). */
export function signToken(options: TokenOptions = {}): string {
  const userId = options.userId ?? randomUUID();
  const now = Math.floor(Date.now() / 1000);
  return jwt.sign(
    {
      sub: userId,
      ...(options.sessionId === undefined ? {} : { sid: options.sessionId }),
      iat: now,
      exp: now + (options.expiresIn ?? 900),
      [CLAIMS_NAMESPACE]: {
        'x-gql-allowed-roles': options.roles ?? ['user'],
        'x-gql-default-role': options.defaultRole ?? options.roles?.[0] ?? 'user',
        'x-gql-user-id': userId,
        'x-gql-source-account-id': 'primary',
        ...options.claims,
      },
    },
    options.key ?? JWT_KEY,
    { algorithm: options.algorithm ?? 'HS256' },
  );
}

/** The same claims, unsigned, with `alg: none` (what an attacker would try). */
export function unsignedToken(options: TokenOptions = {}): string {
  const [, payload] = signToken(options).split('.');
  const header = Buffer.from(JSON.stringify({ alg: 'none', typ: 'JWT' })).toString('base64url');
  return `${header}.${payload}.`;
}

export function bearer(token: string): Record<string, string> {
  return { authorization: `Bearer ${token}` };
}
