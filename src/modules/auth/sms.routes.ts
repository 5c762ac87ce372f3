import { requires } from '../../platform/fastify/security-schemes';
import { accountOwner, type AuthRoute } from './auth.route-helpers';
import { ERRORS, OK, SESSION_SCHEMA, TAGS, text, TICKET } from './auth.schemas';
import type { AuthServices } from './auth.services';

const SMS_ERRORS = { ...ERRORS, 503: ERRORS[400] };

/** SMS codes: enrolling a phone number, and the second step of sign-in. */
export function smsRoutes(route: AuthRoute, services: AuthServices): void {
  const { sms } = services;

  route({
    method: 'POST',
    url: '/user/phone',
    schema: {
      tags: TAGS,
      summary: "Send a code to a phone number that is to become the signed-in user's second factor",
      description: 'With AUTH_MFA_SMS_ENABLED, through AUTH_SMS_PROVIDER. Limited per number and per client address (AUTH_RATE_LIMIT_SMS_*).',
      security: requires('bearerAuth'),
      body: { type: 'object', required: ['phoneNumber'], properties: { phoneNumber: text(32) } },
      response: { 200: OK, ...SMS_ERRORS },
    },
    handler: async (request) => {
      await sms.sendPhoneCode((await accountOwner(request, services)).userId, (request.body as { phoneNumber: string }).phoneNumber, request.ip);
      return 'OK';
    },
  });

  route({
    method: 'POST',
    url: '/user/phone/verify',
    limits: ['authBruteForce'],
    schema: {
      tags: TAGS,
      summary: 'Verify the phone number with the code sent to it',
      description: 'The number becomes verified and the SMS second factor is turned on, unless TOTP already is.',
      security: requires('bearerAuth'),
      body: { type: 'object', required: ['code'], properties: { code: text(16) } },
      response: { 200: OK, ...SMS_ERRORS },
    },
    handler: async (request) => {
      await sms.verifyPhone((await accountOwner(request, services)).userId, (request.body as { code: string }).code, request.ip);
      return 'OK';
    },
  });

  route({
    method: 'POST',
    url: '/signin/mfa/sms',
    limits: ['authBruteForce'],
    schema: {
      tags: TAGS,
      summary: 'Finish a sign-in with the code sent by SMS',
      description: 'With the `mfaSms:` ticket sign-in answered; the code was sent with it.',
      body: { type: 'object', required: ['ticket', 'otp'], properties: { ticket: TICKET, otp: text(16) } },
      response: {
        200: { type: 'object', properties: { session: SESSION_SCHEMA, mfa: { type: 'null' } }, required: ['session', 'mfa'] },
        ...SMS_ERRORS,
      },
    },
    handler: (request) => {
      const { ticket, otp } = request.body as { ticket: string; otp: string };
      return sms.signIn(ticket, otp, request.ip);
    },
  });
}
