import { CreateErrorProjectDocument, CreateErrorTokenDocument } from '../generated/graphql';
import { graphql } from '../support/graphql';
import { ADMIN_SECRET } from '../support/server';

export const ADMIN = { 'x-gql-admin-secret': ADMIN_SECRET };

/** A project and a DSN key for it, made through the admin API. */
export async function projectWithKey(
  graphqlUrl: string,
  slug: string,
  service = `${slug}-service`,
): Promise<{ projectId: number; dsnKey: string; dsn: string; tokenId: string }> {
  const project = await graphql(graphqlUrl, CreateErrorProjectDocument, { input: { name: slug, slug, service } }, ADMIN);
  const projectId = project.body.data!.createErrorProject.id;
  const token = await graphql(graphqlUrl, CreateErrorTokenDocument, { input: { project: String(projectId), kind: 'DSN', name: 'test' } }, ADMIN);
  const created = token.body.data!.createErrorToken;
  return { projectId, dsnKey: created.token, dsn: created.dsn!, tokenId: created.id };
}

export async function secretKey(graphqlUrl: string, project: number | string): Promise<string> {
  const token = await graphql(graphqlUrl, CreateErrorTokenDocument, { input: { project: String(project), kind: 'SECRET', name: 'api' } }, ADMIN);
  return token.body.data!.createErrorToken.token;
}

/** POSTs a JSON event to /api/errors/events. */
export async function sendEvent(baseUrl: string, key: string, event: unknown, headers: Record<string, string> = {}): Promise<Response> {
  return fetch(`${baseUrl}/api/errors/events`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${key}`, ...headers },
    body: typeof event === 'string' || Buffer.isBuffer(event) ? event : JSON.stringify(event),
  });
}

/** An event of the spec's shape (§2.5), thrown at `line` of `fn` in `file`. */
export function specEvent(
  options: { type?: string; value?: string; fn?: string; file?: string; line?: number; level?: string; timestamp?: string; release?: string } = {},
) {
  return {
    environment: 'production',
    level: options.level ?? 'error',
    message: `${options.type ?? 'TypeError'}: ${options.value ?? 'boom'}`,
    release: options.release ?? '1.0.0',
    timestamp: options.timestamp ?? new Date().toISOString(),
    exception: {
      values: [
        {
          type: options.type ?? 'TypeError',
          value: options.value ?? 'boom',
          stacktrace: {
            frames: [
              { filename: '/app/node_modules/express/lib/router.js', function: 'handle', lineno: 10, colno: 3, source: 'next()' },
              { filename: '/app/src/server.js', function: 'route', lineno: 40, colno: 5, source: 'handler(req)' },
              {
                filename: options.file ?? '/app/src/checkout.js',
                function: options.fn ?? 'charge',
                lineno: options.line ?? 12,
                colno: 9,
                source: 'card.charge()',
              },
            ],
          },
        },
      ],
    },
  };
}
