import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Tracked tables (the generated API, module tables): their metadata in Hasura's table-entry
 * shape (table, configuration, relationships, select permissions) is one row, changed whole
 * under the metadata lock; `version` tells instances which schema is newer.
 */
export class TrackedTables1797000000000 implements MigrationInterface {
  name = 'TrackedTables1797000000000';

  async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`
      CREATE TABLE tables_metadata (
        id smallint PRIMARY KEY DEFAULT 1 CHECK (id = 1),
        tables jsonb NOT NULL DEFAULT '[]',
        version bigint NOT NULL DEFAULT 0
      )`);
    await queryRunner.query('INSERT INTO tables_metadata DEFAULT VALUES');
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query('DROP TABLE tables_metadata');
  }
}
