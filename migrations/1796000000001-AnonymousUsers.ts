import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Anonymous users (AUTH_ANONYMOUS_USERS_ENABLED) have no address until they are upgraded
 * (deanonymized) to an e-mail account; the unique index on lower(email) admits any number of
 * nulls.
 */
export class AnonymousUsers1796000000001 implements MigrationInterface {
  name = 'AnonymousUsers1796000000001';

  async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query('ALTER TABLE users ADD COLUMN is_anonymous boolean NOT NULL DEFAULT false');
    await queryRunner.query('ALTER TABLE users ALTER COLUMN email DROP NOT NULL');
    // Only anonymous accounts go without an address.
    await queryRunner.query('ALTER TABLE users ADD CONSTRAINT users_email_or_anonymous CHECK (email IS NOT NULL OR is_anonymous)');
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query('DELETE FROM users WHERE email IS NULL');
    await queryRunner.query('ALTER TABLE users DROP CONSTRAINT users_email_or_anonymous');
    await queryRunner.query('ALTER TABLE users ALTER COLUMN email SET NOT NULL');
    await queryRunner.query('ALTER TABLE users DROP COLUMN is_anonymous');
  }
}
