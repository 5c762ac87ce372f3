import { GraphQLError } from 'graphql';
import { UUIDResolver } from 'graphql-scalars';
import { Arg, Authorized, Ctx, Int, Mutation, Query, Resolver, Root, Subscription } from 'type-graphql';
import type { GraphQLContext } from '../../graphql/context';
import { ChecksOwnText } from '../../graphql/input-text';
import { EVERY_ROLE } from '../../common/roles';
import { enforceQuota } from '../../graphql/rate-limits';
import { rowVisible } from '../../platform/row-filter';
import { CUSTOMER_ROWS } from './billing.service';
import type { PaymentsServices } from './payments.services';
import { paymentTopic } from './payments.service';
import { License, LicenseActivationOutput, Payment, PaymentInput, PaymentOutput, PROCESS_PAYMENT_ROLES, BillingSubscription } from './payments.types';

/** Longest page of a list query. */
export const MAX_PAGE = 100;

const customerArg = { nullable: true, description: 'Admin only: one customer (others always see their own)' } as const;
const firstArg = { defaultValue: 50, description: `1 to ${MAX_PAGE}` } as const;

@Resolver()
export class PaymentsResolver {
  constructor(private readonly services: PaymentsServices) {}

  @Authorized(PROCESS_PAYMENT_ROLES)
  @ChecksOwnText()
  @Mutation(() => PaymentOutput, {
    description:
      'Charges a saved payment method at the active provider. Send an Idempotency-Key header to make retries safe: ' +
      'a retried call with the same key charges once and answers the same payment. Failures come back as success=false',
  })
  async processPayment(@Arg('input', () => PaymentInput) input: PaymentInput, @Ctx() context: GraphQLContext): Promise<PaymentOutput> {
    await enforceQuota(context, 'checkouts');
    return this.services.payments.processPayment(input, context.session, context.idempotencyKey);
  }

  @Authorized(EVERY_ROLE)
  @ChecksOwnText()
  @Mutation(() => LicenseActivationOutput, {
    description:
      'Activates a license key on one instance (a machine or installation), within its activation limit; activating the same instance again counts once',
  })
  activateLicense(@Arg('key') key: string, @Arg('instance') instance: string): Promise<LicenseActivationOutput> {
    return this.services.billing.activateLicense(key, instance);
  }

  @Authorized()
  @Query(() => [Payment], { description: "Payments, newest first: the caller's own; an admin sees everyone's (or customer_id's)" })
  payments(
    @Ctx() context: GraphQLContext,
    @Arg('customer_id', () => UUIDResolver, customerArg) customerId: string | null,
    @Arg('first', () => Int, firstArg) first: number,
  ): Promise<Payment[]> {
    return this.services.payments.list(context.session, customerId, page(first));
  }

  @Authorized()
  @Query(() => [BillingSubscription], { description: "Subscriptions at either provider, newest first: the caller's own; an admin sees everyone's" })
  subscriptions(
    @Ctx() context: GraphQLContext,
    @Arg('customer_id', () => UUIDResolver, customerArg) customerId: string | null,
    @Arg('first', () => Int, firstArg) first: number,
  ): Promise<BillingSubscription[]> {
    return this.services.billing.subscriptions(context.session, customerId, page(first));
  }

  @Authorized()
  @Query(() => [License], { description: "Licenses, newest first: the caller's own; an admin sees everyone's" })
  licenses(
    @Ctx() context: GraphQLContext,
    @Arg('customer_id', () => UUIDResolver, customerArg) customerId: string | null,
    @Arg('first', () => Int, firstArg) first: number,
  ): Promise<License[]> {
    return this.services.billing.licenses(context.session, customerId, page(first));
  }

  @Authorized()
  @Subscription(() => Payment, {
    topics: ({ args }) => paymentTopic(String(args.payment_intent_id)),
    // The payment's owner and its source account's admins only.
    filter: ({ payload, context }: { payload: Payment; context: GraphQLContext }) =>
      rowVisible(context.session, CUSTOMER_ROWS, { customer_user_id: payload.customer_id, source_account_id: payload.source_account_id }),
    description: "Each change of one payment's status (its owner and admins)",
  })
  paymentUpdated(@Root() payment: Payment, @Arg('payment_intent_id', { description: "The provider's id of the payment" }) _id: string): Payment {
    return payment;
  }
}

/** A page size in range, or a BAD_USER_INPUT error. */
export function page(first: number): number {
  if (first < 1 || first > MAX_PAGE) throw new GraphQLError(`first must be between 1 and ${MAX_PAGE}`, { extensions: { code: 'BAD_USER_INPUT' } });
  return first;
}
