import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * The PostgreSQL storage driver (src/platform/storage.ts): an object is a row naming it and its
 * content in chunks of at most 1 MiB, so a large object is written and read a chunk at a time and
 * every instance on the database serves every object.
 */
export class CreateStorage1796500000000 implements MigrationInterface {
  name = 'CreateStorage1796500000000';

  async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`
      CREATE TABLE storage_objects (
        key text PRIMARY KEY,
        size bigint NOT NULL,
        created_at timestamptz NOT NULL DEFAULT now()
      )`);
    await queryRunner.query(`
      CREATE TABLE storage_chunks (
        key text NOT NULL REFERENCES storage_objects (key) ON DELETE CASCADE,
        seq integer NOT NULL,
        data bytea NOT NULL,
        PRIMARY KEY (key, seq)
      )`);
    // Chunks are already compressed or not worth compressing twice; TOAST would try.
    await queryRunner.query('ALTER TABLE storage_chunks ALTER COLUMN data SET STORAGE EXTERNAL');
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query('DROP TABLE storage_chunks');
    await queryRunner.query('DROP TABLE storage_objects');
  }
}
