import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { ActionDefinition } from '../../platform/actions';
import { ENVELOPE_ERROR_SCHEMA, sendError } from '../../http/errors';
import { requires } from '../../platform/fastify/security-schemes';
import { resolveSession, type Session, type SessionSettings } from '../../platform/session';
import type { SignedQuery } from '../../platform/signed-urls';
import type { FilesServices } from './files.services';
import type { ContentAnswer, FileVariant } from './files.service';
import { UPLOAD_FILE_ROLES } from './files.types';

/** The engine-compatible handler route of uploadAndProcessFile. */
export function filesActions({ files }: FilesServices): ActionDefinition[] {
  return [
    {
      name: 'uploadAndProcessFile',
      roles: UPLOAD_FILE_ROLES,
      carriesUpload: true,
      quota: 'uploads',
      // The fields are checked by the service, which answers success=false per field.
      argumentsSchema: { type: 'object', required: ['input'], properties: { input: { type: 'object' } } },
      handle: (args, session) => files.upload(args.input, session),
    },
  ];
}

/** The query of a signed link (src/platform/signed-urls.ts). */
export const LINK_QUERY = {
  type: 'object',
  properties: {
    expires: { type: 'string', description: 'Unix time (seconds) after which the link no longer works' },
    signature: { type: 'string', description: 'HMAC-SHA256 of the path and expiry, base64url' },
  },
} as const;

/** The content routes: a signed link works alone; without one, the owner's or an admin's session. */
export function filesRoutes(app: FastifyInstance, services: FilesServices): void {
  const variants: { variant: FileVariant; summary: string; description: string }[] = [
    {
      variant: 'content',
      summary: 'Download an uploaded file',
      description:
        'The content with its media type, `Content-Disposition` (inline for raster images, attachment otherwise) and ' +
        '`X-Content-Type-Options: nosniff`. With `expires` and `signature` (the `file_url` of uploadAndProcessFile and ' +
        '`file`) no credentials are needed until the link expires; without them, the owner or an admin may fetch it with their session.',
    },
    {
      variant: 'thumbnail',
      summary: "Download an image's thumbnail",
      description: 'The PNG thumbnail processing made (`image.thumbnail_url`); the same access rules as the content.',
    },
  ];
  for (const { variant, summary, description } of variants) {
    app.get<{ Params: { id: string }; Querystring: SignedQuery }>(`/files/:id/${variant}`, {
      schema: {
        tags: ['files'],
        summary,
        description,
        security: [{}, ...requires('bearerAuth', 'adminSecret')],
        params: { type: 'object', required: ['id'], properties: { id: { type: 'string', format: 'uuid' } } },
        querystring: LINK_QUERY,
        response: {
          200: { description: 'The bytes', content: { '*/*': { schema: { type: 'string', format: 'binary' } } } },
          401: { ...ENVELOPE_ERROR_SCHEMA, description: 'No signed link and no valid session (UNAUTHENTICATED, or the session error)' },
          403: { ...ENVELOPE_ERROR_SCHEMA, description: 'The link was tampered with (INVALID_SIGNATURE) or has expired (LINK_EXPIRED)' },
          404: { ...ENVELOPE_ERROR_SCHEMA, description: 'No such file, or not yours (NOT_FOUND)' },
        },
      },
      handler: async (request, reply) => {
        const session = optionalSession(request, services.sessionSettings);
        return sendContent(reply, await services.files.content(request.params.id, variant, request.query, session));
      },
    });
  }
}

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
