import 'reflect-metadata';
import type { AddressInfo } from 'node:net';
import type { FastifyInstance } from 'fastify';
import type { Logger } from 'pino';
import type { DataSource } from 'typeorm';
import { apiReference, apiReferenceOptions } from './apidocs/routes';
import type { Config } from './config';
import { withDevelopmentSecrets } from './config/dev-secrets';
import { createDataSource, runMigrations, withMigrationLock } from './db/data-source';
import { openDatabaseEndpoint } from './db/database';
import { PostgresPubSub } from './platform/pubsub';
import { buildPlinthSchema, ResolverContainer } from './graphql/schema';
import { ServedSchema } from './platform/served-schema';
import { buildApiApp } from './http/api-app';
import { buildProbeApp } from './http/health';
import { MODULES } from './modules';
import { JobQueue } from './platform/job-queue';
import { IdleCollector } from './platform/idle-collection';
import { textCacheEntriesTakenIn } from './platform/text-caches';
import { createMailer } from './platform/mail/mailer';
import { Metrics } from './platform/metrics';
import { ModuleServices, resolverClasses, type AnyModule, type Platform } from './platform/module';
import { RecurringPause, RecurringWork } from './platform/recurring';
import { ChildServices } from './platform/child-services';
import { createOutboundHttp } from './platform/outbound-http';
import { createRateLimits } from './platform/rate-limits';
import { RequestOutcomes } from './platform/request-outcomes';
import { settlesWithin } from './platform/settles-within';
import { createLogger } from './platform/logger';

export interface RunningServer {
  /** Base URL, e.g. http://127.0.0.1:8080 */
  url: string;
  port: number;
  app: FastifyInstance;
  dataSource: DataSource;
  jobs: JobQueue;
  logger: Logger;
  /** Where `plinth start` hands the custom services it runs, for the admin API to stop and start. */
  childServices: ChildServices;
  /**
   * Drains requests and subscriptions, then releases the database (and stops the embedded one).
   * Bounded by PLINTH_SHUTDOWN_TIMEOUT_MS: a step still running then is logged by name and left;
   * resolves with the names of the steps left so (none when all finished).
   */
  close(): Promise<string[]>;
}

/** Time each shutdown step gets even after the whole shutdown's time has run out. */
const MIN_SHUTDOWN_STEP_MS = 1_000;
/** How often the start-up collection looks for quiet: its two collections land about 1 and 7 s after a quiet start. */
const STARTUP_COLLECTION_CHECK_MS = 1_000;
/**
 * After the start-up, a quiet spell collects when resident memory is past this multiple of the
 * idle size the start-up's collections left: a hostile burst's garbage is given back within
 * seconds of it ending, ordinary traffic is left alone.
 */
const GROWN_BY = 1.25;
/**
 * Past this multiple of that idle size, a busy process collects too, every 10 s at most, when the
 * caches keyed by the client's text took in at least PRESSURE_CHURN new entries since its last
 * busy collection: input new at every request, not ordinary load.
 */
const PRESSURE_BY = 1.75;
const PRESSURE_CHURN = 100;
/**
 * How long a quiet spell after the start-up's must last before it is collected: longer than the
 * gaps between the bursts of ordinary traffic (and of a benchmark's turns), short enough that a
 * hostile burst's memory is back within a minute of its end.
 */
const LATER_SPELL_QUIET_MS = 15_000;

/**
 * Starts Plinth: database (DATABASE_URL or the embedded one), migrations, the cross-instance
 * PubSub, the job queue, the services and the modules' work, then by PLINTH_PROCESS_ROLES the
 * schema and the HTTP/WebSocket server (api) and the job workers and recurring tasks (worker).
 * A process without the api role still listens, for the health probes only.
 *
 * `modules` is the product's list; tests add modules of their own (a queue to exercise the
 * workers with). The GraphQL schema always comes from MODULES.
 */
export async function startServer(
  baseConfig: Config,
  logger: Logger = createLogger(baseConfig),
  modules: readonly AnyModule[] = MODULES,
): Promise<RunningServer> {
  const config = withDevelopmentSecrets(baseConfig, (text) => process.stderr.write(`${text}\n`));
  const serveApi = config.processRoles.includes('api');
  const runWorkers = config.processRoles.includes('worker');
  const cleanup: { step: string; run: () => Promise<unknown> }[] = [];
  const shutdown = new AbortController();
  const close = async () => {
    shutdown.abort();
    const unfinished: string[] = [];
    const deadline = Date.now() + config.shutdownTimeoutMs;
    for (const { step, run } of cleanup.splice(0).reverse()) {
      // A step that hangs is named and left behind: the pool and the embedded database after it
      // are still released (each later step gets at least a second).
      const finished = await settlesWithin(run(), Math.max(deadline - Date.now(), MIN_SHUTDOWN_STEP_MS)).catch((error: unknown) => {
        logger.error({ err: error, step }, 'error during shutdown');
        return true;
      });
      if (finished) continue;
      unfinished.push(step);
      logger.error({ step, timeoutMs: config.shutdownTimeoutMs }, 'shutdown step did not finish in time (PLINTH_SHUTDOWN_TIMEOUT_MS); going on');
    }
    return unfinished;
  };

  try {
    const endpoint = await openDatabaseEndpoint(config, logger);
    cleanup.push({ step: 'database endpoint', run: () => endpoint.stop() });
    const dataSource = createDataSource(endpoint.url, config.database.poolSize);
    await dataSource.initialize();
    cleanup.push({ step: 'database pool', run: () => dataSource.destroy() });
    const applied = await runMigrations(dataSource);
    if (applied.length > 0) logger.info({ migrations: applied }, 'migrations applied');

    const pubSub = new PostgresPubSub({
      url: endpoint.url,
      query: (sql, parameters) => dataSource.query(sql, parameters),
      logger: logger.child({ component: 'pubsub' }),
      shutdown: shutdown.signal,
    });
    await pubSub.start();
    cleanup.push({ step: 'pubsub', run: () => pubSub.close() });

    const jobs = new JobQueue({
      dataSource,
      url: endpoint.url,
      config: config.jobs,
      logger: logger.child({ component: 'jobs' }),
      supervise: runWorkers,
      shutdown: shutdown.signal,
    });
    // The clients workers use close after the workers stop (cleanup runs in reverse).
    const http = createOutboundHttp(config.outboundHttp);
    cleanup.push({ step: 'outbound http', run: () => http.close() });
    const mail = createMailer({ config, logger, jobs, http });
    cleanup.push({ step: 'mailer', run: async () => mail.close() });
    const metrics = new Metrics();
    metrics.addGauge('plinth_jobs', 'Jobs kept in the queue tables, by queue and state', ['queue', 'state'], async () =>
      (await jobs.countsByQueueAndState()).map(({ queue, state, count }) => ({ labels: { queue, state }, value: count })),
    );
    const rateLimits = createRateLimits(config, dataSource, logger);
    const requestOutcomes = new RequestOutcomes(
      (sql, parameters) => dataSource.query(sql, parameters),
      config.requestOutcomesFlushMs,
      logger.child({ component: 'request-outcomes' }),
    );
    requestOutcomes.start();
    // Written once more after the HTTP server has stopped (cleanup runs in reverse).
    cleanup.push({ step: 'request outcomes', run: () => requestOutcomes.close() });
    const platform: Platform = {
      config,
      dataSource,
      logger,
      pubSub,
      jobs,
      metrics,
      rateLimits,
      requestOutcomes,
      http,
      mailer: mail.mailer,
      shutdown: shutdown.signal,
      schema: new ServedSchema(),
      recurringPause: new RecurringPause(),
      childServices: new ChildServices(),
    };
    const services = new ModuleServices();
    const container = new ResolverContainer();
    for (const module of modules) {
      const created = await module.create(platform, services);
      services.set(module, created);
      container.add(...(module.resolvers ?? []).map((Resolver) => new Resolver(created)));
    }
    // pg-boss creates its schema on first start and its queues' tables on declaration: one
    // process at a time, as for migrations (two starting together could deadlock).
    await withMigrationLock(dataSource, async () => {
      await jobs.start();
      // Stopped after the HTTP server (requests may still send) and before the PubSub and the pool;
      // also when a declaration below refuses a queue, or pg-boss's timers outlive the failed start.
      cleanup.push({ step: 'jobs', run: () => jobs.stop() });
      await jobs.declare([...mail.jobs, ...modules.flatMap((module) => module.jobs?.(services.get(module)) ?? [])]);
    });
    if (runWorkers) await jobs.work();
    for (const module of modules) {
      if (module.work) cleanup.push({ step: `${module.name} workers`, run: await module.work(services.get(module), config.processRoles) });
    }
    if (runWorkers) {
      const recurring = new RecurringWork(
        [
          pubSub.payloadCleanup(),
          ...modules.flatMap((module) => (module.recurring?.(services.get(module)) ?? []).map((task) => ({ ...task, name: `${module.name}.${task.name}` }))),
        ],
        { url: endpoint.url, logger: logger.child({ component: 'recurring' }), shutdown: shutdown.signal, pause: platform.recurringPause },
      );
      // Stopped (its runs finished) before the module work, the queue and the database.
      cleanup.push({ step: 'recurring tasks', run: () => recurring.stop() });
      await recurring.start();
    }

    if (serveApi) platform.schema.setBase(await buildPlinthSchema({ resolvers: resolverClasses(MODULES), container, pubSub }));
    const app = serveApi
      ? await buildApiApp(platform, modules, services, apiReference(apiReferenceOptions(config)))
      : buildProbeApp({ logger, dataSource, metrics, metricsAccess: config.metrics });
    cleanup.push({ step: 'http server', run: () => app.close() });
    await app.listen({ host: config.host, port: config.port });
    if (config.idleCollectionMs > 0 || config.startUpCollection) {
      const idleCollector =
        config.idleCollectionMs > 0
          ? new IdleCollector(config.idleCollectionMs)
          : new IdleCollector(STARTUP_COLLECTION_CHECK_MS, {
              startUpOnly: true,
              grownBy: GROWN_BY,
              pressureBy: PRESSURE_BY,
              pressureChurn: PRESSURE_CHURN,
              churn: textCacheEntriesTakenIn,
              laterSpellQuietMs: LATER_SPELL_QUIET_MS,
            });
      idleCollector.start();
      cleanup.push({ step: 'idle collection', run: async () => idleCollector.stop() });
    }

    const port = (app.server.address() as AddressInfo).port;
    const host = config.host === '0.0.0.0' || config.host === '::' ? '127.0.0.1' : config.host;
    const url = `http://${host.includes(':') ? `[${host}]` : host}:${port}`;
    logger.info(
      {
        url,
        ...(serveApi ? { graphql: `${url}/v1/graphql` } : {}),
        roles: config.processRoles,
        database: endpoint.embedded ? 'embedded' : 'DATABASE_URL',
      },
      'Plinth is ready',
    );
    return { url, port, app, dataSource, jobs, logger, childServices: platform.childServices, close };
  } catch (error) {
    await close();
    throw error;
  }
}
