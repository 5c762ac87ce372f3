import fp from 'fastify-plugin';
import { runWithSessionVariables } from '../db/session-variables';
import type { SubscriptionSettings } from '../graphql/subscriptions';
import { addRouteHook, isRestRouteWithBody, READ_METHODS } from '../platform/fastify/route-hooks';
import { resolveSession } from '../platform/session';
import { installInputTextCheck } from './input-text';
import { installJsonDepthCheck } from './json-depth';

export interface RequestChecksOptions {
  /** How deep objects and arrays may nest in a REST body (REQUEST_MAX_JSON_DEPTH). */
  maxJsonDepth: number;
  /** How callers' sessions are read. */
  session: SubscriptionSettings;
}

/**
 * The hooks of every route that has them: the body's nesting and text checks, and the caller's
 * session variables for the statements of a REST write. Registered before any route.
 */
export const requestChecks = fp<RequestChecksOptions>(
  async (app, options) => {
    const sessionSettings = options.session;
    // Route hooks (added as routes register, so before any route is). Each goes ahead of those added
    // before it: the depth check runs first, since the text check walks the body recursively.
    installInputTextCheck(app);
    installJsonDepthCheck(app, options.maxJsonDepth);
    // The caller's session variables reach the statements a request that may write runs (event
    // triggers record them): REST calls here, GraphQL mutations in the executor (graphql/apollo.ts),
    // with the session the GraphQL context resolved. A preHandler: the body's stream events
    // (parsing) run outside an earlier hook's context.
    addRouteHook(app, 'preHandler', isRestRouteWithBody, (request, reply, done) => {
      if (READ_METHODS.has(request.method)) return done();
      const { release } = runWithSessionVariables(() => {
        try {
          return resolveSession(request.headers, sessionSettings).variables;
        } catch {
          return null;
        }
      }, done);
      // Emitted once the response is sent or the connection is gone.
      reply.raw.once('close', release);
    });
  },
  { name: 'plinth-request-checks' },
);
