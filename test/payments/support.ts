import type { TestDatabase } from '../support/database';

export const ADMIN_KEY = 'test-billing-admin-key-0123456789';
export const PRIMARY_WEBHOOK_SECRET = 'whsec_test_primary_0123456789';
export const BACKUP_WEBHOOK_SECRET = 'backup-signing-secret-0123456789';

/** A user row to charge (payments reference users). */
export async function createUser(database: TestDatabase, email: string): Promise<string> {
  const [row] = await database.query<{ id: string }>('INSERT INTO users (email, name) VALUES ($1, $2) RETURNING id', [email, email.split('@')[0]]);
  return row.id;
}

/** The settings of a server whose primary provider is the local one at `primaryUrl`. */
export function paymentSettings(primary: { url: string; apiKey: string }, overrides: Record<string, string> = {}): Record<string, string> {
  return {
    ADMIN_KEY,
    PRIMARY_PROVIDER_API_URL: primary.url,
    PRIMARY_PROVIDER_API_KEY: primary.apiKey,
    PRIMARY_PROVIDER_WEBHOOK_SECRET: PRIMARY_WEBHOOK_SECRET,
    PRIMARY_PROVIDER_PRICE_ID_PRO: 'price_pro_monthly',
    PAYMENTS_PROVIDER_MAX_RETRIES: '0',
    ...overrides,
  };
}
