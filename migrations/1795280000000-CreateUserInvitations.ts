import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Invited users (bulkCreateUsers) have no password until they accept their invitation, so
 * password_hash becomes nullable; a null hash matches no password, so such a user cannot sign in.
 * An invitation keeps only the SHA-256 of its ticket: the database alone cannot forge a link.
 */
export class CreateUserInvitations1795280000000 implements MigrationInterface {
  name = 'CreateUserInvitations1795280000000';

  async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query('ALTER TABLE users ALTER COLUMN password_hash DROP NOT NULL');
    await queryRunner.query(`
      CREATE TABLE user_invitations (
        ticket_hash bytea PRIMARY KEY,
        user_id uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
        expires_at timestamptz NOT NULL,
        created_at timestamptz NOT NULL DEFAULT now()
      )`);
    await queryRunner.query('CREATE INDEX user_invitations_user_id_idx ON user_invitations (user_id)');
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query('DROP TABLE user_invitations');
    // Users who never set a password cannot be kept under NOT NULL: they go with the invitations.
    await queryRunner.query('DELETE FROM users WHERE password_hash IS NULL');
    await queryRunner.query('ALTER TABLE users ALTER COLUMN password_hash SET NOT NULL');
  }
}
