import net from 'node:net';
import type { FastifyRequest } from 'fastify';
import type pg from 'pg';
import { poolOf } from '../db/sql';
import type { Logger } from 'pino';
import { RateLimiterMemory, RateLimiterPostgres, RateLimiterRes, type RateLimiterAbstract } from 'rate-limiter-flexible';
import type { DataSource } from 'typeorm';
import { tooManyRequests } from '../common/refusal';
import { sha256Hex } from '../common/sha256';
import type { Config } from '../config';
import { CLIENT_ADDRESS_HEADER, type Session } from './session';

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
  /**
   * `ip` is an engine's own address (a caller with the admin secret that named neither the user
   * nor the user's address): a count that would go by it goes to the engine budget instead.
   */
  viaEngine?: boolean;
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
  | 'errorApi'
  | 'uploads'
  | 'reports'
  | 'checkouts';

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
    // Quotas on what users create (platform/quotas.ts).
    uploads: { ...config.rateLimit.uploads, key: 'user' },
    reports: { ...config.rateLimit.reports, key: 'user' },
    checkouts: { ...config.rateLimit.checkouts, key: 'user' },
  };
}

/**
 * RATE_LIMIT_ENGINE_*: what each limit allows an engine's address, for the calls it makes with
 * the admin secret without naming the user or the user's address.
 */
export type EngineBudget = Pick<RateLimitRule, 'points' | 'durationSeconds'>;

/** The table of the PostgreSQL store, created by a migration (not by the library). */
const RATE_LIMIT_TABLE = 'rate_limits';

export type RateLimitStore = { kind: 'memory' } | { kind: 'postgres'; pool: pg.Pool };

export interface RateLimiter {
  readonly name: string;
  readonly rule: RateLimitRule;
  /** Takes one point for the caller; rejects with tooManyRequests (common/refusal.ts) when none is left. */
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

/** One count of a store, with the process's own count to fall back on while PostgreSQL does not answer. */
class StoreCounter {
  private readonly counter: RateLimiterAbstract;
  /** Counts in this process while PostgreSQL does not answer. */
  private readonly fallback: RateLimiterMemory | undefined;
  private storeFailing = false;

  constructor(
    private readonly name: string,
    keyPrefix: string,
    rule: Pick<RateLimitRule, 'points' | 'durationSeconds'>,
    store: RateLimitStore,
    private readonly logger: Logger,
  ) {
    const options = { keyPrefix, points: rule.points, duration: rule.durationSeconds };
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

  async consume(key: string): Promise<void> {
    try {
      await this.counter.consume(key);
      if (this.storeFailing) {
        this.storeFailing = false;
        this.logger.info({ limit: this.name }, 'rate limit store answers again');
      }
    } catch (error) {
      if (error instanceof RateLimiterRes) throw tooManyRequests(retryAfterSeconds(error));
      if (!this.fallback) throw error;
      if (!this.storeFailing) {
        this.storeFailing = true;
        this.logger.warn({ err: error, limit: this.name }, 'rate limit store failed; counting in this process until it answers');
      }
      await this.fallback.consume(key).catch((refusal: unknown) => {
        throw refusal instanceof RateLimiterRes ? tooManyRequests(retryAfterSeconds(refusal)) : refusal;
      });
    }
  }
}

class StoreRateLimiter implements RateLimiter {
  private readonly own: StoreCounter;
  /** The engine budget's count of this limit, per engine address (RATE_LIMIT_ENGINE_*). */
  private readonly engine: StoreCounter | undefined;

  constructor(
    readonly name: string,
    readonly rule: RateLimitRule,
    store: RateLimitStore,
    logger: Logger,
    engineBudget: EngineBudget | undefined,
  ) {
    this.own = new StoreCounter(name, name, rule, store, logger);
    this.engine = engineBudget && new StoreCounter(name, `${name}:engine`, engineBudget, store, logger);
  }

  async consume(caller: RateLimitCaller): Promise<void> {
    const key = keyOf(this.rule.key, caller);
    // Counted by the engine's address, which stands for every user behind it: the engine's budget.
    if (this.engine && caller.viaEngine && key.startsWith('ip')) return this.engine.consume(key);
    return this.own.consume(key);
  }
}

/** The named limiters of one server, over one store. */
export class RateLimits<Name extends string = RateLimitName> {
  private readonly limiters = new Map<string, RateLimiter>();

  /** Without `engineBudget`, an engine's calls count by its address like anyone's. */
  constructor(store: RateLimitStore, rules: Record<Name, RateLimitRule>, logger: Logger, engineBudget?: EngineBudget) {
    for (const [name, rule] of Object.entries<RateLimitRule>(rules)) {
      this.limiters.set(name, new StoreRateLimiter(name, rule, store, logger, engineBudget));
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
  const store: RateLimitStore = config.rateLimit.store === 'postgres' ? { kind: 'postgres', pool: poolOf(dataSource) } : { kind: 'memory' };
  return new RateLimits(store, rateLimitRules(config), logger.child({ component: 'rate-limits' }), config.rateLimit.engine);
}

/**
 * A Fastify onRequest or preHandler hook that applies `limiter` to a route, counting callers by
 * their address unless `callerOf` says more (a user id, a token).
 */
export function rateLimitHook(limiter: RateLimiter, callerOf: (request: FastifyRequest) => RateLimitCaller = (request) => ({ ip: request.ip })) {
  return async (request: FastifyRequest): Promise<void> => {
    await limiter.consume(callerOf(request));
  };
}

/**
 * Who a request counts as. A caller holding the admin secret is an engine calling for its users,
 * and its own address stands for all of them: it counts by the session's user id, else by the
 * user's address it names in X-Gql-Client-Address, else (the address only) in the engine budget.
 * From anyone else the header is ignored. An address named that is not one IP address is an error.
 */
export function rateLimitCaller(
  session: Pick<Session, 'userId' | 'viaAdminSecret'>,
  address: string,
  headers: Record<string, string | string[] | undefined> | undefined,
): RateLimitCaller | { error: string } {
  if (!session.viaAdminSecret) return { ip: address, userId: session.userId };
  const named = headers?.[CLIENT_ADDRESS_HEADER];
  if (named === undefined) return { ip: address, userId: session.userId, viaEngine: true };
  const clientAddress = typeof named === 'string' ? named.trim() : '';
  if (net.isIP(clientAddress) === 0) return { error: `${CLIENT_ADDRESS_HEADER} must be one IP address, the end user's` };
  return { ip: clientAddress, userId: session.userId };
}
