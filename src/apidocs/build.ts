import fs from 'node:fs';
import path from 'node:path';
import type { FastifyInstance } from 'fastify';
import type { Logger } from 'pino';
import type { Config } from '../config';
import { buildDeclaredSchema } from '../graphql/schema';
import { ServedSchema } from '../platform/served-schema';
import { buildApiApp } from '../http/api-app';
import { MODULES } from '../modules';
import { Metrics } from '../platform/metrics';
import { RequestOutcomes } from '../platform/request-outcomes';
import { RecurringPause } from '../platform/recurring';
import { ChildServices } from '../platform/child-services';
import { ModuleServices, resolverClasses, type AnyModule, type Platform } from '../platform/module';
import { RateLimits, rateLimitRules } from '../platform/rate-limits';
import { readDeclarations, shownPath } from './declarations';
import { OPENAPI_PATH } from './openapi';
import { apiReference, apiReferenceOptions, PAGE_FILE, SPEC_FILE } from './routes';

/** The serving block `plinth build` writes into PLINTH_PROXY_CONF_DIR. */
const PROXY_CONF_FILE = 'api-docs.conf';

/** A build that found bad declarations or would write an invalid spec; each problem names its source. */
export class BuildError extends Error {
  constructor(readonly problems: string[]) {
    super(`the build stopped:\n${problems.map((problem) => `  - ${problem}`).join('\n')}`);
    this.name = 'BuildError';
  }
}

export interface BuildResult {
  /** Files written, in order. */
  written: string[];
  /** Files removed (API_DOCS_ENABLED=false). */
  removed: string[];
  /** What the spec took in besides Plinth's routes, for the person running the build. */
  notes: string[];
}

/**
 * `plinth build` (spec 1 §4): writes the OpenAPI document and the self-contained page into
 * PLINTH_DIST_DIR and the proxy's serving block into PLINTH_PROXY_CONF_DIR, all three rewritten
 * each time and equal byte for byte for equal inputs. Every plugin manifest and custom service
 * document is checked first, and the document against the OpenAPI schema last: any problem
 * stops the build before a file is written. With API_DOCS_ENABLED=false the three files are
 * removed instead. Needs no database: the routes are registered on an app that never listens.
 */
export async function buildApiReference(config: Config, logger: Logger): Promise<BuildResult> {
  const specFile = path.join(config.build.distDir, SPEC_FILE);
  const pageFile = path.join(config.build.distDir, PAGE_FILE);
  const confFile = path.join(config.build.proxyConfDir, PROXY_CONF_FILE);
  if (!config.apiDocs.enabled) {
    const removed = [specFile, pageFile, confFile].filter((file) => fs.existsSync(file));
    for (const file of removed) fs.rmSync(file);
    return { written: [], removed, notes: ['API_DOCS_ENABLED=false: no API reference'] };
  }

  const { declarations, problems } = readDeclarations(config);
  const validator = await openApiValidator();
  for (const { file, document } of declarations.services) {
    for (const error of await validator(document)) problems.push(`${shownPath(file)} is not a valid OpenAPI document: ${error}`);
  }
  if (problems.length) throw new BuildError(problems);

  const app = await documentationApp(config, logger);
  try {
    const reference = await app.apiReference.generate();
    problems.push(...reference.problems);
    for (const error of await validator(reference.document)) problems.push(`the generated spec is not valid OpenAPI 3.1: ${error}`);
    if (problems.length) throw new BuildError(problems);

    const conf = serverBlock(config, reference.policy);
    fs.mkdirSync(config.build.distDir, { recursive: true });
    fs.mkdirSync(config.build.proxyConfDir, { recursive: true });
    fs.writeFileSync(specFile, reference.spec);
    fs.writeFileSync(pageFile, reference.page);
    fs.writeFileSync(confFile, conf);
    return {
      written: [specFile, pageFile, confFile],
      removed: [],
      notes: [
        ...declarations.plugins.map((plugin) => `plugin ${plugin.name}: ${plugin.rest_routes.length} route(s) from ${shownPath(plugin.file)}`),
        ...declarations.services.map(({ service, file }) => `custom service ${service.name}: ${shownPath(file)}`),
      ],
    };
  } finally {
    await app.close();
  }
}

/**
 * The HTTP app as `plinth start` builds it (buildApiApp), for its route table only: same settings,
 * same modules, the schema without services. It never listens. The database, the platform's
 * connections and every module's services are stand-ins, which routes and actions may keep but
 * not call: a route uses its services when a request arrives, never while it is registered.
 */
export async function documentationApp(config: Config, logger: Logger, modules: readonly AnyModule[] = MODULES): Promise<FastifyInstance> {
  const platform: Platform = {
    config,
    logger,
    metrics: new Metrics(),
    rateLimits: new RateLimits({ kind: 'memory' }, rateLimitRules(config), logger),
    // Never started: nothing is served, so nothing is counted or written.
    requestOutcomes: new RequestOutcomes(async () => undefined, config.requestOutcomesFlushMs, logger),
    dataSource: standIn('the database') as Platform['dataSource'],
    pubSub: standIn('the PubSub') as Platform['pubSub'],
    http: standIn('outbound HTTP') as Platform['http'],
    jobs: standIn('the job queue') as Platform['jobs'],
    mailer: standIn('the mailer') as Platform['mailer'],
    shutdown: new AbortController().signal,
    schema: new ServedSchema(),
    recurringPause: new RecurringPause(),
    childServices: new ChildServices(),
  };
  platform.schema.setBase(await buildDeclaredSchema(resolverClasses(MODULES)));
  const services = new ModuleServices();
  for (const module of modules) services.set(module, standIn(`the ${module.name} module's services`));
  // Generated from the routes, whatever an earlier build left.
  const app = await buildApiApp(platform, modules, services, apiReference({ ...apiReferenceOptions(config), builtDir: undefined }));
  await app.ready();
  return app;
}

/**
 * Stands in for `name` while routes are registered to be documented: any member may be read
 * (and is a stand-in too), and a call fails naming what was called.
 */
function standIn(name: string): unknown {
  return new Proxy(function () {}, {
    get: (_target, property) => standIn(`${name}.${String(property)}`),
    apply: () => {
      throw new Error(
        `${name}() was called while the routes were registered to be documented (plinth build has no database): call it only when a request arrives`,
      );
    },
    construct: () => {
      throw new Error(`new ${name}() was called while the routes were registered to be documented: do it only when a request arrives`);
    },
  });
}

/**
 * A validator of OpenAPI documents against the official schemas (@seriousme/openapi-schema-validator,
 * an ES module, hence the dynamic import): each problem as `<where> <what>`.
 */
async function openApiValidator(): Promise<(document: unknown) => Promise<string[]>> {
  const { Validator } = await import('@seriousme/openapi-schema-validator');
  return async (document) => {
    const result = await new Validator().validate(document as Record<string, unknown>);
    if (result.valid) return [];
    const errors = Array.isArray(result.errors) ? result.errors : [{ instancePath: '', message: String(result.errors) }];
    return errors.slice(0, 5).map((error) => `${error.instancePath || '/'} ${error.message ?? 'is invalid'}`);
  };
}

/** Text for a double-quoted nginx string; refuses what nginx would read otherwise ($ starts a variable). */
function nginxString(value: string, setting: string): string {
  if (/["\\$\r\n]/.test(value))
    throw new BuildError([`${setting} (${value}) cannot be written into an nginx configuration: it holds ", \\, $ or a line break`]);
  return `"${value}"`;
}

/**
 * The proxy's serving block: the spec (CORS for any origin) and the page (with the same
 * Content-Security-Policy the server sends), both from the dist folder, gzipped, revalidated by ETag.
 */
function serverBlock(config: Config, pagePolicy: string): string {
  const dist = config.build.distDir;
  return [
    '# Generated by `plinth build` from the API_DOCS_* settings. Do not edit: every build rewrites this file.',
    `# The OpenAPI document and the API reference page, read from ${dist} (PLINTH_DIST_DIR).`,
    '',
    `location = ${OPENAPI_PATH} {`,
    `    alias ${nginxString(path.join(dist, SPEC_FILE), 'PLINTH_DIST_DIR')};`,
    '    types { }',
    // The charset by its own directives: gzip_types would not match a default_type with one.
    '    default_type application/json;',
    '    charset utf-8;',
    '    charset_types application/json;',
    '    gzip on;',
    '    gzip_types application/json;',
    '    add_header Access-Control-Allow-Origin "*" always;',
    '    add_header Access-Control-Allow-Methods "GET, HEAD, OPTIONS" always;',
    '    add_header Access-Control-Allow-Headers "*" always;',
    '    add_header Cache-Control "no-cache" always;',
    '    if ($request_method = OPTIONS) {',
    '        return 204;',
    '    }',
    '}',
    '',
    `location = ${config.apiDocs.path} {`,
    `    alias ${nginxString(path.join(dist, PAGE_FILE), 'PLINTH_DIST_DIR')};`,
    '    types { }',
    '    default_type text/html;',
    '    charset utf-8;',
    '    gzip on;',
    `    add_header Content-Security-Policy "${pagePolicy}" always;`,
    '    add_header Cache-Control "no-cache" always;',
    '}',
    '',
  ].join('\n');
}
