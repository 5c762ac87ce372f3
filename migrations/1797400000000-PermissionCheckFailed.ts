import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * The generated API's mutations: a written row failing its insert or update permission's `check`
 * aborts the statement from inside it (as Hasura's `hdb_catalog.check_violation` does), so that a
 * mutation of one statement needs no explicit transaction to be rolled back. SQLSTATE PL403 is
 * Plinth's own (no PostgreSQL class starts with PL): the runner answers it with Hasura's
 * `permission-error` (src/modules/tables/tables.mutation-runner.ts).
 */
export class PermissionCheckFailed1797400000000 implements MigrationInterface {
  name = 'PermissionCheckFailed1797400000000';

  async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`
      CREATE FUNCTION plinth_check_failed() RETURNS boolean LANGUAGE plpgsql VOLATILE AS $$
      BEGIN
        RAISE EXCEPTION 'check constraint of an insert/update permission has failed' USING ERRCODE = 'PL403';
      END
      $$`);
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query('DROP FUNCTION plinth_check_failed()');
  }
}
