import type { FastifyReply, FastifyRequest } from 'fastify';
import { GraphQLError } from 'graphql';
import type pg from 'pg';
import type { Logger } from 'pino';
import { RateLimiterMemory, RateLimiterPostgres, RateLimiterRes, type RateLimiterAbstract } from 'rate-limiter-flexible';
import type { DataSource } from 'typeorm';
import { sha256Hex } from '../common/sha256';
import type { Config } from '../config';
import type { GraphQLContext } from '../graphql/context';

/**
 * What a limit counts by: the client address, the session's user id, or a token the caller
 * presents (an API or DSN key, counted by its hash). Callers without a user id or token are
 * counted by their address.
 */
export type RateLimitKey = 'ip' | 'user' | 'token';

export interface RateLimitRule {
  points: number;
  durationSeconds: number;
  key: RateLimitKey;
}

/** Who is calling, as far as a limit cares. */
export interface RateLimitCaller {
  ip: string;
  userId?: string | null;
  token?: string | null;
}

/** Every named limit of the server; each takes its numbers from src/config. */
export type RateLimitName =
  | 'registration'
  | 'actionHandlers'
  | 'newsletterSubscribe'
  | 'authGlobal'
  | 'authBruteForce'
  | 'authSignups'
  | 'authEmail'
  | 'authMfa'
  | 'authSmsNumber'
  | 'authSmsAddress'
  | 'errorIngest'
  | 'errorApi';

export function rateLimitRules(config: Config): Record<RateLimitName, RateLimitRule> {
  return {
    // Spec 1 §8: the reference handler allows 5 registrations per 60 seconds per user.
    registration: { ...config.rateLimit.registration, key: 'user' },
    // The same reference limiter on every one of Plinth's own handler routes (and in the scaffolded services).
    actionHandlers: { ...config.actionEngine.handlerRateLimit, key: 'user' },
    // Spec 3 §8: 3 subscribe attempts per client address per hour.
    newsletterSubscribe: { ...config.newsletter.subscribeRateLimit, key: 'ip' },
    // The auth service's (AUTH_RATE_LIMIT_*), per client address as Nhost counts them.
    authGlobal: { ...config.auth.rateLimits.global, key: 'ip' },
    authBruteForce: { ...config.auth.rateLimits.bruteForce, key: 'ip' },
    authSignups: { ...config.auth.rateLimits.signups, key: 'ip' },
    authEmail: { ...config.auth.rateLimits.email, key: 'ip' },
    // Second-factor codes per user, whatever the address: a ticket's holder cannot spread guesses.
    authMfa: { ...config.auth.rateLimits.mfa, key: 'user' },
    // SMS sent (they cost money and reach a third party): per phone number (passed as the token) and per address.
    authSmsNumber: { ...config.auth.rateLimits.sms, key: 'token' },
    authSmsAddress: { ...config.auth.rateLimits.smsAddress, key: 'ip' },
    // Spec 2 §8: events per DSN key, and management calls per secret key, per minute.
    errorIngest: { points: config.errors.ingestPerMinute, durationSeconds: 60, key: 'token' },
    errorApi: { points: config.errors.apiPerMinute, durationSeconds: 60, key: 'token' },
  };
}

/** The table of the PostgreSQL store, created by a migration (not by the library). */
const RATE_LIMIT_TABLE = 'rate_limits';

export type RateLimitStore = { kind: 'memory' } | { kind: 'postgres'; pool: pg.Pool };

export class RateLimitExceeded extends Error {
  constructor(
    readonly limit: string,
    /** Whole seconds, rounded up, until the caller may try again. */
    readonly retryAfterSeconds: number,
  ) {
    super(`Too many requests; try again in ${retryAfterSeconds} s`);
    this.name = 'RateLimitExceeded';
  }
}

export interface RateLimiter {
  readonly name: string;
  readonly rule: RateLimitRule;
  /** Takes one point for the caller; rejects with RateLimitExceeded when none is left. */
  consume(caller: RateLimitCaller): Promise<void>;
}

/** Keys stay short enough for the table's varchar(255), and tokens are never stored. */
const MAX_KEY_PART = 128;

function keyOf(kind: RateLimitKey, caller: RateLimitCaller): string {
  if (kind === 'token' && caller.token) return `token:${sha256Hex(caller.token)}`;
  if (kind === 'user' && caller.userId) {
    return caller.userId.length <= MAX_KEY_PART ? `user:${caller.userId}` : `user#${sha256Hex(caller.userId)}`;
  }
  return caller.ip.length <= MAX_KEY_PART ? `ip:${caller.ip}` : `ip#${sha256Hex(caller.ip)}`;
}

const retryAfterSeconds = (result: RateLimiterRes) => Math.max(1, Math.ceil(result.msBeforeNext / 1000));

class StoreRateLimiter implements RateLimiter {
  private readonly counter: RateLimiterAbstract;
  /** Counts in this process while PostgreSQL does not answer. */
  private readonly fallback: RateLimiterMemory | undefined;
  private storeFailing = false;

  constructor(
    readonly name: string,
    readonly rule: RateLimitRule,
    store: RateLimitStore,
    private readonly logger: Logger,
  ) {
    const options = { keyPrefix: name, points: rule.points, duration: rule.durationSeconds };
    if (store.kind === 'memory') {
      this.counter = new RateLimiterMemory(options);
      return;
    }
    this.counter = new RateLimiterPostgres({
      ...options,
      storeClient: store.pool,
      storeType: 'pool',
      tableName: RATE_LIMIT_TABLE,
      tableCreated: true,
      // A refused key is refused until its window ends: this process stops asking the database.
      inMemoryBlockOnConsumed: rule.points + 1,
    });
    this.fallback = new RateLimiterMemory(options);
  }

  async consume(caller: RateLimitCaller): Promise<void> {
    const key = keyOf(this.rule.key, caller);
    try {
      await this.counter.consume(key);
      if (this.storeFailing) {
        this.storeFailing = false;
        this.logger.info({ limit: this.name }, 'rate limit store answers again');
      }
    } catch (error) {
      if (error instanceof RateLimiterRes) throw new RateLimitExceeded(this.name, retryAfterSeconds(error));
      if (!this.fallback) throw error;
      if (!this.storeFailing) {
        this.storeFailing = true;
        this.logger.warn({ err: error, limit: this.name }, 'rate limit store failed; counting in this process until it answers');
      }
      await this.fallback.consume(key).catch((refusal: unknown) => {
        throw refusal instanceof RateLimiterRes ? new RateLimitExceeded(this.name, retryAfterSeconds(refusal)) : refusal;
      });
    }
  }
}

/** The named limiters of one server, over one store. */
export class RateLimits<Name extends string = RateLimitName> {
  private readonly limiters = new Map<string, RateLimiter>();

  constructor(store: RateLimitStore, rules: Record<Name, RateLimitRule>, logger: Logger) {
    for (const [name, rule] of Object.entries<RateLimitRule>(rules)) {
      this.limiters.set(name, new StoreRateLimiter(name, rule, store, logger));
    }
  }

  get(name: Name): RateLimiter {
    const limiter = this.limiters.get(name);
    if (!limiter) throw new Error(`No rate limit is named ${name}`);
    return limiter;
  }
}

/**
 * The server's limits (RATE_LIMIT_*), counted in memory or, with RATE_LIMIT_STORE=postgres, in
 * the rate_limits table through the data source's pool, so that every process shares them.
 */
export function createRateLimits(config: Config, dataSource: DataSource, logger: Logger): RateLimits {
  const store: RateLimitStore =
    config.rateLimit.store === 'postgres'
      ? { kind: 'postgres', pool: (dataSource.driver as unknown as { master: pg.Pool }).master }
      : { kind: 'memory' };
  return new RateLimits(store, rateLimitRules(config), logger.child({ component: 'rate-limits' }));
}

/**
 * Answers 429 with Retry-After and `{error: "rate-limited", message}`; on the handler routes
 * (envelope format) the body is also the envelope of spec 1 §2.3.
 */
function sendRateLimited(reply: FastifyReply, exceeded: RateLimitExceeded): FastifyReply {
  const envelope = reply.request.routeOptions.config?.errorFormat === 'envelope';
  return reply
    .code(429)
    .header('retry-after', String(exceeded.retryAfterSeconds))
    .send({
      ...(envelope ? { success: false } : {}),
      error: 'rate-limited',
      message: exceeded.message,
      ...(envelope ? { error_code: 'RATE_LIMITED' } : {}),
    });
}

/** Takes a point for the caller of a route; when none is left, answers 429 and returns false. */
export async function admitRequest(reply: FastifyReply, limiter: RateLimiter, caller: RateLimitCaller): Promise<boolean> {
  try {
    await limiter.consume(caller);
    return true;
  } catch (error) {
    if (!(error instanceof RateLimitExceeded)) throw error;
    sendRateLimited(reply, error);
    return false;
  }
}

/**
 * A Fastify onRequest or preHandler hook that applies `limiter` to a route, counting callers by
 * their address unless `callerOf` says more (a user id, a token).
 */
export function rateLimitHook(
  limiter: RateLimiter,
  callerOf: (request: FastifyRequest) => RateLimitCaller = (request) => ({ ip: request.ip }),
) {
  return async (request: FastifyRequest, reply: FastifyReply): Promise<void> => {
    await admitRequest(reply, limiter, callerOf(request));
  };
}

/**
 * For resolvers: takes a point of the named limit for the caller (its user id, else its
 * address), or throws a GraphQLError with extensions.code RATE_LIMITED and
 * extensions.retryAfter in seconds.
 */
export async function enforceRateLimit(context: GraphQLContext, name: RateLimitName): Promise<void> {
  const limiter = context.rateLimits.get(name);
  try {
    await limiter.consume({ ip: context.clientIp, userId: context.session.userId });
  } catch (error) {
    if (!(error instanceof RateLimitExceeded)) throw error;
    throw new GraphQLError(error.message, { extensions: { code: 'RATE_LIMITED', retryAfter: error.retryAfterSeconds } });
  }
}
