import type { FastifyInstance } from 'fastify';
import type { Config } from '../../config';
import type { EventsServices } from './events.services';

const STATUS_BODY = {
  type: 'object',
  properties: { status: { type: 'string' }, message: { type: 'string' } },
  required: ['status'],
} as const;

/**
 * `POST <actions route>/external/:provider` (spec 1 §4, §5.3): an external provider's webhook,
 * verified by its HMAC-SHA256 signature before anything is stored.
 */
export function eventsRoutes(app: FastifyInstance, services: EventsServices, config: Config): void {
  const prefix = config.actionsRoute === '/' ? '' : config.actionsRoute;
  app.post<{ Params: { provider: string }; Body: unknown }>(`${prefix}/external/:provider`, {
    config: { rawBody: true },
    schema: {
      tags: ['events'],
      summary: 'Receive an external webhook (signed with HMAC-SHA256)',
      description:
        "An external provider's webhook, signed with its secret `EXTERNAL_WEBHOOK_<PROVIDER>_SECRET` by its scheme (`_SCHEME`): " +
        '`hmac-sha256` (the default: the hex HMAC-SHA256 of the body in `x-hub-signature-256: sha256=<hex>`, unless `_SIGNATURE_HEADER` ' +
        'and `_SIGNATURE_PREFIX` say otherwise), `stripe` (`Stripe-Signature`), `slack` (`X-Slack-Signature`), `shopify` ' +
        '(`X-Shopify-Hmac-Sha256`) or `standard-webhooks` (`webhook-signature`, Svix). A signed timestamp more than `_TOLERANCE_SECONDS` ' +
        '(300) from now is refused. A verified delivery is stored once in `external_webhook_deliveries`, which event triggers can watch: ' +
        'the same provider delivery id, or the same exact body, within `EXTERNAL_WEBHOOK_DEDUP_WINDOW_HOURS` is answered 200 ' +
        '`duplicate: true` and neither stored nor fired.',
      security: [],
      params: {
        type: 'object',
        required: ['provider'],
        properties: {
          provider: {
            type: 'string',
            pattern: '^[a-z0-9][a-z0-9-]{0,63}$',
            description: 'The provider, as its settings name it (github for EXTERNAL_WEBHOOK_GITHUB_*)',
          },
        },
      },
      body: { description: "The provider's JSON body, exactly as it signed it" },
      response: {
        200: {
          ...STATUS_BODY,
          description: 'Verified and stored, or a duplicate (`duplicate: true`: seen within the window; nothing stored), so the provider stops retrying',
          properties: { ...STATUS_BODY.properties, duplicate: { type: 'boolean' } },
        },
        401: {
          ...STATUS_BODY,
          description: 'The signature is missing or does not match the body, or its signed timestamp is outside the tolerance: nothing is stored',
        },
        404: { ...STATUS_BODY, description: 'No provider of this name is configured' },
      },
    },
    handler: async (request, reply) => {
      const outcome = await services.externalWebhooks.receive(request.params.provider, request.rawBody, request.body, request.headers);
      if (outcome.result === 'unknown-provider')
        return reply.code(404).send({ status: 'not_found', message: `no external provider "${request.params.provider}" is configured` });
      if (outcome.result === 'unauthorized') return reply.code(401).send({ status: 'unauthorized', message: outcome.reason });
      return reply.code(200).send({ status: 'ok', ...(outcome.result === 'duplicate' ? { duplicate: true } : {}) });
    },
  });
}
