import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * What the providers' webhooks build: the events processed (each once: the key is unique), the
 * subscriptions at either provider, and the licenses they and one-off orders grant, with the
 * instances each license is activated on. A license's source is the provider object that sold
 * it (a primary subscription, a backup order), so both events of one purchase grant one license.
 */
export class CreateBillingRecords1796300000001 implements MigrationInterface {
  name = 'CreateBillingRecords1796300000001';

  async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`
      CREATE TABLE webhook_events (
        provider text NOT NULL CHECK (provider IN ('primary', 'backup')),
        event_id text NOT NULL,
        event_type text NOT NULL,
        processed_at timestamptz NOT NULL DEFAULT now(),
        PRIMARY KEY (provider, event_id)
      )`);
    await queryRunner.query(`
      CREATE TABLE subscriptions (
        id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
        provider text NOT NULL CHECK (provider IN ('primary', 'backup')),
        external_id text NOT NULL,
        customer_user_id uuid REFERENCES users (id) ON DELETE SET NULL,
        customer_email text,
        product text,
        status text NOT NULL,
        current_period_end timestamptz,
        created_at timestamptz NOT NULL DEFAULT now(),
        updated_at timestamptz NOT NULL DEFAULT now(),
        UNIQUE (provider, external_id)
      )`);
    await queryRunner.query('CREATE INDEX subscriptions_customer_user_id ON subscriptions (customer_user_id, created_at DESC)');
    await queryRunner.query(`
      CREATE TABLE licenses (
        id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
        license_key text NOT NULL UNIQUE,
        product text,
        customer_user_id uuid REFERENCES users (id) ON DELETE SET NULL,
        provider text NOT NULL CHECK (provider IN ('primary', 'backup')),
        source_id text NOT NULL,
        subscription_id uuid REFERENCES subscriptions (id) ON DELETE SET NULL,
        status text NOT NULL CHECK (status IN ('active', 'canceled', 'expired')),
        activation_limit integer NOT NULL CHECK (activation_limit > 0),
        activation_count integer NOT NULL DEFAULT 0 CHECK (activation_count >= 0),
        renewal_date timestamptz,
        expires_at timestamptz,
        created_at timestamptz NOT NULL DEFAULT now(),
        updated_at timestamptz NOT NULL DEFAULT now(),
        UNIQUE (provider, source_id)
      )`);
    await queryRunner.query('CREATE INDEX licenses_customer_user_id ON licenses (customer_user_id, created_at DESC)');
    await queryRunner.query("CREATE INDEX licenses_renewal_date ON licenses (renewal_date) WHERE status = 'active'");
    await queryRunner.query(`
      CREATE TABLE license_activations (
        license_id uuid NOT NULL REFERENCES licenses (id) ON DELETE CASCADE,
        instance text NOT NULL,
        created_at timestamptz NOT NULL DEFAULT now(),
        PRIMARY KEY (license_id, instance)
      )`);
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query('DROP TABLE license_activations');
    await queryRunner.query('DROP TABLE licenses');
    await queryRunner.query('DROP TABLE subscriptions');
    await queryRunner.query('DROP TABLE webhook_events');
  }
}
