import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Verified deliveries of external providers' webhooks (`POST <route>/external/<provider>`), one
 * row each, deduplicated by the provider's delivery id when it sends one. Event triggers may
 * watch this table like any other.
 */
export class CreateExternalWebhookDeliveries1796200000002 implements MigrationInterface {
  name = 'CreateExternalWebhookDeliveries1796200000002';

  async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`
      CREATE TABLE external_webhook_deliveries (
        id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
        provider text NOT NULL,
        delivery_id text,
        headers jsonb NOT NULL,
        payload jsonb NOT NULL,
        received_at timestamptz NOT NULL DEFAULT now(),
        UNIQUE (provider, delivery_id)
      )`);
    await queryRunner.query('CREATE INDEX external_webhook_deliveries_received_idx ON external_webhook_deliveries (provider, received_at DESC)');
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query('DROP TABLE external_webhook_deliveries');
  }
}
