import { isTooManyRequests, tooManyRequests } from '../common/refusal';
import { ADMIN_ROLE } from '../common/roles';
import { type Session } from './session';
import type { RateLimitCaller, RateLimits } from './rate-limits';

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

function windowText(seconds: number): string {
  for (const [unit, length] of [
    ['day', 86_400],
    ['hour', 3600],
    ['minute', 60],
  ] as const) {
    if (seconds % length === 0) return seconds === length ? unit : `${seconds / length} ${unit}s`;
  }
  return `${seconds} s`;
}

/**
 * Takes one point of the quota for the caller (the session's user, else its address); past it, a
 * limit's refusal (429, RATE_LIMITED) whose message says which quota and how large it is.
 */
export async function takeQuota(rateLimits: RateLimits, name: QuotaName, session: Session, caller: RateLimitCaller): Promise<void> {
  if (session.role === ADMIN_ROLE) return;
  const limiter = rateLimits.get(name);
  try {
    await limiter.consume(caller);
  } catch (error) {
    if (!isTooManyRequests(error)) throw error;
    const { points, durationSeconds } = limiter.rule;
    const seconds = error.retryAfterSeconds;
    throw tooManyRequests(seconds, `Too many ${COUNTED[name]}: at most ${points} per ${windowText(durationSeconds)} for each user; try again in ${seconds} s`);
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
