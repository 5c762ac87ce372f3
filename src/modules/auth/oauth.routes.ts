import type { FastifyError, FastifyReply, FastifyRequest } from 'fastify';
import { unstorableTextPaths, UNSTORABLE_TEXT_MESSAGE } from '../../common/text';
import { OAUTH_PROVIDER_NAMES, type OAuthProviderName } from '../../config/oauth-providers';
import { isDatabaseUnavailable } from '../../db/unavailable';
import { DATABASE_UNAVAILABLE_MESSAGE, INTERNAL_ERROR_MESSAGE } from '../../common/error-messages';
import { requires } from '../../platform/fastify/security-schemes';
import { dropUnreadBody } from '../../platform/fastify/unread-body';
import { bearerUser, type AuthRoute } from './auth.route-helpers';
import { ERRORS, OK, REDIRECT, REDIRECT_TO, TAGS, text } from './auth.schemas';
import type { AuthServices } from './auth.services';
import type { CallbackFailure, ProviderCallback } from './oauth.service';

const PROVIDER_PARAMS = {
  type: 'object',
  required: ['provider'],
  properties: { provider: { type: 'string', enum: OAUTH_PROVIDER_NAMES, description: 'The lower-case provider name' } },
} as const;

/** Sign-in with external identity providers, and the user's linked providers. */
export function oauthRoutes(route: AuthRoute, services: AuthServices): void {
  const { oauth } = services;

  route({
    method: 'GET',
    url: '/signin/provider/:provider',
    limits: ['authBruteForce'],
    schema: {
      tags: TAGS,
      summary: 'Sign in with an external identity provider',
      description:
        "Redirects to the provider (AUTH_PROVIDER_<NAME>_ENABLED) with a signed, single-use `state` and PKCE where the provider takes it, and sets the HttpOnly cookie `plinth_oauth_state` (the state, for the provider's callback path, AUTH_PROVIDER_STATE_TTL_SECONDS): the callback goes on only in the browser that holds it. `redirectTo` must be allowed (AUTH_CLIENT_URL, AUTH_ALLOWED_REDIRECT_URLS); the callback sends the browser there.",
      params: PROVIDER_PARAMS,
      querystring: { type: 'object', properties: { redirectTo: REDIRECT_TO } },
      response: { 302: REDIRECT, ...ERRORS },
    },
    handler: async (request, reply) => {
      const { provider } = request.params as { provider: OAuthProviderName };
      const started = await oauth.start(provider, (request.query as { redirectTo?: string }).redirectTo);
      return reply.header('set-cookie', started.cookie).redirect(started.location, 302);
    },
  });

  const callbackFields = {
    code: text(4096),
    state: text(512),
    error: text(256),
    error_description: text(2048),
    user: text(4096),
    oauth_token: text(512),
    oauth_verifier: text(512),
    denied: text(512),
  };
  // A browser is on the callback: every answer is a redirect back to the app, a request that does
  // not validate, goes over a limit or meets an error included.
  const redirect = (reply: FastifyReply, location: string, cookie: string | null) =>
    (cookie ? reply.header('set-cookie', cookie) : reply).redirect(location, 302);
  const callbackOptions = (fields: 'query' | 'body') => ({
    attachValidation: true,
    config: { answersLimitsItself: true, checksOwnText: true },
    // The provider comes back with the fields in the query, or in a form body (Apple's
    // response_mode=form_post): one route each, the same answer.
    handler: async (request: FastifyRequest, reply: FastifyReply) => {
      const { provider } = request.params as { provider: string };
      const values = (request[fields] ?? {}) as ProviderCallback;
      const failure = callbackRefusal(request);
      if (failure) return redirect(reply, await oauth.refuse(provider, values.state, failure), oauth.clearedCookie(provider));
      const finished = await oauth.callback(provider, values, request.ip, request.headers.cookie);
      return redirect(reply, finished.location, finished.cookie);
    },
    errorHandler: async (error: FastifyError, request: FastifyRequest, reply: FastifyReply) => {
      // An error raised before the body was read (a body limit, a media type without a parser).
      dropUnreadBody(request, reply);
      const { provider } = request.params as { provider: string };
      const status = error.statusCode ?? 500;
      if (status >= 500) request.log.error({ err: error }, 'provider callback failed');
      const failure =
        status < 500
          ? { code: 'invalid-request', message: error.message }
          : isDatabaseUnavailable(error)
            ? { code: 'service-unavailable', message: DATABASE_UNAVAILABLE_MESSAGE }
            : { code: 'internal-server-error', message: INTERNAL_ERROR_MESSAGE };
      const state = (request.query as { state?: unknown } | undefined)?.state ?? (request.body as { state?: unknown } | undefined)?.state;
      return redirect(reply, await oauth.refuse(provider, state, failure), oauth.clearedCookie(provider));
    },
  });
  route({
    method: 'POST',
    url: '/signin/provider/:provider/callback',
    limits: ['authBruteForce'],
    schema: {
      tags: TAGS,
      summary: "The provider's return after sign-in, by form POST (Apple's response_mode=form_post)",
      description: 'As the GET form, with the fields in an application/x-www-form-urlencoded body.',
      params: PROVIDER_PARAMS,
      consumes: ['application/x-www-form-urlencoded'],
      body: { type: 'object', properties: callbackFields },
      response: { 302: REDIRECT },
    },
    ...callbackOptions('body'),
  });

  route({
    method: 'GET',
    url: '/signin/provider/:provider/callback',
    limits: ['authBruteForce'],
    schema: {
      tags: TAGS,
      summary: "The provider's return after sign-in",
      description:
        'Redirects to `redirectTo` with `refreshToken` (or `mfaTicket` when the user has a second factor) and `type=signinProvider`, or with `error` and `errorDescription`: a denied consent, a forged or used state, a state this browser did not start (`invalid-state`: its cookie is missing), an address an account uses but the provider has not verified, a limit (`too-many-requests`), a malformed request (`invalid-request`). Every answer is a redirect; without a valid state the error goes to AUTH_CLIENT_URL.',
      params: PROVIDER_PARAMS,
      querystring: { type: 'object', properties: callbackFields },
      response: { 302: REDIRECT },
    },
    ...callbackOptions('query'),
  });

  route({
    method: 'GET',
    url: '/user/providers',
    schema: {
      tags: TAGS,
      summary: "The signed-in user's linked identity providers",
      security: requires('bearerAuth'),
      response: {
        200: {
          type: 'object',
          properties: {
            providers: {
              type: 'array',
              items: {
                type: 'object',
                properties: { id: { type: 'string', format: 'uuid' }, provider: { type: 'string' }, createdAt: { type: 'string', format: 'date-time' } },
                required: ['id', 'provider', 'createdAt'],
              },
            },
          },
          required: ['providers'],
        },
        ...ERRORS,
      },
    },
    handler: async (request) => ({ providers: await oauth.list(bearerUser(request, services)) }),
  });

  route({
    method: 'DELETE',
    url: '/user/providers/:provider',
    schema: {
      tags: TAGS,
      summary: 'Unlink an identity provider from the signed-in user',
      description: 'Refused (409 last-sign-in-method) when it is the only way the user can sign in.',
      security: requires('bearerAuth'),
      params: PROVIDER_PARAMS,
      response: { 200: OK, ...ERRORS },
    },
    handler: async (request) => {
      await oauth.unlink(bearerUser(request, services), (request.params as { provider: string }).provider);
      return 'OK';
    },
  });
}

/** Why a callback request cannot go on before its fields are read: a limit, a field that does not validate, text that cannot be stored. */
function callbackRefusal(request: FastifyRequest): CallbackFailure | null {
  if (request.exceededLimit) return { code: 'too-many-requests', message: request.exceededLimit.message };
  if (request.validationError) return { code: 'invalid-request', message: `Invalid request: ${request.validationError.message}` };
  const unstorable = [...unstorableTextPaths(request.query, 'query'), ...unstorableTextPaths(request.body, 'body')];
  if (unstorable.length > 0) return { code: 'invalid-request', message: `Invalid request: ${unstorable.join(', ')} ${UNSTORABLE_TEXT_MESSAGE}` };
  return null;
}
