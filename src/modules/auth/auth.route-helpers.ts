import type { FastifyInstance, FastifyReply, FastifyRequest, RouteOptions } from 'fastify';
import { bearerClaims, resolveSession, SessionError } from '../../http/session';
import { RateLimitExceeded, type RateLimitName } from '../../platform/rate-limits';
import { AuthError } from './auth-errors';
import { UUID } from './auth.schemas';
import type { AuthServices } from './auth.services';

declare module 'fastify' {
  interface FastifyContextConfig {
    /**
     * A browser lands on the route (a provider's callback) and must be sent on by a redirect: a
     * limit it goes over is left to its handler (`exceededLimit`) instead of a JSON 429.
     */
    answersLimitsItself?: boolean;
  }
  interface FastifyRequest {
    /** The limit the request went over, on a route that answers limits itself. */
    exceededLimit: RateLimitExceeded | null;
  }
}

/** Declares one auth route: Nhost's error format, and the named limits taken per client address before it runs. */
export type AuthRoute = (options: RouteOptions & { limits?: RateLimitName[] }) => void;

/** How the auth routes are declared in `scope` (the /auth plugin). */
export function authRouteIn(scope: FastifyInstance, services: AuthServices): AuthRoute {
  return (options) => {
    const { limits = [], ...rest } = options;
    scope.route({ ...rest, config: { ...rest.config, errorFormat: 'auth' }, onRequest: limits.map((name) => limit(services, name)) });
  };
}

/**
 * Sends a service's result, or its AuthError as `{status, message, error}` (a limit a service
 * takes itself as 429 too-many-requests with Retry-After); other errors go to the error handler
 * (a masked 500).
 */
export async function answer(reply: FastifyReply, work: () => Promise<unknown>): Promise<unknown> {
  try {
    const result = await work();
    // Nhost answers "OK" as a JSON string, which its clients parse; Fastify would send a bare string as text.
    return typeof result === 'string' ? reply.type('application/json; charset=utf-8').send(JSON.stringify(result)) : result;
  } catch (error) {
    if (error instanceof AuthError) return reply.code(error.status).send(error.toJSON());
    if (error instanceof RateLimitExceeded) return tooManyRequests(reply, error);
    throw error;
  }
}

function tooManyRequests(reply: FastifyReply, error: RateLimitExceeded): FastifyReply {
  return reply.code(429).header('retry-after', String(error.retryAfterSeconds)).send(new AuthError('too-many-requests', error.message).toJSON());
}

/**
 * The bearer who may change its account (password, address, second factors): its user id, and
 * the session its token names (`sid`; null for the admin secret, which may act for any user, and
 * for a token naming none). A token of a session that has ended (signed out, taken over) may not;
 * with `recentSignIn` the session must also have signed in within AUTH_RECENT_SIGN_IN_SECONDS.
 */
export async function accountOwner(
  request: FastifyRequest,
  services: AuthServices,
  { recentSignIn = false }: { recentSignIn?: boolean } = {},
): Promise<{ userId: string; sessionId: string | null }> {
  const userId = bearerUser(request, services);
  const claims = bearerClaims(request.headers, services.bearer);
  if (claims === null) return { userId, sessionId: null };
  const sessionId = typeof claims.sid === 'string' ? claims.sid : null;
  await services.tokens.assertMayChangeAccount(userId, sessionId, recentSignIn);
  return { userId, sessionId };
}

/** The user id of the request's bearer token (verified with the signing secret), or 401 unauthenticated-user. */
export function bearerUser(request: FastifyRequest, services: AuthServices): string {
  try {
    const session = resolveSession(request.headers, services.bearer);
    // A token we signed carries a user's UUID; the admin secret may assert any text.
    if (session.userId && UUID.test(session.userId)) return session.userId;
  } catch (error) {
    if (!(error instanceof SessionError)) throw error;
    throw new AuthError('unauthenticated-user', `User is not authenticated: ${error.message}`);
  }
  throw new AuthError('unauthenticated-user');
}

/** A hook taking one point of a named limit per client address; 429 too-many-requests with Retry-After past it. */
export function limit(services: AuthServices, name: RateLimitName) {
  return async (request: FastifyRequest, reply: FastifyReply): Promise<FastifyReply | undefined> => {
    try {
      await services.rateLimits.get(name).consume({ ip: request.ip });
      return undefined;
    } catch (error) {
      if (!(error instanceof RateLimitExceeded)) throw error;
      if (request.routeOptions.config.answersLimitsItself) {
        request.exceededLimit ??= error;
        return undefined;
      }
      return tooManyRequests(reply, error);
    }
  };
}
