import { Column, Entity, PrimaryGeneratedColumn } from 'typeorm';
import type { PaymentProviderName } from '../../config';
import type { PaymentStatus } from './payments.types';

/** One payment (processPayment); a retried call with the same idempotency key is the same row. */
@Entity('payments')
export class PaymentRecord {
  @PrimaryGeneratedColumn('uuid')
  id!: string;

  @Column('text')
  provider!: PaymentProviderName;

  @Column('text', { name: 'provider_payment_id', nullable: true })
  providerPaymentId!: string | null;

  @Column('text', { name: 'idempotency_key' })
  idempotencyKey!: string;

  @Column('uuid', { name: 'customer_user_id', nullable: true })
  customerUserId!: string | null;

  /** Set by the database from the customer (migration RowSourceAccounts): the admin row filter's column. */
  @Column({ type: 'text', name: 'source_account_id', insert: false, update: false })
  sourceAccountId!: string;

  /** bigint: the driver returns it as text. */
  @Column('bigint', { transformer: { to: (value: number) => value, from: (value: string) => Number(value) } })
  amount!: number;

  @Column('text')
  currency!: string;

  @Column('text', { nullable: true })
  description!: string | null;

  @Column('text')
  status!: PaymentStatus;

  @Column('text', { name: 'failure_code', nullable: true })
  failureCode!: string | null;

  @Column('text', { name: 'failure_message', nullable: true })
  failureMessage!: string | null;

  @Column('text', { name: 'receipt_url', nullable: true })
  receiptUrl!: string | null;

  @Column('timestamptz', { name: 'created_at' })
  createdAt!: Date;

  @Column('timestamptz', { name: 'updated_at' })
  updatedAt!: Date;
}
