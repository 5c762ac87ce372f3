import type { Logger } from 'pino';
import type { DataSource, EntityManager } from 'typeorm';
import { SecretBox } from '../../common/encryption';
import { Refusal } from '../../common/refusal';
import { acceptedTotpStep, generateTotpSecret, totpUri } from '../../common/totp';
import type { MfaSettings } from '../../config';
import type { RateLimits } from '../../platform/rate-limits';
import { authError } from './auth-errors';
import { USER_COLUMNS, type UserRow } from './auth-user';
import { one } from '../../db/sql';
import type { SessionTokens, SignInResult } from './session-tokens.service';
import type { Tickets } from './tickets.service';

/** 20 random bytes (160 bits), RFC 4226's recommended secret length. */
const SECRET_BYTES = 20;

/** What POST /auth/mfa/totp/generate answers: the secret, and its otpauth:// URI as a QR code. */
export interface TotpEnrolment {
  totpSecret: string;
  qrCodeDataUrl: string;
  /** Nhost's name of the same data URL. */
  imageUrl: string;
}

type TotpUserRow = UserRow & { totp_secret_sealed: Buffer | null; totp_last_step: string | null };

/**
 * The TOTP second factor. The secret is sealed (AES-256-GCM, bound to the user's id) under
 * AUTH_ENCRYPTION_KEY; the time step of the last accepted code is kept, so a code is accepted
 * once and never an older one. Codes are checked with one step of skew either way. Every code
 * presented counts against the user's limit (authMfa); a sign-in ticket is void after
 * AUTH_MFA_MAX_ATTEMPTS_PER_TICKET wrong codes, and used up by the right one.
 */
export class TotpFactor {
  private readonly box: SecretBox | undefined;

  constructor(
    private readonly dataSource: DataSource,
    private readonly tokens: SessionTokens,
    private readonly tickets: Tickets,
    private readonly rateLimits: RateLimits,
    private readonly settings: MfaSettings,
    private readonly logger: Logger,
  ) {
    this.box = settings.encryptionKey ? new SecretBox(settings.encryptionKey) : undefined;
  }

  /** A new secret for the user, not yet active: activation proves the app has it. */
  async generate(userId: string): Promise<TotpEnrolment> {
    const box = this.enrolment();
    return this.dataSource.transaction(async (manager) => {
      const user = await this.lockedUser(manager, userId);
      if (user.is_anonymous) throw authError('forbidden-anonymous');
      if (user.active_mfa_type === 'totp') throw authError('totp-already-active');
      const totpSecret = generateTotpSecret(SECRET_BYTES);
      await manager.query('UPDATE users SET totp_secret_sealed = $2, totp_last_step = NULL WHERE id = $1', [userId, box.seal(totpSecret, userId)]);
      const uri = totpUri(totpSecret, this.settings.totpIssuer, user.email ?? userId);
      // Loaded on the first enrolment, not at start-up (megabytes resident with its PNG encoder).
      const qrCodeDataUrl = await (require('qrcode') as typeof import('qrcode')).toDataURL(uri);
      return { totpSecret, qrCodeDataUrl, imageUrl: qrCodeDataUrl };
    });
  }

  /** Turns TOTP on with a current code of the generated secret. */
  async activate(userId: string, code: string, ip: string): Promise<void> {
    this.enrolment();
    await this.limit(userId, ip);
    await this.outcome(
      this.dataSource.transaction(async (manager) => {
        const user = await this.lockedUser(manager, userId);
        if (user.is_anonymous) throw authError('forbidden-anonymous');
        if (user.active_mfa_type === 'totp') throw authError('totp-already-active');
        if (!(await this.accept(manager, user, code))) return authError('invalid-otp');
        await manager.query("UPDATE users SET active_mfa_type = 'totp' WHERE id = $1", [userId]);
        return undefined;
      }),
    );
  }

  /** Turns TOTP off: a current code is required, so a stolen access token alone cannot. */
  async deactivate(userId: string, code: string, ip: string): Promise<void> {
    await this.limit(userId, ip);
    await this.outcome(
      this.dataSource.transaction(async (manager) => {
        const user = await this.lockedUser(manager, userId);
        if (user.active_mfa_type !== 'totp') throw authError('mfa-type-not-found');
        if (!(await this.accept(manager, user, code))) return authError('invalid-otp');
        await manager.query('UPDATE users SET active_mfa_type = NULL, totp_secret_sealed = NULL, totp_last_step = NULL WHERE id = $1', [userId]);
        return undefined;
      }),
    );
  }

  /**
   * POST /auth/signin/mfa/totp: the session for an `mfaTotp:` ticket and a current code. A
   * wrong code keeps the ticket (until its limit), so that a typo does not mean the password again.
   */
  async signIn(ticket: string, otp: string, ip: string): Promise<SignInResult> {
    return this.outcome(
      this.dataSource.transaction(async (manager) => {
        const held = await this.tickets.hold(manager, 'mfaTotp', ticket);
        if (!held) return authError('invalid-ticket');
        await this.limit(held.userId, ip);
        const user = await this.lockedUser(manager, held.userId);
        if (user.active_mfa_type !== 'totp') throw authError('disabled-mfa-totp');
        if (!(await this.accept(manager, user, otp))) {
          await this.tickets.recordFailure(manager, ticket, this.settings.maxAttemptsPerTicket);
          return authError('invalid-otp');
        }
        await this.tickets.redeem(manager, 'mfaTotp', ticket);
        return { session: await this.tokens.start(user, manager), mfa: null };
      }),
    );
  }

  /**
   * Whether `code` is a current code of the user's secret, newer than the last one accepted; if
   * so its time step is recorded. The user's row is locked, so two requests cannot both use it.
   */
  private async accept(manager: EntityManager, user: TotpUserRow, code: string): Promise<boolean> {
    const box = this.verification();
    if (!user.totp_secret_sealed) throw authError('no-totp-secret');
    const secret = box.open(user.totp_secret_sealed, user.id);
    if (secret === null) {
      this.logger.error({ userId: user.id }, 'a TOTP secret does not open with AUTH_ENCRYPTION_KEY: was the key changed?');
      throw authError('no-totp-secret');
    }
    const step = await acceptedTotpStep(secret, code, user.totp_last_step === null ? undefined : Number(user.totp_last_step));
    if (step === undefined) return false;
    await manager.query('UPDATE users SET totp_last_step = $2 WHERE id = $1', [user.id, step]);
    return true;
  }

  /** The transaction's answer: a failure code is thrown after the commit, so what it recorded stays. */
  private async outcome<T>(work: Promise<T | Refusal>): Promise<T> {
    const result = await work;
    if (result instanceof Refusal) throw result;
    return result;
  }

  private async limit(userId: string, ip: string): Promise<void> {
    await this.rateLimits.get('authMfa').consume({ ip, userId });
  }

  private async lockedUser(manager: EntityManager, userId: string): Promise<TotpUserRow> {
    const user = await one<TotpUserRow>(manager, `SELECT ${USER_COLUMNS}, totp_secret_sealed, totp_last_step FROM users WHERE id = $1 FOR UPDATE`, [userId]);
    if (!user || user.deleted_at) throw authError('unauthenticated-user');
    if (user.disabled) throw authError('disabled-user');
    return user;
  }

  /** Enrolment needs AUTH_MFA_TOTP_ENABLED (and so a key). */
  private enrolment(): SecretBox {
    if (!this.settings.totpEnabled) throw authError('disabled-endpoint', 'TOTP is disabled (AUTH_MFA_TOTP_ENABLED)');
    return this.verification();
  }

  /**
   * Checking a code needs only the key: users who enrolled keep signing in (and may turn TOTP
   * off) after AUTH_MFA_TOTP_ENABLED is turned off; turning it off stops new enrolments.
   */
  private verification(): SecretBox {
    if (!this.box) throw authError('disabled-endpoint', 'TOTP is unavailable: AUTH_ENCRYPTION_KEY is not set');
    return this.box;
  }
}
