import { requires } from '../../platform/fastify/security-schemes';
import { authError, invalidRequest } from './auth-errors';
import { bearerUser, type AuthRoute } from './auth.route-helpers';
import { ERRORS, OK, SESSION_SCHEMA, TAGS, text } from './auth.schemas';
import type { AuthServices } from './auth.services';

/** Sessions: a refresh, a sign-out. */
export function sessionRoutes(route: AuthRoute, services: AuthServices): void {
  const { tokens } = services;

  route({
    method: 'POST',
    url: '/token',
    schema: {
      tags: TAGS,
      summary: 'Refresh the session',
      description: 'Rotates the refresh token: the one presented stops working. Presenting a rotated token again revokes its whole session.',
      body: { type: 'object', required: ['refreshToken'], properties: { refreshToken: text(512) } },
      response: { 200: SESSION_SCHEMA, ...ERRORS },
    },
    handler: (request) => tokens.refresh((request.body as { refreshToken: string }).refreshToken),
  });

  route({
    method: 'POST',
    url: '/signout',
    schema: {
      tags: TAGS,
      summary: 'Sign out: one session, or every session of the user',
      description: '`{refreshToken}` revokes that session; `{all: true}` (bearer token required) revokes every session of the user.',
      security: [...requires('bearerAuth'), {}],
      body: { type: 'object', properties: { refreshToken: text(512), all: { type: 'boolean' } } },
      response: { 200: OK, ...ERRORS },
    },
    handler: async (request) => {
      const body = request.body as { refreshToken?: string; all?: boolean };
      const userId = request.headers.authorization !== undefined ? bearerUser(request, services) : null;
      if (body.all === true) {
        if (!userId) throw authError('unauthenticated-user', 'Signing out of every session needs the bearer token');
        await tokens.revokeAll(userId);
        return 'OK';
      }
      if (!body.refreshToken) throw invalidRequest('refreshToken is required unless all is true');
      if (!(await tokens.revoke(body.refreshToken, userId))) throw authError('invalid-refresh-token');
      return 'OK';
    },
  });
}
