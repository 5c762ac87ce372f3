import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { secretsEqual } from '../../common/secrets';
import type { ActionDefinition } from '../../platform/actions';
import { ENVELOPE_ERROR_SCHEMA, RATE_LIMITED_ENVELOPE_SCHEMA, sendError } from '../../http/errors';
import { requires } from '../../platform/fastify/security-schemes';
import { resolveSession } from '../../platform/session';
import { takeQuota } from '../../platform/quotas';
import { rateLimitCaller } from '../../platform/rate-limits';
import { PAYMENT_PROVIDERS, type PaymentProviderName } from '../../config';
import type { PaymentsServices } from './payments.services';
import { PROCESS_PAYMENT_ROLES } from './payments.types';

/** The engine-compatible handler route of processPayment (`/actions/process-payment`). */
export function paymentsActions({ payments }: PaymentsServices): ActionDefinition[] {
  return [
    {
      name: 'processPayment',
      roles: PROCESS_PAYMENT_ROLES,
      quota: 'checkouts',
      // The fields themselves are checked by the service, which answers success=false per field.
      argumentsSchema: { type: 'object', required: ['input'], properties: { input: { type: 'object' } } },
      handle: (args, session, headers) => payments.processPayment(args.input, session, headers['idempotency-key']),
    },
  ];
}

const error = (description: string) => ({ ...ENVELOPE_ERROR_SCHEMA, description });
const provider = { type: 'string', enum: [...PAYMENT_PROVIDERS] };

/** The billing REST routes (spec 3 §4.1): the provider switch, the providers' webhooks, checkout. */
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

  app.get('/billing/health', {
    schema: {
      tags: ['billing'],
      summary: 'Billing health',
      description: 'Which provider new checkouts use, and BILLING_PROVIDER (an alias shown here only; PAYMENT_PROVIDER and the switch decide).',
      response: {
        200: {
          description: 'The billing state',
          type: 'object',
          properties: {
            status: { type: 'string', const: 'ok' },
            active: provider,
            billing_provider: { anyOf: [provider, { type: 'null' }], description: 'BILLING_PROVIDER as set, or null' },
          },
          required: ['status', 'active', 'billing_provider'],
        },
      },
    },
    handler: async () => ({ status: 'ok', active: await services.providers.active(), billing_provider: services.billingProviderAlias ?? null }),
  });

  registerWebhookRoutes(app, services);
  registerCheckoutRoute(app, services);
}

const received = {
  description: 'Received: processed now, or a delivery of an event processed before (duplicate)',
  type: 'object',
  properties: { received: { type: 'boolean', const: true }, duplicate: { type: 'boolean' } },
  required: ['received', 'duplicate'],
};

function registerWebhookRoutes(app: FastifyInstance, services: PaymentsServices): void {
  const responses = {
    200: received,
    400: error('A missing or bad signature (or one too old, or no webhook secret set), or not an event; nothing is stored'),
    503: error('The event could not be stored now (the provider retries)'),
  };
  const handle = async (
    reply: FastifyReply,
    check: 'valid' | 'invalid' | 'unconfigured',
    secretName: string,
    header: string,
    receive: () => Promise<{ outcome: 'processed' | 'duplicate' } | { error: string; message: string }>,
  ) => {
    // Without its secret no signature verifies: the provider sees a failed delivery and retries.
    if (check === 'unconfigured') return sendError(reply, 400, 'WEBHOOK_NOT_CONFIGURED', `The signature cannot be verified: ${secretName} is not set`);
    if (check === 'invalid') return sendError(reply, 400, 'INVALID_SIGNATURE', `The ${header} header does not verify this body`);
    try {
      const result = await receive();
      if ('error' in result) return sendError(reply, 400, result.error, result.message);
      return { received: true, duplicate: result.outcome === 'duplicate' };
    } catch (failure) {
      // Nothing was stored (the event's transaction rolled back): the provider's retry will apply it.
      reply.log.error({ err: failure }, 'webhook event could not be processed');
      return sendError(reply, 503, 'TRY_AGAIN', 'The event could not be processed now; deliver it again');
    }
  };

  app.post('/webhooks/primary', {
    config: { rawBody: true },
    schema: {
      tags: ['billing'],
      summary: 'Webhook of the primary provider',
      description:
        'Events of the primary (Stripe-compatible) provider, signed in `Stripe-Signature` (`t=<time>,v1=<HMAC-SHA256 of "<t>.<body>">` ' +
        'with PRIMARY_PROVIDER_WEBHOOK_SECRET; older than PAYMENTS_WEBHOOK_TOLERANCE_SECONDS is refused). Processed once per event id, ' +
        'whichever provider is active: payment intent outcomes, checkout.session.completed, customer.subscription.*, invoice.paid ' +
        '(renewal), invoice.payment_failed. Other types are acknowledged.',
      headers: { type: 'object', properties: { 'stripe-signature': { type: 'string' } } },
      body: { type: 'object', description: 'A provider event: {id, type, data: {object}}' },
      response: responses,
    },
    handler: (request, reply) =>
      handle(
        reply,
        services.webhooks.verifyPrimary(request.rawBody, request.headers['stripe-signature']),
        'PRIMARY_PROVIDER_WEBHOOK_SECRET',
        'Stripe-Signature',
        () => services.webhooks.receivePrimary(request.body),
      ),
  });

  app.post('/webhooks/backup', {
    config: { rawBody: true },
    schema: {
      tags: ['billing'],
      summary: 'Webhook of the backup provider',
      description:
        'Events of the backup (Lemon Squeezy-compatible) provider, signed in `X-Signature` (hex HMAC-SHA256 of the body with ' +
        'BACKUP_PROVIDER_WEBHOOK_SECRET). Processed once per delivery body, whichever provider is active: subscription_created, ' +
        'subscription_updated, subscription_cancelled, order_created. Other types are acknowledged.',
      headers: { type: 'object', properties: { 'x-signature': { type: 'string' } } },
      body: { type: 'object', description: 'A provider event: {meta: {event_name, custom_data}, data}' },
      response: responses,
    },
    handler: (request, reply) =>
      handle(reply, services.webhooks.verifyBackup(request.rawBody, request.headers['x-signature']), 'BACKUP_PROVIDER_WEBHOOK_SECRET', 'X-Signature', () =>
        services.webhooks.receiveBackup(request.rawBody!, request.body),
      ),
  });
}

function registerCheckoutRoute(app: FastifyInstance, services: PaymentsServices): void {
  app.post<{ Body: { product: string; email?: string } }>('/billing/checkout', {
    // The quota's 429 is the envelope of the route's other errors.
    config: { errorFormat: 'envelope' },
    schema: {
      tags: ['billing'],
      summary: 'Hosted checkout of the active provider',
      description:
        'The address of a hosted checkout (a Stripe Checkout session, or a Lemon Squeezy checkout) for a subscription to `product`, ' +
        'at the provider active now. Answered with `Cache-Control: no-store`, so a cached pricing page cannot keep the old provider. ' +
        'Quota: RATE_LIMIT_CHECKOUTS_* per user, shared with processPayment (not for admin).',
      security: requires('bearerAuth', 'adminSecret'),
      body: {
        type: 'object',
        required: ['product'],
        properties: {
          product: {
            type: 'string',
            minLength: 1,
            maxLength: 64,
            pattern: '^[a-z][a-z0-9_]*$',
            description: 'A configured product in lower case, such as pro',
          },
          email: { type: 'string', maxLength: 254, format: 'email', description: 'Pre-fills the checkout' },
        },
      },
      response: {
        200: {
          description: 'The checkout to send the customer to',
          type: 'object',
          properties: { url: { type: 'string' }, provider: provider },
          required: ['url', 'provider'],
        },
        400: error('An unknown product, or a malformed body'),
        401: error('No valid bearer token (or no user id in it)'),
        403: error('The token does not allow the requested role'),
        429: { ...RATE_LIMITED_ENVELOPE_SCHEMA, description: "Past the user's checkouts quota (RATE_LIMITED); Retry-After says when to try again" },
        502: error('The provider refused or failed'),
        503: error('The active provider has no API key configured'),
        504: error('The provider did not answer in time'),
      },
    },
    handler: async (request, reply) => {
      reply.header('cache-control', 'no-store');
      const session = resolveSession(request.headers, services.session);
      if (!session.userId) return sendError(reply, 401, 'UNAUTHENTICATED', 'A bearer token of a user is required');
      const caller = rateLimitCaller(session, request.ip, request.headers);
      if ('error' in caller) return sendError(reply, 400, 'VALIDATION_ERROR', caller.error);
      await takeQuota(services.rateLimits, 'checkouts', session, caller);
      const result = await services.checkout.checkout(session.userId, request.body.product, request.body.email ?? null);
      if ('url' in result) return result;
      const status = { UNKNOWN_PRODUCT: 400, PROVIDER_NOT_CONFIGURED: 503, PROVIDER_TIMEOUT: 504 }[result.error] ?? 502;
      return sendError(reply, status, result.error, result.message);
    },
  });
}
