import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Error tracking (spec 2 §2.5): projects with numeric ids (Sentry's SDKs want digits), their
 * tokens (only a SHA-256 of each is kept), errors (events grouped by fingerprint), the events,
 * the releases seen (to tell a newer release from an older one), SLOs and incidents.
 *
 * An error merged into another keeps its row, pointing at the one it was merged into, so its
 * fingerprint keeps leading new events there.
 */
export class CreateErrorTracking1796100000000 implements MigrationInterface {
  name = 'CreateErrorTracking1796100000000';

  async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`
      CREATE TABLE error_projects (
        id serial PRIMARY KEY,
        name text NOT NULL,
        slug text NOT NULL UNIQUE,
        service text NOT NULL,
        created_at timestamptz NOT NULL DEFAULT now()
      )`);
    await queryRunner.query(`
      CREATE TABLE error_tokens (
        id text PRIMARY KEY,
        project_id integer NOT NULL REFERENCES error_projects (id) ON DELETE CASCADE,
        kind text NOT NULL CHECK (kind IN ('dsn', 'secret')),
        name text NOT NULL,
        token_hash bytea NOT NULL,
        created_at timestamptz NOT NULL DEFAULT now(),
        revoked_at timestamptz
      )`);
    await queryRunner.query('CREATE INDEX error_tokens_project_idx ON error_tokens (project_id)');
    await queryRunner.query(`
      CREATE TABLE error_groups (
        id bigserial PRIMARY KEY,
        project_id integer NOT NULL REFERENCES error_projects (id) ON DELETE CASCADE,
        fingerprint bytea NOT NULL,
        merged_into_id bigint REFERENCES error_groups (id),
        type text,
        message text NOT NULL,
        level text NOT NULL,
        status text NOT NULL DEFAULT 'unresolved' CHECK (status IN ('unresolved', 'resolved', 'ignored', 'merged')),
        resolved_at timestamptz,
        resolved_release text,
        occurrence_count bigint NOT NULL DEFAULT 0,
        first_seen timestamptz NOT NULL,
        last_seen timestamptz NOT NULL,
        last_event_id uuid,
        last_release text,
        UNIQUE (project_id, fingerprint)
      ) WITH (fillfactor = 80)`);
    // The errors query: newest first within a project. No index covers the columns each event
    // updates (counts, times, latest event), so those updates stay HOT (room is left on each page).
    await queryRunner.query('CREATE INDEX error_groups_listing_idx ON error_groups (project_id, id DESC)');
    await queryRunner.query(`
      CREATE TABLE error_events (
        project_id integer NOT NULL,
        event_id uuid NOT NULL,
        group_id bigint NOT NULL,
        received_at timestamptz NOT NULL DEFAULT now(),
        occurred_at timestamptz NOT NULL,
        level text NOT NULL,
        environment text,
        release text,
        message text NOT NULL,
        frames jsonb,
        PRIMARY KEY (project_id, event_id)
      )`);
    await queryRunner.query('CREATE INDEX error_events_group_idx ON error_events (group_id, occurred_at DESC)');
    await queryRunner.query('CREATE INDEX error_events_received_idx ON error_events (received_at)');
    await queryRunner.query(`
      CREATE TABLE error_releases (
        project_id integer NOT NULL,
        version text NOT NULL,
        first_seen timestamptz NOT NULL DEFAULT clock_timestamp(),
        PRIMARY KEY (project_id, version)
      )`);
    await queryRunner.query(`
      CREATE TABLE slos (
        id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
        number bigserial UNIQUE,
        project_id integer NOT NULL REFERENCES error_projects (id) ON DELETE CASCADE,
        name text NOT NULL,
        service text NOT NULL,
        target_percentage double precision NOT NULL CHECK (target_percentage > 0 AND target_percentage < 100),
        window_days integer NOT NULL DEFAULT 30 CHECK (window_days BETWEEN 1 AND 90),
        error_budget_alert_threshold double precision NOT NULL DEFAULT 0.25 CHECK (error_budget_alert_threshold BETWEEN 0 AND 1),
        created_at timestamptz NOT NULL DEFAULT now(),
        updated_at timestamptz NOT NULL DEFAULT now()
      )`);
    await queryRunner.query('CREATE INDEX slos_project_idx ON slos (project_id)');
    await queryRunner.query(`
      CREATE TABLE incidents (
        id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
        number bigserial UNIQUE,
        project_id integer NOT NULL REFERENCES error_projects (id) ON DELETE CASCADE,
        title text NOT NULL,
        description text NOT NULL DEFAULT '',
        severity text NOT NULL,
        status text NOT NULL DEFAULT 'triggered',
        service text NOT NULL,
        runbook_url text,
        cause_kind text NOT NULL DEFAULT 'manual',
        cause_id text,
        assignee_name text,
        assignee_email text,
        alert_count integer NOT NULL DEFAULT 0,
        alert_types text[] NOT NULL DEFAULT '{}',
        last_alert_at timestamptz,
        created_at timestamptz NOT NULL DEFAULT now(),
        created_by text NOT NULL,
        updated_at timestamptz NOT NULL DEFAULT now(),
        acknowledged_at timestamptz,
        acknowledged_by text,
        resolved_at timestamptz,
        resolved_by text
      )`);
    await queryRunner.query('CREATE INDEX incidents_listing_idx ON incidents (project_id, number DESC)');
    // One open incident per automatic cause: a second alert adds to the first.
    await queryRunner.query(`
      CREATE UNIQUE INDEX incidents_open_cause_idx ON incidents (cause_kind, cause_id)
      WHERE status <> 'resolved' AND cause_kind <> 'manual'`);
    // What Plinth serves, per service and minute (src/platform/request-outcomes.ts), and what
    // services report themselves: the SLOs' good and bad events.
    await queryRunner.query(`
      CREATE TABLE request_outcomes (
        service text NOT NULL,
        minute timestamptz NOT NULL,
        good bigint NOT NULL DEFAULT 0,
        bad bigint NOT NULL DEFAULT 0,
        PRIMARY KEY (service, minute)
      )`);
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    for (const table of ['request_outcomes', 'incidents', 'slos', 'error_releases', 'error_events', 'error_groups', 'error_tokens', 'error_projects']) {
      await queryRunner.query(`DROP TABLE ${table}`);
    }
  }
}
