import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Live queries of the generated API: a statement-level trigger on each tracked table that has
 * live subscribers (created by the tables module when the first one subscribes) calls this
 * function, which announces the table's change on `plinth_live`. PostgreSQL sends the NOTIFY at
 * commit, once per transaction and table, to every instance listening.
 */
export class LiveQueryNotify1797200000000 implements MigrationInterface {
  name = 'LiveQueryNotify1797200000000';

  async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`
      CREATE FUNCTION plinth_live_changed() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN
        PERFORM pg_notify('plinth_live', json_build_array(TG_TABLE_SCHEMA, TG_TABLE_NAME)::text);
        RETURN NULL;
      END
      $$`);
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query('DROP FUNCTION plinth_live_changed() CASCADE');
  }
}
