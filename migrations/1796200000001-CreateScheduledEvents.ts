import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Scheduled events (Hasura's meaning): cron triggers, and the events to deliver, both the ones a
 * cron trigger generates ahead of time (unique per trigger and time, so two instances never
 * create one twice) and one-off events (`create_scheduled_event`, which carry their own webhook,
 * payload, headers and retry settings). Status: scheduled, locked (being delivered), delivered,
 * error (retries used up, or refused for good) and dead (missed beyond the tolerance).
 */
export class CreateScheduledEvents1796200000001 implements MigrationInterface {
  name = 'CreateScheduledEvents1796200000001';

  async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`
      CREATE TABLE cron_triggers (
        name text PRIMARY KEY,
        configuration jsonb NOT NULL,
        created_at timestamptz NOT NULL DEFAULT now(),
        updated_at timestamptz NOT NULL DEFAULT now()
      )`);
    await queryRunner.query(`
      CREATE TABLE scheduled_events (
        id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
        cron_trigger_name text REFERENCES cron_triggers (name) ON DELETE CASCADE,
        scheduled_time timestamptz NOT NULL,
        webhook text,
        payload jsonb,
        headers jsonb,
        retry_conf jsonb,
        comment text,
        status text NOT NULL DEFAULT 'scheduled' CHECK (status IN ('scheduled', 'locked', 'delivered', 'error', 'dead')),
        tries integer NOT NULL DEFAULT 0,
        created_at timestamptz NOT NULL DEFAULT clock_timestamp(),
        next_retry_at timestamptz,
        locked timestamptz,
        lease_expires_at timestamptz,
        delivered_at timestamptz,
        CHECK (cron_trigger_name IS NOT NULL OR webhook IS NOT NULL),
        UNIQUE (cron_trigger_name, scheduled_time)
      )`);
    await queryRunner.query(`
      CREATE INDEX scheduled_events_due_idx ON scheduled_events (coalesce(next_retry_at, scheduled_time))
      WHERE status IN ('scheduled', 'locked')`);
    await queryRunner.query(`
      CREATE TABLE scheduled_event_invocation_logs (
        id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
        event_id uuid NOT NULL REFERENCES scheduled_events (id) ON DELETE CASCADE,
        status integer,
        request jsonb NOT NULL,
        response jsonb NOT NULL,
        duration_ms integer NOT NULL,
        created_at timestamptz NOT NULL DEFAULT now()
      )`);
    await queryRunner.query('CREATE INDEX scheduled_event_invocation_logs_event_idx ON scheduled_event_invocation_logs (event_id, created_at)');
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query('DROP TABLE scheduled_event_invocation_logs');
    await queryRunner.query('DROP TABLE scheduled_events');
    await queryRunner.query('DROP TABLE cron_triggers');
  }
}
