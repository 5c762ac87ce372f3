import type { FastifyInstance } from 'fastify';
import type { AdminServices } from './admin.services';
import { CHANGE_ERRORS, CSRF_HEADER, error, NO_BODY, PART, SESSION_ERRORS, TAGS } from './admin.schemas';
import { PART_ACTIONS, type PartAction } from './plinth-parts.service';

/** Where an action applies: this instance, or every instance sharing the database. */
const SCOPES = ['this', 'all'] as const;

const INSTANCE_ANSWER = {
  type: 'object',
  properties: {
    instance: { type: 'string', description: "A random id of the instance's server, new at each start" },
    hostname: { type: 'string' },
    pid: { type: 'integer' },
    state: { type: 'string', enum: ['running', 'stopped', 'not-run-here', 'unavailable'], description: 'The part there after the action' },
    detail: { type: 'string' },
    error: {
      type: 'object',
      properties: { code: { type: 'string' }, message: { type: 'string' } },
      required: ['code', 'message'],
      description: 'Why the action failed there',
    },
  },
  required: ['instance', 'hostname', 'pid'],
} as const;

/** The services page's routes: the parts with their states, and their actions on this or every instance. */
export function servicesRoutes(scope: FastifyInstance, services: AdminServices): void {
  scope.get(
    '/api/services',
    {
      schema: {
        tags: TAGS,
        summary: "Plinth's parts and the declared custom services on this instance, and what can be done to each",
        response: { 200: { type: 'object', properties: { services: { type: 'array', items: PART } }, required: ['services'] }, ...SESSION_ERRORS },
      },
    },
    async () => ({ services: await services.parts.list() }),
  );

  scope.post<{ Params: { name: string; action: PartAction }; Querystring: { scope: (typeof SCOPES)[number] } }>(
    '/api/services/:name/:action',
    {
      schema: {
        tags: TAGS,
        summary: 'Start, stop or restart a part on this instance, or on every instance',
        description:
          'The event dispatcher (`events`), the scheduler (`scheduler`) and the job worker of each queue (`jobs.<queue>`) stop claiming work ' +
          '(work in flight finishes) and start again; a custom service `cs.<name>` that this process runs (`plinth start`) is stopped and started ' +
          'again; the other parts are shown, not stopped (409). With `scope=all` the action goes to every instance sharing the database: the ' +
          'answer is this instance’s part and, in `cluster`, the instances that acknowledged within PLATFORM_ADMIN_BROADCAST_TIMEOUT_MS; a stop ' +
          'on all instances stands until a start on all instances (an instance started meanwhile stops the part too).',
        headers: CSRF_HEADER,
        body: NO_BODY,
        params: {
          type: 'object',
          required: ['name', 'action'],
          properties: { name: { type: 'string', pattern: '^[a-z][a-z0-9._-]{0,80}$' }, action: { type: 'string', enum: [...PART_ACTIONS] } },
        },
        querystring: {
          type: 'object',
          properties: { scope: { type: 'string', enum: [...SCOPES], default: 'this', description: 'this instance (default), or all instances' } },
        },
        response: {
          200: {
            ...PART,
            description: 'The part after the action (on this instance)',
            properties: {
              ...PART.properties,
              cluster: {
                type: 'object',
                description: 'With scope=all: the instances that acknowledged',
                properties: {
                  expected: { type: 'integer', description: 'Instances listening on the database when the action was sent' },
                  instances: { type: 'array', items: INSTANCE_ANSWER },
                  timedOut: { type: 'boolean', description: 'The wait ended before every expected instance answered' },
                },
                required: ['expected', 'instances', 'timedOut'],
              },
            },
          },
          ...CHANGE_ERRORS,
          404: error('No such part (UNKNOWN_SERVICE)'),
          409: error(
            'The part cannot take that action now (ACTION_NOT_POSSIBLE): not run in this process, already so, only health-checked, or not controllable',
          ),
          503: error('The server is shutting down'),
        },
      },
    },
    async (request) => {
      const { name, action } = request.params;
      if (request.query.scope !== 'all') return services.parts.act(name, action);
      const { part, cluster } = await services.broadcast.broadcast(name, action);
      return { ...part, cluster };
    },
  );
}
