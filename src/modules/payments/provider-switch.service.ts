import type { DataSource } from 'typeorm';
import type { PaymentProviderName, PaymentsConfig } from '../../config';

export interface ProviderState {
  /** The provider new payments and checkouts use. */
  active: PaymentProviderName;
  /** The stored selection. */
  persisted: PaymentProviderName;
  primary_configured: boolean;
  backup_configured: boolean;
}

export type SwitchResult =
  { previous: PaymentProviderName; active: PaymentProviderName; message: string } | { error: 'BACKUP_NOT_CONFIGURED'; message: string };

/**
 * The active payment provider (spec 3 §2.1, §3). The selection is one row in PostgreSQL, read on
 * every use, so a switch is seen by every instance at once and survives restarts;
 * PAYMENT_PROVIDER only seeds it. A stored `backup` whose settings have since gone is not used:
 * the active provider is then primary, and `persisted` still says backup.
 */
export class ProviderSwitch {
  constructor(
    private readonly dataSource: DataSource,
    private readonly settings: PaymentsConfig,
  ) {}

  /** Stores PAYMENT_PROVIDER as the selection unless one is stored already. */
  async seed(): Promise<void> {
    await this.dataSource.query('INSERT INTO payment_provider_state (id, provider) VALUES (true, $1) ON CONFLICT (id) DO NOTHING', [
      this.settings.initialProvider,
    ]);
  }

  get primaryConfigured(): boolean {
    return Boolean(this.settings.primary.apiKey && this.settings.primary.webhookSecret);
  }

  /** The three settings spec 3 §2.1 requires of the backup provider that are missing. */
  get missingBackupSettings(): string[] {
    const { apiKey, storeId, webhookSecret } = this.settings.backup;
    return [
      ...(apiKey ? [] : ['BACKUP_PROVIDER_API_KEY']),
      ...(storeId ? [] : ['BACKUP_PROVIDER_STORE_ID']),
      ...(webhookSecret ? [] : ['BACKUP_PROVIDER_WEBHOOK_SECRET']),
    ];
  }

  get backupConfigured(): boolean {
    return this.missingBackupSettings.length === 0;
  }

  /**
   * The active provider as an SQL expression, for statements that read the switch as they write
   * (`backupConfigured` is the parameter holding this.backupConfigured): the same rule as state().
   */
  activeProviderSql(backupConfigured: string): string {
    return `(SELECT CASE WHEN provider = 'backup' AND ${backupConfigured}::boolean THEN 'backup' ELSE 'primary' END FROM payment_provider_state WHERE id)`;
  }

  async state(): Promise<ProviderState> {
    const persisted = await this.persisted();
    const backupConfigured = this.backupConfigured;
    return {
      active: persisted === 'backup' && backupConfigured ? 'backup' : 'primary',
      persisted,
      primary_configured: this.primaryConfigured,
      backup_configured: backupConfigured,
    };
  }

  async active(): Promise<PaymentProviderName> {
    return (await this.state()).active;
  }

  /** Stores a new selection; switching to an incomplete backup changes nothing. */
  async switchTo(provider: PaymentProviderName): Promise<SwitchResult> {
    const missing = this.missingBackupSettings;
    if (provider === 'backup' && missing.length > 0) {
      return { error: 'BACKUP_NOT_CONFIGURED', message: `The backup provider is not fully configured: ${missing.join(', ')} missing` };
    }
    const backupConfigured = missing.length === 0;
    // One statement: the row is locked, so of two switches at once each sees the other's result.
    const [row] = (await this.dataSource.query(
      `WITH old AS (SELECT provider FROM payment_provider_state WHERE id FOR UPDATE),
            changed AS (UPDATE payment_provider_state SET provider = $1, updated_at = now() WHERE id RETURNING provider)
       SELECT old.provider AS previous FROM old, changed`,
      [provider],
    )) as { previous: PaymentProviderName }[];
    // The provider active before: a stored backup without its settings was primary in effect.
    const previous = row.previous === 'backup' && backupConfigured ? 'backup' : 'primary';
    const message =
      previous === provider
        ? `The ${provider} provider was already active`
        : `New payments and checkouts now use the ${provider} provider; subscriptions at the other provider keep renewing there`;
    return { previous, active: provider, message };
  }

  private async persisted(): Promise<PaymentProviderName> {
    const rows = (await this.dataSource.query('SELECT provider FROM payment_provider_state WHERE id')) as { provider: PaymentProviderName }[];
    return rows[0]?.provider ?? this.settings.initialProvider;
  }
}
