import { requires } from '../../platform/fastify/security-schemes';
import { accountOwner, bearerUser, type AuthRoute } from './auth.route-helpers';
import { ERRORS, OK, SESSION_SCHEMA, TAGS, text, TICKET } from './auth.schemas';
import type { AuthServices } from './auth.services';

const CODE = text(16);

const ENROLMENT_SCHEMA = {
  type: 'object',
  properties: {
    totpSecret: { type: 'string', description: 'Base32 secret, for apps that cannot scan the code' },
    qrCodeDataUrl: { type: 'string', description: 'The otpauth:// URI as a PNG data URL' },
    imageUrl: { type: 'string', description: "The same data URL under Nhost's name" },
  },
  required: ['totpSecret', 'qrCodeDataUrl', 'imageUrl'],
} as const;

/** TOTP: enrolment (generate, activate), deactivation, and the second step of sign-in. */
export function totpRoutes(route: AuthRoute, services: AuthServices): void {
  const { totp } = services;

  for (const method of ['POST', 'GET'] as const) {
    route({
      method,
      url: '/mfa/totp/generate',
      schema: {
        tags: TAGS,
        summary: method === 'POST' ? 'Generate a TOTP secret for the signed-in user' : "Generate a TOTP secret (Nhost's GET form)",
        description:
          'With AUTH_MFA_TOTP_ENABLED. The secret is not active until POST /auth/mfa/totp/activate receives a code of it; generating again replaces a secret not yet activated.',
        security: requires('bearerAuth'),
        ...(method === 'POST' ? { body: { type: 'object', properties: {} } } : {}),
        response: { 200: ENROLMENT_SCHEMA, ...ERRORS },
      },
      // Nothing is sent: no body at all is an empty one.
      preValidation: async (request) => {
        if (method === 'POST') request.body ??= {};
      },
      handler: async (request) => totp.generate((await accountOwner(request, services)).userId),
    });
  }

  route({
    method: 'POST',
    url: '/mfa/totp/activate',
    limits: ['authBruteForce'],
    schema: {
      tags: TAGS,
      summary: 'Turn TOTP on with the first code of the generated secret',
      security: requires('bearerAuth'),
      body: { type: 'object', required: ['code'], properties: { code: CODE } },
      response: { 200: OK, ...ERRORS },
    },
    handler: async (request) => {
      await totp.activate((await accountOwner(request, services)).userId, (request.body as { code: string }).code, request.ip);
      return 'OK';
    },
  });

  route({
    method: 'POST',
    url: '/user/mfa',
    limits: ['authBruteForce'],
    schema: {
      tags: TAGS,
      summary: "Turn the second factor on or off (Nhost's route)",
      description:
        '`{code, activeMfaType: "totp"}` activates as /auth/mfa/totp/activate; `{code, activeMfaType: ""}` (what Nhost\'s client sends), `null` or no `activeMfaType` turns TOTP off, with a current code.',
      security: requires('bearerAuth'),
      body: {
        type: 'object',
        required: ['code'],
        properties: { code: CODE, activeMfaType: { type: ['string', 'null'], enum: ['totp', '', null] } },
      },
      response: { 200: OK, ...ERRORS },
    },
    handler: async (request) => {
      const { code, activeMfaType } = request.body as { code: string; activeMfaType?: 'totp' | '' | null };
      const userId = bearerUser(request, services);
      if (activeMfaType === 'totp') await totp.activate(userId, code, request.ip);
      else await totp.deactivate(userId, code, request.ip);
      return 'OK';
    },
  });

  route({
    method: 'POST',
    url: '/signin/mfa/totp',
    limits: ['authBruteForce'],
    schema: {
      tags: TAGS,
      summary: 'Finish a sign-in with a TOTP code',
      description:
        'With the `mfaTotp:` ticket sign-in answered (valid for AUTH_TICKET_MFA_TTL_SECONDS) and a current code. A code is accepted once; a ticket allows AUTH_MFA_MAX_ATTEMPTS_PER_TICKET wrong codes.',
      body: { type: 'object', required: ['ticket', 'otp'], properties: { ticket: TICKET, otp: CODE } },
      response: {
        200: { type: 'object', properties: { session: SESSION_SCHEMA, mfa: { type: 'null' } }, required: ['session', 'mfa'] },
        ...ERRORS,
      },
    },
    handler: (request) => {
      const { ticket, otp } = request.body as { ticket: string; otp: string };
      return totp.signIn(ticket, otp, request.ip);
    },
  });
}
