import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * When each migration was applied, for the admin dashboard's migrations view: TypeORM records a
 * migration's name and timestamp (from its name) only. Migrations applied before this one keep
 * no time (null); this one and those after it get the time of their transaction.
 */
export class MigrationAppliedAt1797300000000 implements MigrationInterface {
  name = 'MigrationAppliedAt1797300000000';

  async up(queryRunner: QueryRunner): Promise<void> {
    const table = queryRunner.connection.driver.escape(queryRunner.connection.options.migrationsTableName ?? 'migrations');
    await queryRunner.query(`ALTER TABLE ${table} ADD COLUMN applied_at timestamptz`);
    await queryRunner.query(`ALTER TABLE ${table} ALTER COLUMN applied_at SET DEFAULT now()`);
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    const table = queryRunner.connection.driver.escape(queryRunner.connection.options.migrationsTableName ?? 'migrations');
    await queryRunner.query(`ALTER TABLE ${table} DROP COLUMN applied_at`);
  }
}
