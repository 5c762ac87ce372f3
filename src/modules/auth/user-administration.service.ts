import type { DataSource, EntityManager } from 'typeorm';
import { Refusal } from '../../common/refusal';
import { rows } from '../../db/sql';
import type { SessionTokens } from './session-tokens.service';

/** A user as an operator sees it (`plinth auth user ...`). */
export interface AdministeredUser {
  id: string;
  /** Null for an anonymous user. */
  email: string | null;
  displayName: string;
  defaultRole: string;
  roles: string[];
  emailVerified: boolean;
  /** `deleted` (soft: the row stays) wins over `disabled`. */
  state: 'active' | 'disabled' | 'deleted';
  createdAt: string;
  lastSeen: string | null;
}

const ROLE = /^[A-Za-z][A-Za-z0-9_-]{0,63}$/;

interface AdministeredRow {
  id: string;
  email: string | null;
  name: string;
  default_role: string;
  allowed_roles: string[];
  email_verified: boolean;
  disabled: boolean;
  deleted_at: Date | null;
  created_at: Date;
  last_seen: Date | null;
}

const COLUMNS = 'id, email, name, default_role, allowed_roles, email_verified, disabled, deleted_at, created_at, last_seen';

/**
 * The operator's side of accounts (spec 2 §3): list, look up, disable, enable, soft-delete, and
 * grant or withdraw roles. Disabling and deleting revoke every session at once; a deleted
 * account stays in the table, and nothing signs it in again.
 */
export class UserAdministration {
  constructor(
    private readonly dataSource: DataSource,
    private readonly tokens: SessionTokens,
  ) {}

  async list(role?: string): Promise<AdministeredUser[]> {
    const rows = (await this.dataSource.query(`SELECT ${COLUMNS} FROM users WHERE $1::text IS NULL OR $1 = ANY (allowed_roles) ORDER BY created_at, email`, [
      role ?? null,
    ])) as AdministeredRow[];
    return rows.map(administered);
  }

  async get(email: string): Promise<AdministeredUser> {
    return administered(await this.find(this.dataSource.manager, email));
  }

  async disable(email: string): Promise<AdministeredUser> {
    return this.change(email, 'disabled = true', true);
  }

  async enable(email: string): Promise<AdministeredUser> {
    return this.change(email, 'disabled = false', false);
  }

  async delete(email: string): Promise<AdministeredUser> {
    return this.change(email, 'deleted_at = coalesce(deleted_at, now())', true);
  }

  async addRole(email: string, role: string): Promise<AdministeredUser> {
    checkRole(role);
    return this.change(email, 'allowed_roles = CASE WHEN $2 = ANY (allowed_roles) THEN allowed_roles ELSE allowed_roles || $2 END', false, [role]);
  }

  /** Withdraws a role; the default role stays (a token must carry its default among its roles). */
  async removeRole(email: string, role: string): Promise<AdministeredUser> {
    checkRole(role);
    const user = await this.get(email);
    if (user.defaultRole === role) throw new Refusal('CONFLICT', `${role} is the default role of ${user.email}: it cannot be removed`, 409);
    if (!user.roles.includes(role)) throw new Refusal('CONFLICT', `${user.email} does not have the role ${role}`, 409);
    return this.change(email, 'allowed_roles = array_remove(allowed_roles, $2)', false, [role]);
  }

  /** Applies `assignment` to the user's row (with `parameters` from $2), revoking its sessions when asked. */
  private async change(email: string, assignment: string, revokeSessions: boolean, parameters: unknown[] = []): Promise<AdministeredUser> {
    return this.dataSource.transaction(async (manager) => {
      const user = await this.find(manager, email);
      const [row] = await rows<AdministeredRow>(manager, `UPDATE users SET ${assignment} WHERE id = $1 RETURNING ${COLUMNS}`, [user.id, ...parameters]);
      if (revokeSessions) await this.tokens.revokeAll(user.id, manager);
      return administered(row);
    });
  }

  private async find(manager: EntityManager, email: string): Promise<AdministeredRow> {
    const [row] = (await manager.query(`SELECT ${COLUMNS} FROM users WHERE lower(email) = lower($1)`, [email.trim()])) as AdministeredRow[];
    if (!row) throw new Refusal('NOT_FOUND', `no user has the address ${email}`, 404);
    return row;
  }
}

function checkRole(role: string): void {
  if (!ROLE.test(role)) throw new Refusal('BAD_REQUEST', `"${role}" is not a role name (letters, digits, _ and -, starting with a letter)`, 400);
}

function administered(row: AdministeredRow): AdministeredUser {
  return {
    id: row.id,
    email: row.email,
    displayName: row.name,
    defaultRole: row.default_role,
    roles: row.allowed_roles,
    emailVerified: row.email_verified,
    state: row.deleted_at ? 'deleted' : row.disabled ? 'disabled' : 'active',
    createdAt: row.created_at.toISOString(),
    lastSeen: row.last_seen?.toISOString() ?? null,
  };
}
