import { randomUUID } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { ApolloServer } from '@apollo/server';
import Fastify, { type FastifyBaseLogger } from 'fastify';
import { execute, graphql, GraphQLError, parse, validate, type DocumentNode, type GraphQLSchema } from 'graphql';
import pino from 'pino';
import type { PubSub } from 'type-graphql';
import type { DataSource } from 'typeorm';
import { loadConfig } from '../src/config';
import { createDataSource } from '../src/db/data-source';
import { startServer } from '../src/main';
import type { GraphQLContext } from '../src/graphql/context';
import { buildPlinthSchema, ResolverContainer } from '../src/graphql/schema';
import { MODULES } from '../src/modules';
import { resolverClasses } from '../src/platform/module';
import { Refusal } from '../src/common/refusal';
import { resolveSession, type SessionSettings } from '../src/platform/session';
import { AuthResolver } from '../src/modules/auth/auth.resolver';
import { RateLimits, rateLimitRules } from '../src/platform/rate-limits';
import { AuthService } from '../src/modules/auth/auth.service';
import type { ErrorTrackingServices } from '../src/modules/errortracking/errortracking.services';
import { ErrorsResolver } from '../src/modules/errortracking/errors.resolver';
import { ErrorsService } from '../src/modules/errortracking/errors.service';
import { ProjectsService } from '../src/modules/errortracking/projects.service';
import { listen, serveInChild, type BenchServer } from './processes';
import { baselineConfig, GRAPHQL_PATH, serverEnvironment, type Target } from './shared';

/*
 * Express, its Apollo integration and mercurius are required by the baseline that serves on them,
 * so that a server process holds only what its target loads (Plinth's resident memory is measured).
 */

/** What the baselines share with Plinth: the schema from the same resolvers, and the session settings. */
interface BaselineParts {
  schema: GraphQLSchema;
  sessionSettings: SessionSettings;
  logger: FastifyBaseLogger;
  rateLimits: RateLimits;
  /** The database the errors query reads, with Plinth's pool size. */
  dataSource: DataSource;
}

/** Child-process side: starts one server of the GraphQL benchmark and serves it (serveInChild). */
export function runServerRole(target: Target): Promise<void> {
  return serveInChild(() => startTarget(target));
}

async function startTarget(target: Target): Promise<BenchServer> {
  const logLevel = process.env.BENCH_LOG_LEVEL ?? 'warn';
  if (target === 'plinth') return startPlinth(logLevel);
  if (target === 'plinth-other') throw new Error('plinth-other is served by the other build as its plinth');
  const parts = await baselineParts(logLevel);
  const server = await startBaseline(target, parts);
  return { url: server.url, close: () => server.close().finally(() => parts.dataSource.destroy()) };
}

function startBaseline(target: Exclude<Target, 'plinth' | 'plinth-other'>, parts: BaselineParts): Promise<BenchServer> {
  switch (target) {
    case 'graphql-js':
      return startGraphqlJs(parts, { cacheDocuments: false });
    case 'graphql-js-cached':
      return startGraphqlJs(parts, { cacheDocuments: true });
    case 'apollo-express':
      return startApolloExpress(parts);
    case 'mercurius-jit':
      return startMercuriusJit(parts);
  }
}

/** The real server, exactly as the CLI composes it (database, migrations, PubSub, Fastify, Apollo). */
export async function startPlinth(logLevel: string): Promise<BenchServer> {
  const databaseUrl = process.env.BENCH_DATABASE_URL;
  if (!databaseUrl) throw new Error('BENCH_DATABASE_URL is not set for the plinth server');
  const running = await startServer(loadConfig(serverEnvironment(logLevel, databaseUrl)));
  return { url: `${running.url}${GRAPHQL_PATH}`, close: async () => void (await running.close()) };
}

/**
 * The schema built by buildPlinthSchema with the same resolver classes. Only the resolvers the
 * benchmarked queries reach get an instance (type-graphql asks the container lazily): AuthResolver,
 * and ErrorsResolver with error tracking's real services on the database Plinth uses (the errors
 * page reads projects and frames through them; the other services of the module serve other
 * fields, so they are left out). Subscriptions are never started, so PubSub is a stub.
 */
async function schemaFromPlinthResolvers(dataSource: DataSource, publicUrl: string): Promise<GraphQLSchema> {
  const errorTracking = { projects: new ProjectsService(dataSource, publicUrl), errors: new ErrorsService(dataSource) } as ErrorTrackingServices;
  const container = new ResolverContainer().add(new AuthResolver({ auth: new AuthService() }), new ErrorsResolver(errorTracking));
  const pubSub: PubSub = {
    publish: () => undefined,
    subscribe: () => {
      throw new Error('subscriptions are not part of the benchmark');
    },
  };
  return buildPlinthSchema({ resolvers: resolverClasses(MODULES), container, pubSub });
}

async function baselineParts(logLevel: string): Promise<BaselineParts> {
  const { databaseUrl, config, sessionSettings } = baselineConfig(logLevel);
  const logger = pino({ level: logLevel });
  const dataSource = await createDataSource(databaseUrl, config.database.poolSize).initialize();
  return {
    dataSource,
    schema: await schemaFromPlinthResolvers(dataSource, config.publicUrl),
    sessionSettings,
    logger: logger as FastifyBaseLogger,
    rateLimits: new RateLimits({ kind: 'memory' }, rateLimitRules(config), logger),
  };
}

type PreparedDocument = { document: DocumentNode } | { errors: readonly GraphQLError[] };

/** Most distinct query texts kept; the benchmark sends one. */
const DOCUMENT_CACHE_LIMIT = 1000;

/**
 * Parse and validate once per query text, as Apollo's document cache does; without it the
 * baseline would spend much of its time re-validating and stop being the upper bound.
 */
function documentPreparer(schema: GraphQLSchema): (query: string) => PreparedDocument {
  const prepared = new Map<string, PreparedDocument>();
  return (query) => {
    let entry = prepared.get(query);
    if (entry === undefined) {
      try {
        const document = parse(query);
        const errors = validate(schema, document);
        entry = errors.length > 0 ? { errors } : { document };
      } catch (error) {
        if (!(error instanceof GraphQLError)) throw error;
        entry = { errors: [error] };
      }
      if (prepared.size >= DOCUMENT_CACHE_LIMIT) prepared.clear();
      prepared.set(query, entry);
    }
    return entry;
  };
}

/**
 * Baseline (a): the bare graphql-js server as graphql-js documents it: read JSON, resolve the
 * session, graphql() (parse, validate, execute), write JSON. With cacheDocuments, (a') parses and
 * validates each query text once, as Apollo does: the least any GraphQL server can do, shown as
 * a ceiling without a target.
 */
function startGraphqlJs({ schema, sessionSettings, logger, rateLimits }: BaselineParts, { cacheDocuments }: { cacheDocuments: boolean }): Promise<BenchServer> {
  const prepare = documentPreparer(schema);
  const reply = (response: http.ServerResponse, status: number, body: unknown) => {
    response.writeHead(status, { 'content-type': 'application/json; charset=utf-8' }).end(JSON.stringify(body));
  };

  const handle = async (request: http.IncomingMessage, response: http.ServerResponse) => {
    if (request.method !== 'POST' || request.url !== GRAPHQL_PATH) return reply(response, 404, { errors: [{ message: 'not found' }] });
    const chunks: Buffer[] = [];
    for await (const chunk of request) chunks.push(chunk as Buffer);
    let body: { query?: unknown; variables?: Record<string, unknown>; operationName?: string };
    try {
      body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as typeof body;
    } catch {
      return reply(response, 400, { errors: [{ message: 'the body is not JSON' }] });
    }
    if (typeof body.query !== 'string') return reply(response, 400, { errors: [{ message: 'query must be a string' }] });

    let contextValue: GraphQLContext;
    try {
      contextValue = {
        session: resolveSession(request.headers, sessionSettings),
        requestId: randomUUID(),
        logger,
        clientIp: request.socket.remoteAddress ?? '',
        rateLimits,
      };
    } catch (error) {
      if (!(error instanceof Refusal)) throw error;
      return reply(response, error.status, { errors: [{ message: error.message, extensions: { code: error.code } }] });
    }
    const args = { schema, variableValues: body.variables, operationName: body.operationName, contextValue };
    if (!cacheDocuments) return reply(response, 200, await graphql({ ...args, source: body.query }));
    const prepared = prepare(body.query);
    if ('errors' in prepared) return reply(response, 400, { errors: prepared.errors });
    reply(response, 200, await execute({ ...args, document: prepared.document }));
  };

  const server = http.createServer((request, response) => {
    handle(request, response).catch((error: unknown) => {
      logger.error({ err: error }, 'graphql-js baseline failed');
      if (!response.headersSent) reply(response, 500, { errors: [{ message: 'Internal server error' }] });
    });
  });
  return listen(server);
}

/** Baseline (b): stock Apollo Server 5 (default options) on Express 5, same context as Plinth builds. */
async function startApolloExpress({ schema, sessionSettings, logger, rateLimits }: BaselineParts): Promise<BenchServer> {
  const express = require('express') as typeof import('express');
  const { expressMiddleware } = require('@as-integrations/express5') as typeof import('@as-integrations/express5');
  const apollo = new ApolloServer<GraphQLContext>({ schema });
  await apollo.start();

  const app = express();
  app.post(
    GRAPHQL_PATH,
    express.json(),
    expressMiddleware(apollo, {
      context: async ({ req }): Promise<GraphQLContext> => {
        try {
          return {
            session: resolveSession(req.headers, sessionSettings),
            requestId: randomUUID(),
            logger,
            clientIp: req.socket.remoteAddress ?? '',
            rateLimits,
          };
        } catch (error) {
          if (!(error instanceof Refusal)) throw error;
          throw new GraphQLError(error.message, { extensions: { code: error.code, http: { status: error.status } } });
        }
      },
    }),
  );
  const server = await listen(http.createServer(app));
  return { url: server.url, close: () => server.close().then(() => apollo.stop()) };
}

/**
 * Baseline (c), the fastest Node GraphQL server we know: Fastify 5 with mercurius, its document
 * cache (on by default) and graphql-jit compiling each query after its first use (`jit: 1`),
 * same context as Plinth builds.
 */
async function startMercuriusJit({ schema, sessionSettings, logger, rateLimits }: BaselineParts): Promise<BenchServer> {
  const mercurius = require('mercurius') as typeof import('mercurius');
  const app = Fastify();
  await app.register(mercurius, {
    schema,
    path: GRAPHQL_PATH,
    jit: 1,
    context: (request): GraphQLContext => {
      try {
        return {
          session: resolveSession(request.headers, sessionSettings),
          requestId: String(request.id),
          logger,
          clientIp: request.ip,
          rateLimits,
        };
      } catch (error) {
        if (!(error instanceof Refusal)) throw error;
        throw new mercurius.ErrorWithProps(error.message, { code: error.code }, error.status);
      }
    },
  });
  await app.listen({ port: 0, host: '127.0.0.1' });
  const { port } = app.server.address() as AddressInfo;
  return { url: `http://127.0.0.1:${port}${GRAPHQL_PATH}`, close: () => app.close() };
}
