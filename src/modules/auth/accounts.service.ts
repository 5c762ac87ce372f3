import type { DataSource, EntityManager } from 'typeorm';
import { MAIL_ADDRESS } from '../../common/mail-address';
import { hashPassword, passwordMatches } from '../../common/passwords';
import type { Config } from '../../config';
import type { MailMessage, Mailer } from '../../platform/mail/mailer';
import { authUrl } from '../../platform/urls';
import { AuthError, invalidRequest } from './auth-errors';
import { gravatarUrl, toAuthUser, USER_COLUMNS, type AuthUser, type UserRow } from './auth-user';
import type { BreachedPasswords } from './breached-passwords.service';
import { RedirectPolicy, withQuery } from './redirects';
import type { AuthSession, SessionTokens } from './session-tokens.service';
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

export interface SignInResult {
  session: AuthSession | null;
  mfa: { ticket: string } | null;
}

/** The verification links' `type`, and the ticket kind each redeems. */
export const VERIFY_TYPES = {
  emailVerify: 'emailVerify',
  emailConfirmChange: 'emailConfirmChange',
  signinPasswordless: 'signinPasswordless',
  passwordReset: 'passwordReset',
} as const satisfies Record<string, TicketKind>;

export type VerifyType = keyof typeof VERIFY_TYPES;

/** The query of an invitation link's landing (GET /auth/invitations/accept), and what the app is sent. */
export const INVITE_TYPE = 'invite';

const MAX_EMAIL_LENGTH = 254;
const MAX_DISPLAY_NAME_LENGTH = 255;
const LOCALE = /^[a-z]{2,3}$/;
const UNIQUE_VIOLATION = '23505';

/**
 * Accounts of the auth service: sign-up, sign-in, the user, verification links, password reset
 * and change, e-mail change and invitations. Shares `users` with registerUser and bulkCreateUsers.
 */
export class AuthAccounts {
  private readonly redirects: RedirectPolicy;

  constructor(
    private readonly dataSource: DataSource,
    private readonly tokens: SessionTokens,
    private readonly tickets: Tickets,
    private readonly breached: BreachedPasswords,
    private readonly mailer: Mailer,
    private readonly config: Pick<Config, 'auth'>,
    /** False when mail cannot be delivered (production without SMTP_HOST): routes that mail answer disabled-endpoint. */
    private readonly canMail: boolean,
  ) {
    this.redirects = new RedirectPolicy(config.auth.allowedRedirectUrls);
  }

  private get settings(): AuthSettings {
    return this.config.auth;
  }

  /** POST /auth/signup/email-password: the account, and a session unless the address must be verified first. */
  async signUpEmailPassword(input: SignUpInput): Promise<{ session: AuthSession | null }> {
    if (this.settings.signupDisabled) throw new AuthError('signup-disabled');
    if (this.settings.emailVerifiedRequired) this.requireMail();
    const email = this.emailAddress(input.email, 'email');
    const options = input.options ?? {};
    const redirectTo = this.redirectTo(options.redirectTo);
    this.checkProfile(options);
    await this.checkNewPassword(input.password);
    const passwordHash = await hashPassword(input.password);

    return this.dataSource.transaction(async (manager) => {
      const user = await this.insertUser(manager, email, passwordHash, options);
      if (this.settings.emailVerifiedRequired) {
        await this.sendVerificationMail(manager, user, redirectTo);
        return { session: null };
      }
      return { session: await this.tokens.start(user, manager) };
    });
  }

  /** The sign-up options that need no database: roles, display name, locale. Throws the first problem. */
  private checkProfile(options: SignUpOptions): void {
    this.requestedRoles(options);
    this.displayName(options.displayName);
    if (options.locale !== undefined && !LOCALE.test(options.locale)) {
      throw invalidRequest('options.locale must be a language code of two or three letters, such as en');
    }
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
  async signInEmailPassword(emailInput: string, password: string): Promise<SignInResult> {
    const email = this.emailAddress(emailInput, 'email');
    const [row] = (await this.dataSource.query(
      `SELECT ${USER_COLUMNS}, password_hash FROM users WHERE lower(email) = $1`,
      [email],
    )) as (UserRow & { password_hash: string | null })[];
    const matches = await passwordMatches(password, row?.password_hash);
    if (!row || !matches || row.deleted_at) throw new AuthError('invalid-email-password');
    const { password_hash: _hash, ...user } = row;
    return this.signIn(user);
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
        if (this.settings.signupDisabled) throw new AuthError('signup-disabled');
        user = await this.insertUser(manager, email, null, options);
      }
      if (user.disabled || user.deleted_at) throw new AuthError('disabled-user');
      const ticket = await this.tickets.issue(manager, 'signinPasswordless', user.id, this.settings.ticketTtlSeconds.passwordless);
      const link = authUrl(this.config, '/verify', { ticket, type: 'signinPasswordless', redirectTo });
      await this.mail(manager, { to: user.email, template: 'magic-link', variables: { display_name: user.name, link } });
    });
  }

  /** The checks after the credentials, common to every sign-in method; a second factor gives a ticket instead. */
  private async signIn(user: UserRow, manager: EntityManager = this.dataSource.manager): Promise<SignInResult> {
    if (user.disabled || user.deleted_at) throw new AuthError('disabled-user');
    if (this.settings.emailVerifiedRequired && !user.email_verified) throw new AuthError('unverified-user');
    if (user.active_mfa_type === 'totp' || user.active_mfa_type === 'sms') {
      const kind = user.active_mfa_type === 'totp' ? 'mfaTotp' : 'mfaSms';
      const ticket = await this.tickets.issue(manager, kind, user.id, this.settings.ticketTtlSeconds.mfa);
      return { session: null, mfa: { ticket } };
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
  async verify(query: { ticket: string; type: string; redirectTo?: string }): Promise<string> {
    const redirectTo = this.redirectTo(query.redirectTo);
    if (!(query.type in VERIFY_TYPES)) throw invalidRequest(`type must be one of ${Object.keys(VERIFY_TYPES).join(', ')}`);
    const type = query.type as VerifyType;
    try {
      const session = await this.dataSource.transaction(async (manager) => {
        const redeemed = await this.tickets.redeem(manager, VERIFY_TYPES[type], query.ticket);
        if (!redeemed) throw new AuthError('invalid-ticket');
        const user = await this.activeUser(manager, redeemed.userId);
        if (type === 'emailConfirmChange') await this.moveEmail(manager, user, redeemed.newEmail);
        else if (type !== 'passwordReset') await manager.query('UPDATE users SET email_verified = true WHERE id = $1', [user.id]);
        return this.tokens.start(await this.activeUser(manager, user.id), manager);
      });
      return withQuery(redirectTo, { refreshToken: session.refreshToken, type });
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

  /** POST /auth/user/email/send-verification-email: a new link for an address not yet verified. */
  async sendVerificationEmail(emailInput: string, redirectToInput?: string): Promise<void> {
    this.requireMail();
    const email = this.emailAddress(emailInput, 'email');
    const redirectTo = this.redirectTo(redirectToInput);
    await this.dataSource.transaction(async (manager) => {
      const [user] = (await manager.query(`SELECT ${USER_COLUMNS} FROM users WHERE lower(email) = $1`, [email])) as UserRow[];
      if (!user) return;
      if (user.email_verified) throw new AuthError('email-already-verified');
      await this.sendVerificationMail(manager, user, redirectTo);
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
      await this.mail(manager, { to: user.email, template: 'reset-password', variables: { display_name: user.name, link } });
    });
  }

  /**
   * POST /auth/user/password: the signed-in user's new password, or the holder of a ticket's: a
   * password-reset ticket, or an invitation's (bulkCreateUsers), which also verifies the address
   * the invitation went to. A ticket ends every session of the account: whoever had the old
   * password is signed out.
   */
  async changePassword(newPassword: string, by: { userId: string } | { ticket: string }): Promise<void> {
    await this.checkNewPassword(newPassword);
    const passwordHash = await hashPassword(newPassword);
    await this.dataSource.transaction(async (manager) => {
      if ('userId' in by) {
        await this.activeUser(manager, by.userId);
        await manager.query('UPDATE users SET password_hash = $2 WHERE id = $1', [by.userId, passwordHash]);
        return;
      }
      const userId = by.ticket.includes(':')
        ? (await this.tickets.redeem(manager, 'passwordReset', by.ticket))?.userId
        : await this.tickets.redeemInvitation(manager, by.ticket);
      if (!userId) throw new AuthError('invalid-ticket');
      const invitation = !by.ticket.includes(':');
      await this.activeUser(manager, userId);
      await manager.query(
        `UPDATE users SET password_hash = $2, email_verified = email_verified OR $3 WHERE id = $1`,
        [userId, passwordHash, invitation],
      );
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
      const taken = (await manager.query('SELECT 1 FROM users WHERE lower(email) = $1', [newEmail])) as unknown[];
      if (taken.length > 0) throw new AuthError('email-already-in-use');
      await manager.query('UPDATE users SET new_email = $2 WHERE id = $1', [userId, newEmail]);
      const ticket = await this.tickets.issue(manager, 'emailConfirmChange', userId, this.settings.ticketTtlSeconds.emailChange, newEmail);
      const link = authUrl(this.config, '/verify', { ticket, type: 'emailConfirmChange', redirectTo });
      await this.mail(manager, { to: newEmail, template: 'confirm-email-change', variables: { display_name: user.name, new_email: newEmail, link } });
    });
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

  private async sendVerificationMail(manager: EntityManager, user: UserRow, redirectTo: string): Promise<void> {
    const ticket = await this.tickets.issue(manager, 'emailVerify', user.id, this.settings.ticketTtlSeconds.verifyEmail);
    const link = authUrl(this.config, '/verify', { ticket, type: 'emailVerify', redirectTo });
    await this.mail(manager, { to: user.email, template: 'verify-email', variables: { display_name: user.name, email: user.email, link } });
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

  private async checkNewPassword(password: string): Promise<void> {
    const length = [...password].length;
    const { passwordMinLength, passwordMaxLength } = this.settings;
    if (length < passwordMinLength) throw new AuthError('password-too-short', `Password must be at least ${passwordMinLength} characters`);
    if (length > passwordMaxLength) throw invalidRequest(`password must be at most ${passwordMaxLength} characters`);
    if (await this.breached.isBreached(password)) throw new AuthError('password-in-hibp-database');
  }

  private avatarUrl(email: string): string {
    return this.settings.gravatar.enabled ? gravatarUrl(email, this.settings.gravatar) : '';
  }
}
