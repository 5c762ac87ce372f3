import { promisify } from 'node:util';
import zlib from 'node:zlib';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { isTooManyRequests, Refusal, tooManyRequests } from '../../common/refusal';
import { requires } from '../../platform/fastify/security-schemes';
import type { RateLimiter } from '../../platform/rate-limits';
import { invalidEvent, normalizeEvent, type NormalizedEvent } from './event';
import type { ErrorTrackingServices } from './errortracking.services';
import { EVENT_ITEM_TYPE, keyFromDsn, keyFromSentryAuth, parseEnvelope, sentryRateLimitsHeader } from './sentry-protocol';

const inflaters: Record<string, (body: Buffer, options: zlib.ZlibOptions) => Promise<Buffer>> = {
  gzip: promisify(zlib.gunzip),
  'x-gzip': promisify(zlib.gunzip),
  deflate: promisify(zlib.inflate),
  br: promisify(zlib.brotliDecompress),
};

/** The body's bytes as sent, whatever Content-Encoding they came in (gzip, deflate, br), within `maxBytes`. */
async function decodedBody(request: FastifyRequest, maxBytes: number): Promise<Buffer> {
  const body = Buffer.isBuffer(request.body) ? request.body : Buffer.alloc(0);
  const encoding = String(request.headers['content-encoding'] ?? 'identity')
    .trim()
    .toLowerCase();
  if (encoding === 'identity' || encoding === '') return body;
  const inflate = inflaters[encoding];
  if (!inflate) throw new Refusal('UNSUPPORTED_MEDIA_TYPE', `Content-Encoding ${encoding.slice(0, 40)} is not supported (gzip, deflate or br)`, 415);
  try {
    return await inflate(body, { maxOutputLength: maxBytes });
  } catch (error) {
    if ((error as { code?: string }).code === 'ERR_BUFFER_TOO_LARGE') {
      throw new Refusal('PAYLOAD_TOO_LARGE', `the decompressed body is larger than ERRORS_MAX_EVENT_BYTES (${maxBytes} bytes)`, 413);
    }
    throw new Refusal('BAD_REQUEST', `the body is not valid ${encoding} data`, 400);
  }
}

function parseJsonEvent(bytes: Buffer): NormalizedEvent {
  let body: unknown;
  try {
    body = JSON.parse(bytes.toString('utf8'));
  } catch {
    throw invalidEvent('the body is not valid JSON');
  }
  return normalizeEvent(body);
}

const header = (request: FastifyRequest, name: string) => {
  const value = request.headers[name];
  return typeof value === 'string' ? value : undefined;
};

const ERROR_BODY = {
  type: 'object',
  properties: { success: { type: 'boolean' }, message: { type: 'string' }, error_code: { type: 'string' } },
  required: ['success', 'message', 'error_code'],
} as const;
const errorResponse = (description: string) => ({ ...ERROR_BODY, description });

const FRAME_SCHEMA = {
  type: 'object',
  properties: {
    filename: { type: 'string' },
    function: { type: 'string' },
    lineno: { type: 'integer' },
    colno: { type: 'integer' },
    source: { type: 'string' },
    module: { type: 'string' },
    in_app: { type: 'boolean' },
  },
};

/** Spec 2 §2.5's event, with the Sentry fields Plinth also reads. Checked by the service, which says what is wrong. */
const EVENT_BODY = {
  description:
    'An error event (spec 2 §2.5): a `message` or an `exception`, and optionally `event_id` (32 hex digits; an id seen before is not stored twice), `level` (fatal, error, warning, info, debug), `timestamp` (ISO 8601, or seconds since the epoch), `environment`, `release` and `fingerprint` (with `{{ default }}`). The body may be gzip, deflate or br encoded (Content-Encoding).',
  type: 'object',
  properties: {
    event_id: { type: 'string' },
    environment: { type: 'string' },
    level: { type: 'string' },
    message: { type: 'string' },
    release: { type: 'string' },
    timestamp: { type: 'string', format: 'date-time' },
    fingerprint: { type: 'array', items: { type: 'string' } },
    exception: {
      type: 'object',
      properties: {
        values: {
          type: 'array',
          items: {
            type: 'object',
            properties: {
              type: { type: 'string' },
              value: { type: 'string' },
              stacktrace: { type: 'object', properties: { frames: { type: 'array', items: FRAME_SCHEMA } } },
            },
          },
        },
      },
    },
  },
};

const PROJECT_PARAMS = {
  type: 'object',
  properties: { projectId: { type: 'string', pattern: '^[0-9]{1,9}$', description: 'The numeric project id of the DSN' } },
  required: ['projectId'],
} as const;

const SENTRY_QUERY = {
  type: 'object',
  properties: {
    sentry_key: { type: 'string', description: 'The DSN key, when it is not in X-Sentry-Auth or the envelope header' },
    sentry_version: { type: 'string' },
    sentry_client: { type: 'string' },
  },
} as const;

const INGEST_RESPONSES = {
  400: errorResponse('The event or envelope is invalid; the message says why'),
  401: errorResponse('No DSN key, or one that is unknown or revoked'),
  403: errorResponse('The key is not a DSN key, or is another project’s'),
  413: errorResponse('The body is larger than ERRORS_MAX_EVENT_BYTES, compressed or not'),
  415: errorResponse('An unsupported Content-Encoding'),
  429: errorResponse('The DSN key sent more than ERRORS_INGEST_RATE_LIMIT_PER_MINUTE events this minute; see Retry-After and X-Sentry-Rate-Limits'),
};

/**
 * Event ingestion: Plinth's own route and Sentry's, so that unmodified SDKs report here. Bodies
 * are read as bytes (Sentry's SDKs send envelopes without a content type, often gzipped).
 */
export function ingestRoutes(app: FastifyInstance, services: ErrorTrackingServices, limiter: () => RateLimiter): void {
  app.register(async (scope) => {
    scope.removeAllContentTypeParsers();
    // Read here rather than by Fastify, whose body limit is fixed when routes are registered.
    scope.addContentTypeParser('*', (request, payload, done) => {
      const limit = services.maxEventBytes;
      const tooLarge = () => Object.assign(new Error(`the body is larger than ERRORS_MAX_EVENT_BYTES (${limit} bytes)`), { statusCode: 413 });
      if (Number(request.headers['content-length']) > limit) return done(tooLarge());
      const chunks: Buffer[] = [];
      let size = 0;
      let finished = false;
      const finish = (error: Error | null, body?: Buffer) => {
        if (finished) return;
        finished = true;
        done(error, body);
      };
      payload.on('data', (chunk: Buffer) => {
        size += chunk.length;
        if (size > limit) {
          payload.removeAllListeners('data');
          payload.resume();
          return finish(tooLarge());
        }
        chunks.push(chunk);
      });
      payload.on('end', () => finish(null, Buffer.concat(chunks, size)));
      payload.on('error', (error) => finish(error));
    });
    const maxEventBytes = () => services.maxEventBytes;

    /** The project `count` events of the key go to, after the key's limit; refused for a missing or wrong key or past the limit. */
    const admit = async (request: FastifyRequest, key: string | undefined, projectId: number | null, count: number): Promise<number> => {
      if (!key)
        throw new Refusal('UNAUTHENTICATED', 'a DSN key is required (Authorization: Bearer, X-Sentry-Auth, sentry_key, or the envelope header’s dsn)', 401);
      const identity = await services.projects.authenticate(key);
      if (identity === 'revoked') throw new Refusal('UNAUTHENTICATED', 'the DSN key has been revoked', 401);
      if (typeof identity === 'string') throw new Refusal('UNAUTHENTICATED', 'the DSN key is not valid', 401);
      if (identity.kind !== 'dsn') throw new Refusal('FORBIDDEN', 'a secret key cannot send events; use a DSN key', 403);
      if (projectId !== null && identity.projectId !== projectId) {
        throw new Refusal('FORBIDDEN', `the DSN key belongs to another project than ${projectId}`, 403);
      }
      try {
        for (let taken = 0; taken < count; taken++) await limiter().consume({ ip: request.ip, token: key });
      } catch (error) {
        if (!isTooManyRequests(error)) throw error;
        const seconds = error.retryAfterSeconds;
        const message = `this DSN key sent more than its ${limiter().rule.points} events this minute; retry in ${seconds} s`;
        throw tooManyRequests(seconds, message, { 'x-sentry-rate-limits': sentryRateLimitsHeader(seconds) });
      }
      return identity.projectId;
    };

    const storeOne = async (request: FastifyRequest, key: string | undefined, projectId: number | null) => {
      const project = await admit(request, key, projectId, 1);
      const event = parseJsonEvent(await decodedBody(request, maxEventBytes()));
      await services.ingest.submit(project, [event]);
      return event.eventId.replace(/-/g, '');
    };

    scope.post('/api/errors/events', {
      config: { checksOwnText: true },
      schema: {
        tags: ['errors'],
        summary: 'Send an error event',
        description: 'Stores one event for the DSN key’s project (spec 2 §4.2), answered once it is committed.',
        security: requires('dsnKey'),
        body: EVENT_BODY,
        response: {
          200: {
            description: 'The event is stored (or was stored before under its id)',
            type: 'object',
            properties: { id: { type: 'string', description: 'The event id (32 hex digits)' }, received: { type: 'boolean', const: true } },
            required: ['id', 'received'],
          },
          ...INGEST_RESPONSES,
        },
      },
      handler: async (request) => {
        const authorization = header(request, 'authorization');
        const bearer = authorization ? /^Bearer\s+(\S+)\s*$/i.exec(authorization)?.[1] : undefined;
        const key = bearer ?? keyFromSentryAuth(header(request, 'x-sentry-auth'));
        return { id: await storeOne(request, key, null), received: true };
      },
    });

    const sentryKey = (request: FastifyRequest) =>
      keyFromSentryAuth(header(request, 'x-sentry-auth')) ??
      keyFromSentryAuth(header(request, 'authorization')) ??
      (request.query as { sentry_key?: string }).sentry_key;

    scope.post('/api/:projectId/store', {
      config: { checksOwnText: true },
      schema: {
        tags: ['errors'],
        summary: 'Sentry store endpoint',
        description: 'Sentry’s legacy endpoint: one JSON event, the DSN key in X-Sentry-Auth or `sentry_key`.',
        security: requires('dsnKey'),
        params: PROJECT_PARAMS,
        querystring: SENTRY_QUERY,
        body: EVENT_BODY,
        response: {
          200: { description: 'The event is stored', type: 'object', properties: { id: { type: 'string' } }, required: ['id'] },
          ...INGEST_RESPONSES,
        },
      },
      handler: async (request) => ({ id: await storeOne(request, sentryKey(request), Number((request.params as { projectId: string }).projectId)) }),
    });

    scope.post('/api/:projectId/envelope', {
      config: { checksOwnText: true },
      schema: {
        tags: ['errors'],
        summary: 'Sentry envelope endpoint',
        description:
          'What Sentry’s SDKs send: an envelope whose `event` items are stored; sessions, transactions, client reports and other items are accepted and skipped. The DSN key comes from X-Sentry-Auth, `sentry_key` or the envelope header’s `dsn`.',
        security: requires('dsnKey'),
        params: PROJECT_PARAMS,
        querystring: SENTRY_QUERY,
        body: { description: 'A Sentry envelope (newline-separated JSON headers and payloads), possibly gzip, deflate or br encoded' },
        response: {
          200: { description: 'The envelope’s events are stored', type: 'object', properties: { id: { type: 'string' } } },
          ...INGEST_RESPONSES,
        },
      },
      handler: async (request) => {
        const envelope = parseEnvelope(await decodedBody(request, maxEventBytes()));
        const fromDsn = keyFromDsn(envelope.header.dsn);
        const key = sentryKey(request) ?? fromDsn?.key;
        const eventItems = envelope.items.filter((item) => item.type === EVENT_ITEM_TYPE);
        const project = await admit(request, key, Number((request.params as { projectId: string }).projectId), eventItems.length);
        const events = eventItems.map((item) => parseJsonEvent(item.payload));
        await services.ingest.submit(project, events);
        const headerId = typeof envelope.header.event_id === 'string' ? envelope.header.event_id : undefined;
        return events.length > 0 ? { id: events[0].eventId.replace(/-/g, '') } : headerId ? { id: headerId } : {};
      },
    });
  });
}
