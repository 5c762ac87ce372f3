import type { FastifyInstance } from 'fastify';
import { jsonDeeperThan } from '../common/json-depth';
import { JSON_TOO_DEEP } from '../graphql/limits';
import { sendError } from './errors';
import { addRouteHook, isRestRouteWithBody } from '../platform/fastify/route-hooks';

/**
 * Every REST route with a body refuses one whose objects and arrays nest deeper than `maxDepth`
 * (REQUEST_MAX_JSON_DEPTH) with 400 JSON_TOO_DEEP, before the text check, validation and the
 * handler: they walk the body recursively, and a deep enough one would overflow the stack (a 500).
 * The GraphQL routes check their variables with the other operation limits (graphql/limits.ts).
 */
export function installJsonDepthCheck(app: FastifyInstance, maxDepth: number): void {
  addRouteHook(app, 'preValidation', isRestRouteWithBody, (request, reply, done) => {
    if (!jsonDeeperThan(request.body, maxDepth)) return done();
    sendError(reply, 400, JSON_TOO_DEEP, `The body nests more than ${maxDepth} levels deep (REQUEST_MAX_JSON_DEPTH)`);
  });
}
