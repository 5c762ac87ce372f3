import type { EntityManager } from 'typeorm';
import type { Config } from '../../config';
import { displayName, emailAddress, locale, MAX_DISPLAY_NAME_LENGTH, type SignUpOptions } from './account-input';
import { authError } from './auth-errors';
import { gravatarUrl, USER_COLUMNS, type UserRow } from './auth-user';
import { one } from '../../db/sql';
import type { SignUpPolicy } from './sign-up-policy.service';

/**
 * The accounts the auth service makes, and what a new account may ask for: its roles, display
 * name and locale, checked against the settings; its avatar. Shared by sign-up, passwordless and
 * provider sign-in of a new address, and the upgrade of an anonymous user.
 */
export class NewAccounts {
  constructor(
    private readonly settings: Config['auth'],
    /** Every account this service creates follows it. */
    private readonly signUps: SignUpPolicy,
  ) {}

  /** The sign-up options that need no database: roles, display name, locale. Throws the first problem. */
  checkProfile(options: SignUpOptions): void {
    this.requestedRoles(options);
    displayName(options.displayName);
    locale(options.locale);
  }

  /** A new account (without a password for passwordless sign-in); 409 when the address is taken. */
  async insert(manager: EntityManager, email: string, passwordHash: string | null, options: SignUpOptions): Promise<UserRow> {
    this.checkProfile(options);
    const { defaultRole, allowedRoles } = this.requestedRoles(options);
    const [user] = (await manager.query(
      `INSERT INTO users (email, password_hash, name, locale, default_role, allowed_roles, metadata, avatar_url, email_verified)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8, false)
       ON CONFLICT DO NOTHING
       RETURNING ${USER_COLUMNS}`,
      [
        email,
        passwordHash,
        displayName(options.displayName) ?? email,
        options.locale ?? 'en',
        defaultRole,
        allowedRoles,
        options.metadata ?? {},
        this.avatarUrl(email),
      ],
    )) as UserRow[];
    if (!user) throw authError('email-already-in-use');
    return user;
  }

  /**
   * A new account for a user who signed in with an external provider (no password), unless
   * sign-up is disabled; the address counts as verified when the provider vouches for it.
   */
  async insertExternal(
    manager: EntityManager,
    profile: { email: string; emailVerified: boolean; displayName: string | null; avatarUrl: string | null },
  ): Promise<UserRow> {
    this.signUps.assertOpen();
    const email = emailAddress(profile.email, 'email');
    const { defaultRole, allowedRoles } = this.requestedRoles({});
    const name = profile.displayName?.trim().slice(0, MAX_DISPLAY_NAME_LENGTH) || email;
    const user = await one<UserRow>(
      manager,
      `INSERT INTO users (email, password_hash, name, locale, default_role, allowed_roles, metadata, avatar_url, email_verified)
       VALUES ($1, NULL, $2, 'en', $3, $4, '{}', $5, $6)
       ON CONFLICT DO NOTHING
       RETURNING ${USER_COLUMNS}`,
      [email, name, defaultRole, allowedRoles, profile.avatarUrl ?? this.avatarUrl(email), profile.emailVerified],
    );
    if (!user) throw authError('email-already-in-use');
    return user;
  }

  /**
   * The roles a sign-up asks for: each within AUTH_ALLOWED_ROLES, the default among the allowed.
   * Without a request the user gets AUTH_DEFAULT_ROLE and `me` (docs/decisions.md).
   */
  requestedRoles(options: SignUpOptions): { defaultRole: string; allowedRoles: string[] } {
    const permitted = this.settings.allowedRoles;
    const defaultRole = options.defaultRole ?? this.settings.defaultRole;
    const allowedRoles = options.allowedRoles ? [...new Set(options.allowedRoles)] : [...new Set([defaultRole, 'me'])];
    for (const role of [defaultRole, ...allowedRoles]) {
      // `me` is every user's alias of itself, not a grant.
      if (role !== 'me' && !permitted.includes(role)) throw authError('role-not-allowed', `Role not allowed: ${role}`);
    }
    if (!allowedRoles.includes(defaultRole)) throw authError('default-role-must-be-in-allowed-roles');
    return { defaultRole, allowedRoles };
  }

  /** Gravatar's picture of the address with AUTH_GRAVATAR_ENABLED, none otherwise. */
  avatarUrl(email: string): string {
    return this.settings.gravatar.enabled ? gravatarUrl(email, this.settings.gravatar) : '';
  }
}
