import { errorCodes, type FastifyInstance } from 'fastify';
import { requires } from '../../http/security-schemes';
import type { DeanonymizeInput, SignUpInput } from './account-input';
import { AuthError, invalidRequest } from './auth-errors';
import { serveOnAuthPort } from './auth-port';
import { accountOwner, answer, authRouteIn, bearerUser, limit } from './auth.route-helpers';
import { EMAIL, ERRORS, NULLABLE_SESSION, OK, OPTIONS_REDIRECT, PASSWORD, REDIRECT, REDIRECT_TO, SESSION_SCHEMA, SIGN_UP_OPTIONS, TAGS, TICKET, USER_SCHEMA, text } from './auth.schemas';
import type { AuthServices } from './auth.services';
import { oauthRoutes } from './oauth.routes';
import { SIGN_UP_LIMIT } from './sign-up-policy.service';
import { smsRoutes } from './sms.routes';
import { totpRoutes } from './totp.routes';

/** Where the auth routes live on the main port (the spec's `{auth_url}` by default). */
export const AUTH_PREFIX = '/auth';
const HEALTH_PATH = `${AUTH_PREFIX}/healthz`;

/**
 * The authentication service's routes, Nhost's paths and bodies under /auth. Every route is
 * limited per client address overall (AUTH_RATE_LIMIT_GLOBAL_*); sign-in, verification and
 * ticket routes also by the brute-force limit, sign-up by its own, and routes that send mail by
 * the mail limit. Errors are `{status, message, error}` with Nhost's codes.
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
      // callback takes a form; every other auth route answers 415 to one, as before.
      scope.addContentTypeParser('application/x-www-form-urlencoded', { parseAs: 'string' }, (request, body, done) => {
        if (request.routeOptions.url !== `${AUTH_PREFIX}/signin/provider/:provider/callback`) {
          return done(new errorCodes.FST_ERR_CTP_INVALID_MEDIA_TYPE('application/x-www-form-urlencoded'), undefined);
        }
        done(null, Object.fromEntries(new URLSearchParams(body as string)));
      });
      scope.decorateRequest('exceededLimit', null);
      const global = limit(services, 'authGlobal');
      // A proxy's health checks do not use up its address's requests.
      scope.addHook('onRequest', async (request, reply) => (request.routeOptions.url === HEALTH_PATH ? undefined : global(request, reply)));
      registerRoutes(scope, services);
    },
    { prefix: AUTH_PREFIX },
  );
  serveOnAuthPort(app, AUTH_PREFIX, () => services.port);
}

function registerRoutes(scope: FastifyInstance, services: AuthServices): void {
  const { emailSignIn, anonymous, links, account, tokens } = services;
  const route = authRouteIn(scope, services);
  totpRoutes(route, services);
  oauthRoutes(route, services);
  smsRoutes(route, services);

  route({
    method: 'POST',
    url: '/signup/email-password',
    limits: [SIGN_UP_LIMIT, 'authEmail'],
    schema: {
      tags: TAGS,
      summary: 'Sign up with an e-mail address and a password',
      description: 'With AUTH_EMAIL_SIGNIN_EMAIL_VERIFIED_REQUIRED (the default) a verification mail is sent and `session` is null until the link is followed.',
      body: {
        type: 'object',
        required: ['email', 'password'],
        properties: {
          email: EMAIL,
          password: PASSWORD,
          options: SIGN_UP_OPTIONS,
        },
      },
      response: { 200: { type: 'object', properties: { session: NULLABLE_SESSION }, required: ['session'] }, ...ERRORS },
    },
    handler: (request, reply) => answer(reply, () => emailSignIn.signUpEmailPassword(request.body as SignUpInput)),
  });

  route({
    method: 'POST',
    url: '/signin/email-password',
    limits: ['authBruteForce'],
    schema: {
      tags: TAGS,
      summary: 'Sign in with an e-mail address and a password',
      description: 'Answers a session, or `mfa.ticket` when the user has a second factor on.',
      body: { type: 'object', required: ['email', 'password'], properties: { email: EMAIL, password: PASSWORD } },
      response: {
        200: {
          type: 'object',
          properties: {
            session: NULLABLE_SESSION,
            mfa: { type: ['object', 'null'], properties: { ticket: { type: 'string' } }, required: ['ticket'] },
          },
          required: ['session', 'mfa'],
        },
        ...ERRORS,
      },
    },
    handler: (request, reply) => {
      const { email, password } = request.body as { email: string; password: string };
      return answer(reply, () => emailSignIn.signInEmailPassword(email, password, request.ip));
    },
  });

  const passwordless = {
    tags: TAGS,
    description:
      'With AUTH_EMAIL_PASSWORDLESS_EMAIL_ENABLED: mails (template magic-link) a link to `{auth_url}/verify?ticket=otp:<id>&type=signinPasswordless&redirectTo=<URL>`, which signs the user in. A new address gets an account unless sign-up is disabled.',
    body: { type: 'object', required: ['email'], properties: { email: EMAIL, options: SIGN_UP_OPTIONS } },
    response: { 200: OK, ...ERRORS },
  };
  for (const [url, summary] of [
    ['/signin/passwordless/email', 'Sign in with a link mailed to the address'],
    ['/signin/magic-link', 'Sign in with a magic link (the same as /signin/passwordless/email)'],
  ]) {
    route({
      method: 'POST',
      url,
      limits: ['authBruteForce', 'authEmail'],
      schema: { ...passwordless, summary },
      handler: (request, reply) =>
        answer(reply, async () => {
          await emailSignIn.signInPasswordlessEmail(request.body as { email: string; options?: SignUpInput['options'] });
          return 'OK';
        }),
    });
  }

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
    handler: (request, reply) => answer(reply, () => anonymous.signInAnonymous((request.body ?? {}) as { displayName?: string })),
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
    handler: (request, reply) =>
      answer(reply, async () => {
        await anonymous.deanonymize(bearerUser(request, services), request.body as DeanonymizeInput);
        return 'OK';
      }),
  });

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
    handler: (request, reply) => answer(reply, () => tokens.refresh((request.body as { refreshToken: string }).refreshToken)),
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
    handler: (request, reply) =>
      answer(reply, async () => {
        const body = request.body as { refreshToken?: string; all?: boolean };
        const userId = request.headers.authorization !== undefined ? bearerUser(request, services) : null;
        if (body.all === true) {
          if (!userId) throw new AuthError('unauthenticated-user', 'Signing out of every session needs the bearer token');
          await tokens.revokeAll(userId);
          return 'OK';
        }
        if (!body.refreshToken) throw invalidRequest('refreshToken is required unless all is true');
        if (!(await tokens.revoke(body.refreshToken, userId))) throw new AuthError('invalid-refresh-token');
        return 'OK';
      }),
  });

  route({
    method: 'GET',
    url: '/healthz',
    schema: { tags: TAGS, summary: "The auth service's health check (Nhost's path; a proxy in front of AUTH_PORT asks it)", response: { 200: OK } },
    handler: (_request, reply) => answer(reply, async () => 'OK'),
  });

  route({
    method: 'GET',
    url: '/user',
    schema: { tags: TAGS, summary: 'The signed-in user', security: requires('bearerAuth'), response: { 200: USER_SCHEMA, ...ERRORS } },
    handler: (request, reply) => answer(reply, () => account.user(bearerUser(request, services))),
  });

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
    handler: (request, reply) =>
      answer(reply, async () => reply.redirect(await links.verify(request.query as { ticket: string; type: string; redirectTo?: string }, request.ip), 302)),
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
    handler: (request, reply) =>
      answer(reply, async () => reply.redirect(await links.invitationLanding((request.query as { ticket: string }).ticket), 302)),
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
    handler: (request, reply) =>
      answer(reply, async () => {
        const { email, options } = request.body as { email: string; options?: { redirectTo?: string } };
        await links.sendVerificationEmail(email, options?.redirectTo);
        return 'OK';
      }),
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
    handler: (request, reply) =>
      answer(reply, async () => {
        const { email, options } = request.body as { email: string; options?: { redirectTo?: string } };
        await account.sendPasswordReset(email, options?.redirectTo);
        return 'OK';
      }),
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
    handler: (request, reply) =>
      answer(reply, async () => {
        const { newPassword, ticket } = request.body as { newPassword: string; ticket?: string };
        await account.changePassword(newPassword, ticket ? { ticket } : await accountOwner(request, services, { recentSignIn: true }));
        return 'OK';
      }),
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
    handler: (request, reply) =>
      answer(reply, async () => {
        const { newEmail, options } = request.body as { newEmail: string; options?: { redirectTo?: string } };
        await account.changeEmail((await accountOwner(request, services, { recentSignIn: true })).userId, newEmail, options?.redirectTo);
        return 'OK';
      }),
  });
}
