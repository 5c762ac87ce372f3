import { randomUUID } from 'node:crypto';
import { createSigner } from 'fast-jwt';
import type { Logger } from 'pino';
import type { DataSource, EntityManager } from 'typeorm';
import { sha256 } from '../../common/sha256';
import type { JwtSecretConfig } from '../../config';
import { queryPrepared } from '../../db/prepared-statements';
import { GroupCommit } from '../../platform/group-commit';
import { authError } from './auth-errors';
import { one, rows } from '../../db/sql';
import { toAuthUser, USER_COLUMNS, userColumnsOf, type AuthUser, type UserRow } from './auth-user';
import type { ClaimValue, CustomClaims } from './custom-claims.service';
import { UUID } from '../../common/ids';

/** What sign-in, sign-up and refresh answer (spec 2 §2.1, Nhost's session). */
export interface AuthSession {
  accessToken: string;
  accessTokenExpiresIn: number;
  refreshToken: string;
  refreshTokenId: string;
  user: AuthUser;
}

/** What a sign-in answers: a session, or the ticket of the second factor the user has on. */
export interface SignInResult {
  session: AuthSession | null;
  mfa: { ticket: string } | null;
}

export interface TokenSettings {
  /** The signing secret and the engine's claim namespace (HS256/384/512). */
  secret: JwtSecretConfig;
  accessTokenExpiresInSeconds: number;
  refreshTokenExpiresInMinutes: number;
  reuseGraceSeconds: number;
  /** AUTH_RECENT_SIGN_IN_SECONDS: how recent a sign-in a change of password or address needs (0: any). */
  recentSignInSeconds: number;
  /** AUTH_MFA_REQUIRED_ROLES: left out of the token of a user without a second factor. */
  mfaRequiredRoles: string[];
}

/** A new session: its first refresh token ($1 hash, $2 user, $3 lifetime in minutes), the user's last_seen set. */
export const START_SESSION = `WITH seen AS (UPDATE users SET last_seen = now() WHERE id = $2)
         INSERT INTO auth_refresh_tokens (token_hash, family_id, user_id, expires_at)
         VALUES ($1, gen_random_uuid(), $2, now() + make_interval(mins => $3)) RETURNING id, family_id`;

/**
 * Refreshes in one statement. For each presented token (`presented`: its hash, and the hash of the
 * family's next token) that is live and not yet rotated: rotates it, reads its user (active only)
 * and inserts the next token (lifetime $3 minutes). Answers a row per refresh made, named by its
 * next token's hash; a presented token without one was not such a token
 * (SessionTokens.refreshRotated tells why). A token presented twice in one batch is rotated once:
 * the other presentation finds it rotated, as a concurrent retry does.
 */
const rotateFrom = (presented: string) => `WITH presented AS (${presented}), old AS (
           UPDATE auth_refresh_tokens t SET rotated_at = now() FROM presented p
           WHERE t.token_hash = p.token_hash AND t.rotated_at IS NULL AND t.revoked_at IS NULL AND t.expires_at > now()
           RETURNING p.next_hash, t.family_id, t.user_id
         ), account AS (
           SELECT old.next_hash, old.family_id, ${userColumnsOf('u')} FROM old JOIN users u ON u.id = old.user_id
           WHERE NOT u.disabled AND u.deleted_at IS NULL
         ), fresh AS (
           INSERT INTO auth_refresh_tokens (token_hash, family_id, user_id, expires_at)
           SELECT next_hash, family_id, id, now() + make_interval(mins => $3) FROM account
           RETURNING id, token_hash
         )
         SELECT ${userColumnsOf('account')}, account.next_hash, account.family_id, fresh.id AS refresh_token_id
         FROM account JOIN fresh ON fresh.token_hash = account.next_hash`;

/**
 * A batch of one (every refresh at low load) has a statement of its own: the planner cannot size
 * an array parameter in a generic plan, so the array form would be planned afresh on each
 * execution.
 */
const ROTATE_ONE = rotateFrom('SELECT $1::bytea AS token_hash, $2::bytea AS next_hash');
const ROTATE_MANY = rotateFrom('SELECT * FROM unnest($1::bytea[], $2::bytea[]) AS p (token_hash, next_hash)');

/** A refresh the batch made: the user, the next token's hash and id, and its session (family). */
type RotatedRow = UserRow & { next_hash: Buffer; family_id: string; refresh_token_id: string };

/** One refresh of a batch: the presented token's hash and the next token's. */
interface Rotation {
  presented: Buffer;
  next: Buffer;
}

/**
 * The most refreshes one statement rotates. A batch holds the refreshes that came while the
 * previous two were written, so it only grows this large in a burst; the bound keeps that
 * statement (and the locks it holds) short.
 */
const MAX_ROTATIONS_PER_STATEMENT = 256;

/** A refresh token row as the diagnosis of a failed rotation reads it. */
interface TokenState {
  family_id: string;
  user_id: string;
  rotated: boolean;
  revoked: boolean;
  live: boolean;
  in_grace: boolean;
  family_revoked: boolean;
}

/**
 * Access tokens (JWT, signed with AUTH_JWT_SECRET under the engine's claim namespace) and
 * sessions (refresh tokens: random UUIDs kept as SHA-256 hashes, one family per sign-in).
 * Refreshing rotates: the presented token stops working at once. A token presented again after
 * its rotation is a stolen copy or a replay, so its whole family is revoked (reuse detection),
 * unless it comes within AUTH_REFRESH_TOKEN_REUSE_GRACE_SECONDS, a client's concurrent retry.
 */
export class SessionTokens {
  private readonly sign: (payload: Record<string, unknown>) => string;
  private readonly rotations: GroupCommit<Rotation, RotatedRow | undefined>;

  constructor(
    private readonly dataSource: DataSource,
    private readonly settings: TokenSettings,
    private readonly customClaims: CustomClaims,
    private readonly logger: Logger,
  ) {
    const { secret } = settings;
    this.sign = createSigner({
      key: secret.key,
      algorithm: secret.type,
      // fast-jwt sets iat, and exp from it (milliseconds here, seconds in the token).
      expiresIn: settings.accessTokenExpiresInSeconds * 1000,
      ...(secret.issuer ? { iss: secret.issuer } : {}),
      ...(secret.audience ? { aud: secret.audience } : {}),
    });
    this.rotations = new GroupCommit({ maxBatch: MAX_ROTATIONS_PER_STATEMENT, write: (batch) => this.rotate(batch) });
  }

  /**
   * A signed access token for the user (spec 2 §2.2) in the session `sessionId` (its refresh
   * tokens' family), carried as `sid` (OpenID Connect's name): changes to the account check that
   * the session still lives (liveSession), which a JWT alone cannot tell.
   */
  async accessToken(user: UserRow, sessionId: string): Promise<string> {
    const { allowedRoles, defaultRole } = this.roles(user);
    const standard: Record<string, ClaimValue> = {
      'x-gql-allowed-roles': allowedRoles,
      'x-gql-default-role': defaultRole,
      'x-gql-user-id': user.id,
      'x-gql-source-account-id': user.source_account_id,
    };
    const extra = await this.customClaims.claimsFor(user, standard);
    const claims: Record<string, ClaimValue> = {};
    for (const [name, value] of Object.entries({ ...standard, ...extra })) {
      if (value !== null) claims[name] = value;
    }
    const { claims_namespace: namespace, claims_format: format } = this.settings.secret;
    return this.sign({
      sub: user.id,
      sid: sessionId,
      [namespace]: format === 'stringified_json' ? JSON.stringify(claims) : claims,
    });
  }

  /**
   * The roles the token carries. Until the user turns a second factor on, the roles of
   * AUTH_MFA_REQUIRED_ROLES are withheld (spec 2 §5.5: require TOTP for admin): the session can
   * still enrol, and the next token after enrolment (a refresh) carries them. A user left with no
   * role gets `me`, the self-service alias.
   */
  private roles(user: UserRow): { allowedRoles: string[]; defaultRole: string } {
    const required = this.settings.mfaRequiredRoles;
    if (user.active_mfa_type !== null || !user.allowed_roles.some((role) => required.includes(role))) {
      return { allowedRoles: user.allowed_roles, defaultRole: user.default_role };
    }
    const allowedRoles = user.allowed_roles.filter((role) => !required.includes(role));
    if (allowedRoles.length === 0) allowedRoles.push('me');
    return { allowedRoles, defaultRole: allowedRoles.includes(user.default_role) ? user.default_role : allowedRoles[0] };
  }

  /**
   * A new session (a new family) for the user, written with `manager` when given (a
   * transaction); the user's last_seen is set in the same statement.
   */
  async start(user: UserRow, manager?: EntityManager): Promise<AuthSession> {
    const refreshToken = randomUUID();
    const [row] = await queryPrepared<{ id: string; family_id: string }>(
      this.dataSource,
      START_SESSION,
      [sha256(refreshToken), user.id, this.settings.refreshTokenExpiresInMinutes],
      manager,
    );
    return this.session(user, refreshToken, row.id, row.family_id);
  }

  /** POST /auth/token: a new session for a valid refresh token, which stops working. */
  async refresh(refreshToken: string): Promise<AuthSession> {
    if (!UUID.test(refreshToken)) throw authError('invalid-refresh-token');
    const hash = sha256(refreshToken);
    const next = randomUUID();
    const rotated = await this.rotations.submit({ presented: hash, next: sha256(next) });
    if (rotated) return this.session(rotated, next, rotated.refresh_token_id, rotated.family_id);
    return this.refreshRotated(hash, next);
  }

  /** Writes a batch of rotations (ROTATE_ONE or ROTATE_MANY); each gets its row, or undefined when its token was not rotated. */
  private async rotate(batch: Rotation[]): Promise<(RotatedRow | undefined)[]> {
    const minutes = this.settings.refreshTokenExpiresInMinutes;
    const rows =
      batch.length === 1
        ? await queryPrepared<RotatedRow>(this.dataSource, ROTATE_ONE, [batch[0].presented, batch[0].next, minutes])
        : await queryPrepared<RotatedRow>(this.dataSource, ROTATE_MANY, [
            batch.map((rotation) => rotation.presented),
            batch.map((rotation) => rotation.next),
            minutes,
          ]);
    const byNext = new Map(rows.map((row) => [row.next_hash.toString('hex'), row]));
    return batch.map((rotation) => byNext.get(rotation.next.toString('hex')));
  }

  /** The presented token was not a live, unrotated one: a retry within the grace window, reuse, or nothing. */
  private async refreshRotated(hash: Buffer, next: string): Promise<AuthSession> {
    const [state] = (await this.dataSource.query(
      `SELECT t.family_id, t.user_id, t.rotated_at IS NOT NULL AS rotated, t.revoked_at IS NOT NULL AS revoked,
              t.expires_at > now() AS live, now() - t.rotated_at <= make_interval(secs => $2) AS in_grace,
              EXISTS (SELECT 1 FROM auth_refresh_tokens f WHERE f.family_id = t.family_id AND f.revoked_at IS NOT NULL) AS family_revoked
       FROM auth_refresh_tokens t WHERE t.token_hash = $1`,
      [hash, this.settings.reuseGraceSeconds],
    )) as TokenState[];
    if (!state || state.revoked || state.family_revoked || !state.live || !state.rotated) throw authError('invalid-refresh-token');
    if (!state.in_grace) {
      await this.dataSource.query('UPDATE auth_refresh_tokens SET revoked_at = now() WHERE family_id = $1 AND revoked_at IS NULL', [state.family_id]);
      this.logger.warn({ userId: state.user_id, familyId: state.family_id }, 'a rotated refresh token was presented again: its session is revoked');
      throw authError('invalid-refresh-token');
    }
    // A concurrent retry: the family gets one more token; the one already issued stays valid.
    const [user] = (await this.dataSource.query(`SELECT ${USER_COLUMNS} FROM users WHERE id = $1 AND NOT disabled AND deleted_at IS NULL`, [
      state.user_id,
    ])) as UserRow[];
    if (!user) throw authError('invalid-refresh-token');
    const [row] = (await this.dataSource.query(
      `INSERT INTO auth_refresh_tokens (token_hash, family_id, user_id, expires_at)
       VALUES ($1, $2, $3, now() + make_interval(mins => $4)) RETURNING id`,
      [sha256(next), state.family_id, user.id, this.settings.refreshTokenExpiresInMinutes],
    )) as { id: string }[];
    return this.session(user, next, row.id, state.family_id);
  }

  /**
   * Revokes the session (the family) of a refresh token, if it belongs to `userId` when given.
   * Returns false when no such session is known.
   */
  async revoke(refreshToken: string, userId: string | null): Promise<boolean> {
    if (!UUID.test(refreshToken)) return false;
    const revoked = await rows(
      this.dataSource.manager,
      `WITH target AS (SELECT family_id FROM auth_refresh_tokens WHERE token_hash = $1 AND ($2::uuid IS NULL OR user_id = $2))
       UPDATE auth_refresh_tokens SET revoked_at = coalesce(revoked_at, now())
       WHERE family_id = (SELECT family_id FROM target) RETURNING id`,
      [sha256(refreshToken), userId],
    );
    return revoked.length > 0;
  }

  /** Revokes every session of the user (but `except`, when given); answers how many sessions it ended. */
  async revokeAll(userId: string, manager: EntityManager = this.dataSource.manager, except: string | null = null): Promise<number> {
    const [row] = await rows<{ sessions: number }>(
      manager,
      `WITH revoked AS (
         UPDATE auth_refresh_tokens SET revoked_at = now()
         WHERE user_id = $1 AND revoked_at IS NULL AND family_id IS DISTINCT FROM $2::uuid RETURNING family_id
       ) SELECT count(DISTINCT family_id)::int AS sessions FROM revoked`,
      [userId, except],
    );
    return row.sessions;
  }

  /**
   * Whether a bearer token's session may change the account (its password, address, second
   * factors): the session must not have ended (signed out, taken over, revoked as stolen), and for
   * a change of password or address (`recentSignIn`) must have signed in within
   * AUTH_RECENT_SIGN_IN_SECONDS. A token that names no session (`sessionId` null: signed by another
   * holder of the secret) passes unless a recent sign-in is asked for, which it cannot show.
   */
  async assertMayChangeAccount(userId: string, sessionId: string | null, recentSignIn: boolean): Promise<void> {
    const window = recentSignIn ? this.settings.recentSignInSeconds : 0;
    if (sessionId === null) {
      if (window > 0) throw authError('reauthentication-required', 'Sign in again to do this: the token names no session');
      return;
    }
    const session = UUID.test(sessionId) ? await this.liveSession(userId, sessionId) : null;
    if (!session) throw authError('unauthenticated-user', 'The session of this token has ended: sign in again');
    if (window > 0 && Date.now() - session.startedAt.getTime() > window * 1000) {
      throw authError('reauthentication-required', `Sign in again to do this: the session signed in more than ${window} seconds ago`);
    }
  }

  /**
   * The session `sessionId` of the user, while it lives (not revoked, not all expired): when it
   * started. Null once it has ended: signed out, revoked as stolen, or taken over.
   */
  private async liveSession(userId: string, sessionId: string): Promise<{ startedAt: Date } | null> {
    const row = await one<{ started_at: Date | null; ended: boolean }>(
      this.dataSource.manager,
      `SELECT min(created_at) AS started_at, bool_or(revoked_at IS NOT NULL) OR NOT bool_or(expires_at > now()) AS ended
       FROM auth_refresh_tokens WHERE family_id = $1 AND user_id = $2`,
      [sessionId, userId],
    );
    return row?.started_at && !row.ended ? { startedAt: row.started_at } : null;
  }

  /**
   * Deletes what can no longer be used: expired refresh tokens (rotated ones are kept until then,
   * for reuse detection) and expired tickets. Idempotent, so every process may run it.
   */
  async deleteExpired(): Promise<void> {
    await this.dataSource.query('DELETE FROM auth_refresh_tokens WHERE expires_at < now()');
    await this.dataSource.query('DELETE FROM auth_tickets WHERE expires_at < now()');
  }

  private async session(user: UserRow, refreshToken: string, refreshTokenId: string, sessionId: string): Promise<AuthSession> {
    return {
      accessToken: await this.accessToken(user, sessionId),
      accessTokenExpiresIn: this.settings.accessTokenExpiresInSeconds,
      refreshToken,
      refreshTokenId,
      user: toAuthUser(user),
    };
  }
}
