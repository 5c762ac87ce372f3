import 'reflect-metadata';
import type { AddressInfo } from 'node:net';
import type { FastifyInstance } from 'fastify';
import pino, { type DestinationStream, type Logger } from 'pino';
import pinoPretty from 'pino-pretty';
import type { DataSource } from 'typeorm';
import { apiReferenceOptions } from './apidocs/routes';
import type { Config } from './config';
import { withDevelopmentSecrets } from './config/dev-secrets';
import { createDataSource, runMigrations } from './db/data-source';
import { openDatabaseEndpoint } from './db/database';
import { PostgresPubSub } from './graphql/pubsub';
import { buildPlinthSchema, ResolverContainer } from './graphql/schema';
import { buildHttpApp } from './http/app';
import { MODULES } from './modules';
import { Metrics } from './platform/metrics';
import { createOutboundHttp } from './platform/outbound-http';
import { createRateLimits } from './platform/rate-limits';
import { ModuleServices, type Platform } from './platform/module';

export interface RunningServer {
  /** Base URL, e.g. http://127.0.0.1:8080 */
  url: string;
  port: number;
  app: FastifyInstance;
  dataSource: DataSource;
  logger: Logger;
  /** Drains requests and subscriptions, then releases the database (and stops the embedded one). */
  close(): Promise<void>;
}

/**
 * The process logger. No secret may reach a log line: request lines carry the path without its
 * query string (a GET's variables may hold anything), and logged database errors lose the
 * statement's parameters and PostgreSQL's `detail` ("Failing row contains (...)"), which hold
 * row values such as password hashes.
 */
export function createLogger(config: Config, destination?: DestinationStream): Logger {
  return pino(
    {
      level: config.logLevel,
      serializers: {
        req: (request: { method: string; url: string; id: string; ip?: string }) => ({
          method: request.method,
          path: request.url.split('?')[0],
          remoteAddress: request.ip,
        }),
      },
      redact: {
        paths: [
          'err.parameters',
          'err.detail',
          'err.driverError.parameters',
          'err.driverError.detail',
          'req.headers',
          'headers.authorization',
          'password',
        ],
        censor: '[redacted]',
      },
    },
    destination ?? (prettyLogs(config) ? pinoPretty({ colorize: process.stdout.isTTY, sync: true }) : undefined),
  );
}

/** LOG_FORMAT: `auto` is pretty for a person at a terminal in development, JSON for machines. */
function prettyLogs(config: Config): boolean {
  if (config.logFormat !== 'auto') return config.logFormat === 'pretty';
  return config.env === 'development' && process.stdout.isTTY === true;
}

/**
 * Starts Plinth: database (DATABASE_URL or the embedded one), migrations, the cross-instance
 * PubSub, the services, the schema and the HTTP/WebSocket server.
 */
export async function startServer(baseConfig: Config, logger: Logger = createLogger(baseConfig)): Promise<RunningServer> {
  const config = withDevelopmentSecrets(baseConfig, (text) => process.stderr.write(`${text}\n`));
  const cleanup: (() => Promise<unknown>)[] = [];
  const shutdown = new AbortController();
  const close = async () => {
    shutdown.abort();
    for (const step of cleanup.splice(0).reverse()) {
      await step().catch((error: unknown) => logger.error({ err: error }, 'error during shutdown'));
    }
  };

  try {
    const endpoint = await openDatabaseEndpoint(config, logger);
    cleanup.push(() => endpoint.stop());
    const dataSource = createDataSource(endpoint.url, config.database.poolSize);
    await dataSource.initialize();
    cleanup.push(() => dataSource.destroy());
    const applied = await runMigrations(dataSource);
    if (applied.length > 0) logger.info({ migrations: applied }, 'migrations applied');

    const pubSub = new PostgresPubSub({
      url: endpoint.url,
      query: (sql, parameters) => dataSource.query(sql, parameters),
      logger: logger.child({ component: 'pubsub' }),
      shutdown: shutdown.signal,
    });
    await pubSub.start();
    cleanup.push(() => pubSub.close());

    const metrics = new Metrics();
    const rateLimits = createRateLimits(config, dataSource, logger);
    const http = createOutboundHttp(config.outboundHttp);
    cleanup.push(() => http.close());
    const platform: Platform = { config, dataSource, logger, pubSub, metrics, rateLimits, http, shutdown: shutdown.signal };
    const services = new ModuleServices();
    const container = new ResolverContainer();
    for (const module of MODULES) {
      const created = await module.create(platform, services);
      services.set(module, created);
      container.add(...(module.resolvers ?? []).map((Resolver) => new Resolver(created)));
    }
    const schema = await buildPlinthSchema({ container, pubSub });

    const graphql = config.graphql;
    const sessionSettings = {
      adminSecret: graphql.adminSecret!,
      jwtSecret: graphql.jwtSecret!,
      unauthorizedRole: graphql.unauthorizedRole,
    };
    const app = await buildHttpApp({
      logger,
      schema,
      dataSource,
      apollo: { introspection: graphql.introspection, devMode: graphql.devMode, documentCacheBytes: graphql.documentCacheBytes },
      limits: {
        maxDepth: graphql.maxDepth,
        maxComplexity: graphql.maxComplexity,
        maxTokens: graphql.maxTokens,
        maxDocumentBytes: graphql.maxDocumentBytes,
        maxAliases: graphql.maxAliases,
        maxRootFields: graphql.maxRootFields,
      },
      subscriptions: {
        ...sessionSettings,
        initTimeoutMs: graphql.wsInitTimeoutMs,
        maxPayload: graphql.bodyLimit,
      },
      bodyLimit: graphql.bodyLimit,
      corsOrigins: graphql.corsOrigins,
      actionsRoute: config.actionsRoute,
      metrics,
      metricsAccess: config.metrics,
      trustProxy: config.trustProxy,
      rateLimits,
      apiDocs: apiReferenceOptions(config),
      actions: MODULES.flatMap((module) => module.actions?.(services.get(module)) ?? []),
      routes: (routesApp) => {
        for (const module of MODULES) module.routes?.(routesApp, services.get(module));
      },
    });
    cleanup.push(() => app.close());
    await app.listen({ host: config.host, port: config.port });

    const port = (app.server.address() as AddressInfo).port;
    const host = config.host === '0.0.0.0' || config.host === '::' ? '127.0.0.1' : config.host;
    const url = `http://${host.includes(':') ? `[${host}]` : host}:${port}`;
    logger.info({ url, graphql: `${url}/v1/graphql`, database: endpoint.embedded ? 'embedded' : 'DATABASE_URL' }, 'Plinth is ready');
    return { url, port, app, dataSource, logger, close };
  } catch (error) {
    await close();
    throw error;
  }
}
