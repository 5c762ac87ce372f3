import { requires } from '../../platform/fastify/security-schemes';
import { accountOwner, bearerUser, type AuthRoute } from './auth.route-helpers';
import { EMAIL, ERRORS, OK, OPTIONS_REDIRECT, PASSWORD, TAGS, TICKET, USER_SCHEMA } from './auth.schemas';
import type { AuthServices } from './auth.services';

/** The signed-in user's account: read, its password reset or changed, its address changed. */
export function userAccountRoutes(route: AuthRoute, services: AuthServices): void {
  const { account } = services;

  route({
    method: 'GET',
    url: '/user',
    schema: { tags: TAGS, summary: 'The signed-in user', security: requires('bearerAuth'), response: { 200: USER_SCHEMA, ...ERRORS } },
    handler: (request) => account.user(bearerUser(request, services)),
  });

  route({
    method: 'POST',
    url: '/user/password/reset',
    limits: ['authEmail'],
    schema: {
      tags: TAGS,
      summary: 'Mail a password-reset link',
      description: 'Answers OK whether or not the address has an account.',
      body: { type: 'object', required: ['email'], properties: { email: EMAIL, options: OPTIONS_REDIRECT } },
      response: { 200: OK, ...ERRORS },
    },
    handler: async (request) => {
      const { email, options } = request.body as { email: string; options?: { redirectTo?: string } };
      await account.sendPasswordReset(email, options?.redirectTo);
      return 'OK';
    },
  });

  route({
    method: 'POST',
    url: '/user/password',
    limits: ['authBruteForce'],
    schema: {
      tags: TAGS,
      summary: 'Set a new password',
      description:
        'With the bearer token of the signed-in user, or with a `ticket`: a password-reset ticket, or the ticket of an invitation (which also verifies the address). A ticket ends every session of the account; the bearer token every other session, and its own session must have signed in within AUTH_RECENT_SIGN_IN_SECONDS (403 reauthentication-required otherwise).',
      security: [...requires('bearerAuth'), {}],
      body: { type: 'object', required: ['newPassword'], properties: { newPassword: PASSWORD, ticket: TICKET } },
      response: { 200: OK, ...ERRORS },
    },
    handler: async (request) => {
      const { newPassword, ticket } = request.body as { newPassword: string; ticket?: string };
      await account.changePassword(newPassword, ticket ? { ticket } : await accountOwner(request, services, { recentSignIn: true }));
      return 'OK';
    },
  });

  route({
    method: 'POST',
    url: '/user/email/change',
    limits: ['authEmail'],
    schema: {
      tags: TAGS,
      summary: "Change the signed-in user's e-mail address",
      description:
        'Mails a confirmation link to the new address; the address changes when it is followed. The session must have signed in within AUTH_RECENT_SIGN_IN_SECONDS (403 reauthentication-required otherwise).',
      security: requires('bearerAuth'),
      body: { type: 'object', required: ['newEmail'], properties: { newEmail: EMAIL, options: OPTIONS_REDIRECT } },
      response: { 200: OK, ...ERRORS },
    },
    handler: async (request) => {
      const { newEmail, options } = request.body as { newEmail: string; options?: { redirectTo?: string } };
      await account.changeEmail((await accountOwner(request, services, { recentSignIn: true })).userId, newEmail, options?.redirectTo);
      return 'OK';
    },
  });
}
