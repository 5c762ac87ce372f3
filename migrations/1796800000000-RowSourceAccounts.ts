import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * The source account of each user-owned row, for role admin's row filter (spec 2 §2.3; see
 * src/platform/row-filter.ts). A row takes the account its insert names, else its owner's
 * (users.source_account_id), else `primary`; a row whose owner changes (a payment recorded from a
 * webhook before its customer was known) follows its new owner. Asynchronous action calls keep
 * their caller's session variables, so theirs is derived from those.
 */
const OWNED_TABLES: [table: string, owner: string][] = [
  ['files', 'owner_id'],
  ['report_jobs', 'requested_by'],
  ['payments', 'customer_user_id'],
  ['subscriptions', 'customer_user_id'],
  ['licenses', 'customer_user_id'],
];

/** The trigger function's body as this migration made it (RowSourceAccountLookup replaces it, and restores it when reverted). */
export const ROW_SOURCE_ACCOUNT_BODY = `
      BEGIN
        IF TG_OP = 'INSERT' AND NEW.source_account_id IS NOT NULL THEN RETURN NEW; END IF;
        IF TG_OP = 'UPDATE' AND (to_jsonb(NEW) ->> TG_ARGV[0]) IS NOT DISTINCT FROM (to_jsonb(OLD) ->> TG_ARGV[0]) THEN RETURN NEW; END IF;
        NEW.source_account_id := COALESCE(
          (SELECT u.source_account_id FROM users u WHERE u.id::text = to_jsonb(NEW) ->> TG_ARGV[0]),
          NEW.source_account_id,
          'primary');
        RETURN NEW;
      END `;

export class RowSourceAccounts1796800000000 implements MigrationInterface {
  name = 'RowSourceAccounts1796800000000';

  async up(queryRunner: QueryRunner): Promise<void> {
    // TG_ARGV[0] names the owner column, so one function serves every table.
    await queryRunner.query(`CREATE FUNCTION row_source_account() RETURNS trigger LANGUAGE plpgsql AS $$${ROW_SOURCE_ACCOUNT_BODY}$$`);
    for (const [table, owner] of OWNED_TABLES) {
      await queryRunner.query(`ALTER TABLE ${table} ADD COLUMN source_account_id text`);
      await queryRunner.query(
        `UPDATE ${table} t SET source_account_id = COALESCE((SELECT u.source_account_id FROM users u WHERE u.id::text = t.${owner}::text), 'primary')`,
      );
      await queryRunner.query(`ALTER TABLE ${table} ALTER COLUMN source_account_id SET NOT NULL`);
      await queryRunner.query(
        `CREATE TRIGGER ${table}_source_account BEFORE INSERT OR UPDATE OF ${owner} ON ${table} FOR EACH ROW EXECUTE FUNCTION row_source_account('${owner}')`,
      );
    }
    await queryRunner.query(`
      ALTER TABLE action_log
        ADD COLUMN user_id text GENERATED ALWAYS AS (session_variables ->> 'x-gql-user-id') STORED,
        ADD COLUMN source_account_id text GENERATED ALWAYS AS (COALESCE(session_variables ->> 'x-gql-source-account-id', 'primary')) STORED`);
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query('ALTER TABLE action_log DROP COLUMN source_account_id, DROP COLUMN user_id');
    for (const [table] of OWNED_TABLES) {
      await queryRunner.query(`DROP TRIGGER ${table}_source_account ON ${table}`);
      await queryRunner.query(`ALTER TABLE ${table} DROP COLUMN source_account_id`);
    }
    await queryRunner.query('DROP FUNCTION row_source_account()');
  }
}
