import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * SMS second factor: the user's verified phone number, and the codes sent (kept as hashes, one
 * live code per user and purpose, with an expiry and a count of wrong attempts).
 */
export class SmsCodes1796700000002 implements MigrationInterface {
  name = 'SmsCodes1796700000002';

  async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query('ALTER TABLE users ADD COLUMN phone_number text, ADD COLUMN phone_number_verified boolean NOT NULL DEFAULT false');
    await queryRunner.query(`
      CREATE TABLE auth_sms_codes (
        user_id uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
        purpose text NOT NULL,
        phone_number text NOT NULL,
        code_hash bytea NOT NULL,
        failed_attempts integer NOT NULL DEFAULT 0,
        expires_at timestamptz NOT NULL,
        PRIMARY KEY (user_id, purpose)
      )`);
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query('DROP TABLE auth_sms_codes');
    await queryRunner.query('ALTER TABLE users DROP COLUMN phone_number, DROP COLUMN phone_number_verified');
  }
}
