import type { MigrationInterface, QueryRunner } from 'typeorm';

/** Subscription events too large for a NOTIFY payload (8000 bytes) travel through this table. */
export class CreatePubSubPayloads1763700000001 implements MigrationInterface {
  name = 'CreatePubSubPayloads1763700000001';

  async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`
      CREATE TABLE pubsub_payloads (
        id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        payload jsonb NOT NULL,
        created_at timestamptz NOT NULL DEFAULT now()
      )`);
    await queryRunner.query('CREATE INDEX pubsub_payloads_created_at_idx ON pubsub_payloads (created_at)');
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query('DROP TABLE pubsub_payloads');
  }
}
