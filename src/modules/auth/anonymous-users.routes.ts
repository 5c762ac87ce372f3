import { requires } from '../../platform/fastify/security-schemes';
import type { DeanonymizeInput } from './account-input';
import { bearerUser, type AuthRoute } from './auth.route-helpers';
import { EMAIL, ERRORS, OK, PASSWORD, SESSION_SCHEMA, SIGN_UP_OPTIONS, TAGS, text } from './auth.schemas';
import type { AuthServices } from './auth.services';
import { SIGN_UP_LIMIT } from './sign-up-policy.service';

/** Anonymous sign-in, and the anonymous account's upgrade to an e-mail account. */
export function anonymousUserRoutes(route: AuthRoute, services: AuthServices): void {
  const { anonymous } = services;

  route({
    method: 'POST',
    url: '/signin/anonymous',
    limits: [SIGN_UP_LIMIT],
    schema: {
      tags: TAGS,
      summary: 'Sign in anonymously: a new account without an address (AUTH_ANONYMOUS_USERS_ENABLED)',
      description: 'The session carries the role `anonymous` only; POST /auth/user/deanonymize upgrades the account to an e-mail account.',
      body: { type: 'object', properties: { displayName: text(1024), locale: text(16), metadata: { type: 'object', additionalProperties: true } } },
      response: { 200: { type: 'object', properties: { session: SESSION_SCHEMA }, required: ['session'] }, ...ERRORS },
    },
    // Every field is optional: no body at all is an empty one.
    preValidation: async (request) => {
      request.body ??= {};
    },
    handler: (request) => anonymous.signInAnonymous((request.body ?? {}) as { displayName?: string }),
  });

  route({
    method: 'POST',
    url: '/user/deanonymize',
    limits: [SIGN_UP_LIMIT, 'authEmail'],
    schema: {
      tags: TAGS,
      summary: 'Upgrade the signed-in anonymous account to an e-mail account',
      description:
        'With a password (`signInMethod: email-password`; a verification mail when addresses must be verified) or a mailed sign-in link (`passwordless`). Every anonymous session ends: the user signs in again.',
      security: requires('bearerAuth'),
      body: {
        type: 'object',
        required: ['signInMethod', 'email'],
        properties: {
          signInMethod: { type: 'string', enum: ['email-password', 'passwordless'] },
          email: EMAIL,
          password: PASSWORD,
          connection: text(256),
          options: SIGN_UP_OPTIONS,
        },
      },
      response: { 200: OK, ...ERRORS },
    },
    handler: async (request) => {
      await anonymous.deanonymize(bearerUser(request, services), request.body as DeanonymizeInput);
      return 'OK';
    },
  });
}
