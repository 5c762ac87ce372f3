import type { FastifyInstance } from 'fastify';
import type { GraphQLSchema } from 'graphql';
import type { Logger } from 'pino';
import type { DataSource, EntityManager } from 'typeorm';
import type { Config, ProcessRole } from '../config';
import type { PostgresPubSub } from './pubsub';
import type { ServedSchema } from './served-schema';
import type { ActionDefinition } from './actions';
import type { Metrics } from './metrics';
import type { OutboundHttp } from './outbound-http';
import type { RateLimits } from './rate-limits';
import type { RequestOutcomes } from './request-outcomes';
import type { JobQueue } from './job-queue';
import type { Mailer } from './mail/mailer';
import type { JobDefinition } from './jobs';
import type { MetadataFiles, ModuleMetadata } from './metadata';
import type { RecurringPause, RecurringTask } from './recurring';
import type { ChildServices } from './child-services';

/** The shared mechanisms (src/platform/) every module builds its services from. */
export interface Platform {
  config: Config;
  dataSource: DataSource;
  logger: Logger;
  pubSub: PostgresPubSub;
  metrics: Metrics;
  /** Named rate limits (routes and resolvers). */
  rateLimits: RateLimits;
  /** Good and bad requests served, per service and minute (SLOs read them). */
  requestOutcomes: RequestOutcomes;
  /** The one client for calls to handlers, webhooks, providers and hooks. */
  http: OutboundHttp;
  /** Aborted as soon as the process starts shutting down. */
  shutdown: AbortSignal;
  /**
   * Background jobs. Services that only send take it as a `JobSender`; the admin API and
   * metrics use the rest (find, retry, cancel, counts).
   */
  jobs: JobQueue;
  /** Mail through the queue; modules that send call requireDelivery in create. */
  mailer: Mailer;
  /** The schema as served: Plinth's own plus what metadata declares (modules add extensions and rebuild it). */
  schema: ServedSchema;
  /** Pauses and resumes this process's recurring tasks (the admin API's `scheduler`). */
  recurringPause: RecurringPause;
  /** The custom services `plinth start` runs as this process's children, once it has started them. */
  childServices: ChildServices;
}

/** A resolver class: type-graphql builds it with its module's services. */
export type ResolverClass<Services> = new (services: Services) => object;

/**
 * One area of the product: the module contract. `src/modules/index.ts` lists
 * the modules; start-up and the schema builder iterate over that list and name none of them.
 */
export interface PlinthModule<Services = unknown, Declared = unknown> {
  name: string;
  /** Resolver classes of the one schema; each is constructed with this module's services. */
  resolvers?: ResolverClass<Services>[];
  /** Builds the module's services; `modules` gives the services of modules listed before it. */
  create(platform: Platform, modules: ModuleServices): Services | Promise<Services>;
  /**
   * Thin Fastify routes, each with its JSON schemas (body, querystring, params, response, and
   * tags, summary, security: the API reference is made from them). `plinth build` registers them
   * with stand-in services and no database: keep references to `services`, call them in handlers.
   * `config` is the real configuration (in `plinth build` too), for paths that depend on settings.
   */
  routes?(app: FastifyInstance, services: Services, config: Config): void;
  /** Engine-compatible action handlers, served under the actions route prefix (the same rule for `services`). */
  actions?(services: Services): ActionDefinition[];
  /**
   * The module's job queues and their workers. Every process declares them (so any process can
   * send); only processes with the worker role (PLINTH_PROCESS_ROLES) run the workers.
   */
  jobs?(services: Services): JobDefinition[];
  /**
   * Work done on a schedule (every so often, or on a cron expression) by exactly one process of
   * all those sharing the database (platform/recurring.ts): clean-ups, checks, scheduled sends.
   * Only processes with the worker role run them; a task's name is put after the module's.
   */
  recurring?(services: Services): RecurringTask[];
  /**
   * Loops the module runs while the process serves (a dispatcher, a follower of changes), started
   * in every process once the job queue is up (and its workers, in a worker process): `roles` are
   * the process's, for work that belongs to one role. Never started in `create`. The returned
   * function stops it at shutdown, after the HTTP server closed and before the queue and the
   * database do.
   */
  work?(services: Services, roles: readonly ProcessRole[]): Promise<() => Promise<void>>;
  /**
   * The module's part of the metadata API (`POST /v1/metadata`, platform/metadata.ts): the
   * Hasura request types it answers, and its section of export/replace/reload_metadata. The
   * same rule for `services` as for routes.
   */
  metadata?(services: Services): ModuleMetadata;
  /** The files under `metadata/` holding the module's top-level metadata keys (`plinth metadata`). */
  metadataFiles?: MetadataFiles;
  /**
   * What the module's stored metadata adds to `schema`, resolving nothing (`plinth schema
   * --with-metadata` prints the result; no services are created for it).
   */
  declaredSchema?(schema: GraphQLSchema, manager: EntityManager): Promise<GraphQLSchema>;
  /**
   * What the module's stored metadata gives the `declaredSchema` of a module listed after it, as
   * `create` gives it services (that module calls it on this module's object): the same
   * extensions as served, in the same order, with no services.
   */
  declared?(manager: EntityManager): Promise<Declared>;
}

/** A module of any services type, as the list holds them. */
// eslint-disable-next-line @typescript-eslint/no-explicit-any -- the list holds modules of every services type
export type AnyModule = PlinthModule<any>;

/** The services of the modules created so far, looked up by module (so the type follows). */
export class ModuleServices {
  private readonly byModule = new Map<AnyModule, unknown>();

  set<Services>(module: PlinthModule<Services>, services: Services): void {
    this.byModule.set(module, services);
  }

  get<Services>(module: PlinthModule<Services>): Services {
    if (!this.byModule.has(module)) {
      throw new Error(`the ${module.name} module must be listed before the modules that use it (src/modules/index.ts)`);
    }
    return this.byModule.get(module) as Services;
  }
}

/** Every resolver class the modules declare, in their order: what the schema is built from. */
export function resolverClasses(modules: readonly AnyModule[]): [ResolverClass<unknown>, ...ResolverClass<unknown>[]] {
  const [first, ...rest] = modules.flatMap((module): ResolverClass<unknown>[] => module.resolvers ?? []);
  if (!first) throw new Error('no module declares a resolver');
  return [first, ...rest];
}
