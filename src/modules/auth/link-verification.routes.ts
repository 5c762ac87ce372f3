import type { AuthRoute } from './auth.route-helpers';
import { EMAIL, ERRORS, OK, OPTIONS_REDIRECT, REDIRECT, REDIRECT_TO, TAGS, TICKET } from './auth.schemas';
import type { AuthServices } from './auth.services';

/** The mailed links, followed, and a verification link sent again. */
export function linkVerificationRoutes(route: AuthRoute, services: AuthServices): void {
  const { links } = services;

  route({
    method: 'GET',
    url: '/verify',
    limits: ['authBruteForce'],
    schema: {
      tags: TAGS,
      summary: 'Follow a mailed link: verify an address, confirm an e-mail change, sign in without a password, or start a password reset',
      description:
        'Redirects to `redirectTo` with `refreshToken` and `type` added to its query (keeping its own), or with `error` and `errorDescription` when the ticket is invalid, used or expired.',
      querystring: {
        type: 'object',
        required: ['ticket', 'type'],
        properties: {
          ticket: TICKET,
          type: { type: 'string', enum: ['emailVerify', 'emailConfirmChange', 'signinPasswordless', 'passwordReset'] },
          redirectTo: REDIRECT_TO,
        },
      },
      response: { 302: REDIRECT, ...ERRORS },
    },
    handler: async (request, reply) =>
      reply.redirect(await links.verify(request.query as { ticket: string; type: string; redirectTo?: string }, request.ip), 302),
  });

  route({
    method: 'GET',
    url: '/invitations/accept',
    limits: ['authBruteForce'],
    schema: {
      tags: TAGS,
      summary: 'Follow an invitation link',
      description:
        'Redirects to AUTH_CLIENT_URL with `ticket` and `type=invite` in the query; the app then sets the password with POST /auth/user/password `{newPassword, ticket}`. The ticket is not used up here.',
      querystring: { type: 'object', required: ['ticket'], properties: { ticket: TICKET } },
      response: { 302: REDIRECT, ...ERRORS },
    },
    handler: async (request, reply) => reply.redirect(await links.invitationLanding((request.query as { ticket: string }).ticket), 302),
  });

  route({
    method: 'POST',
    url: '/user/email/send-verification-email',
    limits: ['authEmail'],
    schema: {
      tags: TAGS,
      summary: 'Send the verification mail again',
      body: { type: 'object', required: ['email'], properties: { email: EMAIL, options: OPTIONS_REDIRECT } },
      response: { 200: OK, ...ERRORS },
    },
    handler: async (request) => {
      const { email, options } = request.body as { email: string; options?: { redirectTo?: string } };
      await links.sendVerificationEmail(email, options?.redirectTo);
      return 'OK';
    },
  });
}
