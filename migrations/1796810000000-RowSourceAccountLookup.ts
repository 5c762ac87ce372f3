import type { MigrationInterface, QueryRunner } from 'typeorm';
import { ROW_SOURCE_ACCOUNT_BODY } from './1796800000000-RowSourceAccounts';

/**
 * The source-account trigger of user-owned rows (RowSourceAccounts) found the owner by
 * `users.id::text = to_jsonb(NEW) ->> column`: no index serves that, so every insert of a payment,
 * file, report job, subscription or license read every user and converted the new row to JSON once
 * per user read, a cost that grows with the users table. Here the owner is read from the row once
 * and, when it has a user id's form, looked up by primary key. The rows it matches are the same:
 * `id::text` is that lower-case form.
 */
export class RowSourceAccountLookup1796810000000 implements MigrationInterface {
  name = 'RowSourceAccountLookup1796810000000';

  async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`
      CREATE OR REPLACE FUNCTION row_source_account() RETURNS trigger LANGUAGE plpgsql AS $$
      DECLARE
        owner text;
      BEGIN
        IF TG_OP = 'INSERT' AND NEW.source_account_id IS NOT NULL THEN RETURN NEW; END IF;
        owner := to_jsonb(NEW) ->> TG_ARGV[0];
        IF TG_OP = 'UPDATE' AND owner IS NOT DISTINCT FROM (to_jsonb(OLD) ->> TG_ARGV[0]) THEN RETURN NEW; END IF;
        IF owner ~ '^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$' THEN
          NEW.source_account_id := COALESCE((SELECT u.source_account_id FROM users u WHERE u.id = owner::uuid), NEW.source_account_id, 'primary');
        ELSE
          NEW.source_account_id := COALESCE(NEW.source_account_id, 'primary');
        END IF;
        RETURN NEW;
      END $$`);
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`CREATE OR REPLACE FUNCTION row_source_account() RETURNS trigger LANGUAGE plpgsql AS $$${ROW_SOURCE_ACCOUNT_BODY}$$`);
  }
}
