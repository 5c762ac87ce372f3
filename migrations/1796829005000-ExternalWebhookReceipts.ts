import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Deduplication of inbound external webhooks within a window (EXTERNAL_WEBHOOK_DEDUP_WINDOW_HOURS):
 * each verified delivery claims its keys (`id:<sha256 of the provider's delivery id>`, and
 * `body:<sha256 of the exact body>` unless the id is signed) under this table's primary key in
 * the transaction that stores it, so a replay, a retry or a concurrent copy finds them taken. It
 * replaces the deliveries' unique (provider, delivery_id), which deduplicated only on an optional,
 * unsigned header and for ever. Existing delivery ids are carried over as claimed keys.
 */
export class ExternalWebhookReceipts1796829005000 implements MigrationInterface {
  name = 'ExternalWebhookReceipts1796829005000';

  async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`
      CREATE TABLE external_webhook_receipts (
        provider text NOT NULL,
        dedup_key text NOT NULL,
        received_at timestamptz NOT NULL DEFAULT now(),
        PRIMARY KEY (provider, dedup_key)
      )`);
    await queryRunner.query('CREATE INDEX external_webhook_receipts_received_idx ON external_webhook_receipts (received_at)');
    await queryRunner.query(`
      INSERT INTO external_webhook_receipts (provider, dedup_key, received_at)
      SELECT provider, 'id:' || encode(sha256(convert_to(delivery_id, 'UTF8')), 'hex'), max(received_at)
      FROM external_webhook_deliveries WHERE delivery_id IS NOT NULL GROUP BY 1, 2`);
    await queryRunner.query('ALTER TABLE external_webhook_deliveries DROP CONSTRAINT external_webhook_deliveries_provider_delivery_id_key');
    await queryRunner.query('CREATE INDEX external_webhook_deliveries_delivery_idx ON external_webhook_deliveries (provider, delivery_id)');
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query('DROP INDEX external_webhook_deliveries_delivery_idx');
    // Fails, deleting nothing, if a delivery id was stored twice since (after its window).
    await queryRunner.query(
      'ALTER TABLE external_webhook_deliveries ADD CONSTRAINT external_webhook_deliveries_provider_delivery_id_key UNIQUE (provider, delivery_id)',
    );
    await queryRunner.query('DROP TABLE external_webhook_receipts');
  }
}
