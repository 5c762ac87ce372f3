import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * T3-license-alert, once per license and renewal date: the primary key is what makes two workers,
 * or a worker restarted mid-run, queue the notice once (the row and the mail's job are written in
 * one transaction). A renewal that moves the date is another key, so it gets its own notice.
 * The index serves the scheduled look-up of licenses renewing soon.
 */
export class LicenseAlerts1796800000001 implements MigrationInterface {
  name = 'LicenseAlerts1796800000001';

  async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`
      CREATE TABLE newsletter_license_alerts (
        license_id uuid NOT NULL,
        renewal_date timestamptz NOT NULL,
        email text NOT NULL,
        status text NOT NULL CHECK (status IN ('queued', 'skipped')),
        job_id uuid,
        created_at timestamptz NOT NULL DEFAULT now(),
        PRIMARY KEY (license_id, renewal_date)
      )`);
    await queryRunner.query(`CREATE INDEX licenses_renewal_date_active ON licenses (renewal_date) WHERE status = 'active'`);
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query('DROP INDEX licenses_renewal_date_active');
    await queryRunner.query('DROP TABLE newsletter_license_alerts');
  }
}
