import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * The admin dashboard's deployment runs (spec 3 §4.3): who started which environment's command,
 * when it ended and how, and its output, so the history survives a restart. At most one run is
 * `running` at a time across every instance (the partial unique index); `heartbeat_at`, `host` and
 * `pid` tell a run whose process died (kill -9, a crash) from a live one: it shows as interrupted.
 * And the plugins' syncs (POST /api/plugins/{name}/sync): each one's outcome.
 */
export class AdminDeployRunsPluginSyncs1797330000000 implements MigrationInterface {
  name = 'AdminDeployRunsPluginSyncs1797330000000';

  async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`
      CREATE TABLE admin_deploy_runs (
        id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        environment text NOT NULL,
        command text NOT NULL,
        status text NOT NULL DEFAULT 'running'
          CHECK (status IN ('running', 'succeeded', 'failed', 'timed-out', 'interrupted')),
        exit_code integer,
        signal text,
        started_by text NOT NULL,
        started_at timestamptz NOT NULL DEFAULT now(),
        ended_at timestamptz,
        heartbeat_at timestamptz NOT NULL DEFAULT now(),
        host text NOT NULL,
        pid integer NOT NULL,
        -- Its output: [stream, text] pairs (stdout, stderr, or plinth's own lines), its last lines when long.
        output jsonb NOT NULL DEFAULT '[]'
      )`);
    await queryRunner.query(`CREATE UNIQUE INDEX admin_deploy_runs_one_running ON admin_deploy_runs ((true)) WHERE status = 'running'`);
    await queryRunner.query('CREATE INDEX admin_deploy_runs_started_at ON admin_deploy_runs (started_at DESC)');
    await queryRunner.query(`
      CREATE TABLE admin_plugin_syncs (
        id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        plugin text NOT NULL,
        synced_by text NOT NULL,
        synced_at timestamptz NOT NULL DEFAULT now(),
        ok boolean NOT NULL,
        routes integer,
        endpoint text,
        http_status integer,
        duration_ms integer NOT NULL,
        message text NOT NULL
      )`);
    await queryRunner.query('CREATE INDEX admin_plugin_syncs_plugin ON admin_plugin_syncs (plugin, synced_at DESC)');
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query('DROP TABLE admin_plugin_syncs');
    await queryRunner.query('DROP TABLE admin_deploy_runs');
  }
}
