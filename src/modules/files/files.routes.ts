import type { FastifyInstance } from 'fastify';
import type { ActionDefinition } from '../../platform/actions';
import { ENVELOPE_ERROR_SCHEMA } from '../../http/errors';
import { LINK_QUERY, optionalSession, sendContent } from '../../http/stored-content';
import { requires } from '../../platform/fastify/security-schemes';
import type { SignedQuery } from '../../platform/signed-urls';
import type { FilesServices } from './files.services';
import type { FileVariant } from './files.service';
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
