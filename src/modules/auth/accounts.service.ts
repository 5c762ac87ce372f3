import type { Logger } from 'pino';
import type { DataSource, EntityManager } from 'typeorm';
import { MAIL_ADDRESS } from '../../common/mail-address';
import { PasswordHasher } from '../../common/passwords';
import type { Config } from '../../config';
import { queryPrepared } from '../../db/prepared-statements';
import type { MailMessage, Mailer } from '../../platform/mail/mailer';
import { authUrl } from '../../platform/urls';
import { AuthError, invalidRequest } from './auth-errors';
import { gravatarUrl, toAuthUser, USER_COLUMNS, type AuthUser, type UserRow } from './auth-user';
import { queryRows } from './query-rows';
import { RedirectPolicy, withQuery } from './redirects';
import type { AuthSession, SessionTokens, SignInResult } from './session-tokens.service';
import type { SignUpPolicy } from './sign-up-policy.service';
import type { SmsFactor } from './sms.service';
import type { TicketKind, Tickets } from './tickets.service';

export type AuthSettings = Config['auth'];

export interface SignUpOptions {
  displayName?: string;
  locale?: string;
  defaultRole?: string;
  allowedRoles?: string[];
  metadata?: Record<string, unknown>;
  redirectTo?: string;
}

export interface SignUpInput {
  email: string;
  password: string;
  options?: SignUpOptions;
}

export interface DeanonymizeInput {
  signInMethod: 'email-password' | 'passwordless';
  email: string;
  password?: string;
  options?: SignUpOptions;
}

/** The role of anonymous users (spec 2 §2.3), their only one until they are upgraded. */
export const ANONYMOUS_ROLE = 'anonymous';

/** The verification links' `type`, and the ticket kind each redeems. */
export const VERIFY_TYPES = {
  emailVerify: 'emailVerify',
  emailConfirmChange: 'emailConfirmChange',
  signinPasswordless: 'signinPasswordless',
  passwordReset: 'passwordReset',
} as const satisfies Record<string, TicketKind>;

export type VerifyType = keyof typeof VERIFY_TYPES;

/**
 * How the owner of an address proved its mailbox on an account nobody had verified (takeOver): a
 * provider vouching for the address, a sign-in link, a password-reset ticket, an invitation.
 */
export type MailboxProof = `provider:${string}` | 'magic-link' | 'password-reset' | 'invitation';

/**
 * takeOver's one statement ($1 the user): the password, pending address change and second
 * factors of the account go, with its tickets, invitations, SMS codes, linked providers and
 * sessions; the address counts as verified. Answers the account and what there was to clear.
 */
const TAKE_OVER = `WITH before AS (
         SELECT password_hash IS NOT NULL AS password, new_email IS NOT NULL AS email_change,
                totp_secret_sealed IS NOT NULL OR active_mfa_type IS NOT NULL AS second_factor, phone_number IS NOT NULL AS phone
         FROM users WHERE id = $1
       ), tickets AS (DELETE FROM auth_tickets WHERE user_id = $1 RETURNING 1),
       invitations AS (DELETE FROM user_invitations WHERE user_id = $1 RETURNING 1),
       codes AS (DELETE FROM auth_sms_codes WHERE user_id = $1 RETURNING 1),
       providers AS (DELETE FROM auth_user_providers WHERE user_id = $1 RETURNING provider),
       sessions AS (UPDATE auth_refresh_tokens SET revoked_at = now() WHERE user_id = $1 AND revoked_at IS NULL RETURNING family_id),
       account AS (
         UPDATE users SET password_hash = NULL, new_email = NULL, active_mfa_type = NULL, totp_secret_sealed = NULL, totp_last_step = NULL,
           phone_number = NULL, phone_number_verified = false, email_verified = true
         WHERE id = $1 RETURNING ${USER_COLUMNS}
       )
       SELECT account.*, before.*,
         (SELECT count(*) FROM tickets)::int + (SELECT count(*) FROM invitations)::int + (SELECT count(*) FROM codes)::int AS tickets,
         (SELECT array_agg(provider ORDER BY provider) FROM providers) AS providers,
         (SELECT count(DISTINCT family_id) FROM sessions)::int AS sessions
       FROM account, before`;

/** What TAKE_OVER answers: the account, and what it cleared. */
type TakenOverRow = UserRow & {
  password: boolean;
  email_change: boolean;
  second_factor: boolean;
  phone: boolean;
  tickets: number;
  providers: string[] | null;
  sessions: number;
};

/** The query of an invitation link's landing (GET /auth/invitations/accept), and what the app is sent. */
export const INVITE_TYPE = 'invite';

const MAX_EMAIL_LENGTH = 254;
const MAX_DISPLAY_NAME_LENGTH = 255;
const LOCALE = /^[a-z]{2,3}$/;
const UNIQUE_VIOLATION = '23505';

/**
 * Sign-in's look-up of the account and its hash ($1 the address, lower case); prepared, as it runs
 * on every attempt. Exported for the sign-in floor (bench/bare-signin.ts).
 */
export const USER_WITH_PASSWORD_BY_EMAIL = `SELECT ${USER_COLUMNS}, password_hash FROM users WHERE lower(email) = $1`;

/**
 * Accounts of the auth service: sign-up, sign-in, the user, verification links, password reset
 * and change, e-mail change and invitations. Shares `users` with registerUser and bulkCreateUsers.
 */
export class AuthAccounts {
  private readonly redirects: RedirectPolicy;
  private readonly passwords: PasswordHasher;

  constructor(
    private readonly dataSource: DataSource,
    private readonly tokens: SessionTokens,
    private readonly tickets: Tickets,
    /** Every account this service creates follows it. */
    private readonly signUps: SignUpPolicy,
    private readonly mailer: Mailer,
    private readonly config: Pick<Config, 'auth'>,
    /** False when mail cannot be delivered (production without SMTP_HOST): routes that mail answer disabled-endpoint. */
    private readonly canMail: boolean,
    /** Sends the code of an `mfaSms` sign-in. */
    private readonly sms: SmsFactor,
    private readonly logger: Logger,
  ) {
    this.redirects = new RedirectPolicy(config.auth.allowedRedirectUrls);
    this.passwords = new PasswordHasher(config.auth.passwordHash);
  }

  private get settings(): AuthSettings {
    return this.config.auth;
  }

  /** POST /auth/signup/email-password: the account, and a session unless the address must be verified first. */
  async signUpEmailPassword(input: SignUpInput): Promise<{ session: AuthSession | null }> {
    this.signUps.assertOpen();
    if (this.settings.emailVerifiedRequired) this.requireMail();
    const email = this.emailAddress(input.email, 'email');
    const options = input.options ?? {};
    const redirectTo = this.redirectTo(options.redirectTo);
    this.checkProfile(options);
    await this.signUps.checkPassword(input.password);
    const passwordHash = await this.passwords.hash(input.password);

    return this.dataSource.transaction(async (manager) => {
      const user = await this.insertUser(manager, email, passwordHash, options);
      if (this.settings.emailVerifiedRequired) {
        await this.sendVerificationMail(manager, user, email, redirectTo);
        return { session: null };
      }
      return { session: await this.tokens.start(user, manager) };
    });
  }

  /** The sign-up options that need no database: roles, display name, locale. Throws the first problem. */
  private checkProfile(options: SignUpOptions): void {
    this.requestedRoles(options);
    this.displayName(options.displayName);
    this.locale(options.locale);
  }

  private locale(value: string | undefined): string {
    if (value !== undefined && !LOCALE.test(value)) throw invalidRequest('locale must be a language code of two or three letters, such as en');
    return value ?? 'en';
  }

  /** A new account (without a password for passwordless sign-in); 409 when the address is taken. */
  private async insertUser(manager: EntityManager, email: string, passwordHash: string | null, options: SignUpOptions): Promise<UserRow> {
    this.checkProfile(options);
    const { defaultRole, allowedRoles } = this.requestedRoles(options);
    const [user] = (await manager.query(
      `INSERT INTO users (email, password_hash, name, locale, default_role, allowed_roles, metadata, avatar_url, email_verified)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8, false)
       ON CONFLICT DO NOTHING
       RETURNING ${USER_COLUMNS}`,
      [email, passwordHash, this.displayName(options.displayName) ?? email, options.locale ?? 'en', defaultRole, allowedRoles, options.metadata ?? {}, this.avatarUrl(email)],
    )) as UserRow[];
    if (!user) throw new AuthError('email-already-in-use');
    return user;
  }

  /**
   * POST /auth/signin/email-password. Every failure costs one argon2 hash, whether or not the
   * address has an account, so the time taken does not tell.
   */
  async signInEmailPassword(emailInput: string, password: string, ip: string): Promise<SignInResult> {
    const email = this.emailAddress(emailInput, 'email');
    const [row] = await queryPrepared<UserRow & { password_hash: string | null }>(this.dataSource, USER_WITH_PASSWORD_BY_EMAIL, [email]);
    const matches = await this.passwords.matches(password, row?.password_hash);
    if (!row || !matches || row.deleted_at) throw new AuthError('invalid-email-password');
    const { password_hash: passwordHash, ...user } = row;
    if (passwordHash && !this.passwords.isCurrent(passwordHash)) await this.rehash(user.id, passwordHash, password);
    return this.signIn(user, undefined, ip);
  }

  /**
   * A password whose hash was made at another cost (AUTH_PASSWORD_HASH_*) gets a new one, once,
   * at the sign-in that proves it; unless the password changed since it was read.
   */
  private async rehash(userId: string, oldHash: string, password: string): Promise<void> {
    const passwordHash = await this.passwords.hash(password);
    await this.dataSource.query('UPDATE users SET password_hash = $3 WHERE id = $1 AND password_hash = $2', [userId, oldHash, passwordHash]);
  }

  /**
   * POST /auth/signin/passwordless/email (and its alias /auth/signin/magic-link): mails a
   * single-use link (template magic-link) that signs the user in through GET /auth/verify. A new
   * address gets an account first, with the sign-up options, unless sign-up is disabled.
   */
  async signInPasswordlessEmail(input: { email: string; options?: SignUpOptions }): Promise<void> {
    if (!this.settings.passwordlessEmailEnabled) throw new AuthError('disabled-endpoint', 'Passwordless sign-in is disabled (AUTH_EMAIL_PASSWORDLESS_EMAIL_ENABLED)');
    this.requireMail();
    const email = this.emailAddress(input.email, 'email');
    const options = input.options ?? {};
    const redirectTo = this.redirectTo(options.redirectTo);
    await this.dataSource.transaction(async (manager) => {
      let [user] = (await manager.query(`SELECT ${USER_COLUMNS} FROM users WHERE lower(email) = $1`, [email])) as UserRow[];
      if (!user) {
        this.signUps.assertOpen();
        user = await this.insertUser(manager, email, null, options);
      }
      if (user.disabled || user.deleted_at) throw new AuthError('disabled-user');
      const ticket = await this.tickets.issue(manager, 'signinPasswordless', user.id, this.settings.ticketTtlSeconds.passwordless);
      const link = authUrl(this.config, '/verify', { ticket, type: 'signinPasswordless', redirectTo });
      await this.mail(manager, { to: email, template: 'magic-link', variables: { display_name: user.name, link } });
    });
  }

  /**
   * POST /auth/signin/anonymous (AUTH_ANONYMOUS_USERS_ENABLED): a new account without an address,
   * role `anonymous`; a sign-up, so not while sign-up is disabled.
   */
  async signInAnonymous(input: { displayName?: string; locale?: string; metadata?: Record<string, unknown> }): Promise<{ session: AuthSession }> {
    if (!this.settings.anonymousUsersEnabled) throw new AuthError('disabled-endpoint', 'Anonymous users are disabled (AUTH_ANONYMOUS_USERS_ENABLED)');
    this.signUps.assertOpen();
    const displayName = this.displayName(input.displayName) ?? 'Anonymous';
    const locale = this.locale(input.locale);
    return this.dataSource.transaction(async (manager) => {
      const [user] = (await manager.query(
        `INSERT INTO users (email, password_hash, name, locale, default_role, allowed_roles, metadata, email_verified, is_anonymous)
         VALUES (NULL, NULL, $1, $2, $3, $4, $5, false, true)
         RETURNING ${USER_COLUMNS}`,
        [displayName, locale, ANONYMOUS_ROLE, [ANONYMOUS_ROLE], input.metadata ?? {}],
      )) as UserRow[];
      return { session: await this.tokens.start(user, manager) };
    });
  }

  /**
   * POST /auth/user/deanonymize (Nhost's body): the anonymous account becomes an e-mail account,
   * with a password (`email-password`) or a mailed link (`passwordless`), the roles of a new user
   * (or those asked for, as at sign-up), and every anonymous session ended: the user signs in
   * again with the new credentials (after verifying the address when that is required).
   */
  async deanonymize(userId: string, input: DeanonymizeInput): Promise<void> {
    const email = this.emailAddress(input.email, 'email');
    const options = input.options ?? {};
    const redirectTo = this.redirectTo(options.redirectTo);
    this.checkProfile(options);
    const { defaultRole, allowedRoles } = this.requestedRoles(options);
    let passwordHash: string | null = null;
    if (input.signInMethod === 'email-password') {
      if (input.password === undefined) throw invalidRequest('password is required with signInMethod email-password');
      if (this.settings.emailVerifiedRequired) this.requireMail();
      await this.signUps.checkPassword(input.password);
      passwordHash = await this.passwords.hash(input.password);
    } else {
      if (!this.settings.passwordlessEmailEnabled) throw new AuthError('disabled-endpoint', 'Passwordless sign-in is disabled (AUTH_EMAIL_PASSWORDLESS_EMAIL_ENABLED)');
      this.requireMail();
    }
    await this.dataSource.transaction(async (manager) => {
      const user = await this.activeUser(manager, userId);
      if (!user.is_anonymous) throw new AuthError('user-not-anonymous');
      const taken = (await manager.query('SELECT 1 FROM users WHERE lower(email) = $1', [email])) as unknown[];
      if (taken.length > 0) throw new AuthError('email-already-in-use');
      const [upgraded] = await queryRows<UserRow>(
        manager,
        `UPDATE users SET email = $2, password_hash = $3, is_anonymous = false, email_verified = false, default_role = $4,
           allowed_roles = $5, name = coalesce($6, name), locale = coalesce($7, locale), metadata = coalesce($8, metadata), avatar_url = $9
         WHERE id = $1 RETURNING ${USER_COLUMNS}`,
        [userId, email, passwordHash, defaultRole, allowedRoles, this.displayName(options.displayName) ?? null, options.locale ?? null, options.metadata ?? null, this.avatarUrl(email)],
      );
      await this.tokens.revokeAll(userId, manager);
      if (input.signInMethod === 'passwordless') {
        const ticket = await this.tickets.issue(manager, 'signinPasswordless', userId, this.settings.ticketTtlSeconds.passwordless);
        const link = authUrl(this.config, '/verify', { ticket, type: 'signinPasswordless', redirectTo });
        await this.mail(manager, { to: email, template: 'magic-link', variables: { display_name: upgraded.name, link } });
      } else if (this.settings.emailVerifiedRequired) {
        await this.sendVerificationMail(manager, upgraded, email, redirectTo);
      }
    });
  }

  /**
   * A new account for a user who signed in with an external provider (no password), unless
   * sign-up is disabled; the address counts as verified when the provider vouches for it.
   */
  async createExternalUser(
    manager: EntityManager,
    profile: { email: string; emailVerified: boolean; displayName: string | null; avatarUrl: string | null },
  ): Promise<UserRow> {
    this.signUps.assertOpen();
    const email = this.emailAddress(profile.email, 'email');
    const { defaultRole, allowedRoles } = this.requestedRoles({});
    const name = profile.displayName?.trim().slice(0, MAX_DISPLAY_NAME_LENGTH) || email;
    const [user] = await queryRows<UserRow>(
      manager,
      `INSERT INTO users (email, password_hash, name, locale, default_role, allowed_roles, metadata, avatar_url, email_verified)
       VALUES ($1, NULL, $2, 'en', $3, $4, '{}', $5, $6)
       ON CONFLICT DO NOTHING
       RETURNING ${USER_COLUMNS}`,
      [email, name, defaultRole, allowedRoles, profile.avatarUrl ?? this.avatarUrl(email), profile.emailVerified],
    );
    if (!user) throw new AuthError('email-already-in-use');
    return user;
  }

  /**
   * The checks after the credentials, common to every sign-in method; a second factor gives a
   * ticket instead. Written with `manager` when given (a transaction); without it the session is
   * one statement, and a second factor's ticket and code get a transaction of their own.
   */
  async signIn(user: UserRow, manager: EntityManager | undefined, ip: string): Promise<SignInResult> {
    if (user.disabled || user.deleted_at) throw new AuthError('disabled-user');
    if (this.settings.emailVerifiedRequired && !user.email_verified) throw new AuthError('unverified-user');
    if (user.active_mfa_type === 'totp' || user.active_mfa_type === 'sms') {
      const kind = user.active_mfa_type === 'totp' ? 'mfaTotp' : 'mfaSms';
      const challenge = async (writer: EntityManager): Promise<SignInResult> => {
        const ticket = await this.tickets.issue(writer, kind, user.id, this.settings.ticketTtlSeconds.mfa);
        if (kind === 'mfaSms') await this.sms.sendSignInCode(writer, user, ip);
        return { session: null, mfa: { ticket } };
      };
      return manager ? challenge(manager) : this.dataSource.transaction(challenge);
    }
    return { session: await this.tokens.start(user, manager), mfa: null };
  }

  /** GET /auth/user. */
  async user(userId: string): Promise<AuthUser> {
    return toAuthUser(await this.activeUser(this.dataSource.manager, userId));
  }

  /**
   * GET /auth/verify: redeems the ticket of a mailed link and answers where to redirect: to
   * `redirectTo` with `refreshToken` and `type` added to its query (a session), or with `error`
   * and `errorDescription` when the ticket or account does not allow it. A `redirectTo` that is
   * not allowed is an AuthError: nobody is sent there, even with an error.
   */
  async verify(query: { ticket: string; type: string; redirectTo?: string }, ip: string): Promise<string> {
    const redirectTo = this.redirectTo(query.redirectTo);
    if (!(query.type in VERIFY_TYPES)) throw invalidRequest(`type must be one of ${Object.keys(VERIFY_TYPES).join(', ')}`);
    const type = query.type as VerifyType;
    try {
      const result = await this.dataSource.transaction(async (manager) => {
        const redeemed = await this.tickets.redeem(manager, VERIFY_TYPES[type], query.ticket);
        if (!redeemed) throw new AuthError('invalid-ticket');
        const user = await this.activeUser(manager, redeemed.userId);
        // Every link went to the address it verifies: following it proves the mailbox. A link
        // that signs in takes an account nobody had verified over; the verification mail confirms
        // the sign-up it was sent for, password included (docs/decisions.md).
        if (type === 'emailConfirmChange') await this.moveEmail(manager, user, redeemed.newEmail);
        else if (!user.email_verified && type !== 'emailVerify') await this.takeOver(manager, user, type === 'passwordReset' ? 'password-reset' : 'magic-link');
        else await manager.query('UPDATE users SET email_verified = true WHERE id = $1', [user.id]);
        // As any sign-in: a second factor, when on, is still asked for (the MFA ticket instead of a session).
        return this.signIn(await this.activeUser(manager, user.id), manager, ip);
      });
      if (result.mfa) return withQuery(redirectTo, { mfaTicket: result.mfa.ticket, type });
      return withQuery(redirectTo, { refreshToken: result.session!.refreshToken, type });
    } catch (error) {
      if (!(error instanceof AuthError)) throw error;
      return withQuery(redirectTo, { error: error.code, errorDescription: error.message });
    }
  }

  private async moveEmail(manager: EntityManager, user: UserRow, newEmail: string | null): Promise<void> {
    if (!newEmail) throw new AuthError('invalid-ticket');
    try {
      await manager.query('UPDATE users SET email = $2, new_email = NULL, email_verified = true WHERE id = $1', [user.id, newEmail]);
    } catch (error) {
      // Taken since the change was asked for; the transaction is rolled back with this error.
      if ((error as { driverError?: { code?: string } }).driverError?.code !== UNIQUE_VIOLATION) throw error;
      throw new AuthError('email-already-in-use');
    }
  }

  /**
   * POST /auth/user/email/send-verification-email: a new link for an address not yet verified.
   * The answer is OK whether the address has no account, an unverified one or a verified one
   * (which gets no mail): it does not tell which.
   */
  async sendVerificationEmail(emailInput: string, redirectToInput?: string): Promise<void> {
    this.requireMail();
    const email = this.emailAddress(emailInput, 'email');
    const redirectTo = this.redirectTo(redirectToInput);
    await this.dataSource.transaction(async (manager) => {
      const [user] = (await manager.query(`SELECT ${USER_COLUMNS} FROM users WHERE lower(email) = $1`, [email])) as UserRow[];
      if (!user || user.email_verified) return;
      await this.sendVerificationMail(manager, user, email, redirectTo);
    });
  }

  /**
   * POST /auth/user/password/reset: mails a link (template reset-password) to an active account.
   * The answer is the same whether or not the address has one.
   */
  async sendPasswordReset(emailInput: string, redirectToInput?: string): Promise<void> {
    this.requireMail();
    const email = this.emailAddress(emailInput, 'email');
    const redirectTo = this.redirectTo(redirectToInput);
    await this.dataSource.transaction(async (manager) => {
      const [user] = (await manager.query(`SELECT ${USER_COLUMNS} FROM users WHERE lower(email) = $1`, [email])) as UserRow[];
      if (!user || user.disabled || user.deleted_at) return;
      const ticket = await this.tickets.issue(manager, 'passwordReset', user.id, this.settings.ticketTtlSeconds.passwordReset);
      const link = authUrl(this.config, '/verify', { ticket, type: 'passwordReset', redirectTo });
      await this.mail(manager, { to: email, template: 'reset-password', variables: { display_name: user.name, link } });
    });
  }

  /**
   * POST /auth/user/password: the signed-in user's new password, or the holder of a ticket's: a
   * password-reset ticket, or an invitation's (bulkCreateUsers); either also verifies the address
   * it was mailed to (and takes an account nobody had verified over). A ticket ends every session
   * of the account, the signed-in user's change every other one (`sessionId` the one kept, null
   * for none): whoever had the old password is signed out.
   */
  async changePassword(newPassword: string, by: { userId: string; sessionId: string | null } | { ticket: string }): Promise<void> {
    await this.signUps.checkPassword(newPassword);
    const passwordHash = await this.passwords.hash(newPassword);
    await this.dataSource.transaction(async (manager) => {
      if ('userId' in by) {
        if ((await this.activeUser(manager, by.userId)).is_anonymous) throw new AuthError('forbidden-anonymous');
        await manager.query('UPDATE users SET password_hash = $2 WHERE id = $1', [by.userId, passwordHash]);
        await this.tokens.revokeAll(by.userId, manager, by.sessionId);
        return;
      }
      const userId = by.ticket.includes(':')
        ? (await this.tickets.redeem(manager, 'passwordReset', by.ticket))?.userId
        : await this.tickets.redeemInvitation(manager, by.ticket);
      if (!userId) throw new AuthError('invalid-ticket');
      const user = await this.activeUser(manager, userId);
      if (!user.email_verified) await this.takeOver(manager, user, by.ticket.includes(':') ? 'password-reset' : 'invitation');
      // The ticket came by mail to the account's address: holding it proves the mailbox.
      await manager.query('UPDATE users SET password_hash = $2, email_verified = true WHERE id = $1', [userId, passwordHash]);
      await this.tokens.revokeAll(userId, manager);
    });
  }

  /**
   * POST /auth/user/email/change: mails a link (template confirm-email-change) to the new
   * address; the address changes when that link is followed.
   */
  async changeEmail(userId: string, newEmailInput: string, redirectToInput?: string): Promise<void> {
    this.requireMail();
    const newEmail = this.emailAddress(newEmailInput, 'newEmail');
    const redirectTo = this.redirectTo(redirectToInput);
    await this.dataSource.transaction(async (manager) => {
      const user = await this.activeUser(manager, userId);
      if (user.is_anonymous) throw new AuthError('forbidden-anonymous');
      const taken = (await manager.query('SELECT 1 FROM users WHERE lower(email) = $1', [newEmail])) as unknown[];
      if (taken.length > 0) throw new AuthError('email-already-in-use');
      await manager.query('UPDATE users SET new_email = $2 WHERE id = $1', [userId, newEmail]);
      const ticket = await this.tickets.issue(manager, 'emailConfirmChange', userId, this.settings.ticketTtlSeconds.emailChange, newEmail);
      const link = authUrl(this.config, '/verify', { ticket, type: 'emailConfirmChange', redirectTo });
      await this.mail(manager, { to: newEmail, template: 'confirm-email-change', variables: { display_name: user.name, new_email: newEmail, link } });
    });
  }

  /**
   * The owner of the address proved the mailbox on an account nobody had verified: whoever typed
   * the address there first (a sign-up, registerUser, an anonymous user's upgrade) keeps no way
   * in. The password set before is cleared, the sessions revoked, the pending tickets (password
   * reset, address change, sign-in links), invitations and SMS codes deleted, the second factors
   * and phone number removed, the linked providers unlinked (the caller links the proving one);
   * the address counts as verified. Profile, roles and metadata stay: an operator may have set
   * them (bulkCreateUsers), and a sign-up may only ask for roles of AUTH_ALLOWED_ROLES. Anything
   * cleared is logged (what, not its values). Runs in the caller's transaction; answers the account.
   */
  async takeOver(manager: EntityManager, user: UserRow, proof: MailboxProof): Promise<UserRow> {
    const [row] = await queryRows<TakenOverRow>(manager, TAKE_OVER, [user.id]);
    const { password, email_change: emailChange, second_factor: secondFactor, phone, tickets, providers, sessions, ...account } = row;
    if (password || emailChange || secondFactor || phone || tickets > 0 || providers || sessions > 0) {
      this.logger.warn(
        { userId: user.id, proof, cleared: { password, emailChange, secondFactor, phone, tickets, providers: providers ?? [], sessions } },
        'the owner of the address took over an account nobody had verified: what was set on it before is cleared',
      );
    }
    return account;
  }

  /**
   * GET /auth/invitations/accept (the link of an invitation mail): leads to the app with the
   * ticket, where the invited user chooses a password (POST /auth/user/password {ticket}). The
   * ticket is not used here, so a mail scanner following the link cannot spend it.
   */
  async invitationLanding(ticket: string): Promise<string> {
    const target = this.settings.clientUrl;
    if (!(await this.tickets.invitationIsLive(this.dataSource.manager, ticket))) {
      const error = new AuthError('invalid-ticket');
      return withQuery(target, { error: error.code, errorDescription: error.message, type: INVITE_TYPE });
    }
    return withQuery(target, { ticket, type: INVITE_TYPE });
  }

  private async sendVerificationMail(manager: EntityManager, user: UserRow, email: string, redirectTo: string): Promise<void> {
    const ticket = await this.tickets.issue(manager, 'emailVerify', user.id, this.settings.ticketTtlSeconds.verifyEmail);
    const link = authUrl(this.config, '/verify', { ticket, type: 'emailVerify', redirectTo });
    await this.mail(manager, { to: email, template: 'verify-email', variables: { display_name: user.name, email, link } });
  }

  private async mail(manager: EntityManager, message: MailMessage): Promise<void> {
    await this.mailer.send(message, { transaction: manager });
  }

  /** Checked before anything else, so that the answer does not depend on the address. */
  private requireMail(): void {
    if (!this.canMail) throw new AuthError('disabled-endpoint', 'This server cannot send mail (SMTP_HOST is unset)');
  }

  /** The account, when it may act: not disabled, not deleted. */
  private async activeUser(manager: EntityManager, userId: string): Promise<UserRow> {
    const [user] = (await manager.query(`SELECT ${USER_COLUMNS} FROM users WHERE id = $1`, [userId])) as UserRow[];
    if (!user || user.deleted_at) throw new AuthError('unauthenticated-user');
    if (user.disabled) throw new AuthError('disabled-user');
    return user;
  }

  /** A redirectTo, or AUTH_CLIENT_URL when none is given; 400 redirectTo-not-allowed when it may not be used. */
  redirectTo(requested: string | undefined): string {
    if (requested === undefined || requested === '') return this.settings.clientUrl;
    if (!this.redirects.allows(requested)) throw new AuthError('redirectTo-not-allowed');
    return requested;
  }

  private emailAddress(value: string, field: string): string {
    const email = value.trim().toLowerCase();
    if (email.length > MAX_EMAIL_LENGTH || !MAIL_ADDRESS.test(email) || !/@[^.]+(\.[^.]+)*$/.test(email)) {
      throw invalidRequest(`${field} must be a valid e-mail address`);
    }
    return email;
  }

  private displayName(value: string | undefined): string | undefined {
    const name = value?.trim();
    if (name && [...name].length > MAX_DISPLAY_NAME_LENGTH) {
      throw invalidRequest(`options.displayName must be at most ${MAX_DISPLAY_NAME_LENGTH} characters`);
    }
    return name || undefined;
  }

  /**
   * The roles a sign-up asks for: each within AUTH_ALLOWED_ROLES, the default among the allowed.
   * Without a request the user gets AUTH_DEFAULT_ROLE and `me` (docs/decisions.md).
   */
  private requestedRoles(options: SignUpOptions): { defaultRole: string; allowedRoles: string[] } {
    const permitted = this.settings.allowedRoles;
    const defaultRole = options.defaultRole ?? this.settings.defaultRole;
    const allowedRoles = options.allowedRoles ? [...new Set(options.allowedRoles)] : [...new Set([defaultRole, 'me'])];
    for (const role of [defaultRole, ...allowedRoles]) {
      // `me` is every user's alias of itself, not a grant.
      if (role !== 'me' && !permitted.includes(role)) throw new AuthError('role-not-allowed', `Role not allowed: ${role}`);
    }
    if (!allowedRoles.includes(defaultRole)) throw new AuthError('default-role-must-be-in-allowed-roles');
    return { defaultRole, allowedRoles };
  }

  private avatarUrl(email: string): string {
    return this.settings.gravatar.enabled ? gravatarUrl(email, this.settings.gravatar) : '';
  }
}
