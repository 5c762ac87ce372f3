import { createHash } from 'node:crypto';
import type { EntityManager } from 'typeorm';
import { authError } from './auth-errors';

/** The columns of `users` the auth service reads. */
export const USER_COLUMNS =
  'id, email, name, created_at, locale, default_role, allowed_roles, metadata, avatar_url, email_verified, disabled, deleted_at, active_mfa_type, source_account_id, is_anonymous, phone_number, phone_number_verified';

/** USER_COLUMNS of the table or CTE `alias`, for statements that join users to another table. */
export function userColumnsOf(alias: string): string {
  return USER_COLUMNS.split(', ')
    .map((column) => `${alias}.${column}`)
    .join(', ');
}

/** A row of `users` as USER_COLUMNS selects it. */
export interface UserRow {
  id: string;
  /** Null for an anonymous user. */
  email: string | null;
  name: string;
  created_at: Date;
  locale: string;
  default_role: string;
  allowed_roles: string[];
  metadata: Record<string, unknown>;
  avatar_url: string;
  email_verified: boolean;
  disabled: boolean;
  deleted_at: Date | null;
  active_mfa_type: string | null;
  source_account_id: string;
  is_anonymous: boolean;
  phone_number: string | null;
  phone_number_verified: boolean;
}

/** The user as Nhost's clients read it (session.user, GET /auth/user). */
export interface AuthUser {
  id: string;
  createdAt: string;
  displayName: string;
  avatarUrl: string;
  locale: string;
  email: string | null;
  isAnonymous: boolean;
  defaultRole: string;
  roles: string[];
  metadata: Record<string, unknown>;
  emailVerified: boolean;
  phoneNumber: string | null;
  phoneNumberVerified: boolean;
  activeMfaType: string | null;
}

/** The account, when it may act: not disabled, not deleted. */
export async function activeUser(manager: EntityManager, userId: string): Promise<UserRow> {
  const [user] = (await manager.query(`SELECT ${USER_COLUMNS} FROM users WHERE id = $1`, [userId])) as UserRow[];
  if (!user || user.deleted_at) throw authError('unauthenticated-user');
  if (user.disabled) throw authError('disabled-user');
  return user;
}

export function toAuthUser(row: UserRow): AuthUser {
  return {
    id: row.id,
    createdAt: row.created_at.toISOString(),
    displayName: row.name,
    avatarUrl: row.avatar_url,
    locale: row.locale,
    email: row.email,
    isAnonymous: row.is_anonymous,
    defaultRole: row.default_role,
    roles: row.allowed_roles,
    metadata: row.metadata,
    emailVerified: row.email_verified,
    phoneNumber: row.phone_number,
    phoneNumberVerified: row.phone_number_verified,
    activeMfaType: row.active_mfa_type,
  };
}

/** Gravatar's address for an e-mail (AUTH_GRAVATAR_ENABLED): the MD5 of the trimmed, lower-case address, as Gravatar defines it. */
export function gravatarUrl(email: string, settings: { default: string; rating: string }): string {
  const digest = createHash('md5').update(email.trim().toLowerCase()).digest('hex');
  return `https://www.gravatar.com/avatar/${digest}?r=${settings.rating}&default=${settings.default}`;
}
