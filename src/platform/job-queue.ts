import PgBoss from 'pg-boss';
import { poolOf } from '../db/sql';
import type { Logger } from 'pino';
import type { DataSource, EntityManager } from 'typeorm';
import { queueSettingProblem, queueVariableName, type JobsConfig } from '../config';
import { QueueRunner } from './job-runner';
import type { JobDefinition, JobSender, JobState, QueueSettings, SendOptions } from './jobs';
import { PostgresListener } from './pg-listener';

/** pg-boss keeps its tables in a schema of their own in the project's database. */
export const JOBS_SCHEMA = 'pgboss';
/** NOTIFY channel that wakes workers; the payload is the queue name. */
const WAKE_CHANNEL = 'plinth_jobs';
/**
 * A job's row expires this long after its timeout, so maintenance never takes a job away from
 * a live worker before that worker has given up on it itself.
 */
const EXPIRY_MARGIN_SECONDS = 2;
const QUEUE_NAME = /^[a-z][a-z0-9_-]{0,49}$/;

/** A job as the admin API shows it. */
export interface JobRecord {
  id: string;
  queue: string;
  state: JobState;
  data: unknown;
  /** What the worker returned, or the last attempt's error ({name, message}). */
  output: unknown;
  retryCount: number;
  retryLimit: number;
  createdOn: Date;
  /** Not run before this; for a job waiting to be retried, when it will be. */
  startAfter: Date;
  startedOn: Date | null;
  completedOn: Date | null;
}

export interface JobFilter {
  queue?: string;
  state?: JobState;
  /** Newest first, at most this many. */
  first: number;
  /** Skips this many first (default 0). */
  offset?: number;
  /** Failed jobs before the others (then newest first). */
  failedFirst?: boolean;
}

export interface JobCount {
  queue: string;
  state: JobState;
  count: number;
}

export interface JobQueueOptions {
  dataSource: DataSource;
  /** Connection string for the LISTEN connection that wakes workers (only used by work()). */
  url: string;
  config: JobsConfig;
  logger: Logger;
  /** Runs pg-boss's maintenance (expiring jobs of crashed workers, archiving) in this process. */
  supervise: boolean;
  /** Aborted when the process starts shutting down. */
  shutdown: AbortSignal;
}

type PgBossDb = PgBoss.Db;
/** What pg-boss's job commands resolve with (its typings say void). */
interface CommandResult {
  affected: number;
}

const JOB_COLUMNS = `id, name AS queue, state, data, output, retry_count AS "retryCount", retry_limit AS "retryLimit",
  created_on AS "createdOn", start_after AS "startAfter", started_on AS "startedOn", completed_on AS "completedOn"`;

/**
 * The project's job queue: pg-boss on the project's connection pool. Every process sends and
 * administers jobs; processes with the worker role also run the workers (work()).
 */
export class JobQueue implements JobSender {
  private readonly boss: PgBoss;
  private readonly db: PgBossDb;
  private readonly queues = new Map<string, { definition: JobDefinition; settings: QueueSettings }>();
  private readonly runners = new Map<string, QueueRunner>();
  private listener: PostgresListener | undefined;

  constructor(private readonly options: JobQueueOptions) {
    // TypeORM's pg pool: one pool per process, and pg-pool discards a connection whose
    // statement failed (a failed multi-statement pg-boss command leaves its transaction open).
    const pool = () => poolOf(options.dataSource);
    this.db = { executeSql: (text, values) => pool().query(text, values) };
    this.boss = new PgBoss({
      db: this.db,
      schema: JOBS_SCHEMA,
      migrate: true,
      supervise: options.supervise,
      maintenanceIntervalSeconds: options.config.maintenanceIntervalSeconds,
      // Cron scheduling is not used yet; it would poll a queue of its own.
      schedule: false,
    });
    this.boss.on('error', (error) => options.logger.warn({ err: error }, 'pg-boss maintenance failed'));
  }

  /** Creates or upgrades pg-boss's schema (under pg-boss's advisory lock) and starts maintenance. */
  async start(): Promise<void> {
    await this.boss.start();
  }

  /**
   * Creates the modules' queues, or updates their settings (pg-boss copies them into each job
   * it inserts, so a change applies to jobs sent afterwards). Every process declares the queues,
   * so a process that only sends finds them.
   */
  async declare(definitions: JobDefinition[]): Promise<void> {
    // Every check first: a refused declaration changes nothing in the database.
    const declared = new Map<string, { definition: JobDefinition; settings: QueueSettings }>();
    for (const definition of definitions) {
      const { queue } = definition;
      if (!QUEUE_NAME.test(queue)) {
        throw new Error(`job queue "${queue}": a name is a lower-case letter, then up to 49 lower-case letters, digits, _ or -`);
      }
      const variable = queueVariableName(queue);
      if (variable === 'DEFAULT') throw new Error('job queue "default": the name is reserved for JOBS_DEFAULT_* settings');
      const clash = [...declared.keys()].find((other) => queueVariableName(other) === variable);
      if (clash) throw new Error(`job queues "${clash}" and "${queue}" would share the settings JOBS_${variable}_*`);
      declared.set(queue, { definition, settings: queueSettings(definition, this.options.config) });
    }
    const variables = new Set([...declared.keys()].map(queueVariableName));
    for (const variable of Object.keys(this.options.config.queues)) {
      if (!variables.has(variable)) {
        throw new Error(`JOBS_${variable}_* is set, but no module declares that job queue (queues: ${[...declared.keys()].join(', ') || 'none'})`);
      }
    }

    for (const [queue, { settings }] of declared) {
      const pgBossSettings = {
        name: queue,
        retryLimit: settings.retryLimit,
        retryDelay: settings.retryDelaySeconds,
        retryBackoff: settings.retryBackoff,
        expireInSeconds: settings.timeoutSeconds + EXPIRY_MARGIN_SECONDS,
      };
      await this.boss.createQueue(queue, pgBossSettings);
      await this.boss.updateQueue(queue, pgBossSettings);
    }
    for (const [queue, entry] of declared) this.queues.set(queue, entry);
  }

  /** Starts this process's workers for every declared queue, woken by sends from any process. */
  async work(): Promise<void> {
    const { config, logger } = this.options;
    for (const { definition, settings } of this.queues.values()) {
      const runner = new QueueRunner({
        boss: this.boss,
        definition,
        settings,
        pollIntervalMs: config.pollIntervalSeconds * 1000,
        logger,
        release: (ids) => this.release(definition.queue, ids),
      });
      this.runners.set(definition.queue, runner);
    }
    this.listener = new PostgresListener({
      url: this.options.url,
      channel: WAKE_CHANNEL,
      applicationName: 'plinth-jobs',
      logger,
      shutdown: this.options.shutdown,
      onNotification: (queue) => this.runners.get(queue)?.wake(),
      // Also the first time: jobs sent while no worker ran are waiting.
      onListening: () => {
        for (const runner of this.runners.values()) runner.wake();
      },
    });
    await this.listener.start();
  }

  /**
   * Stops the workers (running jobs get JOBS_SHUTDOWN_GRACE_SECONDS to finish, then are
   * released), the wake-up listener and pg-boss's maintenance.
   */
  async stop(): Promise<void> {
    const graceMs = this.options.config.shutdownGraceSeconds * 1000;
    await Promise.all([...this.runners.values()].map((runner) => runner.stop(graceMs)));
    await this.listener?.close();
    await this.boss.stop({ graceful: false, close: false });
  }

  /** This process's workers, by queue (none outside a worker process): whether each claims jobs, and its jobs running. */
  workers(): { queue: string; claiming: boolean; running: number }[] {
    return [...this.runners].map(([queue, runner]) => ({ queue, ...runner.state() }));
  }

  /** The queues declared, whether this process works them or not. */
  declaredQueues(): string[] {
    return [...this.queues.keys()];
  }

  /**
   * Pauses or resumes this process's worker of `queue` (the admin API): false when this process
   * runs no worker for it.
   */
  setWorkerPaused(queue: string, paused: boolean): boolean {
    const runner = this.runners.get(queue);
    if (!runner) return false;
    if (paused) runner.pause();
    else runner.resume();
    return true;
  }

  async send<Data extends object>(queue: string, data: Data, options: SendOptions = {}): Promise<string> {
    if (!this.queues.has(queue)) throw new Error(`no module declares the job queue "${queue}"`);
    if (data === null || typeof data !== 'object' || Array.isArray(data)) throw new TypeError('job data must be a JSON object');
    const db = options.transaction ? transactionDb(options.transaction) : this.db;
    const id = await this.boss.send(queue, data, { db, startAfter: options.startAfter });
    if (!id) throw new Error(`pg-boss did not queue the job on "${queue}"`);
    if (!options.startAfter || options.startAfter.getTime() <= Date.now()) await wake(db, queue);
    return id;
  }

  async find(filter: JobFilter): Promise<JobRecord[]> {
    const { rows } = await this.db.executeSql(
      `SELECT ${JOB_COLUMNS} FROM ${JOBS_SCHEMA}.job
       WHERE ($1::text IS NULL OR name = $1) AND ($2::text IS NULL OR state = $2::${JOBS_SCHEMA}.job_state)
       ORDER BY ${filter.failedFirst ? "state = 'failed' DESC, " : ''}created_on DESC, id LIMIT $3 OFFSET $4`,
      [filter.queue ?? null, filter.state ?? null, filter.first, filter.offset ?? 0],
    );
    return rows as JobRecord[];
  }

  /** Whether pg-boss knows a queue of this name (declared by this server's modules or not). */
  async hasQueue(queue: string): Promise<boolean> {
    const { rows } = await this.db.executeSql(`SELECT 1 FROM ${JOBS_SCHEMA}.queue WHERE name = $1`, [queue]);
    return rows.length > 0;
  }

  /** The job with this id (a UUID), or null. Jobs pg-boss archived (finished over 12 hours ago) are not found. */
  async get(id: string): Promise<JobRecord | null> {
    const { rows } = await this.db.executeSql(`SELECT ${JOB_COLUMNS} FROM ${JOBS_SCHEMA}.job WHERE id = $1`, [id]);
    return (rows[0] as JobRecord | undefined) ?? null;
  }

  /**
   * Runs a failed job again (with one more retry allowed), or a cancelled one; false when the
   * job is in neither state.
   */
  async retry(job: JobRecord): Promise<boolean> {
    const result = (job.state === 'cancelled'
      ? await this.boss.resume(job.queue, job.id)
      : await this.boss.retry(job.queue, job.id)) as unknown as CommandResult;
    if (result.affected === 0) return false;
    await wake(this.db, job.queue);
    return true;
  }

  /** Cancels a job that has not finished; false when it has. A running job is not interrupted, but its outcome is dropped. */
  async cancel(job: JobRecord): Promise<boolean> {
    const result = (await this.boss.cancel(job.queue, job.id)) as unknown as CommandResult;
    return result.affected > 0;
  }

  /** Jobs in pg-boss's job table by queue and state, every state of every queue included (0 when empty). */
  async countsByQueueAndState(): Promise<JobCount[]> {
    const { rows } = await this.db.executeSql(
      `SELECT q.name AS queue, s.state, count(j.id)::int AS count
       FROM ${JOBS_SCHEMA}.queue q
       CROSS JOIN unnest(enum_range(NULL::${JOBS_SCHEMA}.job_state)) AS s(state)
       LEFT JOIN ${JOBS_SCHEMA}.job j ON j.name = q.name AND j.state = s.state
       GROUP BY q.name, s.state ORDER BY q.name, s.state`,
      [],
    );
    return rows as JobCount[];
  }

  /**
   * Puts jobs back in the queue without counting an attempt (a shutdown is not the job's
   * failure), and wakes the other workers.
   */
  private async release(queue: string, ids: string[]): Promise<void> {
    await this.db.executeSql(
      `UPDATE ${JOBS_SCHEMA}.job SET state = 'retry', started_on = NULL, start_after = now(),
         output = '{"name": "Released", "message": "the worker shut down before the job finished"}'::jsonb
       WHERE name = $1 AND id = ANY($2::uuid[]) AND state = 'active'`,
      [queue, ids],
    );
    await wake(this.db, queue);
  }
}

/**
 * A queue's settings: the JOBS_DEFAULT_* defaults, then what its module declares, then
 * JOBS_<QUEUE>_* (the operator has the last word).
 */
export function queueSettings(definition: JobDefinition, config: JobsConfig): QueueSettings {
  const declared = definition.settings ?? {};
  for (const [setting, value] of Object.entries(declared)) {
    const problem = value === undefined ? undefined : queueSettingProblem(setting as keyof QueueSettings, value);
    if (problem) throw new Error(`job queue "${definition.queue}": ${setting} ${problem} (got ${JSON.stringify(value)})`);
  }
  const defined = Object.fromEntries(Object.entries(declared).filter(([, value]) => value !== undefined));
  return { ...config.defaults, ...defined, ...config.queues[queueVariableName(definition.queue)] };
}

/** Runs pg-boss's statements on the connection of the caller's transaction. */
function transactionDb(manager: EntityManager): PgBossDb {
  const runner = manager.queryRunner;
  if (!runner?.isTransactionActive) {
    throw new Error('SendOptions.transaction must be the EntityManager of a running transaction');
  }
  return { executeSql: async (text, values) => ({ rows: (await runner.query(text, values, true)).records }) };
}

/** NOTIFY the workers of a queue; inside a transaction it is delivered when (and only if) it commits. */
async function wake(db: PgBossDb, queue: string): Promise<void> {
  await db.executeSql('SELECT pg_notify($1, $2)', [WAKE_CHANNEL, queue]);
}
