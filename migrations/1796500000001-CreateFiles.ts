import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Uploaded files (uploadAndProcessFile): who uploaded it, what it claims to be, where its bytes
 * are (storage key) and what processing found. The owner is the session's user id as given
 * (x-gql-user-id is any text in the engine's sessions), so it is text without a foreign key.
 */
export class CreateFiles1796500000001 implements MigrationInterface {
  name = 'CreateFiles1796500000001';

  async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`CREATE TYPE file_status AS ENUM ('PENDING', 'PROCESSING', 'COMPLETED', 'FAILED')`);
    await queryRunner.query(`
      CREATE TABLE files (
        id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
        owner_id text,
        file_name text NOT NULL,
        file_type text NOT NULL,
        file_size bigint NOT NULL,
        storage_key text NOT NULL,
        options jsonb NOT NULL,
        status file_status NOT NULL DEFAULT 'PENDING',
        processing_job_id uuid,
        result jsonb,
        error text,
        created_at timestamptz NOT NULL DEFAULT now(),
        processed_at timestamptz
      )`);
    await queryRunner.query('CREATE INDEX files_owner_id_idx ON files (owner_id, created_at)');
    await queryRunner.query('CREATE INDEX files_created_at_idx ON files (created_at)');
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query('DROP TABLE files');
    await queryRunner.query('DROP TYPE file_status');
  }
}
