import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Payments (processPayment): one row per payment, keyed by its idempotency key so that a retried
 * call updates its payment instead of adding one; and the stored provider selection (spec 3
 * §2.1), one row that every instance reads.
 */
export class CreatePayments1796300000000 implements MigrationInterface {
  name = 'CreatePayments1796300000000';

  async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`
      CREATE TABLE payments (
        id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
        provider text NOT NULL CHECK (provider IN ('primary', 'backup')),
        provider_payment_id text,
        idempotency_key text NOT NULL,
        customer_user_id uuid REFERENCES users (id) ON DELETE SET NULL,
        amount bigint NOT NULL CHECK (amount > 0),
        currency text NOT NULL,
        description text,
        status text NOT NULL CHECK (status IN ('SUCCEEDED', 'FAILED', 'REQUIRES_ACTION', 'PROCESSING')),
        failure_code text,
        failure_message text,
        receipt_url text,
        created_at timestamptz NOT NULL DEFAULT now(),
        updated_at timestamptz NOT NULL DEFAULT now()
      )`);
    await queryRunner.query('CREATE UNIQUE INDEX payments_provider_idempotency_key ON payments (provider, idempotency_key)');
    await queryRunner.query(
      'CREATE UNIQUE INDEX payments_provider_payment_id ON payments (provider, provider_payment_id) WHERE provider_payment_id IS NOT NULL',
    );
    await queryRunner.query('CREATE INDEX payments_customer_user_id ON payments (customer_user_id, created_at DESC)');
    await queryRunner.query(`
      CREATE TABLE payment_provider_state (
        id boolean PRIMARY KEY DEFAULT true CHECK (id),
        provider text NOT NULL CHECK (provider IN ('primary', 'backup')),
        updated_at timestamptz NOT NULL DEFAULT now()
      )`);
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query('DROP TABLE payment_provider_state');
    await queryRunner.query('DROP TABLE payments');
  }
}
