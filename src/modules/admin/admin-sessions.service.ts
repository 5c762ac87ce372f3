import { randomBytes } from 'node:crypto';
import type { Logger } from 'pino';
import type { DataSource } from 'typeorm';
import type { PasswordHasher } from '../../common/passwords';
import { Refusal } from '../../common/refusal';
import { secretsEqual } from '../../common/secrets';
import { sha256 } from '../../common/sha256';
import { acceptedTotpStep } from '../../common/totp';
import type { AdminConfig } from '../../config';
import { one } from '../../db/sql';

/** An admin session as the API shows it: never its token. */
export interface AdminSession {
  username: string;
  /** Sent back in X-CSRF-Token with every state-changing request. */
  csrfToken: string;
  createdAt: string;
  /** When it ends if no request comes before. */
  idleExpiresAt: string;
}

/** A login that worked: the token for the cookie, and the session. */
export interface AdminLogin {
  token: string;
  session: AdminSession;
}

interface LoginState {
  failures: number;
  /** Milliseconds until the next attempt may be checked (growing delay or lock-out); 0 or less: now. */
  wait_ms: number;
  locked: boolean;
  totp_last_step: string | null;
}

/** The CSRF token of a session: derived from its token, so it is never stored and only the cookie's holder can know it. */
function csrfTokenOf(token: string): string {
  return sha256(`plinth-admin-csrf:${token}`).toString('base64url');
}

/** The session cookie: HttpOnly, SameSite=Strict, Secure when the dashboard is reached over TLS (through a proxy). */
export const ADMIN_SESSION_COOKIE = 'plinth_admin_session';

const SESSION_TOKEN_BYTES = 32;
/** A session token as issued: 32 random bytes, base64url. */
const SESSION_TOKEN = /^[A-Za-z0-9_-]{43}$/;
/** A session's last request is written when the one before is older than this (or a tenth of the idle timeout). */
const TOUCH_WRITTEN_AFTER_SECONDS = 15;

/**
 * Admin logins and sessions (docs/decisions.md, "Admin dashboard sessions"). A login checks the user
 * name, the argon2id hash of PLATFORM_ADMIN_PASSWORD and, when PLATFORM_ADMIN_TOTP_SECRET is set,
 * a TOTP code. Failed logins in a row make the next attempt wait (1 s, 2 s, 4 s, ...) and, at
 * PLATFORM_ADMIN_LOGIN_MAX_FAILURES, lock logins out for PLATFORM_ADMIN_LOGIN_LOCKOUT_MINUTES; the
 * count lives in PostgreSQL, and attempts are checked one at a time (the row is locked).
 */
export class AdminSessions {
  constructor(
    private readonly dataSource: DataSource,
    private readonly settings: AdminConfig,
    private readonly passwords: PasswordHasher,
    private readonly logger: Logger,
  ) {}

  async login(username: string, password: string, otp: string | undefined): Promise<AdminLogin> {
    const { totpSecret } = this.settings;
    // Asking for the code reveals nothing about the password, and counts as no attempt.
    if (totpSecret && otp === undefined) throw new Refusal('OTP_REQUIRED', 'A TOTP code (otp) is required', 401, { field: 'otp' });
    const outcome = await this.dataSource.transaction(async (manager) => {
      const state = (await one<LoginState>(
        manager,
        `SELECT failures, totp_last_step, coalesce(locked_until > now(), false) AS locked,
                GREATEST(extract(epoch FROM locked_until - now()) * 1000,
                         extract(epoch FROM last_failure_at - now()) * 1000 + LEAST($1::float8 * 2 ^ (failures - 1), $2::float8 * 60000)) AS wait_ms
         FROM admin_login_state WHERE id = 1 FOR UPDATE`,
        [this.settings.loginDelayMs, this.settings.loginLockoutMinutes],
      ))!;
      const waitMs = Number(state.wait_ms ?? 0);
      if (waitMs > 0) return { refused: waitLonger(state.locked, waitMs) };
      const userMatches = secretsEqual(username, this.settings.user);
      // Always one argon2id check, also without a hash or with a wrong name: the time says nothing.
      const passwordMatches = await this.passwords.matches(password, this.settings.passwordHash);
      let step: number | undefined;
      if (totpSecret) step = await acceptedTotpStep(totpSecret, otp!, state.totp_last_step === null ? undefined : Number(state.totp_last_step));
      if (userMatches && passwordMatches && (!totpSecret || step !== undefined)) {
        await manager.query(
          'UPDATE admin_login_state SET failures = 0, last_failure_at = NULL, locked_until = NULL, totp_last_step = COALESCE($1, totp_last_step) WHERE id = 1',
          [step ?? null],
        );
        return { accepted: true as const };
      }
      const failures = state.failures + 1;
      const lock = failures >= this.settings.loginMaxFailures;
      await manager.query(
        // clock_timestamp(): the delay runs from the answer, not from the start of this (argon2-long) transaction.
        `UPDATE admin_login_state SET failures = $1, last_failure_at = clock_timestamp(),
                locked_until = CASE WHEN $2 THEN clock_timestamp() + make_interval(mins => $3) ELSE NULL END WHERE id = 1`,
        [failures, lock, this.settings.loginLockoutMinutes],
      );
      return { failures, locked: lock };
    });
    if ('refused' in outcome) throw outcome.refused;
    if ('failures' in outcome) {
      // Never the name or the password tried.
      this.logger.warn({ failures: outcome.failures, locked: outcome.locked }, 'failed admin login');
      if (outcome.locked) throw waitLonger(true, this.settings.loginLockoutMinutes * 60_000);
      throw new Refusal('INVALID_CREDENTIALS', totpSecret ? 'Wrong user name, password or code' : 'Wrong user name or password', 401);
    }
    const token = randomBytes(SESSION_TOKEN_BYTES).toString('base64url');
    const row = (await one<{ created_at: Date; expires_at: Date }>(
      this.dataSource,
      `INSERT INTO admin_sessions (token_hash, username) VALUES ($1, $2)
       RETURNING created_at, last_seen_at + make_interval(mins => $3) AS expires_at`,
      [sha256(token), this.settings.user, this.settings.sessionIdleMinutes],
    ))!;
    this.logger.info('admin logged in');
    return { token, session: this.describe(token, row) };
  }

  /**
   * The session of `token` when it is live (used within the idle timeout, by the current admin
   * user name), which this request keeps alive; undefined otherwise. The time it was last seen is
   * written only when it is older than a tenth of the idle timeout (15 s at most): a request then
   * only reads, and a read commits without waiting for the disk, where a write per request made
   * every call of the API wait for one (issue 33's benchmark: GET /api/auth/session 12 ms at p50).
   */
  async touch(token: string | undefined): Promise<AdminSession | undefined> {
    if (token === undefined || !SESSION_TOKEN.test(token)) return undefined;
    const { sessionIdleMinutes } = this.settings;
    const row = await one<{ created_at: Date; expires_at: Date }>(
      this.dataSource,
      `WITH live AS (
         SELECT token_hash, created_at, last_seen_at, last_seen_at < now() - make_interval(secs => $4) AS stale FROM admin_sessions
         WHERE token_hash = $1 AND username = $2 AND last_seen_at > now() - make_interval(mins => $3)
       ), kept AS (
         UPDATE admin_sessions AS session SET last_seen_at = now() FROM live WHERE session.token_hash = live.token_hash AND live.stale RETURNING 1
       )
       SELECT created_at, (CASE WHEN stale THEN now() ELSE last_seen_at END) + make_interval(mins => $3) AS expires_at FROM live`,
      [sha256(token), this.settings.user, sessionIdleMinutes, Math.min(TOUCH_WRITTEN_AFTER_SECONDS, sessionIdleMinutes * 6)],
    );
    return row && this.describe(token, row);
  }

  /** Whether `given` is the CSRF token of the session of `token` (constant time). */
  csrfMatches(token: string, given: string | undefined): boolean {
    return given !== undefined && secretsEqual(given, csrfTokenOf(token));
  }

  async logout(token: string): Promise<void> {
    await this.dataSource.query('DELETE FROM admin_sessions WHERE token_hash = $1', [sha256(token)]);
  }

  /** Deletes sessions idle past the timeout (a recurring task). */
  async deleteIdle(): Promise<void> {
    await this.dataSource.query('DELETE FROM admin_sessions WHERE last_seen_at <= now() - make_interval(mins => $1)', [this.settings.sessionIdleMinutes]);
  }

  private describe(token: string, row: { created_at: Date; expires_at: Date }): AdminSession {
    return {
      username: this.settings.user,
      csrfToken: csrfTokenOf(token),
      createdAt: row.created_at.toISOString(),
      idleExpiresAt: row.expires_at.toISOString(),
    };
  }
}

/** The refusal of an attempt made too soon after a failure, or while locked out. */
function waitLonger(locked: boolean, waitMs: number): Refusal {
  const retryAfterSeconds = Math.max(1, Math.ceil(waitMs / 1000));
  return locked
    ? new Refusal('LOGIN_LOCKED', `Too many failed logins: logins are locked for ${retryAfterSeconds} s`, 429, { retryAfterSeconds })
    : new Refusal('LOGIN_DELAYED', `A failed login was too recent: try again in ${retryAfterSeconds} s`, 429, { retryAfterSeconds });
}

/** Ends every admin session and lifts the lock-out (`plinth admin reset`). */
export async function resetAdminLogins(dataSource: DataSource): Promise<{ sessions: number }> {
  const ended = await one<{ count: number }>(dataSource, 'WITH ended AS (DELETE FROM admin_sessions RETURNING 1) SELECT count(*)::int AS count FROM ended');
  await dataSource.query('UPDATE admin_login_state SET failures = 0, last_failure_at = NULL, locked_until = NULL WHERE id = 1');
  return { sessions: ended!.count };
}

/**
 * A session for a `plinth admin` command on this machine (`logs`), made in the database the command
 * reaches with the project's settings: whoever reaches it can already change the admin password
 * and the settings, so no password is asked for, none is kept in the environment, and the login
 * lock-out is not touched. The token stays in the command's memory; `end` deletes the session.
 */
export async function openCommandSession(dataSource: DataSource, username: string): Promise<{ token: string; end(): Promise<void> }> {
  const token = randomBytes(SESSION_TOKEN_BYTES).toString('base64url');
  await dataSource.query('INSERT INTO admin_sessions (token_hash, username) VALUES ($1, $2)', [sha256(token), username]);
  return { token, end: async () => void (await dataSource.query('DELETE FROM admin_sessions WHERE token_hash = $1', [sha256(token)])) };
}
