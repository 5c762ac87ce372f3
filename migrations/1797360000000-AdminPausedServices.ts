import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * The services paused on every instance from the admin API (`?scope=all`): a row stands until the
 * same scope starts the service again, and an instance that starts meanwhile pauses it too.
 */
export class AdminPausedServices1797360000000 implements MigrationInterface {
  name = 'AdminPausedServices1797360000000';

  async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`
      CREATE TABLE admin_paused_services (
        name text PRIMARY KEY,
        paused_at timestamptz NOT NULL DEFAULT now()
      )`);
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query('DROP TABLE admin_paused_services');
  }
}
