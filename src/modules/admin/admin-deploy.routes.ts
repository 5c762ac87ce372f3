import type { ServerResponse } from 'node:http';
import type { FastifyInstance } from 'fastify';
import { DEPLOY_ENVIRONMENTS, type DeployEnvironment } from '../../config';
import type { AdminServices } from './admin.services';
import { CHANGE_ERRORS, CSRF_HEADER, error, NO_BODY, SESSION_ERRORS, TAGS } from './admin.schemas';

/** A comment line on every output stream this often, so proxies and browsers keep it open. */
const KEEP_ALIVE_MS = 15_000;

const RUN = {
  type: 'object',
  properties: {
    id: { type: 'integer' },
    environment: { type: 'string', enum: [...DEPLOY_ENVIRONMENTS] },
    command: { type: 'string' },
    status: { type: 'string', enum: ['running', 'succeeded', 'failed', 'timed-out', 'interrupted'] },
    exitCode: { type: ['integer', 'null'] },
    signal: { type: ['string', 'null'] },
    startedBy: { type: 'string' },
    startedAt: { type: 'string', format: 'date-time' },
    endedAt: { type: ['string', 'null'], format: 'date-time' },
    durationMs: { type: ['integer', 'null'] },
  },
  required: ['id', 'environment', 'command', 'status', 'exitCode', 'signal', 'startedBy', 'startedAt', 'endedAt', 'durationMs'],
} as const;

const RUN_PARAMS = { type: 'object', required: ['id'], properties: { id: { type: 'integer', minimum: 1, maximum: 2 ** 53 - 1 } } } as const;
const UNKNOWN_RUN = error('No run of that id (UNKNOWN_RUN)');

/** Deployments (spec 3 §4.3): the environments' commands, running one, its output streamed, the history. */
export function adminDeployRoutes(scope: FastifyInstance, services: AdminServices, streams: Set<ServerResponse>): void {
  scope.get(
    '/api/deploy/environments',
    {
      schema: {
        tags: TAGS,
        summary: 'The deployment environments',
        description:
          "Each environment's command (PLATFORM_DEPLOY_<ENVIRONMENT>_COMMAND) or that it is not configured, its folder and timeout, and the run going on.",
        response: {
          200: {
            type: 'object',
            properties: {
              environments: {
                type: 'array',
                items: {
                  type: 'object',
                  properties: {
                    environment: { type: 'string' },
                    configured: { type: 'boolean' },
                    command: { type: ['string', 'null'] },
                    workingDirectory: { type: 'string' },
                    timeoutSeconds: { type: 'integer' },
                  },
                  required: ['environment', 'configured', 'command', 'workingDirectory', 'timeoutSeconds'],
                },
              },
              running: { anyOf: [RUN, { type: 'null' }] },
            },
            required: ['environments', 'running'],
          },
          ...SESSION_ERRORS,
        },
      },
    },
    async () => {
      const [latest] = await services.deploys.list({ limit: 1 });
      return { environments: services.deploys.environments(), running: latest?.status === 'running' ? latest : null };
    },
  );

  for (const environment of DEPLOY_ENVIRONMENTS) {
    scope.post(
      `/api/deploy/${environment}`,
      {
        schema: {
          tags: TAGS,
          summary: `Deploy to ${environment}`,
          description:
            `Runs PLATFORM_DEPLOY_${environment.toUpperCase()}_COMMAND (with /bin/sh -c, in PLATFORM_PROJECT_PATH; the request adds nothing to it) and answers ` +
            'the run at once; GET /api/deploy/runs/{id}/output streams its output. One deployment at a time, across every instance.',
          headers: CSRF_HEADER,
          body: NO_BODY,
          response: {
            202: RUN,
            ...CHANGE_ERRORS,
            409: error('The environment has no command (DEPLOY_NOT_CONFIGURED), or a deployment is running (DEPLOY_RUNNING)'),
            503: error('The server is shutting down (SHUTTING_DOWN)'),
          },
        },
      },
      async (request, reply) => reply.code(202).send(await services.deploys.start(environment as DeployEnvironment, request.adminSession!.session.username)),
    );
  }

  scope.get<{ Querystring: { environment?: string; limit: number } }>(
    '/api/deploy/runs',
    {
      schema: {
        tags: TAGS,
        summary: 'The history of deployments',
        description:
          'Newest first: who started which environment, when, how it ended (exit code) and how long it took; a run whose server died shows as interrupted.',
        querystring: {
          type: 'object',
          additionalProperties: false,
          properties: {
            environment: { type: 'string', enum: [...DEPLOY_ENVIRONMENTS] },
            limit: { type: 'integer', minimum: 1, maximum: 500, default: 50 },
          },
        },
        response: {
          200: { type: 'object', properties: { runs: { type: 'array', items: RUN } }, required: ['runs'] },
          ...SESSION_ERRORS,
          400: error('A bad filter (VALIDATION_ERROR)'),
        },
      },
    },
    async (request) => ({ runs: await services.deploys.list(request.query) }),
  );

  scope.get<{ Params: { id: number } }>(
    '/api/deploy/runs/:id',
    {
      schema: {
        tags: TAGS,
        summary: 'A deployment run with its output',
        params: RUN_PARAMS,
        response: {
          200: { type: 'object', properties: { ...RUN.properties, output: { type: 'string' } }, required: [...RUN.required, 'output'] },
          ...SESSION_ERRORS,
          400: error('The id is not a run id (VALIDATION_ERROR)'),
          404: UNKNOWN_RUN,
        },
      },
    },
    async (request) => {
      const { lines: _lines, ...run } = await services.deploys.get(request.params.id);
      return run;
    },
  );

  scope.get<{ Params: { id: number } }>(
    '/api/deploy/runs/:id/output',
    {
      schema: {
        tags: TAGS,
        summary: "A deployment's output, streamed (Server-Sent Events)",
        description:
          'Each line as a `line` event (data: {stream, text}; id: its number; after Last-Event-ID when given): the lines so far, then each new one ' +
          'while the command runs, then an `end` event with the run (its status and exit code), and the stream closes.',
        params: RUN_PARAMS,
        response: {
          200: { description: 'The stream', content: { 'text/event-stream': { schema: { type: 'string' } } } },
          ...SESSION_ERRORS,
          400: error('The id is not a run id (VALIDATION_ERROR)'),
          404: UNKNOWN_RUN,
        },
      },
    },
    async (request, reply) => {
      const { id } = request.params;
      // Unknown: a 404 before the stream starts.
      await services.deploys.get(id);
      const after = Number(request.headers['last-event-id']);
      reply.hijack();
      const response = reply.raw;
      response.writeHead(200, {
        'content-type': 'text/event-stream; charset=utf-8',
        'cache-control': 'no-store',
        'x-content-type-options': 'nosniff',
        'x-accel-buffering': 'no',
        connection: 'close',
      });
      let ended = false;
      const keepAlive = setInterval(() => response.write(': keep-alive\n\n'), KEEP_ALIVE_MS);
      streams.add(response);
      const unfollow = await services.deploys.follow(id, Number.isInteger(after) ? after : 0, (line) => {
        if (ended) return;
        if (line) {
          response.write(`id: ${line.seq}\nevent: line\ndata: ${JSON.stringify({ stream: line.stream, text: line.text })}\n\n`);
          return;
        }
        ended = true;
        void services.deploys.get(id).then(
          ({ output: _output, lines: _lines, ...run }) => response.end(`event: end\ndata: ${JSON.stringify(run)}\n\n`),
          () => response.end(),
        );
      });
      response.on('close', () => {
        unfollow();
        clearInterval(keepAlive);
        streams.delete(response);
      });
    },
  );
}

/** The certificates the TLS terminator serves (spec 3 §5.4). */
export function adminCertificateRoutes(scope: FastifyInstance, services: AdminServices): void {
  const name = { type: 'string' } as const;
  scope.get(
    '/api/certificates',
    {
      schema: {
        tags: TAGS,
        summary: 'The TLS certificates',
        description:
          'With PLATFORM_TLS_CERT_FILES set: each certificate of those PEM files (or folders) with its subject, issuer, names, validity and days left, ' +
          'warned 14 days before it expires; without: that TLS is not configured.',
        response: {
          200: {
            type: 'object',
            properties: {
              tlsConfigured: { type: 'boolean' },
              message: name,
              warningDays: { type: 'integer' },
              certificates: {
                type: 'array',
                items: {
                  type: 'object',
                  properties: {
                    file: name,
                    index: { type: 'integer', description: '0: the first certificate of the file (the server’s), then its chain' },
                    subject: name,
                    issuer: name,
                    subjectAltNames: { type: 'array', items: name },
                    serialNumber: name,
                    fingerprintSha256: name,
                    validFrom: { type: 'string', format: 'date-time' },
                    validTo: { type: 'string', format: 'date-time' },
                    daysLeft: { type: 'integer' },
                    selfSigned: { type: 'boolean' },
                    state: { type: 'string', enum: ['valid', 'expiring', 'expired', 'not-yet-valid'] },
                    warning: { type: ['string', 'null'] },
                  },
                  required: [
                    'file',
                    'index',
                    'subject',
                    'issuer',
                    'subjectAltNames',
                    'serialNumber',
                    'fingerprintSha256',
                    'validFrom',
                    'validTo',
                    'daysLeft',
                    'selfSigned',
                    'state',
                    'warning',
                  ],
                },
              },
              problems: { type: 'array', items: { type: 'object', properties: { file: name, problem: name }, required: ['file', 'problem'] } },
            },
            required: ['tlsConfigured', 'message', 'warningDays', 'certificates', 'problems'],
          },
          ...SESSION_ERRORS,
        },
      },
    },
    () => services.certificates(),
  );
}
