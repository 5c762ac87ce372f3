import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { GraphQLSchema } from 'graphql';
import { secretsEqual } from '../common/secrets';
import { outputJsonSchema, rootFieldType } from '../graphql/json-schema';
import type { ActionDefinition } from '../platform/actions';
import { takeQuota } from '../platform/quotas';
import { rateLimitCaller, type RateLimits } from '../platform/rate-limits';
import { ADMIN_SECRET_HEADER, assertedSession, CLIENT_ADDRESS_HEADER, isRoleAllowed, variablesFromHeaders, type Session } from '../platform/session';
import { ENVELOPE_ERROR_SCHEMA, RATE_LIMITED_ENVELOPE_SCHEMA, sendError } from './errors';
import { requires } from '../platform/fastify/security-schemes';

/** The path segment of an action: its name in kebab case (spec 1 §2.1: registerUser gives register-user). */
export function actionPath(actionName: string): string {
  return actionName
    .replace(/([a-z0-9])([A-Z])/g, '$1-$2')
    .replace(/([A-Z])([A-Z][a-z])/g, '$1-$2')
    .replace(/[_\s]+/g, '-')
    .toLowerCase();
}

/** The handler URL path of an action under a route prefix (`/` or `/actions`, say). */
export function actionUrl(prefix: string, actionName: string): string {
  return `${prefix === '/' ? '' : prefix}/${actionPath(actionName)}`;
}

interface ActionEnvelope {
  action?: { name: string };
  input: Record<string, unknown>;
  session_variables?: Record<string, unknown>;
  request_query?: string;
}

/**
 * Registers the engine-compatible handler route of an action: `POST <prefix>/<kebab-name>`
 * with Hasura's envelope {action:{name}, input, session_variables, request_query}. The caller
 * must present the admin secret; the session comes from the X-Gql-* headers (and the body's
 * session_variables, which the headers override). The answer is the action's GraphQL output
 * type (from `schema`) plus the envelope's `error_code`.
 */
export function registerActionRoute(
  app: FastifyInstance,
  settings: { prefix: string; adminSecret: string; rateLimits: RateLimits; schema: GraphQLSchema; uploadBodyLimit?: number; unauthorizedRole?: string },
  action: ActionDefinition,
): void {
  const limiters = ['actionHandlers' as const, ...(action.rateLimits ?? [])].map((name) => settings.rateLimits.get(name));
  const output = outputJsonSchema(rootFieldType(settings.schema, action.name));
  app.post<{ Body: ActionEnvelope }>(actionUrl(settings.prefix, action.name), {
    // Action services validate their input with fieldErrors, which reports unstorable text per field.
    config: { errorFormat: 'envelope', checksOwnText: true },
    ...(action.carriesUpload && settings.uploadBodyLimit ? { bodyLimit: settings.uploadBodyLimit } : {}),
    schema: {
      tags: ['actions'],
      summary: `${action.name} (action handler)`,
      description:
        `The engine-compatible handler of the \`${action.name}\` GraphQL operation (spec 1 §2.3): the engine's envelope in, ` +
        `the operation's result out, with \`success: false\` and per-field \`errors\` for invalid input. ` +
        `Roles: ${action.roles.join(', ')} (X-Gql-Role; admin when none is given).` +
        ` Rate limits: ${limiters.map((limiter) => limiter.name).join(', ')}, each counted by the user (X-Gql-User-Id) or the user's` +
        ` address (X-Gql-Client-Address) as it is keyed; what would count by the engine's own address counts in the engine budget` +
        ` (RATE_LIMIT_ENGINE_*).${action.quota ? ` Quota: ${action.quota} (RATE_LIMIT_${action.quota.toUpperCase()}_*, counted alike; not for admin).` : ''}`,
      security: requires('adminSecret'),
      body: {
        type: 'object',
        required: ['input'],
        properties: {
          action: {
            type: 'object',
            required: ['name'],
            properties: { name: { type: 'string', const: action.name } },
          },
          input: action.argumentsSchema,
          session_variables: {
            type: 'object',
            additionalProperties: { anyOf: [{ type: 'string' }, { type: 'number' }, { type: 'boolean' }, { type: 'null' }] },
          },
          request_query: { type: 'string' },
        },
      },
      response: {
        200: {
          ...output,
          description: 'The result, or success=false with the reason',
          properties: {
            ...(output.properties as object),
            error_code: { type: 'string', description: 'Why the action failed (with success=false), such as VALIDATION_ERROR' },
          },
        },
        400: { ...ENVELOPE_ERROR_SCHEMA, description: `A malformed envelope, session headers or ${CLIENT_ADDRESS_HEADER} (VALIDATION_ERROR)` },
        401: {
          description: 'No admin secret, or a wrong one',
          type: 'object',
          properties: { status: { type: 'string', const: 'unauthorized' }, message: { type: 'string' } },
          required: ['status', 'message'],
        },
        403: { ...ENVELOPE_ERROR_SCHEMA, description: 'The session role may not call this action (FORBIDDEN)' },
        429: { ...RATE_LIMITED_ENVELOPE_SCHEMA, description: 'Too many calls from this user (or address, or engine); Retry-After says when to try again' },
      },
    },
    // Authentication comes before the body is even validated.
    onRequest: async (request, reply) => {
      const given = request.headers[ADMIN_SECRET_HEADER];
      if (typeof given !== 'string' || !secretsEqual(given, settings.adminSecret)) {
        return reply.code(401).send({ status: 'unauthorized', message: 'invalid or missing x-gql-admin-secret' });
      }
    },
    handler: async (request, reply) => {
      const asserted = engineSession(request);
      if ('error' in asserted) return sendError(reply, 400, 'VALIDATION_ERROR', asserted.error);
      // The engine sends the unauthorised role for callers without credentials: not signed in.
      const session = asserted.role === settings.unauthorizedRole ? { ...asserted, authenticated: false } : asserted;
      if (!isRoleAllowed(session, action.roles)) {
        return sendError(reply, 403, 'FORBIDDEN', `the role "${session.role}" may not call ${action.name}`);
      }
      const caller = rateLimitCaller(session, request.ip, request.headers);
      if ('error' in caller) return sendError(reply, 400, 'VALIDATION_ERROR', caller.error);
      for (const limiter of limiters) await limiter.consume(caller);
      if (action.quota) await takeQuota(settings.rateLimits, action.quota, session, caller);
      const result = await action.handle(request.body.input, session, request.headers);
      return reply.code(200).send(result);
    },
  });
}

function engineSession(request: FastifyRequest<{ Body: ActionEnvelope }>): Session | { error: string } {
  const variables: Record<string, string> = {};
  for (const [name, value] of Object.entries(request.body.session_variables ?? {})) {
    if (value !== null) variables[name.toLowerCase()] = String(value);
  }
  const packed = request.headers['x-gql-session-variables'];
  if (typeof packed === 'string') {
    let parsed: unknown;
    try {
      parsed = JSON.parse(packed);
    } catch {
      return { error: 'x-gql-session-variables must be a JSON object' };
    }
    if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed)) {
      return { error: 'x-gql-session-variables must be a JSON object' };
    }
    for (const [name, value] of Object.entries(parsed)) {
      if (value !== null && typeof value !== 'object') variables[name.toLowerCase()] = String(value);
    }
  }
  Object.assign(variables, variablesFromHeaders(request.headers));
  delete variables['x-gql-session-variables'];
  return assertedSession(variables);
}
