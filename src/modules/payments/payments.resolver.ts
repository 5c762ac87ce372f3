import { GraphQLError } from 'graphql';
import { UUIDResolver } from 'graphql-scalars';
import { Arg, Authorized, Ctx, Int, Mutation, Query, Resolver } from 'type-graphql';
import type { GraphQLContext } from '../../graphql/context';
import { ChecksOwnText } from '../../graphql/input-text';
import type { PaymentsServices } from '.';
import { Payment, PaymentInput, PaymentOutput, PROCESS_PAYMENT_ROLES } from './payments.types';

/** Longest page of a list query. */
export const MAX_PAGE = 100;

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
  processPayment(@Arg('input', () => PaymentInput) input: PaymentInput, @Ctx() context: GraphQLContext): Promise<PaymentOutput> {
    return this.services.payments.processPayment(input, context.session, context.idempotencyKey);
  }

  @Authorized()
  @Query(() => [Payment], { description: "Payments, newest first: the caller's own; an admin sees everyone's (or customer_id's)" })
  payments(
    @Ctx() context: GraphQLContext,
    @Arg('customer_id', () => UUIDResolver, { nullable: true, description: 'Admin only: one customer' }) customerId: string | null,
    @Arg('first', () => Int, { defaultValue: 50, description: `1 to ${MAX_PAGE}` }) first: number,
  ): Promise<Payment[]> {
    return this.services.payments.list(context.session, customerId, page(first));
  }
}

/** A page size in range, or a BAD_USER_INPUT error. */
export function page(first: number): number {
  if (first < 1 || first > MAX_PAGE) throw new GraphQLError(`first must be between 1 and ${MAX_PAGE}`, { extensions: { code: 'BAD_USER_INPUT' } });
  return first;
}
