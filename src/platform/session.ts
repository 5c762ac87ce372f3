import { createVerifier, TokenError } from 'fast-jwt';
import { LRUCache } from 'lru-cache';
import type { JwtSecretConfig } from '../config';
import { Refusal } from '../common/refusal';
import { ADMIN_ROLE, EVERY_ROLE } from '../common/roles';
import { secretsEqual } from '../common/secrets';
import { countTakenIn } from './text-caches';

/** Who is calling: the role the request runs as and the session variables (x-gql-* names). */
export interface Session {
  role: string;
  userId: string | null;
  allowedRoles: string[];
  /** Lower-case `x-gql-*` names, as in Hasura's session variables; includes x-gql-role. */
  variables: Record<string, string>;
  /** False for the unauthorised role, true for a verified token or the admin secret. */
  authenticated: boolean;
  /**
   * The caller holds the admin secret: an engine calling for its end users (or a trusted backend).
   * It asserts the session, and may name the end user's address (CLIENT_ADDRESS_HEADER).
   */
  viaAdminSecret: boolean;
  /** Expiry of the access token in seconds since the epoch, when a token was used. */
  expiresAt: number | null;
}

export type SessionErrorCode = 'INVALID_ADMIN_SECRET' | 'JWT_EXPIRED' | 'INVALID_JWT' | 'INVALID_JWT_CLAIMS' | 'ROLE_NOT_ALLOWED';

/** Authentication failed: 403 for a role the token does not allow, 401 otherwise. */
function sessionError(code: SessionErrorCode, message: string): Refusal {
  return new Refusal(code, message, code === 'ROLE_NOT_ALLOWED' ? 403 : 401);
}

export interface SessionSettings {
  adminSecret: string;
  jwtSecret: JwtSecretConfig;
  unauthorizedRole: string;
}

const VARIABLE_PREFIX = 'x-gql-';
export const ADMIN_SECRET_HEADER = 'x-gql-admin-secret';
/**
 * The end user's address, as an engine calling with the admin secret names it for the rate
 * limits; ignored from anyone else. An x-gql-* name: engines pass their clients' x-gql-* headers
 * on to no one (a client cannot forge it through one), and it is no session variable.
 */
export const CLIENT_ADDRESS_HEADER = 'x-gql-client-address';

type Headers = Record<string, string | string[] | undefined>;

/** Returns a header's value, or undefined; a repeated header is ambiguous and counts as absent. */
function header(headers: Headers, name: string): string | undefined {
  const value = headers[name];
  return typeof value === 'string' ? value : undefined;
}

/**
 * Resolves the session of a client request (HTTP headers, or the `headers` of a graphql-ws
 * connection_init payload), following the engine's rules:
 * the admin secret gives role admin and lets the caller choose X-Gql-Role and any X-Gql-* variable;
 * a bearer JWT gives the roles its claims allow and X-Gql-Role picks one of them;
 * no credentials give the unauthorised role. Credentials that fail are refused (sessionError).
 * Header names must already be lower case (Node's and our WebSocket adapter's form).
 */
export function resolveSession(headers: Headers, settings: SessionSettings): Session {
  const adminSecret = header(headers, ADMIN_SECRET_HEADER);
  if (adminSecret !== undefined) {
    if (!secretsEqual(adminSecret, settings.adminSecret)) {
      throw sessionError('INVALID_ADMIN_SECRET', 'invalid x-gql-admin-secret');
    }
    return assertedSession(variablesFromHeaders(headers));
  }

  const token = bearerToken(headers);
  if (token !== undefined) return tokenSession(token, header(headers, 'x-gql-role'), settings.jwtSecret);

  const role = settings.unauthorizedRole;
  return {
    role,
    userId: null,
    allowedRoles: [role],
    variables: { 'x-gql-role': role },
    authenticated: false,
    viaAdminSecret: false,
    expiresAt: null,
  };
}

/** The token of the Authorization header, when there is one; a header of another form is INVALID_JWT. */
function bearerToken(headers: Headers): string | undefined {
  const authorization = header(headers, 'authorization');
  if (authorization === undefined) return undefined;
  const match = /^Bearer\s+(\S+)\s*$/i.exec(authorization);
  if (!match) throw sessionError('INVALID_JWT', 'the Authorization header must be "Bearer <token>"');
  return match[1];
}

/**
 * The verified claims of the request's bearer token, read from the cache resolveSession fills;
 * null when the admin secret is presented (it takes precedence) or there is no token. Throws
 * the Refusal resolveSession throws.
 */
export function bearerClaims(headers: Headers, settings: SessionSettings): JwtPayload | null {
  if (header(headers, ADMIN_SECRET_HEADER) !== undefined) return null;
  const token = bearerToken(headers);
  return token === undefined ? null : verifiedToken(token, settings.jwtSecret).payload;
}

/** The X-Gql-* headers of a request (but the admin secret and the client address), as session variables. */
export function variablesFromHeaders(headers: Headers): Record<string, string> {
  const variables: Record<string, string> = {};
  for (const [name, value] of Object.entries(headers)) {
    if (name.startsWith(VARIABLE_PREFIX) && name !== ADMIN_SECRET_HEADER && name !== CLIENT_ADDRESS_HEADER && typeof value === 'string') {
      variables[name] = value;
    }
  }
  return variables;
}

/**
 * The session a caller holding the admin secret asserts (a client with the secret, or the
 * engine calling a handler): the variables it sends, role admin unless it names another.
 */
export function assertedSession(variables: Record<string, string>): Session {
  const role = variables['x-gql-role'] || ADMIN_ROLE;
  return {
    role,
    userId: variables['x-gql-user-id'] || null,
    allowedRoles: [role],
    variables: { ...variables, 'x-gql-role': role },
    authenticated: true,
    viaAdminSecret: true,
    expiresAt: null,
  };
}

/** Whether the session may call something open to `roles` (see EVERY_ROLE; admin may call all). */
export function isRoleAllowed(session: Session, roles: readonly string[]): boolean {
  if (session.role === ADMIN_ROLE || roles.includes(EVERY_ROLE)) return true;
  if (roles.length === 0) return session.authenticated;
  return roles.includes(session.role);
}

export type JwtPayload = Record<string, unknown>;

/**
 * Heap bytes of verified tokens kept per process (about 900 tokens as the auth service signs
 * them); each entry lives until its token expires (or 10 minutes). Counted in bytes: a token is
 * as long as its signer made it.
 */
const VERIFIED_TOKEN_CACHE_BYTES = 4 * 1024 * 1024;
const VERIFIED_TOKEN_TTL_MS = 10 * 60_000;
/**
 * What a kept token takes, per character of the token: the token itself, its payload, and the
 * sessions made of it (up to SESSIONS_PER_TOKEN), plus a fixed part: the top of what was measured
 * (docs/decisions.md, "Memory under hostile input").
 */
const verifiedTokenBytes = (token: string) => 1024 + 8 * token.length;

/** A verified token's payload, and the instants (ms) between which it may be used. */
interface VerifiedToken {
  payload: JwtPayload;
  notBefore: number;
  expiresAt: number;
  /** The sessions made of it, by the role asked for ('' for the default): the claims are read once. */
  sessions: Map<string, Session>;
}

/** Roles a token's cache entry keeps a session for; a token asked for more is read again each time. */
const SESSIONS_PER_TOKEN = 8;

/**
 * One verifier per configured secret (fast-jwt): only the configured algorithm (so no "none"
 * and no HS/RS confusion), audience and issuer when set, skew in milliseconds. A token verified
 * once is served from a bounded cache until it expires; not-before and expiry
 * are checked again on every hit. Only successes are kept: fast-jwt's own cache keeps failures
 * too, and a cached error holds its stack's frames, and through them the request that failed.
 */
const verifiers = new WeakMap<JwtSecretConfig, (token: string) => VerifiedToken>();
function verifierFor(secret: JwtSecretConfig): (token: string) => VerifiedToken {
  let verify = verifiers.get(secret);
  if (!verify) {
    const verifyUncached = createVerifier({
      key: secret.key,
      algorithms: [secret.type],
      allowedAud: secret.audience,
      allowedIss: secret.issuer,
      clockTolerance: secret.allowed_skew * 1000,
    }) as (token: string) => JwtPayload;
    const skewMs = secret.allowed_skew * 1000;
    const verified = new LRUCache<string, VerifiedToken>({
      maxSize: VERIFIED_TOKEN_CACHE_BYTES,
      sizeCalculation: countTakenIn((_entry, token) => verifiedTokenBytes(token)),
    });
    verify = (token) => {
      // Keyed by the token itself: hashing it would cost more than the lookup.
      const now = Date.now();
      const hit = verified.get(token);
      if (hit && now >= hit.notBefore && now < hit.expiresAt) return hit;
      // A miss, or a hit past its time: fast-jwt decides (and says why: expired, not yet valid).
      const payload = verifyUncached(token);
      const entry: VerifiedToken = {
        payload,
        notBefore: typeof payload.nbf === 'number' ? payload.nbf * 1000 - skewMs : 0,
        expiresAt: Math.min(now + VERIFIED_TOKEN_TTL_MS, typeof payload.exp === 'number' ? payload.exp * 1000 + skewMs : Infinity),
        sessions: new Map(),
      };
      verified.set(token, entry);
      return entry;
    };
    verifiers.set(secret, verify);
  }
  return verify;
}

/**
 * The session of a bearer token under the role asked for. Made once per verified token and role
 * and shared by the requests that present them (frozen: nothing may change it), rather than every
 * request reading the claims again.
 */
function tokenSession(token: string, requestedRole: string | undefined, secret: JwtSecretConfig): Session {
  const verified = verifiedToken(token, secret);
  const key = requestedRole ?? '';
  let session = verified.sessions.get(key);
  if (session === undefined) {
    session = sessionOfClaims(verified.payload, requestedRole, secret);
    if (verified.sessions.size < SESSIONS_PER_TOKEN) verified.sessions.set(key, session);
  }
  return session;
}

/** The token verified (or found verified in the cache); a Refusal when it is not valid. */
function verifiedToken(token: string, secret: JwtSecretConfig): VerifiedToken {
  try {
    return verifierFor(secret)(token);
  } catch (error) {
    if (!(error instanceof TokenError)) throw error;
    if (error.code === TokenError.codes.expired) throw sessionError('JWT_EXPIRED', 'the JWT has expired');
    if (error.code === TokenError.codes.inactive) throw sessionError('INVALID_JWT', 'the JWT is not valid yet');
    throw sessionError('INVALID_JWT', `could not verify the JWT: ${error.message}`);
  }
}

/** The session a verified payload's claims give under the role asked for (deeply frozen). */
function sessionOfClaims(payload: JwtPayload, requestedRole: string | undefined, secret: JwtSecretConfig): Session {
  const claims = namespaceClaims(payload, secret);
  const allowedRoles = claims['x-gql-allowed-roles'];
  const defaultRole = claims['x-gql-default-role'];
  if (!Array.isArray(allowedRoles) || allowedRoles.length === 0 || !allowedRoles.every((r) => typeof r === 'string' && r)) {
    throw sessionError('INVALID_JWT_CLAIMS', 'x-gql-allowed-roles must be a non-empty list of role names');
  }
  if (typeof defaultRole !== 'string' || !allowedRoles.includes(defaultRole)) {
    throw sessionError('INVALID_JWT_CLAIMS', 'x-gql-default-role must be one of x-gql-allowed-roles');
  }
  const role = requestedRole ?? defaultRole;
  if (!allowedRoles.includes(role)) {
    throw sessionError('ROLE_NOT_ALLOWED', `the role "${role}" is not among the token's allowed roles`);
  }

  const variables: Record<string, string> = {};
  for (const [name, value] of Object.entries(claims)) {
    const key = name.toLowerCase();
    if (!key.startsWith(VARIABLE_PREFIX) || key === 'x-gql-allowed-roles' || key === 'x-gql-default-role') continue;
    if (typeof value === 'string') variables[key] = value;
    else if (typeof value === 'number' || typeof value === 'boolean') variables[key] = String(value);
    // Hasura passes arrays and objects as their JSON text (PostgreSQL array literals for arrays of
    // scalars are its other form); JSON is what our resolvers can read back.
    else if (value !== null && value !== undefined) variables[key] = JSON.stringify(value);
  }
  variables['x-gql-role'] = role;
  return Object.freeze({
    role,
    userId: variables['x-gql-user-id'] ?? null,
    allowedRoles: Object.freeze([...(allowedRoles as string[])]) as string[],
    variables: Object.freeze(variables),
    authenticated: true,
    viaAdminSecret: false,
    expiresAt: typeof payload.exp === 'number' ? payload.exp : null,
  });
}

function namespaceClaims(payload: JwtPayload, secret: JwtSecretConfig): Record<string, unknown> {
  let claims: unknown = payload[secret.claims_namespace];
  if (secret.claims_format === 'stringified_json' && typeof claims === 'string') {
    try {
      claims = JSON.parse(claims);
    } catch {
      throw sessionError('INVALID_JWT_CLAIMS', `the claims under "${secret.claims_namespace}" are not valid JSON`);
    }
  }
  if (claims === null || typeof claims !== 'object' || Array.isArray(claims)) {
    throw sessionError('INVALID_JWT_CLAIMS', `the JWT has no claims object under "${secret.claims_namespace}"`);
  }
  return claims as Record<string, unknown>;
}
