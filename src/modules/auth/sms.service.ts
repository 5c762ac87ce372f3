import { randomInt, timingSafeEqual } from 'node:crypto';
import type { Logger } from 'pino';
import type { DataSource, EntityManager } from 'typeorm';
import { Refusal } from '../../common/refusal';
import { sha256 } from '../../common/sha256';
import type { MfaSettings, SmsGatewaySettings } from '../../config';
import type { OutboundHttp } from '../../platform/outbound-http';
import type { RateLimits } from '../../platform/rate-limits';
import { authError, invalidRequest } from './auth-errors';
import { USER_COLUMNS, type UserRow } from './auth-user';
import { one, rows } from '../../db/sql';
import type { SessionTokens, SignInResult } from './session-tokens.service';
import type { Tickets } from './tickets.service';

/** E.164: a plus, then up to 15 digits, the first not zero. */
const E164 = /^\+[1-9]\d{6,14}$/;
const CODE = /^\d{6}$/;
type Purpose = 'verify' | 'signin';

/**
 * The SMS second factor. A code is 6 random digits, stored as a hash with its phone number and
 * an expiry (AUTH_SMS_CODE_TTL_SECONDS), one live code per user and purpose; a code allows
 * AUTH_MFA_MAX_ATTEMPTS_PER_TICKET wrong tries. Sends are limited per number and per address;
 * codes presented count against the user's second-factor limit, as TOTP codes do.
 */
export class SmsFactor {
  constructor(
    private readonly dataSource: DataSource,
    private readonly tokens: SessionTokens,
    private readonly tickets: Tickets,
    private readonly rateLimits: RateLimits,
    private readonly http: OutboundHttp,
    private readonly settings: MfaSettings,
    private readonly logger: Logger,
  ) {}

  /** POST /auth/user/phone: a code to the number, which becomes the user's once verified. */
  async sendPhoneCode(userId: string, phoneNumber: string, ip: string): Promise<void> {
    const gateway = this.gateway();
    if (!E164.test(phoneNumber)) throw invalidRequest('phoneNumber must be in international format (E.164), such as +14155550100');
    await this.rateLimits.get('authSmsAddress').consume({ ip });
    await this.rateLimits.get('authSmsNumber').consume({ ip, token: phoneNumber });
    await this.dataSource.transaction(async (manager) => {
      const user = await this.lockedUser(manager, userId);
      if (user.is_anonymous) throw authError('forbidden-anonymous');
      await this.sendCode(manager, gateway, user.id, 'verify', phoneNumber);
    });
  }

  /** POST /auth/user/phone/verify: the number is verified, and the SMS second factor on (unless TOTP is). */
  async verifyPhone(userId: string, code: string, ip: string): Promise<void> {
    this.gateway();
    await this.rateLimits.get('authMfa').consume({ ip, userId });
    const result = await this.dataSource.transaction(async (manager) => {
      await this.lockedUser(manager, userId);
      const phoneNumber = await this.accept(manager, userId, 'verify', code);
      if (phoneNumber === null) return authError('invalid-otp');
      await manager.query(
        "UPDATE users SET phone_number = $2, phone_number_verified = true, active_mfa_type = coalesce(active_mfa_type, 'sms') WHERE id = $1",
        [userId, phoneNumber],
      );
      return undefined;
    });
    // A wrong code or ticket is refused once the transaction that counted it has committed.
    if (result instanceof Refusal) throw result;
  }

  /** Sign-in of a user with the SMS factor on: a code to the verified number, sent with the ticket. */
  async sendSignInCode(manager: EntityManager, user: UserRow, ip: string): Promise<void> {
    const gateway = this.gateway();
    if (!user.phone_number) throw authError('disabled-endpoint', 'The user has no verified phone number');
    // Sign-in codes count against the sender's address as enrolment codes do: accounts enrolled
    // earlier would otherwise let one address send to many numbers (SMS pumping).
    await this.rateLimits.get('authSmsAddress').consume({ ip });
    await this.rateLimits.get('authSmsNumber').consume({ ip, token: user.phone_number });
    await this.sendCode(manager, gateway, user.id, 'signin', user.phone_number);
  }

  /** POST /auth/signin/mfa/sms. */
  async signIn(ticket: string, otp: string, ip: string): Promise<SignInResult> {
    const result = await this.dataSource.transaction(async (manager) => {
      const held = await this.tickets.hold(manager, 'mfaSms', ticket);
      if (!held) return authError('invalid-ticket');
      await this.rateLimits.get('authMfa').consume({ ip, userId: held.userId });
      const user = await this.lockedUser(manager, held.userId);
      if ((await this.accept(manager, user.id, 'signin', otp)) === null) {
        await this.tickets.recordFailure(manager, ticket, this.settings.maxAttemptsPerTicket);
        return authError('invalid-otp');
      }
      await this.tickets.redeem(manager, 'mfaSms', ticket);
      return { session: await this.tokens.start(user, manager), mfa: null };
    });
    if (result instanceof Refusal) throw result;
    return result;
  }

  /** Stores a new code (replacing the live one of that purpose) and sends it. */
  private async sendCode(manager: EntityManager, gateway: SmsGatewaySettings, userId: string, purpose: Purpose, phoneNumber: string): Promise<void> {
    const code = String(randomInt(0, 1_000_000)).padStart(6, '0');
    await manager.query(
      `INSERT INTO auth_sms_codes (user_id, purpose, phone_number, code_hash, expires_at)
       VALUES ($1, $2, $3, $4, now() + make_interval(secs => $5))
       ON CONFLICT (user_id, purpose) DO UPDATE SET phone_number = excluded.phone_number, code_hash = excluded.code_hash,
         failed_attempts = 0, expires_at = excluded.expires_at`,
      [userId, purpose, phoneNumber, codeHash(userId, purpose, code), this.settings.sms.codeTtlSeconds],
    );
    await this.send(gateway, phoneNumber, `Your verification code is ${code}`);
  }

  /** The phone number of a live code of the user equal to `code` (used up); null otherwise, counting the try. */
  private async accept(manager: EntityManager, userId: string, purpose: Purpose, code: string): Promise<string | null> {
    const row = await one<{ phone_number: string; code_hash: Buffer; live: boolean }>(
      manager,
      'SELECT phone_number, code_hash, expires_at > now() AS live FROM auth_sms_codes WHERE user_id = $1 AND purpose = $2 FOR UPDATE',
      [userId, purpose],
    );
    if (!row?.live) return null;
    if (CODE.test(code) && timingSafeEqual(row.code_hash, codeHash(userId, purpose, code))) {
      await manager.query('DELETE FROM auth_sms_codes WHERE user_id = $1 AND purpose = $2', [userId, purpose]);
      return row.phone_number;
    }
    const [counted] = await rows<{ failed_attempts: number }>(
      manager,
      'UPDATE auth_sms_codes SET failed_attempts = failed_attempts + 1 WHERE user_id = $1 AND purpose = $2 RETURNING failed_attempts',
      [userId, purpose],
    );
    if (counted.failed_attempts >= this.settings.maxAttemptsPerTicket) {
      await manager.query('DELETE FROM auth_sms_codes WHERE user_id = $1 AND purpose = $2', [userId, purpose]);
    }
    return null;
  }

  /** Twilio's Messages API (POST /2010-04-01/Accounts/{AccountSid}/Messages.json), through the outbound client. */
  private async send(gateway: SmsGatewaySettings, to: string, body: string): Promise<void> {
    const url = `${gateway.apiUrl.replace(/\/+$/, '')}/2010-04-01/Accounts/${encodeURIComponent(gateway.accountSid)}/Messages.json`;
    const form = new URLSearchParams({ To: to, MessagingServiceSid: gateway.messagingServiceId, Body: body });
    const response = await this.http
      .request(url, {
        method: 'POST',
        headers: {
          authorization: `Basic ${Buffer.from(`${gateway.accountSid}:${gateway.authToken}`).toString('base64')}`,
          'content-type': 'application/x-www-form-urlencoded',
        },
        body: form.toString(),
      })
      .catch((error: unknown) => {
        this.logger.warn({ err: error }, 'the SMS gateway did not answer');
        throw authError('sms-delivery-failed');
      });
    if (response.status !== 201 && response.status !== 200) {
      this.logger.warn({ status: response.status }, 'the SMS gateway refused a message');
      throw authError('sms-delivery-failed');
    }
  }

  private async lockedUser(manager: EntityManager, userId: string): Promise<UserRow> {
    const user = await one<UserRow>(manager, `SELECT ${USER_COLUMNS} FROM users WHERE id = $1 FOR UPDATE`, [userId]);
    if (!user || user.deleted_at) throw authError('unauthenticated-user');
    if (user.disabled) throw authError('disabled-user');
    return user;
  }

  private gateway(): SmsGatewaySettings {
    const { enabled, gateway } = this.settings.sms;
    if (!enabled || !gateway) throw authError('disabled-endpoint', 'SMS codes are disabled (AUTH_MFA_SMS_ENABLED)');
    return gateway;
  }
}

/** SHA-256 of the code with its user and purpose: a stolen table does not give codes that work elsewhere. */
function codeHash(userId: string, purpose: Purpose, code: string): Buffer {
  return sha256(`${userId}:${purpose}:${code}`);
}
