import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest, RouteOptions } from 'fastify';
import { isTooManyRequests, Refusal } from '../../common/refusal';
import { bearerClaims, resolveSession } from '../../platform/session';
import type { RateLimitName } from '../../platform/rate-limits';
import { authError, isAuthError } from './auth-errors';
import { UUID } from '../../common/ids';
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
    /** The limit the request went over (tooManyRequests), on a route that answers limits itself. */
    exceededLimit: Refusal | null;
  }
}

/** Declares one auth route: Nhost's error format, a string answer sent as a JSON string, and the named limits taken per client address before it runs. */
export type AuthRoute = (options: RouteOptions & { limits?: RateLimitName[] }) => void;

/** How the auth routes are declared in `scope` (the /auth plugin). */
export function authRouteIn(scope: FastifyInstance, services: AuthServices): AuthRoute {
  return (options) => {
    const { limits = [], handler, ...rest } = options;
    scope.route({
      ...rest,
      config: { ...rest.config, errorFormat: 'auth' },
      onRequest: limits.map((name) => limit(services, name)),
      handler: async (request, reply) => {
        const result: unknown = await handler.call(scope, request, reply);
        // Nhost answers "OK" as a JSON string, which its clients parse; Fastify would send a bare string as text.
        return typeof result === 'string' ? reply.type('application/json; charset=utf-8').send(JSON.stringify(result)) : result;
      },
    });
  };
}

/**
 * The /auth scope's error handler: a refusal with one of Nhost's codes as Nhost answers it,
 * `{status, message, error}`. Anything else goes on to the app's handler, which answers in the
 * same shape (the routes' errorFormat) with Nhost's code for the status: too-many-requests with
 * Retry-After for a limit, invalid-request for a body that does not validate, a masked 500.
 */
export function answerAuthErrors(error: FastifyError | Refusal, _request: FastifyRequest, reply: FastifyReply): FastifyReply {
  if (!isAuthError(error)) throw error;
  return reply.code(error.status).headers(error.headers).send({ status: error.status, message: error.message, error: error.code });
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
    if (!(error instanceof Refusal)) throw error;
    throw authError('unauthenticated-user', `User is not authenticated: ${error.message}`);
  }
  throw authError('unauthenticated-user');
}

/** A hook taking one point of a named limit per client address; 429 too-many-requests with Retry-After past it. */
export function limit(services: AuthServices, name: RateLimitName) {
  return async (request: FastifyRequest): Promise<void> => {
    try {
      await services.rateLimits.get(name).consume({ ip: request.ip });
    } catch (error) {
      if (!isTooManyRequests(error) || !request.routeOptions.config.answersLimitsItself) throw error;
      request.exceededLimit ??= error;
    }
  };
}
