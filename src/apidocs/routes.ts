import fs from 'node:fs';
import path from 'node:path';
import { gzipSync } from 'node:zlib';
import fastifySwagger from '@fastify/swagger';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { GraphQLSchema } from 'graphql';
import type { Logger } from 'pino';
import { PLINTH_VERSION } from '../common/package-version';
import { sha256 } from '../common/sha256';
import type { Config } from '../config';
import { acceptsGzip } from '../http/accept-encoding';
import type { ApiReference, DocumentedSchema } from '../http/app';
import { SECURITY_SCHEMES } from '../platform/fastify/security-schemes';
import { pluginsFingerprint } from '../platform/plugin-manifests';
import { readDeclarations, type DeclarationSources } from './declarations';
import type { ActionRoute } from './graphql-reference';
import { OPENAPI_PATH, openApiDocument, type OwnListener } from './openapi';
import { ADMIN_ROUTE_PREFIX } from '../modules/admin/admin-port';
import { graphiqlPage, referencePage } from './pages';

/** The files `plinth build` writes into PLINTH_DIST_DIR, and `plinth start` serves when they are there. */
export const SPEC_FILE = 'openapi.json';
export const PAGE_FILE = 'scalar.html';

export interface ApiReferenceOptions extends DeclarationSources {
  settings: Config['apiDocs'];
  publicUrl: string;
  /** Routes served on a port of their own. */
  listeners: readonly OwnListener[];
  /** Where `plinth build` wrote the files, served when both are there; unset: always generate them (the build itself). */
  builtDir: string | undefined;
}

/** The reference as the http layer serves it (http/app.ts); undefined when API_DOCS_ENABLED is false. */
export function apiReference(options: ApiReferenceOptions): ApiReference | undefined {
  if (!options.settings.enabled) return undefined;
  const graphiql = graphiqlResponder(options.settings);
  return {
    openPaths: [OPENAPI_PATH],
    install: (app, context) => installApiReference(app, options, context),
    graphiql: (request, reply) => graphiql(request, reply),
  };
}

/** The reference as a server started from `config` serves it. */
export function apiReferenceOptions(config: Config): ApiReferenceOptions {
  return {
    settings: config.apiDocs,
    publicUrl: config.publicUrl,
    listeners: [{ prefix: ADMIN_ROUTE_PREFIX, url: config.admin.url, description: 'PLATFORM_ADMIN_PORT: the admin dashboard' }],
    customServices: config.customServices,
    pluginsDir: config.pluginsDir,
    servicesDir: config.servicesDir,
    builtDir: config.build.distDir,
  };
}

/** A response body, encoded once and gzipped once (the pages are megabytes), with its validator. */
interface Served {
  body: Buffer;
  gzipped: Buffer;
  /** The validator of both encodings; each answer adds its encoding to it. */
  hash: string;
}

function served(text: string): Served {
  const body = Buffer.from(text);
  return { body, gzipped: gzipSync(body), hash: sha256(body).toString('base64url').slice(0, 32) };
}

/**
 * Answers with a body the browser may keep and revalidate (304 when its copy is current), gzipped
 * when the client takes gzip (the page is megabytes of script): the pages change only with a
 * build or a restart.
 */
function sendServed(request: FastifyRequest, reply: FastifyReply, file: Served, type: string, headers: Record<string, string> = {}): FastifyReply {
  const gzip = acceptsGzip(request.headers['accept-encoding']);
  const etag = `"${file.hash}${gzip ? '-gzip' : ''}"`;
  // CORS may have said Vary: Origin already.
  const vary = reply.getHeader('vary');
  reply
    .header('etag', etag)
    .header('cache-control', 'no-cache')
    .header('vary', vary ? `${String(vary)}, Accept-Encoding` : 'Accept-Encoding')
    .headers(headers);
  const known = request.headers['if-none-match']?.split(',').map((tag) => tag.trim().replace(/^W\//, ''));
  if (known?.includes(etag)) return reply.code(304).send();
  if (gzip) reply.header('content-encoding', 'gzip');
  return reply.type(type).send(gzip ? file.gzipped : file.body);
}

/**
 * The page's Content-Security-Policy: scripts and styles only from the page itself, and requests
 * only to this origin and the servers the spec names (custom services), so nothing in the bundle
 * can reach another host.
 */
function pageSecurityPolicy(document: { servers?: { url: string }[]; paths?: Record<string, { servers?: { url: string }[] }> }): string {
  const origins = new Set<string>();
  for (const server of [...(document.servers ?? []), ...Object.values(document.paths ?? {}).flatMap((item) => item.servers ?? [])]) {
    if (URL.canParse(server.url)) origins.add(new URL(server.url).origin);
  }
  return [
    "default-src 'none'",
    "script-src 'unsafe-inline'",
    "style-src 'unsafe-inline'",
    "img-src 'self' data: blob:",
    "font-src 'self' data:",
    `connect-src 'self' ${[...origins].sort().join(' ')}`.trim(),
    "worker-src 'self' blob:",
    "base-uri 'none'",
    "form-action 'none'",
  ].join('; ');
}

declare module 'fastify' {
  interface FastifyInstance {
    /** The API reference of this app's routes, as generated now (what `plinth build` writes). */
    apiReference: { generate(): Promise<GeneratedReference> };
  }
}

export interface GeneratedReference {
  document: Record<string, unknown>;
  /** The document as served and written: indented JSON. */
  spec: string;
  /** The page, with the document inside. */
  page: string;
  /** The page's Content-Security-Policy. */
  policy: string;
  /** Plugin or service paths left out because the path was already documented. */
  problems: string[];
}

interface ReferenceFiles {
  spec: Served;
  page: Served;
  /** The page's Content-Security-Policy. */
  policy: string;
}

const notModified = { description: 'Not Modified: the copy named in If-None-Match is current', type: 'null' };

/**
 * The API reference on `app`: @fastify/swagger collects every route registered after it (so this
 * runs before any route), and `GET /api-docs` and `GET <API_DOCS_PATH>` serve the spec and the
 * page: the files `plinth build` wrote when both are there, otherwise generated from the
 * running app's routes on the first request. Malformed plugin manifests and service documents are
 * logged and left out.
 */
export async function installApiReference(
  app: FastifyInstance,
  options: ApiReferenceOptions,
  context: { schema: DocumentedSchema; actions: readonly ActionRoute[]; logger: Logger },
): Promise<void> {
  const { settings } = options;
  // Routes name the security schemes they accept; @fastify/swagger needs to know them.
  await app.register(fastifySwagger, {
    openapi: { openapi: '3.1.0', info: { title: settings.title, version: PLINTH_VERSION }, components: { securitySchemes: SECURITY_SCHEMES } },
  });

  const built = options.builtDir ? builtFiles(options.builtDir, context.logger) : undefined;
  // Plugins come and go while the server runs (the admin API installs and removes them): the
  // declarations are read again, and the reference regenerated, when the plugins folder changed.
  const builtPlugins = pluginsFingerprint(options.pluginsDir);
  let declared: (ReturnType<typeof readDeclarations> & { plugins: string }) | undefined;
  const declarations = (plugins = pluginsFingerprint(options.pluginsDir)) => {
    if (declared?.plugins !== plugins) {
      declared = { ...readDeclarations(options), plugins };
      for (const problem of declared.problems) context.logger.warn({ problem }, 'left out of the API reference');
    }
    return declared.declarations;
  };
  if (!built) declarations(builtPlugins);

  const generate = async (schema = context.schema.current): Promise<GeneratedReference> => {
    const problems: string[] = [];
    const document = openApiDocument(
      {
        routes: app.swagger() as unknown as Record<string, unknown>,
        schema,
        actions: context.actions,
        declarations: declarations(),
        title: settings.title,
        version: PLINTH_VERSION,
        publicUrl: options.publicUrl,
        graphql: settings.graphql,
        hiddenPrefixes: settings.hiddenPrefixes,
        listeners: options.listeners,
      },
      problems,
    );
    return {
      document,
      spec: `${JSON.stringify(document, null, 2)}\n`,
      page: referencePage(document, settings),
      policy: pageSecurityPolicy(document),
      problems,
    };
  };
  app.decorate('apiReference', { generate });

  // The files plinth build wrote describe Plinth's own schema; once metadata extends what is
  // documented (actions, tables open to anonymous callers), the reference is generated from it,
  // again after each change.
  let generated: { schema: GraphQLSchema; plugins: string; files: Promise<ReferenceFiles> } | undefined;
  const files = (): Promise<ReferenceFiles> | ReferenceFiles => {
    const schema = context.schema.current;
    const plugins = pluginsFingerprint(options.pluginsDir);
    if (built && schema === context.schema.base && plugins === builtPlugins) return built;
    if (generated?.schema === schema && generated.plugins === plugins) return generated.files;
    const files = generate(schema).then(
      (reference) => {
        for (const problem of reference.problems) context.logger.warn({ problem }, 'left out of the API reference');
        return { spec: served(reference.spec), page: served(reference.page), policy: reference.policy };
      },
      (error: unknown) => {
        if (generated?.files === files) generated = undefined;
        throw error;
      },
    );
    generated = { schema, plugins, files };
    return files;
  };

  app.get(OPENAPI_PATH, {
    schema: {
      tags: ['docs'],
      summary: 'The OpenAPI 3.1 document',
      description: 'This document. Any origin may read it (CORS).',
      response: {
        200: { description: 'The OpenAPI 3.1 document', content: { 'application/json': { schema: { type: 'object' } } } },
        304: notModified,
      },
    },
    handler: async (request, reply) => sendServed(request, reply, (await files()).spec, 'application/json; charset=utf-8'),
  });
  app.get(settings.path, {
    schema: {
      tags: ['docs'],
      summary: 'The API reference page',
      description: 'This page: Scalar, with the OpenAPI document inside, served as one file that makes no request to another host.',
      response: {
        200: { description: 'The page', content: { 'text/html': { schema: { type: 'string' } } } },
        304: notModified,
      },
    },
    handler: async (request, reply) => {
      const { page, policy } = await files();
      return sendServed(request, reply, page, 'text/html; charset=utf-8', { 'content-security-policy': policy });
    },
  });
}

/** What `plinth build` wrote, when both files are there. */
function builtFiles(dir: string, logger: Logger): ReferenceFiles | undefined {
  const read = (file: string) => {
    try {
      return fs.readFileSync(path.join(dir, file), 'utf8');
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
      throw error;
    }
  };
  const [spec, page] = [read(SPEC_FILE), read(PAGE_FILE)];
  if (spec === undefined || page === undefined) {
    if (spec !== page) logger.warn({ dir }, `only one of ${SPEC_FILE} and ${PAGE_FILE} is there: serving a reference generated now (run plinth build)`);
    return undefined;
  }
  let document: Parameters<typeof pageSecurityPolicy>[0];
  try {
    document = JSON.parse(spec) as typeof document;
  } catch {
    throw new Error(`${path.join(dir, SPEC_FILE)} is not the JSON plinth build writes: run plinth build again`);
  }
  logger.info({ dir }, 'serving the API reference plinth build wrote');
  return { spec: served(spec), page: served(page), policy: pageSecurityPolicy(document) };
}

/** GraphiQL for browsers at the GraphQL endpoint, with the bearer token pre-filled; built on first use. */
export function graphiqlResponder(settings: Config['apiDocs']): (request: FastifyRequest, reply: FastifyReply) => FastifyReply {
  let page: Served | undefined;
  return (request, reply) => {
    page ??= served(graphiqlPage({ title: settings.title, bearerToken: settings.bearerToken }));
    return sendServed(request, reply, page, 'text/html; charset=utf-8', { 'content-security-policy': pageSecurityPolicy({}) });
  };
}
