import type { FastifyInstance } from 'fastify';
import type { ActionDefinition } from '../../platform/actions';
import { ENVELOPE_ERROR_SCHEMA } from '../../http/errors';
import { requires } from '../../platform/fastify/security-schemes';
import type { SignedQuery } from '../../platform/signed-urls';
import { LINK_QUERY, optionalSession, sendContent } from '../../http/stored-content';
import type { ReportsServices } from './reports.services';
import { GENERATE_REPORT_ROLES, ReportFormat, ReportKind } from './reports.types';

/** The engine-compatible handler route of generateReport. */
export function reportsActions({ reports }: ReportsServices): ActionDefinition[] {
  return [
    {
      name: 'generateReport',
      roles: GENERATE_REPORT_ROLES,
      quota: 'reports',
      // The fields are checked by the service, which answers success=false per field.
      argumentsSchema: {
        type: 'object',
        required: ['input'],
        properties: {
          input: {
            type: 'object',
            properties: {
              kind: { type: 'string', enum: Object.values(ReportKind) },
              format: { type: 'string', enum: Object.values(ReportFormat) },
              from: { type: 'string', format: 'date-time' },
              to: { type: 'string', format: 'date-time' },
            },
          },
        },
      },
      handle: (args, session) => reports.generate(args.input, session),
    },
  ];
}

/** The result of a COMPLETED report: a signed link works alone; without one, the requester's or an admin's session. */
export function reportsRoutes(app: FastifyInstance, services: ReportsServices): void {
  app.get<{ Params: { id: string }; Querystring: SignedQuery }>('/reports/:id/result', {
    schema: {
      tags: ['files'],
      summary: "Download a report's result",
      description:
        'The CSV (`text/csv`) or JSON (`application/json`) of a COMPLETED report job, as an attachment, with ' +
        '`X-Content-Type-Options: nosniff`. With `expires` and `signature` (the `result_url` of `reportJob`) no credentials ' +
        'are needed until the link expires; without them, the user who asked for the report or an admin may fetch it with their session.',
      security: [{}, ...requires('bearerAuth', 'adminSecret')],
      params: { type: 'object', required: ['id'], properties: { id: { type: 'string', format: 'uuid' } } },
      querystring: LINK_QUERY,
      response: {
        200: { description: 'The report', content: { 'text/csv': { schema: { type: 'string' } }, 'application/json': { schema: {} } } },
        401: { ...ENVELOPE_ERROR_SCHEMA, description: 'No signed link and no valid session (UNAUTHENTICATED, or the session error)' },
        403: { ...ENVELOPE_ERROR_SCHEMA, description: 'The link was tampered with (INVALID_SIGNATURE) or has expired (LINK_EXPIRED)' },
        404: { ...ENVELOPE_ERROR_SCHEMA, description: 'No such job, not yours, or not COMPLETED (NOT_FOUND)' },
      },
    },
    handler: async (request, reply) => {
      const session = optionalSession(request, services.sessionSettings);
      return sendContent(reply, await services.reports.result(request.params.id, request.query, session));
    },
  });
}
