import type { SignUpInput } from './account-input';
import type { AuthRoute } from './auth.route-helpers';
import { EMAIL, ERRORS, NULLABLE_SESSION, OK, PASSWORD, SIGN_UP_OPTIONS, TAGS } from './auth.schemas';
import type { AuthServices } from './auth.services';
import { SIGN_UP_LIMIT } from './sign-up-policy.service';

/** Sign-up and sign-in with an e-mail address: with a password, or with a link mailed to it. */
export function emailSignInRoutes(route: AuthRoute, services: AuthServices): void {
  const { emailSignIn } = services;

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
    handler: (request) => emailSignIn.signUpEmailPassword(request.body as SignUpInput),
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
    handler: (request) => {
      const { email, password } = request.body as { email: string; password: string };
      return emailSignIn.signInEmailPassword(email, password, request.ip);
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
      handler: async (request) => {
        await emailSignIn.signInPasswordlessEmail(request.body as { email: string; options?: SignUpInput['options'] });
        return 'OK';
      },
    });
  }
}
