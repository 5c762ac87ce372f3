import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * The PostgreSQL rate-limit store's counters as an UNLOGGED table: each request's upsert then
 * commits without waiting for a WAL flush (docs/decisions.md has the measurements). The counters
 * need no crash safety: after a crash the table is empty and every window starts afresh, as after
 * a restart with the memory store.
 */
export class RateLimitsUnlogged1796820000000 implements MigrationInterface {
  name = 'RateLimitsUnlogged1796820000000';

  async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query('ALTER TABLE rate_limits SET UNLOGGED');
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query('ALTER TABLE rate_limits SET LOGGED');
  }
}
