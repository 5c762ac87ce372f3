import { Column, Entity, PrimaryGeneratedColumn } from 'typeorm';
import type { PaymentProviderName } from '../../config';

/** A subscription at either provider, as its webhooks describe it. */
@Entity('subscriptions')
export class SubscriptionRecord {
  @PrimaryGeneratedColumn('uuid')
  id!: string;

  @Column('text')
  provider!: PaymentProviderName;

  /** The provider's id (sub_... at primary, a number at backup). */
  @Column('text', { name: 'external_id' })
  externalId!: string;

  @Column('uuid', { name: 'customer_user_id', nullable: true })
  customerUserId!: string | null;

  @Column('text', { name: 'customer_email', nullable: true })
  customerEmail!: string | null;

  /** The configured product (lower case), when the provider's price or variant is one of ours. */
  @Column('text', { nullable: true })
  product!: string | null;

  @Column('text')
  status!: string;

  @Column('timestamptz', { name: 'current_period_end', nullable: true })
  currentPeriodEnd!: Date | null;

  @Column('timestamptz', { name: 'created_at' })
  createdAt!: Date;

  @Column('timestamptz', { name: 'updated_at' })
  updatedAt!: Date;
}
