import { randomUUID } from 'node:crypto';
import http, { type IncomingMessage, type ServerResponse } from 'node:http';

type RawHandler = (request: IncomingMessage, response: ServerResponse) => void;

const REQUEST_ID = Symbol('plinth.requestId');
type IdentifiedRequest = IncomingMessage & { [REQUEST_ID]?: string };

/** The caller's X-Request-ID when it is a sensible token, else a new UUID. */
function requestId(header: string | string[] | undefined): string {
  return typeof header === 'string' && /^[\w.:-]{1,128}$/.test(header) ? header : randomUUID();
}

/**
 * Gives the request its id (the caller's X-Request-ID when sensible, else a UUID) and says it in
 * the response's X-Request-ID. Runs before routing, on the raw request and response, where an
 * onSend hook would cost each request a trip through Fastify's hook runner; Fastify keeps the header.
 */
export function identify(request: IncomingMessage, response: ServerResponse): void {
  const id = requestId(request.headers['x-request-id']);
  (request as IdentifiedRequest)[REQUEST_ID] = id;
  response.setHeader('x-request-id', id);
}

/** The id `identify` gave the request (Fastify's genReqId); one of its own for a request that did not pass through it. */
export function requestIdOf(request: IncomingMessage): string {
  return (request as IdentifiedRequest)[REQUEST_ID] ?? requestId(request.headers['x-request-id']);
}

/** The timeouts of Fastify's settings that its servers take (milliseconds; 0: none). */
export type ServerTimeouts = { keepAliveTimeout: number; requestTimeout: number; connectionTimeout: number };

/**
 * Node checks its request timeouts on a clock (every 30 s by default), so a request may outlive
 * its timeout by up to one tick: a shorter timeout gets a tick of a quarter of it. The headers'
 * own timeout (60 s) may not exceed the request's.
 */
function requestTimeoutOptions(requestTimeout: number): http.ServerOptions {
  if (requestTimeout === 0) return { requestTimeout: 0 };
  return {
    requestTimeout,
    headersTimeout: Math.min(60_000, requestTimeout),
    connectionsCheckingInterval: Math.min(30_000, Math.max(100, Math.floor(requestTimeout / 4))),
  };
}

/**
 * An HTTP server with Fastify's timeouts, as its own server would set them (the main port's,
 * through `serverFactory`, and AUTH_PORT's): `beforeRouting` runs on each request's raw request
 * and response, then `route` takes it.
 */
export function createHttpServer(route: RawHandler, settings: ServerTimeouts, beforeRouting?: RawHandler): http.Server {
  const server = http.createServer(requestTimeoutOptions(settings.requestTimeout), (request, response) => {
    beforeRouting?.(request, response);
    route(request, response);
  });
  server.keepAliveTimeout = settings.keepAliveTimeout;
  server.setTimeout(settings.connectionTimeout);
  return server;
}
