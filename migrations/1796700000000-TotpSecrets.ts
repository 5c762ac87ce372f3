import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * TOTP second factor: the user's secret, sealed with AES-256-GCM under AUTH_ENCRYPTION_KEY (never
 * stored in clear), and the last time step a code was accepted for, so that a code works once.
 * MFA tickets count their wrong codes.
 */
export class TotpSecrets1796700000000 implements MigrationInterface {
  name = 'TotpSecrets1796700000000';

  async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query('ALTER TABLE users ADD COLUMN totp_secret_sealed bytea, ADD COLUMN totp_last_step bigint');
    await queryRunner.query('ALTER TABLE auth_tickets ADD COLUMN failed_attempts integer NOT NULL DEFAULT 0');
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query('ALTER TABLE auth_tickets DROP COLUMN failed_attempts');
    await queryRunner.query('ALTER TABLE users DROP COLUMN totp_secret_sealed, DROP COLUMN totp_last_step');
  }
}
