import type { FastifyReply, FastifyRequest } from 'fastify';
import type { ContentAnswer } from '../platform/storage';
import { resolveSession, type Session, type SessionSettings } from '../platform/session';
import { sendError } from './errors';

// REST helpers of the routes serving stored bytes (a file, a report's result) behind a signed link or a session.

/** The query of a signed link (src/platform/signed-urls.ts). */
export const LINK_QUERY = {
  type: 'object',
  properties: {
    expires: { type: 'string', description: 'Unix time (seconds) after which the link no longer works' },
    signature: { type: 'string', description: 'HMAC-SHA256 of the path and expiry, base64url' },
  },
} as const;

/** The caller's session when it presented credentials (refused when they are bad); undefined without. */
export function optionalSession(request: FastifyRequest, settings: SessionSettings): Session | undefined {
  const { headers } = request;
  if (headers.authorization === undefined && headers['x-gql-admin-secret'] === undefined) return undefined;
  return resolveSession(headers, settings);
}

/** Streams stored bytes with headers that keep a browser from reading them as anything else. */
export function sendContent(reply: FastifyReply, answer: ContentAnswer): FastifyReply {
  if (!answer.found) return sendError(reply, answer.status, answer.code, answer.message);
  const disposition = answer.inline ? 'inline' : 'attachment';
  const ascii = answer.fileName.replace(/[^\x20-\x7e]|["\\%]/g, '_');
  return reply
    .code(200)
    .header('content-type', answer.contentType)
    .header('content-length', answer.size)
    .header('content-disposition', `${disposition}; filename="${ascii}"; filename*=UTF-8''${encodeURIComponent(answer.fileName)}`)
    .header('x-content-type-options', 'nosniff')
    .header('content-security-policy', "default-src 'none'; sandbox")
    .header('cache-control', 'private, no-store')
    .send(answer.stream);
}
