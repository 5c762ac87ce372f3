import type { FastifyInstance } from 'fastify';
import { secretsEqual } from '../common/secrets';
import { MetadataError, type MetadataApi, type MetadataRequest } from '../platform/metadata';
import { requires } from '../platform/fastify/security-schemes';
import { ADMIN_SECRET_HEADER } from '../platform/session';

export const METADATA_PATH = '/v1/metadata';

/** Hasura's error body: `{path, error, code}`. */
const METADATA_ERROR_SCHEMA = {
  type: 'object',
  properties: { path: { type: 'string' }, error: { type: 'string' }, code: { type: 'string' } },
  required: ['path', 'error', 'code'],
} as const;

/**
 * `POST /v1/metadata`: Hasura's metadata API (`{type, args}`, and `bulk`), for the admin secret
 * only. The request types come from the modules (PlinthModule.metadata); the answer is the
 * request's result (`{"message":"success"}` for changes), a refusal is 400 `{path, error, code}`.
 */
export function registerMetadataRoute(app: FastifyInstance, settings: { adminSecret: string; api: MetadataApi }): void {
  app.post<{ Body: MetadataRequest }>(METADATA_PATH, {
    config: { errorFormat: 'metadata' },
    schema: {
      tags: ['metadata'],
      summary: 'Metadata API (Hasura-compatible)',
      description:
        "Changes and reads the metadata (event triggers, cron triggers, scheduled events, actions...) with Hasura's request " +
        'shapes: `{"type": "<request type>", "args": {...}}`, or `{"type": "bulk", "args": [<requests>]}` to run several in ' +
        'one transaction. Whole-metadata requests: `export_metadata`, `replace_metadata`, `clear_metadata`, ' +
        '`reload_metadata`, `get_inconsistent_metadata`. A refused request changes nothing and answers 400 `{path, error, code}`.',
      security: requires('adminSecret'),
      body: {
        type: 'object',
        required: ['type'],
        properties: {
          type: { type: 'string', description: 'The request type, such as pg_create_event_trigger' },
          args: { description: 'The arguments of the request type' },
          version: { type: 'integer', description: 'The version of the request shape (1 or 2)' },
          source: { type: 'string' },
          resource_version: { type: 'integer' },
        },
      },
      response: {
        200: { description: 'The result of the request: `{"message":"success"}` for a change, the data asked for otherwise' },
        400: { ...METADATA_ERROR_SCHEMA, description: 'The request was refused and changed nothing' },
        401: { ...METADATA_ERROR_SCHEMA, description: 'No admin secret, or a wrong one (access-denied)' },
      },
    },
    onRequest: async (request, reply) => {
      const given = request.headers[ADMIN_SECRET_HEADER];
      if (typeof given !== 'string' || !secretsEqual(given, settings.adminSecret)) {
        return reply.code(401).send({ path: '$', error: 'the metadata API needs the admin secret (x-gql-admin-secret)', code: 'access-denied' });
      }
    },
    handler: async (request, reply) => {
      try {
        return reply.code(200).send(await settings.api.run(request.body));
      } catch (error) {
        if (error instanceof MetadataError) return reply.code(400).send({ path: error.path, error: error.message, code: error.code });
        throw error;
      }
    },
  });
}
