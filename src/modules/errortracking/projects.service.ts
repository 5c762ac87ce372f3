import { randomBytes, timingSafeEqual } from 'node:crypto';
import { LRUCache } from 'lru-cache';
import type { DataSource } from 'typeorm';
import { sha256 } from '../../common/sha256';
import { rows } from '../../db/sql';
import { Refusal } from '../../common/refusal';
import { invalid, notFound, requiredText, serviceName } from './problems';

export type TokenKind = 'dsn' | 'secret';

/** `<prefix>_<id>_<secret>`: letters, digits and `_` only, since SDKs read a DSN's key as `\w+`. */
const PREFIX: Record<TokenKind, string> = { dsn: 'dsn', secret: 'sk' };
const TOKEN = /^(dsn|sk)_([0-9a-f]{16})_([0-9a-f]{40})$/;
const SLUG = /^[a-z0-9](?:[a-z0-9-]{0,62}[a-z0-9])?$/;

export interface ErrorProject {
  id: number;
  name: string;
  slug: string;
  service: string;
  createdAt: Date;
}

export interface ErrorToken {
  id: string;
  projectId: number;
  kind: TokenKind;
  name: string;
  createdAt: Date;
  revokedAt: Date | null;
}

/** A new token: the only time its secret is shown. */
export interface CreatedToken extends ErrorToken {
  token: string;
  /** For a DSN key, what SDKs take: `http(s)://<token>@<host>/<project-id>`. */
  dsn: string | null;
}

/** Who a valid token speaks for. */
export interface TokenIdentity {
  tokenId: string;
  projectId: number;
  kind: TokenKind;
}

export type TokenRefusal = 'malformed' | 'unknown' | 'revoked';

/**
 * How long a checked token is believed without asking the database again. A revocation through
 * this process takes effect at once; through another process, within this time.
 */
const TOKEN_CACHE_MS = 10_000;

interface ProjectRow {
  id: number;
  name: string;
  slug: string;
  service: string;
  created_at: Date;
}
interface TokenRow {
  id: string;
  project_id: number;
  kind: TokenKind;
  name: string;
  created_at: Date;
  revoked_at: Date | null;
}

const project = (row: ProjectRow): ErrorProject => ({ id: row.id, name: row.name, slug: row.slug, service: row.service, createdAt: row.created_at });
const token = (row: TokenRow): ErrorToken => ({
  id: row.id,
  projectId: row.project_id,
  kind: row.kind,
  name: row.name,
  createdAt: row.created_at,
  revokedAt: row.revoked_at,
});

/** Projects and their DSN and secret keys (stored as SHA-256 hashes). */
export class ProjectsService {
  private readonly verified = new LRUCache<string, TokenIdentity>({ max: 10_000, ttl: TOKEN_CACHE_MS });

  constructor(
    private readonly dataSource: DataSource,
    private readonly publicUrl: string,
  ) {}

  async createProject(input: { name?: unknown; slug?: unknown; service?: unknown }): Promise<ErrorProject> {
    const name = requiredText(input.name, 'name', 200);
    const slug = requiredText(input.slug, 'slug', 64);
    if (!SLUG.test(slug)) throw invalid('slug', 'slug must be lower-case letters, digits and inner hyphens (at most 64)');
    const service = serviceName(input.service);
    const [row] = (await this.dataSource.query(
      `INSERT INTO error_projects (name, slug, service) VALUES ($1, $2, $3)
       ON CONFLICT (slug) DO NOTHING RETURNING *`,
      [name, slug, service],
    )) as ProjectRow[];
    if (!row) throw new Refusal('SLUG_TAKEN', `a project with the slug "${slug}" exists`, 409, { field: 'slug' });
    return project(row);
  }

  async listProjects(): Promise<ErrorProject[]> {
    return ((await this.dataSource.query('SELECT * FROM error_projects ORDER BY id')) as ProjectRow[]).map(project);
  }

  /** A page of projects in id order, each with its errors still open and when one was last seen (the admin dashboard). */
  async page(limit: number, offset: number): Promise<{ total: number; items: (ErrorProject & { openErrors: number; lastSeen: Date | null })[] }> {
    const found = await rows<ProjectRow & { total: number; open_errors: number; last_seen: Date | null }>(
      this.dataSource,
      `SELECT p.*, count(*) OVER ()::int AS total,
         (SELECT count(*)::int FROM error_groups g WHERE g.project_id = p.id AND g.status = 'unresolved' AND g.occurrence_count > 0) AS open_errors,
         (SELECT max(g.last_seen) FROM error_groups g WHERE g.project_id = p.id AND g.status <> 'merged') AS last_seen
       FROM error_projects p ORDER BY p.id LIMIT $1 OFFSET $2`,
      [limit, offset],
    );
    const total = found[0]?.total ?? (offset > 0 ? Number((await rows<{ n: string }>(this.dataSource, 'SELECT count(*) AS n FROM error_projects'))[0].n) : 0);
    return { total, items: found.map((row) => ({ ...project(row), openErrors: row.open_errors, lastSeen: row.last_seen })) };
  }

  async projectsByIds(ids: readonly number[]): Promise<Map<number, ErrorProject>> {
    const rows = (await this.dataSource.query('SELECT * FROM error_projects WHERE id = ANY($1::int[])', [ids])) as ProjectRow[];
    return new Map(rows.map((row) => [row.id, project(row)]));
  }

  /** A project by its numeric id or its slug. */
  async findProject(reference: string | number): Promise<ErrorProject> {
    const text = String(reference).trim();
    const rows = (await this.dataSource.query(
      /^\d{1,9}$/.test(text) ? 'SELECT * FROM error_projects WHERE id = $1::int' : 'SELECT * FROM error_projects WHERE slug = $1',
      [text],
    )) as ProjectRow[];
    if (rows.length === 0) throw notFound(`project "${text.slice(0, 100)}"`);
    return project(rows[0]);
  }

  async createToken(input: { project?: unknown; kind?: unknown; name?: unknown }): Promise<CreatedToken> {
    const kind = input.kind;
    if (kind !== 'dsn' && kind !== 'secret') throw invalid('kind', 'kind must be DSN or SECRET');
    const name = requiredText(input.name, 'name', 200);
    const owner = await this.findProject(requiredText(input.project, 'project', 100));
    const id = randomBytes(8).toString('hex');
    const secret = `${PREFIX[kind]}_${id}_${randomBytes(20).toString('hex')}`;
    const [row] = (await this.dataSource.query(
      `INSERT INTO error_tokens (id, project_id, kind, name, token_hash) VALUES ($1, $2, $3, $4, $5)
       RETURNING id, project_id, kind, name, created_at, revoked_at`,
      [id, owner.id, kind, name, sha256(secret)],
    )) as TokenRow[];
    return { ...token(row), token: secret, dsn: kind === 'dsn' ? this.dsnOf(secret, owner.id) : null };
  }

  private dsnOf(secret: string, projectId: number): string {
    const url = new URL(this.publicUrl);
    return `${url.protocol}//${secret}@${url.host}${url.pathname.replace(/\/$/, '')}/${projectId}`;
  }

  async listTokens(projectReference?: string | null): Promise<ErrorToken[]> {
    const rows = projectReference
      ? ((await this.dataSource.query(
          'SELECT id, project_id, kind, name, created_at, revoked_at FROM error_tokens WHERE project_id = $1 ORDER BY created_at, id',
          [(await this.findProject(projectReference)).id],
        )) as TokenRow[])
      : ((await this.dataSource.query('SELECT id, project_id, kind, name, created_at, revoked_at FROM error_tokens ORDER BY created_at, id')) as TokenRow[]);
    return rows.map(token);
  }

  /** Revokes a token by its id (the middle part of the token); revoking twice is refused. */
  async revokeToken(id: unknown): Promise<ErrorToken> {
    const text = requiredText(id, 'id', 64);
    const updated = await rows<TokenRow>(
      this.dataSource,
      `UPDATE error_tokens SET revoked_at = now() WHERE id = $1 AND revoked_at IS NULL
       RETURNING id, project_id, kind, name, created_at, revoked_at`,
      [text],
    );
    for (const [key, identity] of this.verified.entries()) if (identity.tokenId === text) this.verified.delete(key);
    if (updated.length > 0) return token(updated[0]);
    const existing = (await this.dataSource.query('SELECT revoked_at FROM error_tokens WHERE id = $1', [text])) as TokenRow[];
    if (existing.length === 0) throw notFound(`token "${text}"`);
    throw new Refusal('ALREADY_REVOKED', `token "${text}" is already revoked`, 409);
  }

  /**
   * The identity behind a presented token, or why there is none. The token's id finds its row;
   * the whole token's hash is then compared in constant time.
   */
  async authenticate(presented: string): Promise<TokenIdentity | TokenRefusal> {
    const cached = this.verified.get(presented);
    if (cached) return cached;
    const match = TOKEN.exec(presented);
    if (!match) return 'malformed';
    const rows = (await this.dataSource.query('SELECT id, project_id, kind, token_hash, revoked_at FROM error_tokens WHERE id = $1', [
      match[2],
    ])) as (TokenRow & { token_hash: Buffer })[];
    const row = rows[0];
    if (!row || row.kind !== (match[1] === 'dsn' ? 'dsn' : 'secret')) return 'unknown';
    if (!timingSafeEqual(row.token_hash, sha256(presented))) return 'unknown';
    if (row.revoked_at) return 'revoked';
    const identity: TokenIdentity = { tokenId: row.id, projectId: row.project_id, kind: row.kind };
    this.verified.set(presented, identity);
    return identity;
  }
}
