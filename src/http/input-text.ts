import type { FastifyInstance } from 'fastify';
import { UNSTORABLE_TEXT_MESSAGE, unstorableTextPaths } from '../common/text';
import { sendError } from './errors';
import { addRouteHook } from '../platform/fastify/route-hooks';

declare module 'fastify' {
  interface FastifyContextConfig {
    /** The handler's service reports unstorable text as field errors itself (action routes). */
    checksOwnText?: boolean;
  }
}

/**
 * Every REST route refuses a body, query string or path parameter holding text PostgreSQL cannot
 * store or that is not Unicode, with a 400 naming the field, before validation and the handler.
 */
export function installInputTextCheck(app: FastifyInstance): void {
  addRouteHook(
    app,
    'preValidation',
    (route) => !route.config?.checksOwnText,
    (request, reply, done) => {
      const fields = [
        ...unstorableTextPaths(request.params, 'params'),
        ...unstorableTextPaths(request.query, 'query'),
        ...unstorableTextPaths(request.body, 'body'),
      ];
      if (fields.length === 0) return done();
      const format = request.routeOptions.config?.errorFormat ?? 'envelope';
      sendError(
        reply,
        400,
        format === 'envelope' ? 'VALIDATION_ERROR' : 'BAD_REQUEST',
        `Invalid request: ${fields.join(', ')} ${UNSTORABLE_TEXT_MESSAGE}`,
        fields.map((field) => ({ field, message: `${field} ${UNSTORABLE_TEXT_MESSAGE}`, code: 'INVALID_FORMAT' })),
      );
    },
  );
}
