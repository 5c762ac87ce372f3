import type { IncomingMessage, ServerResponse } from 'node:http';
import type { FastifyInstance } from 'fastify';

const ALLOWED_METHODS = 'GET, POST, OPTIONS';
const PREFLIGHT_MAX_AGE_SECONDS = '600';

/**
 * CORS for browser clients (explorers on other origins). Only requests with an Origin header
 * are touched, so API clients, engines and servers pay nothing, where @fastify/cors works on every
 * request (docs/decisions.md, "GraphQL over HTTP"). Credentials
 * are headers, never cookies, so no Allow-Credentials. Paths in `anyOriginPaths` (the OpenAPI
 * document, which any site may read) answer every origin whatever the list says.
 */
export class CorsPolicy {
  constructor(
    private readonly origins: readonly string[] | '*',
    private readonly anyOriginPaths: readonly string[] = [],
  ) {}

  private allowedOrigin(origin: string, url: string): string | undefined {
    if (this.origins === '*' || this.anyOriginPaths.includes(url.split('?')[0])) return '*';
    return this.origins.includes(origin) ? origin : undefined;
  }

  /**
   * The headers of every answer to a request with an Origin: set on the raw response before
   * routing (src/http/incoming.ts), where a Fastify hook would cost each request a trip through
   * Fastify's hook runner, Origin or not. Fastify keeps them and adds its own.
   */
  setHeaders(request: IncomingMessage, response: ServerResponse): void {
    const origin = request.headers.origin;
    if (origin === undefined) return;
    if (this.origins !== '*') response.setHeader('vary', 'Origin');
    const allowed = this.allowedOrigin(origin, request.url ?? '/');
    if (allowed !== undefined) response.setHeader('access-control-allow-origin', allowed);
  }

  /**
   * Answers preflights on every path (204 with the methods and headers allowed); any other
   * OPTIONS request, or one from an origin not allowed, is a 404. The API reference leaves it out:
   * it is how every route answers browsers, not a route of its own.
   */
  registerPreflight(app: FastifyInstance): void {
    app.options('*', { schema: { hide: true } }, (request, reply) => {
      const origin = request.headers.origin;
      if (origin === undefined || request.headers['access-control-request-method'] === undefined || this.allowedOrigin(origin, request.url) === undefined) {
        return reply.callNotFound();
      }
      const requestedHeaders = request.headers['access-control-request-headers'];
      if (requestedHeaders !== undefined) {
        reply.header('access-control-allow-headers', requestedHeaders);
        reply.header('vary', this.origins === '*' ? 'Access-Control-Request-Headers' : 'Origin, Access-Control-Request-Headers');
      }
      return reply.header('access-control-allow-methods', ALLOWED_METHODS).header('access-control-max-age', PREFLIGHT_MAX_AGE_SECONDS).code(204).send();
    });
  }
}
