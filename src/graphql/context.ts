import type { FastifyBaseLogger } from 'fastify';
import type { Session } from '../platform/session';
import type { RateLimits } from '../platform/rate-limits';

/** What every resolver receives: the caller's session, and a logger bound to the request. */
export interface GraphQLContext {
  session: Session;
  requestId: string;
  logger: FastifyBaseLogger;
  /** The client's address (X-Forwarded-For counts only from TRUST_PROXY peers). */
  clientIp: string;
  /** The server's named limits, for enforceRateLimit (graphql/rate-limits.ts). */
  rateLimits: RateLimits;
  /** The request's Idempotency-Key header (HTTP only, never a WebSocket connection's): a retried mutation that honours it has its effect once. */
  idempotencyKey?: string | string[];
  /** The client's request headers (lower-case names), for actions that forward them to their handler. */
  requestHeaders?: Record<string, string | string[] | undefined>;
}
