import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Sign-in with external identity providers: which provider accounts are linked to which user,
 * and the pending sign-ins (the `state` sent to the provider, kept as a hash with the PKCE
 * verifier and where to send the user back; used once, short-lived).
 */
export class OAuthProviders1796700000001 implements MigrationInterface {
  name = 'OAuthProviders1796700000001';

  async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`
      CREATE TABLE auth_user_providers (
        id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
        user_id uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
        provider text NOT NULL,
        provider_user_id text NOT NULL,
        created_at timestamptz NOT NULL DEFAULT now(),
        UNIQUE (provider, provider_user_id),
        UNIQUE (user_id, provider)
      )`);
    await queryRunner.query(`
      CREATE TABLE auth_oauth_states (
        state_hash bytea PRIMARY KEY,
        provider text NOT NULL,
        code_verifier text NOT NULL,
        redirect_to text NOT NULL,
        expires_at timestamptz NOT NULL
      )`);
    await queryRunner.query('CREATE INDEX auth_oauth_states_expires_at_idx ON auth_oauth_states (expires_at)');
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query('DROP TABLE auth_oauth_states');
    await queryRunner.query('DROP TABLE auth_user_providers');
  }
}
