import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { secretsEqual } from '../../common/secrets';
import type { ActionDefinition } from '../../http/actions';
import { ENVELOPE_ERROR_SCHEMA, sendError } from '../../http/errors';
import { requires } from '../../http/security-schemes';
import { PAYMENT_PROVIDERS, type PaymentProviderName } from '../../config';
import type { PaymentsServices } from '.';
import { PROCESS_PAYMENT_ROLES } from './payments.types';

/** The engine-compatible handler route of processPayment (`/actions/process-payment`). */
export function paymentsActions({ payments }: PaymentsServices): ActionDefinition[] {
  return [
    {
      name: 'processPayment',
      roles: PROCESS_PAYMENT_ROLES,
      // The fields themselves are checked by the service, which answers success=false per field.
      argumentsSchema: { type: 'object', required: ['input'], properties: { input: { type: 'object' } } },
      handle: (args, session, headers) => payments.processPayment(args.input, session, headers['idempotency-key']),
    },
  ];
}

const error = (description: string) => ({ ...ENVELOPE_ERROR_SCHEMA, description });
const provider = { type: 'string', enum: [...PAYMENT_PROVIDERS] };

/** The billing REST routes: the provider switch (spec 3 §4.1). */
export function paymentsRoutes(app: FastifyInstance, services: PaymentsServices): void {
  // X-Admin-Key before anything else, the body included.
  const adminKey = async (request: FastifyRequest, reply: FastifyReply) => {
    const given = request.headers['x-admin-key'];
    if (typeof given !== 'string' || !services.adminKey || !secretsEqual(given, services.adminKey)) {
      return sendError(reply, 401, 'UNAUTHENTICATED', 'invalid or missing X-Admin-Key');
    }
  };
  const unauthorized = error('X-Admin-Key missing or wrong (or ADMIN_KEY unset)');

  app.get('/admin/payment-provider', {
    schema: {
      tags: ['billing'],
      summary: 'The active payment provider',
      description: 'Which provider new payments and checkouts use, the stored selection, and whether each provider has all its settings.',
      security: requires('adminKey'),
      response: {
        200: {
          description: 'The provider state',
          type: 'object',
          properties: {
            active: { ...provider, description: 'Used for new payments and checkouts' },
            persisted: { ...provider, description: 'The stored selection (backup without its settings is not used)' },
            primary_configured: { type: 'boolean' },
            backup_configured: { type: 'boolean' },
          },
          required: ['active', 'persisted', 'primary_configured', 'backup_configured'],
        },
        401: unauthorized,
      },
    },
    onRequest: adminKey,
    handler: () => services.providers.state(),
  });

  app.post<{ Body: { provider: PaymentProviderName } }>('/admin/payment-provider', {
    schema: {
      tags: ['billing'],
      summary: 'Switch the active payment provider',
      description:
        'New payments and checkouts go to the chosen provider at once, on every instance. Subscriptions already running at the ' +
        'other provider keep renewing there. Switching to backup without its three required settings changes nothing (503).',
      security: requires('adminKey'),
      body: {
        type: 'object',
        required: ['provider'],
        properties: { provider: { ...provider, description: 'primary or backup' } },
      },
      response: {
        200: {
          description: 'Switched (or already active)',
          type: 'object',
          properties: { previous: provider, active: provider, message: { type: 'string' } },
          required: ['previous', 'active', 'message'],
        },
        400: error('No provider, or an unknown one'),
        401: unauthorized,
        503: error('The backup provider is not fully configured'),
      },
    },
    onRequest: adminKey,
    handler: async (request, reply) => {
      const result = await services.providers.switchTo(request.body.provider);
      if ('error' in result) return sendError(reply, 503, result.error, result.message);
      return result;
    },
  });
}
