import { IsInt, IsISO4217CurrencyCode, IsNotEmpty, IsOptional, IsString, IsUUID, Matches, MaxLength, Min } from 'class-validator';
import { DateTimeResolver, UUIDResolver } from 'graphql-scalars';
import { Field, ID, InputType, Int, ObjectType, registerEnumType } from 'type-graphql';
import { FieldError } from '../../common/field-error.types';
import { rule } from '../../common/validation';

/** Where a payment stands (spec 1 §2.2). SUCCEEDED and FAILED are final; the other two end in one of them. */
export enum PaymentStatus {
  SUCCEEDED = 'SUCCEEDED',
  FAILED = 'FAILED',
  REQUIRES_ACTION = 'REQUIRES_ACTION',
  PROCESSING = 'PROCESSING',
}
registerEnumType(PaymentStatus, { name: 'PaymentStatus', description: 'SUCCEEDED and FAILED are final; REQUIRES_ACTION and PROCESSING end in one of them' });

/** processPayment: any signed-in caller (for itself; an admin for anyone). */
export const PROCESS_PAYMENT_ROLES: string[] = [];

@InputType({ description: 'A payment to take now from a saved payment method' })
export class PaymentInput {
  @Field(() => Int, { description: 'Minor currency units (cents), at least 1 and at most PAYMENTS_MAX_AMOUNT' })
  @IsNotEmpty(rule('REQUIRED_FIELD', 'amount is required'))
  @IsInt(rule('INVALID_FORMAT', 'amount must be a whole number of minor currency units (cents)'))
  @Min(1, rule('INVALID_FORMAT', 'amount must be positive'))
  amount!: number;

  @Field({ description: 'ISO 4217 code, such as USD or eur' })
  @IsNotEmpty(rule('REQUIRED_FIELD', 'currency is required'))
  @IsString(rule('INVALID_FORMAT', 'currency must be a string'))
  @IsISO4217CurrencyCode(rule('INVALID_FORMAT', 'currency must be an ISO 4217 code such as USD'))
  currency!: string;

  @Field({ description: "The provider's id of the payment method to charge, such as pm_card_visa" })
  @IsNotEmpty(rule('REQUIRED_FIELD', 'payment_method_id is required'))
  @IsString(rule('INVALID_FORMAT', 'payment_method_id must be a string'))
  @MaxLength(255, rule('INVALID_LENGTH', 'payment_method_id must be at most 255 characters'))
  @Matches(/^[A-Za-z0-9_]+$/, rule('INVALID_FORMAT', 'payment_method_id must be a provider id (letters, digits, _)'))
  payment_method_id!: string;

  @Field(() => UUIDResolver, { description: 'The user charged: the caller itself, or anyone for an admin' })
  @IsNotEmpty(rule('REQUIRED_FIELD', 'customer_id is required'))
  @IsUUID('all', rule('INVALID_FORMAT', 'customer_id must be a UUID'))
  customer_id!: string;

  @Field(() => String, { nullable: true })
  @IsOptional()
  @IsString(rule('INVALID_FORMAT', 'description must be a string'))
  @MaxLength(1000, rule('INVALID_LENGTH', 'description must be at most 1000 characters'))
  description?: string | null;
}

@ObjectType()
export class PaymentOutput {
  @Field({ description: 'True when the payment succeeded or is processing without the customer; false otherwise (status and error_code say why)' })
  success!: boolean;

  @Field(() => String, { nullable: true, description: "The provider's id of the payment" })
  payment_intent_id!: string | null;

  @Field(() => PaymentStatus)
  status!: PaymentStatus;

  @Field()
  message!: string;

  @Field(() => String, { nullable: true })
  receipt_url!: string | null;

  @Field(() => String, { nullable: true, description: 'With REQUIRES_ACTION: what the client confirms the payment with (3-D Secure)' })
  client_secret?: string | null;

  @Field(() => [FieldError], { nullable: true })
  errors?: FieldError[] | null;

  /** Overall failure code of the handler envelope (spec 1 §2.3); not part of the GraphQL type. */
  error_code?: string;
}

@ObjectType({ description: 'A payment as recorded here' })
export class Payment {
  @Field(() => ID)
  id!: string;

  @Field({ description: 'primary or backup' })
  provider!: string;

  @Field(() => String, { nullable: true, description: "The provider's id of the payment" })
  payment_intent_id!: string | null;

  @Field(() => UUIDResolver, { nullable: true })
  customer_id!: string | null;

  /** Not in the schema: the row filter of a subscription's payload (src/platform/row-filter.ts). */
  source_account_id!: string;

  @Field(() => Int)
  amount!: number;

  @Field()
  currency!: string;

  @Field(() => String, { nullable: true })
  description!: string | null;

  @Field(() => PaymentStatus)
  status!: PaymentStatus;

  @Field(() => String, { nullable: true, description: 'Why it failed, such as CARD_DECLINED' })
  failure_code!: string | null;

  @Field(() => String, { nullable: true })
  failure_message!: string | null;

  @Field(() => String, { nullable: true })
  receipt_url!: string | null;

  @Field(() => DateTimeResolver)
  created_at!: Date;

  @Field(() => DateTimeResolver)
  updated_at!: Date;
}

@ObjectType('BillingSubscription', { description: 'A subscription at either provider' })
export class BillingSubscription {
  @Field(() => ID)
  id!: string;

  @Field({ description: 'primary or backup' })
  provider!: string;

  @Field({ description: "The provider's id" })
  external_id!: string;

  @Field(() => UUIDResolver, { nullable: true })
  customer_id!: string | null;

  @Field(() => String, { nullable: true, description: 'The configured product (pro for PRIMARY_PROVIDER_PRICE_ID_PRO)' })
  product!: string | null;

  @Field({ description: 'active, trialing, past_due, paused, unpaid, incomplete, canceled or expired' })
  status!: string;

  @Field(() => DateTimeResolver, { nullable: true })
  current_period_end!: Date | null;

  @Field(() => DateTimeResolver)
  created_at!: Date;

  @Field(() => DateTimeResolver)
  updated_at!: Date;
}

@ObjectType({ description: 'A license a purchase granted' })
export class License {
  @Field(() => ID)
  id!: string;

  @Field()
  key!: string;

  @Field(() => String, { nullable: true })
  product!: string | null;

  @Field(() => UUIDResolver, { nullable: true })
  customer_id!: string | null;

  @Field({ description: 'The provider that sold it' })
  provider!: string;

  @Field({ description: 'active, canceled (no renewal; usable until expires_at) or expired' })
  status!: string;

  @Field(() => Int)
  activation_limit!: number;

  @Field(() => Int)
  activation_count!: number;

  @Field(() => DateTimeResolver, { nullable: true, description: 'When it renews next; null when it does not renew' })
  renewal_date!: Date | null;

  @Field(() => DateTimeResolver, { nullable: true })
  expires_at!: Date | null;

  @Field(() => DateTimeResolver)
  created_at!: Date;
}

@ObjectType()
export class LicenseActivationOutput {
  @Field()
  success!: boolean;

  @Field()
  message!: string;

  @Field(() => License, { nullable: true })
  license?: License | null;

  @Field(() => String, { nullable: true, description: 'Why it failed: LICENSE_NOT_FOUND, LICENSE_INACTIVE, ACTIVATION_LIMIT_REACHED, VALIDATION_ERROR' })
  error_code?: string | null;

  @Field(() => [FieldError], { nullable: true })
  errors?: FieldError[] | null;
}

/** activateLicense's arguments, checked as the service checks every input. */
export class LicenseActivationInput {
  @IsNotEmpty(rule('REQUIRED_FIELD', 'key is required'))
  @IsString(rule('INVALID_FORMAT', 'key must be a string'))
  @MaxLength(100, rule('INVALID_LENGTH', 'key must be at most 100 characters'))
  key!: string;

  @IsNotEmpty(rule('REQUIRED_FIELD', 'instance is required'))
  @IsString(rule('INVALID_FORMAT', 'instance must be a string'))
  @MaxLength(200, rule('INVALID_LENGTH', 'instance must be at most 200 characters'))
  instance!: string;
}
