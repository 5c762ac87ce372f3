import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Counters of the PostgreSQL rate-limit store (RATE_LIMIT_STORE=postgres), in the shape
 * rate-limiter-flexible's RateLimiterPostgres reads and writes: key `<limit>:<kind>:<value>`,
 * points used, and the end of the window in milliseconds since the epoch.
 */
export class CreateRateLimits1795270000000 implements MigrationInterface {
  name = 'CreateRateLimits1795270000000';

  async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`
      CREATE TABLE rate_limits (
        key varchar(255) PRIMARY KEY,
        points integer NOT NULL DEFAULT 0,
        expire bigint
      )`);
    // Each process deletes expired counters every five minutes.
    await queryRunner.query('CREATE INDEX rate_limits_expire_idx ON rate_limits (expire)');
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query('DROP TABLE rate_limits');
  }
}
