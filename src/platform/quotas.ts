import type { FastifyReply } from 'fastify';
import { GraphQLError } from 'graphql';
import type { GraphQLContext } from '../graphql/context';
import { ADMIN_ROLE, type Session } from '../http/session';
import { RateLimitExceeded, rateLimitCaller, sendRateLimited, type RateLimitCaller, type RateLimitRule, type RateLimits } from './rate-limits';

/**
 * Quotas on what users create: one point per request in a window, per user id (else client
 * address, as rateLimitCaller tells them), kept by the server's rate limits (RATE_LIMIT_<NAME>_*).
 * The admin role is never counted, as Hasura applies no API limit to it: the admin secret is the
 * operator's.
 */
export type QuotaName = 'uploads' | 'reports' | 'checkouts';

/** What a quota counts, in its refusal's message. */
const COUNTED: Record<QuotaName, string> = {
  uploads: 'uploads',
  reports: 'report requests',
  checkouts: 'checkouts and payments',
};

/** A quota's refusal: a rate limit's, with a message that says which quota and how large it is. */
export class QuotaExceeded extends RateLimitExceeded {
  constructor(name: QuotaName, rule: RateLimitRule, retryAfterSeconds: number) {
    super(name, retryAfterSeconds);
    this.name = 'QuotaExceeded';
    this.message = `Too many ${COUNTED[name]}: at most ${rule.points} per ${windowText(rule.durationSeconds)} for each user; try again in ${retryAfterSeconds} s`;
  }
}

function windowText(seconds: number): string {
  for (const [unit, length] of [['day', 86_400], ['hour', 3600], ['minute', 60]] as const) {
    if (seconds % length === 0) return seconds === length ? unit : `${seconds / length} ${unit}s`;
  }
  return `${seconds} s`;
}

/** Takes one point of the quota for the caller (the session's user, else its address); throws QuotaExceeded when none is left. */
export async function takeQuota(rateLimits: RateLimits, name: QuotaName, session: Session, caller: RateLimitCaller): Promise<void> {
  if (session.role === ADMIN_ROLE) return;
  const limiter = rateLimits.get(name);
  try {
    await limiter.consume(caller);
  } catch (error) {
    if (!(error instanceof RateLimitExceeded)) throw error;
    throw new QuotaExceeded(name, limiter.rule, error.retryAfterSeconds);
  }
}

/**
 * For resolvers: the quota's point, or a GraphQLError with extensions.code RATE_LIMITED and
 * retryAfter (seconds), or BAD_REQUEST for a named address that is not one (as enforceRateLimit).
 */
export async function enforceQuota(context: GraphQLContext, name: QuotaName): Promise<void> {
  const caller = rateLimitCaller(context.session, context.clientIp, context.requestHeaders);
  if ('error' in caller) throw new GraphQLError(caller.error, { extensions: { code: 'BAD_REQUEST' } });
  try {
    await takeQuota(context.rateLimits, name, context.session, caller);
  } catch (error) {
    if (!(error instanceof QuotaExceeded)) throw error;
    throw new GraphQLError(error.message, { extensions: { code: 'RATE_LIMITED', retryAfter: error.retryAfterSeconds } });
  }
}

/** For routes: takes the quota's point; past it, answers 429 with Retry-After (in the route's format) and returns false. */
export async function admitQuota(reply: FastifyReply, rateLimits: RateLimits, name: QuotaName, session: Session, caller: RateLimitCaller): Promise<boolean> {
  try {
    await takeQuota(rateLimits, name, session, caller);
    return true;
  } catch (error) {
    if (!(error instanceof QuotaExceeded)) throw error;
    sendRateLimited(reply, error);
    return false;
  }
}

/**
 * Things held at once per key (connections or subscriptions per user), counted in this process,
 * for what this process itself holds. A key whose count falls to zero is forgotten, so the map
 * holds only the keys with something open.
 */
export class ConcurrentCounts {
  private readonly counts = new Map<string, number>();

  constructor(readonly max: number) {}

  /** Takes one for `key`; false, taking nothing, when it already holds `max`. */
  acquire(key: string): boolean {
    const held = this.counts.get(key) ?? 0;
    if (held >= this.max) return false;
    this.counts.set(key, held + 1);
    return true;
  }

  release(key: string, count = 1): void {
    const left = (this.counts.get(key) ?? 0) - count;
    if (left > 0) this.counts.set(key, left);
    else this.counts.delete(key);
  }
}
