import type { FastifyInstance } from 'fastify';
import type { AdminServices } from './admin.services';
import { CHANGE_ERRORS, CSRF_HEADER, error, NO_BODY, SESSION_ERRORS, TAGS } from './admin.schemas';

const SYNC = {
  type: 'object',
  properties: {
    syncedAt: { type: 'string', format: 'date-time' },
    syncedBy: { type: 'string' },
    ok: { type: 'boolean' },
    routes: { type: ['integer', 'null'], description: 'The routes the manifest declared then' },
    endpoint: { type: ['string', 'null'], description: 'The sync URL called, if the manifest declares one' },
    httpStatus: { type: ['integer', 'null'] },
    durationMs: { type: 'integer' },
    message: { type: 'string' },
  },
  required: ['syncedAt', 'syncedBy', 'ok', 'routes', 'endpoint', 'httpStatus', 'durationMs', 'message'],
} as const;

const PLUGIN = {
  type: 'object',
  properties: {
    name: { type: 'string', description: "The manifest's name (the folder's when the manifest is not valid)" },
    folder: { type: 'string' },
    path: { type: 'string' },
    valid: { type: 'boolean' },
    problems: {
      type: 'array',
      items: { type: 'string' },
      description: "What is wrong with the manifest (an invalid plugin's routes are not served in the reference)",
    },
    version: { type: ['string', 'null'] },
    description: { type: ['string', 'null'] },
    routes: {
      type: 'array',
      items: {
        type: 'object',
        properties: { method: { type: 'string' }, path: { type: 'string' }, summary: { type: 'string' } },
        required: ['method', 'path', 'summary'],
      },
    },
    sync: { type: ['string', 'null'], description: 'The URL POST /api/plugins/{name}/sync calls' },
    webhooks: { type: 'array', items: { type: 'string' }, description: 'The events the plugin receives' },
    lastSync: { anyOf: [SYNC, { type: 'null' }] },
  },
  required: ['name', 'folder', 'path', 'valid', 'problems', 'version', 'description', 'routes', 'sync', 'webhooks', 'lastSync'],
} as const;

const NAME_PARAMS = {
  type: 'object',
  required: ['name'],
  properties: { name: { type: 'string', minLength: 1, maxLength: 64, pattern: '^[A-Za-z0-9][A-Za-z0-9 ._-]{0,63}$' } },
} as const;

const UNKNOWN = error('No plugin of that name (UNKNOWN_PLUGIN)');
const BAD_NAME = error('The name is not a plugin name (VALIDATION_ERROR)');

/** The plugins of PLINTH_PLUGINS_DIR (spec 3 §4.3): list, install, remove, sync, webhook events. */
export function adminPluginRoutes(scope: FastifyInstance, services: AdminServices): void {
  scope.get(
    '/api/plugins',
    {
      schema: {
        tags: TAGS,
        summary: 'The installed plugins',
        description:
          'Every folder of PLINTH_PLUGINS_DIR with its plugin.json: its routes (in the API reference), version, sync endpoint and webhook events, or what is wrong with it.',
        response: { 200: { type: 'object', properties: { plugins: { type: 'array', items: PLUGIN } }, required: ['plugins'] }, ...SESSION_ERRORS },
      },
    },
    async () => ({ plugins: await services.plugins.list() }),
  );

  scope.get<{ Params: { name: string } }>(
    '/api/plugins/:name',
    {
      schema: {
        tags: TAGS,
        summary: 'A plugin',
        description: 'Its manifest, its state (valid or the manifest problems) and its last sync.',
        params: NAME_PARAMS,
        response: { 200: PLUGIN, ...SESSION_ERRORS, 400: BAD_NAME, 404: UNKNOWN },
      },
    },
    async (request) => services.plugins.get(request.params.name),
  );

  scope.post<{ Body: { source: string } }>(
    '/api/plugins/install',
    {
      schema: {
        tags: TAGS,
        summary: 'Install a plugin',
        description:
          'From a plugin folder or a .tar.gz / .tgz archive on the server (absolute, or relative to PLATFORM_PROJECT_PATH). plugin.json is checked before ' +
          'anything is written; an archive entry outside the plugin (an absolute path, `..`, a link leading out, a device) refuses the whole archive. ' +
          'The plugin lands in PLINTH_PLUGINS_DIR/<name>, and its routes appear in the API reference at once.',
        headers: CSRF_HEADER,
        body: {
          type: 'object',
          required: ['source'],
          additionalProperties: false,
          properties: { source: { type: 'string', minLength: 1, maxLength: 4096, description: 'The folder or archive path on the server' } },
        },
        response: {
          201: PLUGIN,
          ...CHANGE_ERRORS,
          400: error('No source (VALIDATION_ERROR)'),
          409: error('A plugin of that name is installed (PLUGIN_EXISTS)'),
          422: error(
            'The source does not exist (SOURCE_NOT_FOUND) or is neither a folder nor an archive (UNSUPPORTED_SOURCE); plugin.json is missing or invalid ' +
              '(INVALID_MANIFEST); the archive cannot be read (BAD_ARCHIVE) or would write outside the plugin (UNSAFE_ARCHIVE)',
          ),
        },
      },
    },
    async (request, reply) => reply.code(201).send(await services.plugins.install(request.body.source)),
  );

  scope.delete<{ Params: { name: string } }>(
    '/api/plugins/:name',
    {
      schema: {
        tags: TAGS,
        summary: 'Remove a plugin',
        description: 'Deletes its folder (a symbolic link is unlinked, its target kept) and its sync history; its routes leave the API reference at once.',
        headers: CSRF_HEADER,
        params: NAME_PARAMS,
        response: { 200: { type: 'object', properties: { removed: PLUGIN }, required: ['removed'] }, ...CHANGE_ERRORS, 400: BAD_NAME, 404: UNKNOWN },
      },
    },
    async (request) => ({ removed: await services.plugins.remove(request.params.name) }),
  );

  scope.post<{ Params: { name: string } }>(
    '/api/plugins/:name/sync',
    {
      schema: {
        tags: TAGS,
        summary: 'Sync a plugin',
        description:
          'Reads plugin.json again (the API reference follows) and, when it declares `sync`, POSTs {plugin, version, requestedBy} to that URL ' +
          '(30 s at most); the outcome is recorded and answered. A failing endpoint is a recorded sync with ok false, not an error.',
        headers: CSRF_HEADER,
        params: NAME_PARAMS,
        body: NO_BODY,
        response: {
          200: { type: 'object', properties: { plugin: PLUGIN, sync: SYNC }, required: ['plugin', 'sync'] },
          ...CHANGE_ERRORS,
          400: BAD_NAME,
          404: UNKNOWN,
          422: error('plugin.json is not valid now (INVALID_MANIFEST)'),
        },
      },
    },
    async (request) => services.plugins.sync(request.params.name, request.adminSession!.session.username),
  );

  scope.get<{ Params: { name: string } }>(
    '/api/plugins/:name/webhooks',
    {
      schema: {
        tags: TAGS,
        summary: "A plugin's webhook events",
        description:
          'The events plugin.json says the plugin receives (`webhooks`), each with Plinth’s event trigger of that name (which delivers it) and its 10 latest events.',
        params: NAME_PARAMS,
        response: {
          200: {
            type: 'object',
            properties: {
              plugin: { type: 'string' },
              webhooks: {
                type: 'array',
                items: {
                  type: 'object',
                  properties: {
                    event: { type: 'string' },
                    trigger: {
                      anyOf: [
                        {
                          type: 'object',
                          properties: {
                            table: { type: 'string' },
                            operations: { type: 'array', items: { type: 'string' } },
                            webhook: { type: ['string', 'null'] },
                            webhookFromEnv: { type: ['string', 'null'] },
                            pending: { type: 'integer' },
                            dead: { type: 'integer' },
                          },
                          required: ['table', 'operations', 'webhook', 'webhookFromEnv', 'pending', 'dead'],
                        },
                        { type: 'null' },
                      ],
                    },
                    recent: {
                      type: 'array',
                      items: {
                        type: 'object',
                        properties: {
                          id: { type: 'string' },
                          op: { type: 'string' },
                          state: { type: 'string' },
                          tries: { type: 'integer' },
                          createdAt: { type: 'string', format: 'date-time' },
                        },
                        required: ['id', 'op', 'state', 'tries', 'createdAt'],
                      },
                    },
                  },
                  required: ['event', 'trigger', 'recent'],
                },
              },
            },
            required: ['plugin', 'webhooks'],
          },
          ...SESSION_ERRORS,
          400: BAD_NAME,
          404: UNKNOWN,
        },
      },
    },
    async (request) => services.plugins.webhooks(request.params.name),
  );
}
