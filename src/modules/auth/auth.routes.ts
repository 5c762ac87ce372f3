import { errorCodes, type FastifyInstance } from 'fastify';
import { anonymousUserRoutes } from './anonymous-users.routes';
import { serveOnAuthPort } from './auth-port';
import { answerAuthErrors, authRouteIn, limit } from './auth.route-helpers';
import { OK, TAGS } from './auth.schemas';
import type { AuthServices } from './auth.services';
import { emailSignInRoutes } from './email-sign-in.routes';
import { linkVerificationRoutes } from './link-verification.routes';
import { oauthRoutes } from './oauth.routes';
import { sessionRoutes } from './session.routes';
import { smsRoutes } from './sms.routes';
import { totpRoutes } from './totp.routes';
import { userAccountRoutes } from './user-account.routes';

/** Where the auth routes live on the main port (the spec's `{auth_url}` by default). */
export const AUTH_PREFIX = '/auth';
const HEALTH_PATH = `${AUTH_PREFIX}/healthz`;

/**
 * The authentication service's routes, Nhost's paths and bodies under /auth. Every route is
 * limited per client address overall (AUTH_RATE_LIMIT_GLOBAL_*); sign-in, verification and
 * ticket routes also by the brute-force limit, sign-up by its own, and routes that send mail by
 * the mail limit. Errors are `{status, message, error}` with Nhost's codes (answerAuthErrors).
 */
export function authRoutes(app: FastifyInstance, services: AuthServices): void {
  app.register(
    async (scope) => {
      // Nhost's client sends `Content-Type: application/json` without a body where the body is
      // optional (anonymous sign-in): an empty JSON body is read as {} here, and the schema decides.
      const { onProtoPoisoning = 'error', onConstructorPoisoning = 'error' } = scope.initialConfig;
      const parseJson = scope.getDefaultJsonParser(onProtoPoisoning, onConstructorPoisoning);
      scope.removeContentTypeParser('application/json');
      scope.addContentTypeParser('application/json', { parseAs: 'string' }, (request, body, done) =>
        (body as string).trim() === '' ? done(null, {}) : parseJson(request, body as string, done),
      );
      // Apple returns from sign-in by a form POST (response_mode=form_post): the provider
      // callback takes a form; every other auth route answers 415 to one.
      scope.addContentTypeParser('application/x-www-form-urlencoded', { parseAs: 'string' }, (request, body, done) => {
        if (request.routeOptions.url !== `${AUTH_PREFIX}/signin/provider/:provider/callback`) {
          return done(new errorCodes.FST_ERR_CTP_INVALID_MEDIA_TYPE('application/x-www-form-urlencoded'), undefined);
        }
        done(null, Object.fromEntries(new URLSearchParams(body as string)));
      });
      scope.setErrorHandler(answerAuthErrors);
      scope.decorateRequest('exceededLimit', null);
      const global = limit(services, 'authGlobal');
      // A proxy's health checks do not use up its address's requests.
      scope.addHook('onRequest', async (request) => (request.routeOptions.url === HEALTH_PATH ? undefined : global(request)));
      registerRoutes(scope, services);
    },
    { prefix: AUTH_PREFIX },
  );
  serveOnAuthPort(app, AUTH_PREFIX, () => services.port);
}

function registerRoutes(scope: FastifyInstance, services: AuthServices): void {
  const route = authRouteIn(scope, services);
  totpRoutes(route, services);
  oauthRoutes(route, services);
  smsRoutes(route, services);
  emailSignInRoutes(route, services);
  anonymousUserRoutes(route, services);
  sessionRoutes(route, services);

  route({
    method: 'GET',
    url: '/healthz',
    schema: { tags: TAGS, summary: "The auth service's health check (Nhost's path; a proxy in front of AUTH_PORT asks it)", response: { 200: OK } },
    handler: async () => 'OK',
  });

  userAccountRoutes(route, services);
  linkVerificationRoutes(route, services);
}
