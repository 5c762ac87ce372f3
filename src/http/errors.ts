import { STATUS_CODES } from 'node:http';
import type { Duplex } from 'node:stream';
import type { FastifyError, FastifyInstance, FastifyReply } from 'fastify';
import { DATABASE_UNAVAILABLE_MESSAGE, INTERNAL_ERROR_MESSAGE } from '../common/error-messages';
import type { FieldError } from '../common/field-error.types';
import { Refusal } from '../common/refusal';
import { isDatabaseUnavailable } from '../db/unavailable';
import { APPLICATION_JSON, chooseGraphQLMediaType } from '../graphql/media-type';
import { dropUnreadBody } from '../platform/fastify/unread-body';

const DATABASE_UNAVAILABLE_RETRY_AFTER_SECONDS = 5;

/**
 * How a route reports errors: the handler envelope of spec 1 §2.3, a GraphQL response, Hasura's
 * metadata error `{path, error, code}` (POST /v1/metadata), or the auth service's
 * `{status, message, error}` (Nhost's shape, with its kebab-case codes).
 */
export type ErrorFormat = 'envelope' | 'graphql' | 'metadata' | 'auth';

declare module 'fastify' {
  interface FastifyContextConfig {
    errorFormat?: ErrorFormat;
  }
}

const CODES: Record<number, string> = {
  400: 'BAD_REQUEST',
  401: 'UNAUTHENTICATED',
  403: 'FORBIDDEN',
  404: 'NOT_FOUND',
  405: 'METHOD_NOT_ALLOWED',
  406: 'NOT_ACCEPTABLE',
  408: 'REQUEST_TIMEOUT',
  413: 'PAYLOAD_TOO_LARGE',
  415: 'UNSUPPORTED_MEDIA_TYPE',
  429: 'RATE_LIMITED',
};

/** The code of the auth format for a status the framework answered (validation, size, 404, 500). */
function authErrorCodeForStatus(status: number): string {
  if (status === 401) return 'unauthenticated-user';
  if (status === 404) return 'route-not-found';
  if (status === 429) return 'too-many-requests';
  if (status === 503) return 'service-unavailable';
  if (status >= 500) return 'internal-server-error';
  return 'invalid-request';
}

/** The body `sendError` answers with on REST routes (the handler envelope of spec 1 §2.3), for route schemas. */
export const ENVELOPE_ERROR_SCHEMA = {
  type: 'object',
  properties: {
    success: { type: 'boolean', const: false },
    message: { type: 'string' },
    error_code: { type: 'string' },
    errors: {
      type: 'array',
      items: {
        type: 'object',
        properties: { field: { type: 'string' }, message: { type: 'string' }, code: { type: 'string' } },
        required: ['field', 'message', 'code'],
      },
    },
  },
  required: ['success', 'message', 'error_code'],
} as const;

/** The 429 of a rate limit on an envelope route (sendError), for route schemas. */
export const RATE_LIMITED_ENVELOPE_SCHEMA = {
  type: 'object',
  properties: {
    success: { type: 'boolean', const: false },
    error: { type: 'string', const: 'rate-limited' },
    message: { type: 'string' },
    error_code: { type: 'string', const: 'RATE_LIMITED' },
  },
  required: ['success', 'error', 'message', 'error_code'],
} as const;

/** Answers with an error in the route's format; never with a stack trace. */
export function sendError(reply: FastifyReply, status: number, code: string, message: string, errors?: FieldError[]): FastifyReply {
  const format = reply.request.routeOptions.config?.errorFormat ?? 'envelope';
  if (format === 'metadata') {
    // Fields are named from the body ("body.args.name", or "args.name" by the schema check).
    const field = errors?.[0]?.field.replace(/^body\.?/, '');
    const path = field ? `$.${field}` : '$';
    return reply.code(status).send({ path, error: message, code: status === 400 ? 'parse-failed' : code.toLowerCase().replace(/_/g, '-') });
  }
  if (format === 'graphql') {
    const mediaType = chooseGraphQLMediaType(reply.request.headers.accept) ?? APPLICATION_JSON;
    return reply
      .code(status)
      .type(mediaType)
      .send({ errors: [{ message, extensions: { code, ...(errors ? { errors } : {}) } }] });
  }
  if (format === 'auth') return reply.code(status).send({ status, message, error: authErrorCodeForStatus(status) });
  // A limit's 429 also says `error: "rate-limited"` (docs/decisions.md); a route whose 429 schema leaves it out sends without it.
  if (status === 429) return reply.code(status).send({ success: false, error: 'rate-limited', message, error_code: code });
  return reply.code(status).send({ success: false, message, error_code: code, ...(errors ? { errors } : {}) });
}

/** Answers a refusal in the route's format, with its headers (Retry-After). */
export function sendRefusal(reply: FastifyReply, refusal: Refusal): FastifyReply {
  reply.headers(refusal.headers);
  const errors = refusal.field === undefined ? undefined : [{ field: refusal.field, message: refusal.message, code: 'INVALID_FORMAT' }];
  return sendError(reply, refusal.status, refusal.code, refusal.message, errors);
}

/**
 * Maps every error Fastify or a route raises to an answer in the route's format: a Refusal with
 * its status, code and headers, a framework error (validation, body size, media type) with its
 * 4xx, a 503 with Retry-After while the database cannot be reached, or a masked 500 that is
 * logged with the request id. Nothing reaches the client as a stack trace.
 */
export function installErrorHandling(app: FastifyInstance): void {
  app.setErrorHandler((error: FastifyError | Refusal, request, reply) => {
    // An error raised before the body was read (a body limit, a parser's refusal): see dropUnreadBody.
    dropUnreadBody(request, reply);
    if (error instanceof Refusal) return sendRefusal(reply, error);
    const format = request.routeOptions.config?.errorFormat ?? 'envelope';
    if (error.validation) {
      const errors = error.validation.map(fieldErrorFromSchema);
      const code = format === 'envelope' ? 'VALIDATION_ERROR' : 'BAD_REQUEST';
      return sendError(reply, 400, code, `Invalid request: ${errors.map((e) => e.message).join('; ')}`, errors);
    }
    const status = error.statusCode ?? 500;
    if (status >= 400 && status < 500) {
      // A body that cannot be parsed is a malformed envelope for action routes.
      const code = format === 'envelope' && status === 400 ? 'VALIDATION_ERROR' : (CODES[status] ?? 'BAD_REQUEST');
      return sendError(reply, status, code, error.message);
    }
    if (isDatabaseUnavailable(error)) {
      // Not a fault of the request nor of our code: the same request may succeed once it is back.
      request.log.warn({ err: error }, 'database unavailable');
      reply.header('retry-after', String(DATABASE_UNAVAILABLE_RETRY_AFTER_SECONDS));
      return sendError(reply, 503, 'SERVICE_UNAVAILABLE', DATABASE_UNAVAILABLE_MESSAGE);
    }
    request.log.error({ err: error }, 'unhandled error');
    return sendError(reply, 500, format === 'graphql' ? 'INTERNAL_SERVER_ERROR' : 'INTERNAL_ERROR', INTERNAL_ERROR_MESSAGE);
  });
  app.setNotFoundHandler((request, reply) => sendError(reply, 404, 'NOT_FOUND', `Route ${request.method} ${request.url.split('?')[0]} not found`));
}

/** The answers to requests the HTTP parser refused, by the parser's error code. */
const CLIENT_ERRORS: Record<string, { status: number; code: string; message: string }> = {
  HPE_HEADER_OVERFLOW: { status: 431, code: 'HEADERS_TOO_LARGE', message: 'The request line and headers exceed the server limit (16 KiB)' },
  ERR_HTTP_REQUEST_TIMEOUT: { status: 408, code: 'REQUEST_TIMEOUT', message: 'The request was not received in time' },
};
const MALFORMED_REQUEST = { status: 400, code: 'BAD_REQUEST', message: 'The request is not valid HTTP/1.1' };

/**
 * Answers a request Node's HTTP parser refused (headers over the limit, malformed HTTP, a request
 * too slow to arrive), in the envelope format, and closes the connection. It says
 * `Connection: close`, as Node's own answer does and Fastify's does not: without it a keep-alive
 * client takes the connection for reusable and may send its next request on a socket the server
 * is closing, which then fails with a reset.
 */
export function answerClientError(error: NodeJS.ErrnoException, socket: Duplex): void {
  // The client is gone: there is nobody to answer.
  if (error.code === 'ECONNRESET' || socket.destroyed) return;
  const { status, code, message } = CLIENT_ERRORS[error.code ?? ''] ?? MALFORMED_REQUEST;
  const body = JSON.stringify({ success: false, message, error_code: code });
  // Not while an answer is going out on the connection (a pipelined request): it would land inside
  // it. Node's own check, on the socket's response in flight.
  const inFlight = (socket as Duplex & { _httpMessage?: { headersSent: boolean } | null })._httpMessage;
  if (socket.writable && !inFlight?.headersSent) {
    socket.write(
      `HTTP/1.1 ${status} ${STATUS_CODES[status]}\r\nConnection: close\r\nContent-Type: application/json; charset=utf-8\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`,
    );
  }
  socket.destroy();
}

type SchemaError = NonNullable<FastifyError['validation']>[number];

function fieldErrorFromSchema(error: SchemaError): FieldError {
  const path = error.instancePath.split('/').filter(Boolean).join('.');
  const params = error.params as Record<string, unknown>;
  if (error.keyword === 'required') {
    const field = path ? `${path}.${String(params.missingProperty)}` : String(params.missingProperty);
    return { field, message: `${field} is required`, code: 'REQUIRED_FIELD' };
  }
  const field = path || 'body';
  if (error.keyword === 'maxLength' || error.keyword === 'minLength' || error.keyword === 'maxItems' || error.keyword === 'minItems') {
    return { field, message: `${field} ${error.message ?? 'has an invalid length'}`, code: 'INVALID_LENGTH' };
  }
  return { field, message: `${field} ${error.message ?? 'is invalid'}`, code: 'INVALID_FORMAT' };
}
