import type { ServerResponse } from 'node:http';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { sendError } from '../../http/errors';
import { ADMIN_SESSION_COOKIE as SESSION_COOKIE, type AdminSession } from './admin-sessions.service';
import type { AdminServices } from './admin.services';
import { adminPages } from './admin.pages';
import { adminAreaRoutes } from './admin-areas.routes';
import { servicesRoutes } from './admin-services.routes';
import { adminDatabaseRoutes } from './admin-database.routes';
import { adminOperationsRoutes } from './admin-operations.routes';
import { chartsRoutes } from './admin-charts.routes';
import { ADMIN_ROUTE_PREFIX, cameThroughAdminPort, serveOnAdminPort } from './admin-port';
import { CHANGE_ERRORS, CSRF_HEADER, error, NO_BODY, PART, SESSION, SESSION_ERRORS, SETTING, TAGS, tooSoon } from './admin.schemas';

const LOGIN_PATH = '/api/auth/login';
const CHANGING_METHODS = new Set(['POST', 'PUT', 'PATCH', 'DELETE']);
/** A comment line on every log stream this often, so proxies and browsers keep it open. */
const KEEP_ALIVE_MS = 15_000;
const LEVELS: Record<string, number> = { trace: 10, debug: 20, info: 30, warn: 40, error: 50, fatal: 60 };

declare module 'fastify' {
  interface FastifyRequest {
    /** The admin session of a request to the dashboard's API (set by its onRequest hook). */
    adminSession: { token: string; session: AdminSession } | null;
  }
}

function sessionToken(request: FastifyRequest): string | undefined {
  for (const pair of (request.headers.cookie ?? '').split(';')) {
    const separator = pair.indexOf('=');
    if (separator > 0 && pair.slice(0, separator).trim() === SESSION_COOKIE) return pair.slice(separator + 1).trim();
  }
  return undefined;
}

function sessionCookie(request: FastifyRequest, value: string, maxAge?: number): string {
  const secure = request.protocol === 'https' ? '; Secure' : '';
  return `${SESSION_COOKIE}=${value}; Path=/; HttpOnly; SameSite=Strict${maxAge === undefined ? '' : `; Max-Age=${maxAge}`}${secure}`;
}

/** Whether a log line (pino's JSON) belongs to `service` and is at `minimum` level or above. */
function lineMatches(line: Record<string, unknown>, service: string, minimum: number): boolean {
  if (typeof line.level !== 'number' || line.level < minimum) return false;
  switch (service) {
    case 'all':
      return true;
    case 'http':
      return 'reqId' in line || line.component === 'apollo';
    case 'database':
      return line.component === 'pubsub' || /database/i.test(String(line.msg ?? ''));
    case 'scheduler':
      return line.component === 'recurring';
    case 'mailer':
      return line.component === 'mail';
    case 'events':
      return line.component === 'events';
    case 'auth':
      return line.module === 'auth';
    default:
      // A custom service's output, as plinth start keeps it (cli/services.ts).
      if (service.startsWith('cs.')) return line.component === 'custom-service' && line.service === service.slice('cs.'.length);
      return service.startsWith('jobs.') && line.component === 'jobs' && line.queue === service.slice('jobs.'.length);
  }
}

/**
 * The dashboard's REST API (spec 3 §4.3), reached only through PLATFORM_ADMIN_PORT (at its root;
 * the main app routes it under ADMIN_ROUTE_PREFIX). Every route but the login needs the session
 * cookie (401 without), and every state-changing one the session's CSRF token in X-CSRF-Token (403).
 */
export function adminRoutes(app: FastifyInstance, services: AdminServices): void {
  const streams = new Set<ServerResponse>();
  app.register(
    async (scope) => {
      scope.decorateRequest('adminSession', null);
      scope.addHook('onRequest', async (request, reply) => {
        // On the main port these routes do not exist.
        if (!cameThroughAdminPort(request.raw)) return sendError(reply, 404, 'NOT_FOUND', `Route ${request.method} ${request.url.split('?')[0]} not found`);
        reply.header('cache-control', 'no-store').header('x-content-type-options', 'nosniff').header('x-frame-options', 'DENY');
        // The login, the pages and their assets need no session (the pages ask for one, and show the login form without).
        const route = request.routeOptions.url ?? '';
        if (route === `${ADMIN_ROUTE_PREFIX}${LOGIN_PATH}` || !route.startsWith(`${ADMIN_ROUTE_PREFIX}/api/`)) return;
        const token = sessionToken(request);
        const session = await services.sessions.touch(token);
        if (!session || token === undefined) return sendError(reply, 401, 'UNAUTHENTICATED', 'Log in first: no admin session, or it has ended');
        const csrfToken = request.headers['x-csrf-token'];
        if (CHANGING_METHODS.has(request.method) && !services.sessions.csrfMatches(token, typeof csrfToken === 'string' ? csrfToken : undefined)) {
          return sendError(reply, 403, 'CSRF_TOKEN_INVALID', 'X-CSRF-Token is missing or is not the token of this session');
        }
        request.adminSession = { token, session };
      });
      registerRoutes(scope, services, streams);
      adminPages(scope, { preload: services.listen !== undefined });
    },
    { prefix: ADMIN_ROUTE_PREFIX },
  );
  serveOnAdminPort(app, () =>
    services.listen
      ? {
          ...services.listen,
          beforeClose: () => {
            for (const stream of streams) stream.end();
          },
        }
      : undefined,
  );
}

function registerRoutes(scope: FastifyInstance, services: AdminServices, streams: Set<ServerResponse>): void {
  adminAreaRoutes(scope, services.areas);
  adminOperationsRoutes(scope, services, streams);
  scope.post<{ Body: { username: string; password: string; otp?: string } }>(LOGIN_PATH, {
    schema: {
      tags: TAGS,
      summary: 'Log in to the admin dashboard',
      description:
        'Checks the user name, the password and, when PLATFORM_ADMIN_TOTP_SECRET is set, the TOTP code; sets the session cookie ' +
        '(HttpOnly, SameSite=Strict) and answers the CSRF token. Failed logins make the next one wait, doubling, and lock logins out ' +
        'after PLATFORM_ADMIN_LOGIN_MAX_FAILURES.',
      body: {
        type: 'object',
        required: ['username', 'password'],
        additionalProperties: false,
        properties: {
          username: { type: 'string', maxLength: 200 },
          password: { type: 'string', maxLength: 1024 },
          otp: { type: 'string', maxLength: 16, description: 'The 6-digit code of the authenticator app (with TOTP set up)' },
        },
      },
      response: {
        200: { ...SESSION, description: 'Logged in: the session cookie is set' },
        401: error('Wrong user name, password or code (INVALID_CREDENTIALS), or a code is needed (OTP_REQUIRED)'),
        429: tooSoon,
      },
    },
    handler: async (request, reply) => {
      const { token, session } = await services.sessions.login(request.body.username, request.body.password, request.body.otp);
      reply.header('set-cookie', sessionCookie(request, token));
      return session;
    },
  });

  scope.post(
    '/api/auth/logout',
    {
      schema: {
        tags: TAGS,
        summary: 'Log out of the admin dashboard',
        headers: CSRF_HEADER,
        body: NO_BODY,
        response: { 200: { type: 'object', properties: { loggedOut: { type: 'boolean', const: true } }, required: ['loggedOut'] }, ...CHANGE_ERRORS },
      },
    },
    async (request, reply) => {
      await services.sessions.logout(request.adminSession!.token);
      reply.header('set-cookie', sessionCookie(request, '', 0));
      return { loggedOut: true };
    },
  );

  scope.get(
    '/api/auth/session',
    { schema: { tags: TAGS, summary: 'The admin session (and its CSRF token)', response: { 200: SESSION, ...SESSION_ERRORS } } },
    async (request) => request.adminSession!.session,
  );

  scope.get(
    '/api/health',
    {
      schema: {
        tags: TAGS,
        summary: "Each part's state, and the CLI version",
        response: {
          200: {
            type: 'object',
            properties: {
              status: { type: 'string', enum: ['ok', 'degraded'], description: 'degraded: a part is stopped or unavailable' },
              version: { type: 'string', description: "Plinth's version (the dashboard's)" },
              cliVersion: { type: 'string', description: 'The version of the `plinth` CLI, which ships in lockstep with the dashboard' },
              parts: { type: 'array', items: PART },
            },
            required: ['status', 'version', 'cliVersion', 'parts'],
          },
          ...SESSION_ERRORS,
        },
      },
    },
    () => services.parts.health(),
  );

  servicesRoutes(scope, services);

  scope.get(
    '/api/config',
    {
      schema: {
        tags: TAGS,
        summary: 'Every setting: its running value (secrets masked), the settings file’s, and its default',
        response: {
          200: {
            type: 'object',
            properties: { settingsFile: { type: 'string' }, settings: { type: 'array', items: SETTING } },
            required: ['settingsFile', 'settings'],
          },
          ...SESSION_ERRORS,
        },
      },
    },
    async () => ({ settingsFile: services.settings.settingsFile, settings: services.settings.list() }),
  );

  scope.post<{ Body: { settings: Record<string, string | null> } }>(
    '/api/config',
    {
      schema: {
        tags: TAGS,
        summary: 'Change settings in the settings file',
        description:
          'Each value (null or "" unsets) is checked with the rules of start-up, together with the other settings; a bad one is refused ' +
          'naming its variable and nothing is written. Settings are read at start-up: the answer names those that need a restart.',
        headers: CSRF_HEADER,
        body: {
          type: 'object',
          required: ['settings'],
          additionalProperties: false,
          properties: {
            settings: {
              type: 'object',
              minProperties: 1,
              maxProperties: 200,
              propertyNames: { pattern: '^[A-Z][A-Z0-9_]{0,127}$' },
              additionalProperties: { type: ['string', 'null'] },
            },
          },
        },
        response: {
          200: {
            type: 'object',
            properties: {
              settingsFile: { type: 'string' },
              written: { type: 'array', items: { type: 'string' } },
              restartRequired: {
                type: 'array',
                items: { type: 'string' },
                description: 'Written with a value other than the running one: applies at the next start',
              },
              overriddenByEnvironment: { type: 'array', items: { type: 'string' }, description: 'The process environment sets them, and wins over the file' },
            },
            required: ['settingsFile', 'written', 'restartRequired', 'overriddenByEnvironment'],
          },
          400: error('An unknown setting (UNKNOWN_SETTING) or an invalid value (INVALID_CONFIG), named in `errors[0].field` and the message'),
          ...CHANGE_ERRORS,
        },
      },
    },
    (request) => services.settings.update(request.body.settings),
  );

  scope.get(
    '/api/env',
    {
      schema: {
        tags: TAGS,
        summary: 'Where and how this instance runs',
        response: {
          200: {
            type: 'object',
            properties: {
              plinthVersion: { type: 'string' },
              nodeEnv: { type: 'string' },
              nodeVersion: { type: 'string' },
              platform: { type: 'string' },
              arch: { type: 'string' },
              hostname: { type: 'string' },
              pid: { type: 'integer' },
              uptimeSeconds: { type: 'integer' },
              processRoles: { type: 'array', items: { type: 'string' } },
              projectPath: { type: 'string' },
              settingsFile: { type: 'string' },
              publicUrl: { type: 'string' },
              database: {
                type: 'object',
                properties: { kind: { type: 'string', enum: ['embedded', 'DATABASE_URL'] }, serverVersion: { type: ['string', 'null'] } },
                required: ['kind', 'serverVersion'],
              },
              memory: {
                type: 'object',
                properties: { rssBytes: { type: 'integer' }, heapUsedBytes: { type: 'integer' } },
                required: ['rssBytes', 'heapUsedBytes'],
              },
            },
            required: [
              'plinthVersion',
              'nodeEnv',
              'nodeVersion',
              'platform',
              'arch',
              'hostname',
              'pid',
              'uptimeSeconds',
              'processRoles',
              'projectPath',
              'settingsFile',
              'publicUrl',
              'database',
              'memory',
            ],
          },
          ...SESSION_ERRORS,
        },
      },
    },
    () => services.environment(),
  );

  scope.get<{ Params: { service: string }; Querystring: { level: string; tail: number } }>(
    '/api/logs/:service',
    {
      schema: {
        tags: TAGS,
        summary: "A part's log lines, streamed (Server-Sent Events)",
        description:
          'Recent lines first (up to `tail`, after Last-Event-ID when given), then each new line as it is logged, as `log` events whose ' +
          "data is the line's JSON and whose id is its number. `all` streams every line; a part streams its own.",
        params: { type: 'object', required: ['service'], properties: { service: { type: 'string', pattern: '^[a-z][a-z0-9._-]{0,80}$' } } },
        querystring: {
          type: 'object',
          properties: {
            level: { type: 'string', enum: Object.keys(LEVELS), default: 'trace', description: 'The lowest level streamed' },
            tail: { type: 'integer', minimum: 0, maximum: 10_000, default: 200, description: 'How many recent lines come first' },
          },
        },
        response: {
          200: { description: 'The stream', content: { 'text/event-stream': { schema: { type: 'string' } } } },
          ...SESSION_ERRORS,
          404: error('No such part (UNKNOWN_SERVICE)'),
          503: error('This process keeps no log lines (LOGS_UNAVAILABLE)'),
        },
      },
    },
    async (request, reply) => streamLogs(request, reply, services, streams),
  );
  adminDatabaseRoutes(scope, services);
  chartsRoutes(scope, services);
}

async function streamLogs(
  request: FastifyRequest<{ Params: { service: string }; Querystring: { level: string; tail: number } }>,
  reply: FastifyReply,
  services: AdminServices,
  streams: Set<ServerResponse>,
): Promise<FastifyReply | void> {
  const { service } = request.params;
  const known = service === 'all' || (await services.parts.list()).some((part) => part.name === service);
  if (!known) return sendError(reply, 404, 'UNKNOWN_SERVICE', `There is no service ${service}: see GET /api/services, or use all`);
  const logs = services.logs;
  if (!logs) return sendError(reply, 503, 'LOGS_UNAVAILABLE', 'This process keeps no recent log lines');
  const minimum = LEVELS[request.query.level];
  const lastSeen = Number(request.headers['last-event-id']);
  const matching = (text: string): boolean => {
    try {
      return lineMatches(JSON.parse(text) as Record<string, unknown>, service, minimum);
    } catch {
      return false;
    }
  };
  reply.hijack();
  const response = reply.raw;
  response.writeHead(200, {
    'content-type': 'text/event-stream; charset=utf-8',
    'cache-control': 'no-store',
    'x-content-type-options': 'nosniff',
    'x-accel-buffering': 'no',
    // A stream's connection is not reused: ended (at shutdown), it closes.
    connection: 'close',
  });
  const send = (seq: number, text: string) => response.write(`id: ${seq}\nevent: log\ndata: ${text.trimEnd()}\n\n`);
  const { tail } = request.query;
  const backlog = tail === 0 ? [] : logs.recent().filter((line) => (Number.isInteger(lastSeen) ? line.seq > lastSeen : true) && matching(line.text));
  for (const line of backlog.slice(-tail)) send(line.seq, line.text);
  response.write(': following\n\n');
  const unfollow = logs.follow((line) => {
    if (matching(line.text)) send(line.seq, line.text);
  });
  const keepAlive = setInterval(() => response.write(': keep-alive\n\n'), KEEP_ALIVE_MS);
  streams.add(response);
  response.on('close', () => {
    unfollow();
    clearInterval(keepAlive);
    streams.delete(response);
  });
}
