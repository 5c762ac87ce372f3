import type { FastifyReply, FastifyRequest } from 'fastify';
import { OAUTH_PROVIDER_NAMES, type OAuthProviderName } from '../../config/oauth-providers';
import { requires } from '../../http/security-schemes';
import { answer, bearerUser, type AuthRoute } from './auth.routes';
import { ERRORS, OK, REDIRECT, REDIRECT_TO, TAGS, text } from './auth.schemas';
import type { ProviderCallback } from './oauth.service';
import type { AuthServices } from '.';

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
        'Redirects to the provider (AUTH_PROVIDER_<NAME>_ENABLED) with a signed, single-use `state` and PKCE where the provider takes it. `redirectTo` must be allowed (AUTH_CLIENT_URL, AUTH_ALLOWED_REDIRECT_URLS); the callback sends the browser there.',
      params: PROVIDER_PARAMS,
      querystring: { type: 'object', properties: { redirectTo: REDIRECT_TO } },
      response: { 302: REDIRECT, ...ERRORS },
    },
    handler: (request, reply) =>
      answer(reply, async () => {
        const { provider } = request.params as { provider: OAuthProviderName };
        return reply.redirect(await oauth.start(provider, (request.query as { redirectTo?: string }).redirectTo), 302);
      }),
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
  // The provider comes back with the fields in the query, or in a form body (Apple's
  // response_mode=form_post): one route each, the same answer.
  const callback = (fields: 'query' | 'body') => (request: FastifyRequest, reply: FastifyReply) =>
    answer(reply, async () => {
      const { provider } = request.params as { provider: OAuthProviderName };
      return reply.redirect(await oauth.callback(provider, request[fields] as ProviderCallback, request.ip), 302);
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
      response: { 302: REDIRECT, ...ERRORS },
    },
    handler: callback('body'),
  });

  route({
    method: 'GET',
    url: '/signin/provider/:provider/callback',
    limits: ['authBruteForce'],
    schema: {
      tags: TAGS,
      summary: "The provider's return after sign-in",
      description:
        'Redirects to `redirectTo` with `refreshToken` (or `mfaTicket` when the user has a second factor) and `type=signinProvider`, or with `error` and `errorDescription` (a denied consent, a forged or used state, an address an account uses but the provider has not verified).',
      params: PROVIDER_PARAMS,
      querystring: { type: 'object', properties: callbackFields },
      response: { 302: REDIRECT, ...ERRORS },
    },
    handler: callback('query'),
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
    handler: (request, reply) => answer(reply, async () => ({ providers: await oauth.list(bearerUser(request, services)) })),
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
    handler: (request, reply) =>
      answer(reply, async () => {
        await oauth.unlink(bearerUser(request, services), (request.params as { provider: string }).provider);
        return 'OK';
      }),
  });
}
