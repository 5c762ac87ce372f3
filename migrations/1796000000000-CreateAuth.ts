import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * The authentication service: what a user carries beyond registerUser's fields (roles, profile,
 * state), sessions as refresh tokens, and single-use tickets. Refresh tokens and tickets are kept
 * only as SHA-256 hashes: the database alone cannot sign anyone in.
 */
export class CreateAuth1796000000000 implements MigrationInterface {
  name = 'CreateAuth1796000000000';

  async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`
      ALTER TABLE users
        ADD COLUMN locale text NOT NULL DEFAULT 'en',
        ADD COLUMN default_role text NOT NULL DEFAULT 'user',
        ADD COLUMN allowed_roles text[] NOT NULL DEFAULT '{user,me}',
        ADD COLUMN metadata jsonb NOT NULL DEFAULT '{}',
        ADD COLUMN avatar_url text NOT NULL DEFAULT '',
        ADD COLUMN disabled boolean NOT NULL DEFAULT false,
        ADD COLUMN deleted_at timestamptz,
        ADD COLUMN new_email text,
        ADD COLUMN active_mfa_type text,
        ADD COLUMN source_account_id text NOT NULL DEFAULT 'primary',
        ADD COLUMN last_seen timestamptz`);
    // One row per session and per rotation: a family is one sign-in and every token rotated from it.
    await queryRunner.query(`
      CREATE TABLE auth_refresh_tokens (
        id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
        token_hash bytea NOT NULL UNIQUE,
        family_id uuid NOT NULL,
        user_id uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
        created_at timestamptz NOT NULL DEFAULT now(),
        expires_at timestamptz NOT NULL,
        rotated_at timestamptz,
        revoked_at timestamptz
      )`);
    await queryRunner.query('CREATE INDEX auth_refresh_tokens_user_id_idx ON auth_refresh_tokens (user_id)');
    await queryRunner.query('CREATE INDEX auth_refresh_tokens_family_id_idx ON auth_refresh_tokens (family_id)');
    await queryRunner.query('CREATE INDEX auth_refresh_tokens_expires_at_idx ON auth_refresh_tokens (expires_at)');
    await queryRunner.query(`
      CREATE TABLE auth_tickets (
        ticket_hash bytea PRIMARY KEY,
        kind text NOT NULL,
        user_id uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
        new_email text,
        expires_at timestamptz NOT NULL,
        created_at timestamptz NOT NULL DEFAULT now()
      )`);
    await queryRunner.query('CREATE INDEX auth_tickets_user_id_kind_idx ON auth_tickets (user_id, kind)');
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query('DROP TABLE auth_tickets');
    await queryRunner.query('DROP TABLE auth_refresh_tokens');
    await queryRunner.query(`
      ALTER TABLE users
        DROP COLUMN locale, DROP COLUMN default_role, DROP COLUMN allowed_roles, DROP COLUMN metadata,
        DROP COLUMN avatar_url, DROP COLUMN disabled, DROP COLUMN deleted_at, DROP COLUMN new_email,
        DROP COLUMN active_mfa_type, DROP COLUMN source_account_id, DROP COLUMN last_seen`);
  }
}
