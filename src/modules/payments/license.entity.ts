import { Column, Entity, PrimaryGeneratedColumn } from 'typeorm';
import type { PaymentProviderName } from '../../config';

/** What a license may be: active, canceled (no renewal; valid until expires_at), expired. */
export type LicenseStatus = 'active' | 'canceled' | 'expired';

/**
 * A license a purchase grants: one per primary subscription, one per backup order (a backup
 * subscription's events name its order, so they update the same license).
 */
@Entity('licenses')
export class LicenseRecord {
  @PrimaryGeneratedColumn('uuid')
  id!: string;

  @Column('text', { name: 'license_key' })
  licenseKey!: string;

  @Column('text', { nullable: true })
  product!: string | null;

  @Column('uuid', { name: 'customer_user_id', nullable: true })
  customerUserId!: string | null;

  @Column('text')
  provider!: PaymentProviderName;

  /** The provider's id of what sold it: a primary subscription, or a backup order. */
  @Column('text', { name: 'source_id' })
  sourceId!: string;

  @Column('uuid', { name: 'subscription_id', nullable: true })
  subscriptionId!: string | null;

  @Column('text')
  status!: LicenseStatus;

  @Column('integer', { name: 'activation_limit' })
  activationLimit!: number;

  @Column('integer', { name: 'activation_count' })
  activationCount!: number;

  /** When its subscription renews next; null when it does not renew. */
  @Column('timestamptz', { name: 'renewal_date', nullable: true })
  renewalDate!: Date | null;

  /** The end of a canceled license's paid time; null while it is not ending. */
  @Column('timestamptz', { name: 'expires_at', nullable: true })
  expiresAt!: Date | null;

  @Column('timestamptz', { name: 'created_at' })
  createdAt!: Date;

  @Column('timestamptz', { name: 'updated_at' })
  updatedAt!: Date;
}
