import { Refusal } from '../common/refusal';
import { takeQuota, type QuotaName } from '../platform/quotas';
import { rateLimitCaller, type RateLimitCaller, type RateLimitName } from '../platform/rate-limits';
import type { GraphQLContext } from './context';

/** Who a GraphQL request counts as (rateLimitCaller); a named address that is not one is refused. */
export function graphqlCaller(context: GraphQLContext): RateLimitCaller {
  const caller = rateLimitCaller(context.session, context.clientIp, context.requestHeaders);
  if ('error' in caller) throw new Refusal('BAD_REQUEST', caller.error, 400);
  return caller;
}

/** For resolvers: takes a point of the named limit for the caller; past it the field fails with RATE_LIMITED and retryAfter. */
export async function enforceRateLimit(context: GraphQLContext, name: RateLimitName): Promise<void> {
  await context.rateLimits.get(name).consume(graphqlCaller(context));
}

/** For resolvers: the quota's point for the caller (graphqlCaller), as enforceRateLimit. */
export async function enforceQuota(context: GraphQLContext, name: QuotaName): Promise<void> {
  await takeQuota(context.rateLimits, name, context.session, graphqlCaller(context));
}
