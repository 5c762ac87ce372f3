import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Recurring tasks (platform/recurring.ts): one row per task, `<module>.<task>`, with the time its
 * next run falls due; `id` is the second half of the task's advisory lock key. The newsletter's
 * schedule moves in with its due times, and `newsletter_schedule` stays as a view of those rows
 * (task without the module's prefix), so reading it or moving a task's time still works.
 */
export class RecurringTasks1796900000000 implements MigrationInterface {
  name = 'RecurringTasks1796900000000';

  async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`
      CREATE TABLE recurring_tasks (
        name text PRIMARY KEY,
        id integer GENERATED ALWAYS AS IDENTITY UNIQUE,
        schedule text,
        next_run_at timestamptz NOT NULL,
        started_at timestamptz,
        finished_at timestamptz,
        run_by text,
        last_error text
      )`);
    // Without a schedule: the first start-up keeps these due times and records the schedule.
    await queryRunner.query(`INSERT INTO recurring_tasks (name, next_run_at) SELECT 'newsletter.' || task, next_run_at FROM newsletter_schedule`);
    await queryRunner.query('DROP TABLE newsletter_schedule');
    await queryRunner.query(`
      CREATE VIEW newsletter_schedule AS
      SELECT substr(name, length('newsletter.') + 1) AS task, next_run_at FROM recurring_tasks WHERE starts_with(name, 'newsletter.')`);
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query('DROP VIEW newsletter_schedule');
    await queryRunner.query('CREATE TABLE newsletter_schedule (task text PRIMARY KEY, next_run_at timestamptz NOT NULL)');
    await queryRunner.query(`
      INSERT INTO newsletter_schedule (task, next_run_at)
      SELECT substr(name, length('newsletter.') + 1), next_run_at FROM recurring_tasks WHERE starts_with(name, 'newsletter.')`);
    await queryRunner.query('DROP TABLE recurring_tasks');
  }
}
