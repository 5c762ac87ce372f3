import type { FastifyInstance } from 'fastify';
import { secretsEqual } from '../common/secrets';
import { MetadataError, type MetadataApi, type MetadataApiKind, type MetadataRequest } from '../platform/metadata';
import { requires } from '../platform/fastify/security-schemes';
import { ADMIN_SECRET_HEADER } from '../platform/session';

export const METADATA_PATH = '/v1/metadata';

/** Hasura's error body: `{path, error, code}`. */
const METADATA_ERROR_SCHEMA = {
  type: 'object',
  properties: { path: { type: 'string' }, error: { type: 'string' }, code: { type: 'string' }, internal: {} },
  required: ['path', 'error', 'code'],
} as const;

/** Hasura's schema API: `run_sql` (and `bulk` of it) for migrations and consoles. */
export const QUERY_PATH = '/v2/query';

/**
 * `POST /v1/metadata`: Hasura's metadata API (`{type, args}`, and `bulk`), and `POST /v2/query`:
 * its schema API (`run_sql`), both for the admin secret only. The request types come from the
 * modules (PlinthModule.metadata); the answer is the request's result (`{"message":"success"}`
 * for changes), a refusal is 400 `{path, error, code}` (with `internal` for PostgreSQL's error).
 */
export function registerMetadataRoute(app: FastifyInstance, settings: { adminSecret: string; api: MetadataApi }): void {
  registerAdminApi(app, settings, METADATA_PATH, 'metadata', {
    summary: 'Metadata API (Hasura-compatible)',
    description:
      "Changes and reads the metadata (event triggers, cron triggers, scheduled events, actions, tracked tables...) with Hasura's request " +
      'shapes: `{"type": "<request type>", "args": {...}}`, or `{"type": "bulk", "args": [<requests>]}` to run several in ' +
      'one transaction. Whole-metadata requests: `export_metadata`, `replace_metadata`, `clear_metadata`, ' +
      '`reload_metadata`, `get_inconsistent_metadata`. A refused request changes nothing and answers 400 `{path, error, code}`.',
    typeDescription: 'The request type, such as pg_create_event_trigger',
  });
  registerAdminApi(app, settings, QUERY_PATH, 'query', {
    summary: 'Schema API (Hasura-compatible): run_sql',
    description:
      'Runs SQL on the database, as Hasura\'s `run_sql`: `{"type": "run_sql", "args": {"sql": "...", "cascade": false, ' +
      '"read_only": false, "check_metadata_consistency": true}}` (or `bulk` of them, in one transaction). The statements run in one ' +
      'transaction; the answer is the last statement\'s result, `{"result_type": "TuplesOk", "result": [[columns], [values as text]...]}` ' +
      'or `{"result_type": "CommandOk", "result": null}`. A statement that changes a tracked table updates the metadata (a rename ' +
      'follows; a drop that metadata depends on is refused unless `cascade`, which drops the dependent metadata) and the generated API. ' +
      'A failing statement rolls everything back and answers 400 `{path, error, code: "postgres-error", internal}`.',
    typeDescription: 'The request type: run_sql (or pg_run_sql), or bulk',
  });
}

function registerAdminApi(
  app: FastifyInstance,
  settings: { adminSecret: string; api: MetadataApi },
  path: string,
  kind: MetadataApiKind,
  text: { summary: string; description: string; typeDescription: string },
): void {
  app.post<{ Body: MetadataRequest }>(path, {
    config: { errorFormat: 'metadata' },
    schema: {
      tags: ['metadata'],
      summary: text.summary,
      description: text.description,
      security: requires('adminSecret'),
      body: {
        type: 'object',
        required: ['type'],
        properties: {
          type: { type: 'string', description: text.typeDescription },
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
        return reply.code(401).send({ path: '$', error: `the ${kind} API needs the admin secret (x-gql-admin-secret)`, code: 'access-denied' });
      }
    },
    handler: async (request, reply) => {
      try {
        return reply.code(200).send(await settings.api.run(request.body, kind));
      } catch (error) {
        if (error instanceof MetadataError) {
          const body = { path: error.path, error: error.message, code: error.code };
          return reply.code(400).send(error.internal === undefined ? body : { ...body, internal: error.internal });
        }
        throw error;
      }
    },
  });
}
