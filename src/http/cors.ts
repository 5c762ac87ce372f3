import type { FastifyInstance } from 'fastify';

const ALLOWED_METHODS = 'GET, POST, OPTIONS';
const PREFLIGHT_MAX_AGE_SECONDS = '600';

/**
 * CORS for browser clients (explorers on other origins). Only requests with an Origin header
 * are touched, so API clients, engines and servers pay nothing; @fastify/cors did its work on
 * every request (about a tenth of a cheap query's cost, see docs/decisions.md). Credentials
 * are headers, never cookies, so no Allow-Credentials. Paths in `anyOriginPaths` (the OpenAPI
 * document, which any site may read) answer every origin whatever the list says.
 */
export function installCors(app: FastifyInstance, origins: readonly string[] | '*', anyOriginPaths: readonly string[] = []): void {
  const allowedOrigin = (origin: string, url: string): string | undefined =>
    origins === '*' || anyOriginPaths.includes(url.split('?')[0]) ? '*' : origins.includes(origin) ? origin : undefined;

  app.addHook('onRequest', (request, reply, done) => {
    const origin = request.headers.origin;
    if (origin === undefined) return done();
    if (origins !== '*') reply.header('vary', 'Origin');
    const allowed = allowedOrigin(origin, request.url);
    if (allowed === undefined) return done();
    reply.header('access-control-allow-origin', allowed);

    const preflightMethod = request.headers['access-control-request-method'];
    if (request.method !== 'OPTIONS' || preflightMethod === undefined) return done();
    const requestedHeaders = request.headers['access-control-request-headers'];
    if (requestedHeaders !== undefined) {
      reply.header('access-control-allow-headers', requestedHeaders);
      reply.header('vary', origins === '*' ? 'Access-Control-Request-Headers' : 'Origin, Access-Control-Request-Headers');
    }
    reply
      .header('access-control-allow-methods', ALLOWED_METHODS)
      .header('access-control-max-age', PREFLIGHT_MAX_AGE_SECONDS)
      .code(204)
      .send();
  });

  // A preflight must reach the hook above whatever its path; anything else is a 404. The API
  // reference leaves it out: it is how every route answers browsers, not a route of its own.
  app.options('*', { schema: { hide: true } }, (_request, reply) => reply.callNotFound());
}
