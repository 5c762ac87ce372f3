import type { FastifyInstance } from 'fastify';
import { MetadataApi } from '../platform/metadata';
import type { AnyModule, ModuleServices, Platform } from '../platform/module';
import { buildHttpApp, type ApiReference } from './app';

/**
 * The full HTTP server of the api role: GraphQL, subscriptions, actions, the modules' routes,
 * serving `platform.schema` (its base set).
 * `plinth build` builds it too, with stand-ins for the database and the services (src/apidocs/build.ts).
 * `apiDocs`: the API reference to serve (src/apidocs: apiReference), undefined for none.
 */
export function buildApiApp(
  { config, logger, dataSource, metrics, rateLimits, requestOutcomes, schema }: Platform,
  modules: readonly AnyModule[],
  services: ModuleServices,
  apiDocs: ApiReference | undefined,
): Promise<FastifyInstance> {
  const graphql = config.graphql;
  const sessionSettings = {
    adminSecret: graphql.adminSecret!,
    jwtSecret: graphql.jwtSecret!,
    unauthorizedRole: graphql.unauthorizedRole,
  };
  return buildHttpApp({
    logger,
    schema,
    dataSource,
    apollo: {
      introspection: graphql.introspection,
      devMode: graphql.devMode,
      documentCacheBytes: graphql.documentCacheBytes,
      compiledExecution: graphql.compiledExecution,
    },
    limits: {
      maxDepth: graphql.maxDepth,
      maxComplexity: graphql.maxComplexity,
      maxTokens: graphql.maxTokens,
      maxDocumentBytes: graphql.maxDocumentBytes,
      maxAliases: graphql.maxAliases,
      maxRootFields: graphql.maxRootFields,
      maxVariablesDepth: config.requestMaxJsonDepth,
    },
    subscriptions: {
      ...sessionSettings,
      initTimeoutMs: graphql.wsInitTimeoutMs,
      limits: graphql.wsLimits,
      maxPayload: graphql.bodyLimit,
      multiplexing: graphql.subscriptionMultiplexing,
      compiledExecution: graphql.compiledExecution,
    },
    bodyLimit: graphql.bodyLimit,
    uploadBodyLimit: config.files.uploadBodyLimit,
    corsOrigins: graphql.corsOrigins,
    actionsRoute: config.actionsRoute,
    metrics,
    metricsAccess: config.metrics,
    trustProxy: config.trustProxy,
    requestTimeoutMs: config.requestTimeoutMs,
    maxJsonDepth: config.requestMaxJsonDepth,
    rateLimits,
    requestOutcomes,
    apiDocs,
    actions: modules.flatMap((module) => module.actions?.(services.get(module)) ?? []),
    metadata: new MetadataApi(
      dataSource,
      modules.flatMap((module) => (module.metadata ? [module.metadata(services.get(module))] : [])),
    ),
    routes: (routesApp) => {
      for (const module of modules) module.routes?.(routesApp, services.get(module), config);
    },
  });
}
