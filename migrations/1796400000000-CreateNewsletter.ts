import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * The newsletter (spec 3 §2.2): subscribers (double opt-in), the mails sent or
 * scheduled for each (confirmation, welcome series), the bi-weekly issues with one row per issue
 * and recipient (the unique key that makes a resumed send neither skip nor double anyone), and
 * the due times of the scheduled tasks, claimed by one process at a time.
 */
export class CreateNewsletter1796400000000 implements MigrationInterface {
  name = 'CreateNewsletter1796400000000';

  async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`
      CREATE TABLE newsletter_subscribers (
        id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
        email text NOT NULL UNIQUE CHECK (email = lower(email)),
        name text,
        source text,
        is_verified boolean NOT NULL DEFAULT false,
        status text NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'active', 'unsubscribed')),
        subscribed_at timestamptz,
        unsubscribed_at timestamptz,
        created_at timestamptz NOT NULL DEFAULT now(),
        updated_at timestamptz NOT NULL DEFAULT now(),
        verification_expires_at timestamptz NOT NULL,
        confirmations_sent integer NOT NULL DEFAULT 1
      )`);
    await queryRunner.query('CREATE INDEX newsletter_subscribers_status_idx ON newsletter_subscribers (status, created_at)');
    await queryRunner.query('CREATE INDEX newsletter_subscribers_unverified_idx ON newsletter_subscribers (verification_expires_at) WHERE NOT is_verified');
    await queryRunner.query(`
      CREATE TABLE newsletter_mails (
        id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
        subscriber_id uuid NOT NULL REFERENCES newsletter_subscribers (id) ON DELETE CASCADE,
        template text NOT NULL,
        status text NOT NULL CHECK (status IN ('queued', 'scheduled', 'sending', 'sent', 'cancelled')),
        due_at timestamptz NOT NULL DEFAULT now(),
        sent_at timestamptz,
        job_id uuid,
        created_at timestamptz NOT NULL DEFAULT now()
      )`);
    await queryRunner.query('CREATE INDEX newsletter_mails_subscriber_idx ON newsletter_mails (subscriber_id, created_at)');
    await queryRunner.query(`
      CREATE TABLE newsletter_issues (
        id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
        issue_number integer NOT NULL UNIQUE CHECK (issue_number > 0),
        variables jsonb NOT NULL,
        status text NOT NULL CHECK (status IN ('sending', 'sent')),
        recipients integer NOT NULL,
        requested_by text NOT NULL,
        created_at timestamptz NOT NULL DEFAULT now(),
        completed_at timestamptz
      )`);
    await queryRunner.query(`
      CREATE TABLE newsletter_issue_recipients (
        issue_id uuid NOT NULL REFERENCES newsletter_issues (id) ON DELETE CASCADE,
        subscriber_id uuid NOT NULL REFERENCES newsletter_subscribers (id) ON DELETE CASCADE,
        status text NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'sending', 'sent', 'skipped', 'failed')),
        attempts integer NOT NULL DEFAULT 0,
        claimed_at timestamptz,
        sent_at timestamptz,
        error text,
        PRIMARY KEY (issue_id, subscriber_id)
      )`);
    await queryRunner.query(
      "CREATE INDEX newsletter_issue_recipients_open_idx ON newsletter_issue_recipients (issue_id, subscriber_id) WHERE status IN ('pending', 'sending')",
    );
    await queryRunner.query('CREATE INDEX newsletter_issue_recipients_subscriber_idx ON newsletter_issue_recipients (subscriber_id)');
    await queryRunner.query(`
      CREATE TABLE newsletter_schedule (
        task text PRIMARY KEY,
        next_run_at timestamptz NOT NULL
      )`);
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query('DROP TABLE newsletter_schedule');
    await queryRunner.query('DROP TABLE newsletter_issue_recipients');
    await queryRunner.query('DROP TABLE newsletter_issues');
    await queryRunner.query('DROP TABLE newsletter_mails');
    await queryRunner.query('DROP TABLE newsletter_subscribers');
  }
}
