import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Report jobs (generateReport): the request, its state and progress, and where the result is.
 * The pg-boss job that runs it is named by queue_job_id; this row is what clients see.
 */
export class CreateReportJobs1796500000002 implements MigrationInterface {
  name = 'CreateReportJobs1796500000002';

  async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`CREATE TYPE report_status AS ENUM ('QUEUED', 'RUNNING', 'COMPLETED', 'FAILED', 'CANCELLED')`);
    await queryRunner.query(`
      CREATE TABLE report_jobs (
        id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
        requested_by text,
        input jsonb NOT NULL,
        status report_status NOT NULL DEFAULT 'QUEUED',
        queue_job_id uuid,
        estimated_rows bigint NOT NULL,
        estimated_duration integer NOT NULL,
        total_rows bigint,
        rows_written bigint NOT NULL DEFAULT 0,
        attempts integer NOT NULL DEFAULT 0,
        storage_key text,
        result_size bigint,
        error text,
        created_at timestamptz NOT NULL DEFAULT now(),
        started_at timestamptz,
        finished_at timestamptz
      )`);
    await queryRunner.query('CREATE INDEX report_jobs_requested_by_idx ON report_jobs (requested_by, created_at)');
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query('DROP TABLE report_jobs');
    await queryRunner.query('DROP TYPE report_status');
  }
}
