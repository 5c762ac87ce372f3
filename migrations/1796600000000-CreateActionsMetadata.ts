import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * User-declared actions: their metadata (custom types and actions with their permissions, in
 * Hasura's shapes) is one row, changed whole under the metadata lock; `version` tells instances
 * which schema is newer. `action_log` holds the calls of asynchronous actions and their results.
 */
export class CreateActionsMetadata1796600000000 implements MigrationInterface {
  name = 'CreateActionsMetadata1796600000000';

  async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`
      CREATE TABLE actions_metadata (
        id smallint PRIMARY KEY DEFAULT 1 CHECK (id = 1),
        custom_types jsonb NOT NULL DEFAULT '{}',
        actions jsonb NOT NULL DEFAULT '[]',
        version bigint NOT NULL DEFAULT 0
      )`);
    await queryRunner.query('INSERT INTO actions_metadata DEFAULT VALUES');
    await queryRunner.query(`
      CREATE TABLE action_log (
        id uuid PRIMARY KEY,
        action_name text NOT NULL,
        input jsonb NOT NULL,
        session_variables jsonb NOT NULL,
        client_headers jsonb NOT NULL DEFAULT '{}',
        request_query text NOT NULL DEFAULT '',
        status text NOT NULL DEFAULT 'created' CHECK (status IN ('created', 'completed', 'error')),
        output jsonb,
        errors jsonb,
        created_at timestamptz NOT NULL DEFAULT now(),
        completed_at timestamptz
      )`);
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query('DROP TABLE action_log');
    await queryRunner.query('DROP TABLE actions_metadata');
  }
}
