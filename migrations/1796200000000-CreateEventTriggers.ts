import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Event triggers (Hasura's meaning): the definitions, the captured events (`event_log`, one row
 * per change and trigger, written by the table's trigger function in the change's transaction)
 * and every delivery attempt (`event_invocation_logs`). `error` is the dead state: retries used
 * up, or a final refusal. `seq` orders events of one row for in-order triggers; `lease_expires_at`
 * is when a claimed event may be taken over from a process that died delivering it.
 */
export class CreateEventTriggers1796200000000 implements MigrationInterface {
  name = 'CreateEventTriggers1796200000000';

  async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`
      CREATE TABLE event_triggers (
        name text PRIMARY KEY,
        schema_name text NOT NULL,
        table_name text NOT NULL,
        configuration jsonb NOT NULL,
        created_at timestamptz NOT NULL DEFAULT now(),
        updated_at timestamptz NOT NULL DEFAULT now()
      )`);
    await queryRunner.query(`
      CREATE TABLE event_log (
        id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
        seq bigserial NOT NULL,
        schema_name text NOT NULL,
        table_name text NOT NULL,
        trigger_name text NOT NULL,
        payload jsonb NOT NULL,
        row_key text,
        delivered boolean NOT NULL DEFAULT false,
        error boolean NOT NULL DEFAULT false,
        tries integer NOT NULL DEFAULT 0,
        created_at timestamptz NOT NULL DEFAULT clock_timestamp(),
        locked timestamptz,
        lease_expires_at timestamptz,
        next_retry_at timestamptz,
        delivered_at timestamptz,
        archived boolean NOT NULL DEFAULT false
      )`);
    // The dispatcher's claim: pending events of a trigger in order.
    await queryRunner.query(`
      CREATE INDEX event_log_pending_idx ON event_log (trigger_name, seq)
      WHERE NOT delivered AND NOT error AND NOT archived`);
    await queryRunner.query('CREATE INDEX event_log_trigger_created_idx ON event_log (trigger_name, created_at DESC)');
    await queryRunner.query(`
      CREATE TABLE event_invocation_logs (
        id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
        event_id uuid NOT NULL REFERENCES event_log (id) ON DELETE CASCADE,
        trigger_name text NOT NULL,
        status integer,
        request jsonb NOT NULL,
        response jsonb NOT NULL,
        duration_ms integer NOT NULL,
        created_at timestamptz NOT NULL DEFAULT now()
      )`);
    await queryRunner.query('CREATE INDEX event_invocation_logs_event_idx ON event_invocation_logs (event_id, created_at)');
    await queryRunner.query('CREATE INDEX event_invocation_logs_trigger_idx ON event_invocation_logs (trigger_name, created_at DESC)');
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    // The capture triggers on watched tables go with their definitions.
    const triggers: { name: string; schema_name: string; table_name: string }[] = await queryRunner.query(
      'SELECT name, schema_name, table_name FROM event_triggers',
    );
    for (const trigger of triggers) {
      const table = `"${trigger.schema_name}"."${trigger.table_name}"`;
      const [{ exists }] = await queryRunner.query('SELECT to_regclass($1) IS NOT NULL AS exists', [table]);
      if (exists) await queryRunner.query(`DROP TRIGGER IF EXISTS "plinth_event_${trigger.name}" ON ${table}`);
      await queryRunner.query(`DROP FUNCTION IF EXISTS "plinth_event_${trigger.name}"()`);
    }
    await queryRunner.query('DROP TABLE event_invocation_logs');
    await queryRunner.query('DROP TABLE event_log');
    await queryRunner.query('DROP TABLE event_triggers');
  }
}
