import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * The admin dashboard's sessions (only the SHA-256 of each session token: the token lives in the
 * browser's cookie) and its login state: failed logins in a row, the lock-out, and the time step
 * of the last TOTP code accepted. One row for the one admin, so a restart does not forget them.
 */
export class AdminSessions1797100000000 implements MigrationInterface {
  name = 'AdminSessions1797100000000';

  async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`
      CREATE TABLE admin_sessions (
        token_hash bytea PRIMARY KEY,
        username text NOT NULL,
        created_at timestamptz NOT NULL DEFAULT now(),
        last_seen_at timestamptz NOT NULL DEFAULT now()
      )`);
    await queryRunner.query('CREATE INDEX admin_sessions_last_seen_at ON admin_sessions (last_seen_at)');
    await queryRunner.query(`
      CREATE TABLE admin_login_state (
        id integer PRIMARY KEY CHECK (id = 1),
        failures integer NOT NULL DEFAULT 0,
        last_failure_at timestamptz,
        locked_until timestamptz,
        totp_last_step bigint
      )`);
    await queryRunner.query('INSERT INTO admin_login_state (id) VALUES (1)');
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query('DROP TABLE admin_login_state');
    await queryRunner.query('DROP TABLE admin_sessions');
  }
}
