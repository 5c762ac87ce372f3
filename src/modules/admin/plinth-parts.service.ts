import type { Logger } from 'pino';
import type { DataSource } from 'typeorm';
import { PLINTH_VERSION } from '../../common/package-version';
import { Refusal } from '../../common/refusal';
import type { Config } from '../../config';
import type { JobQueue } from '../../platform/job-queue';
import { mailDeliveryProblem } from '../../platform/mail/transport';
import type { DeliverySwitch } from '../events/events.services';

/** What the admin API may do to a part. */
export const PART_ACTIONS = ['start', 'stop', 'restart'] as const;
export type PartAction = (typeof PART_ACTIONS)[number];

/**
 * A part's state on this instance: `running`; `stopped` (by the admin API); `not-run-here` (a
 * process without the worker role runs no workers, dispatcher or scheduler); `unavailable` (it
 * cannot do its work: the database does not answer, mail has no way out).
 */
export type PartState = 'running' | 'stopped' | 'not-run-here' | 'unavailable';

/** One of Plinth's own parts, as the health and services routes show it. */
export interface PartStatus {
  name: string;
  title: string;
  state: PartState;
  /** The actions this instance takes for it now; empty for a part that is not stopped or started from here. */
  actions: PartAction[];
  /** A sentence on its state, when there is more to say. */
  detail?: string;
  /** Job workers: the queue's jobs by state (all instances), and how many run in this process. */
  jobs?: { waiting: number; active: number; failed: number; runningHere: number };
  /** The database: how long `SELECT 1` took. */
  latencyMs?: number;
}

/** The health answer: each part, and the CLI version (spec 3 §9: the admin UI ships with the CLI, in lockstep). */
export interface PlinthHealth {
  status: 'ok' | 'degraded';
  version: string;
  cliVersion: string;
  parts: PartStatus[];
}

const JOBS_PREFIX = 'jobs.';

/**
 * Plinth's own parts on this instance, as the admin API sees and drives them (docs/decisions.md,
 * "What stop and start mean"): HTTP and GraphQL, the auth service, the database, the mailer and
 * the scheduler are shown; the event dispatcher and each queue's job worker are also stopped
 * (they stop claiming work; work in flight finishes) and started again.
 */
export class PlinthParts {
  constructor(
    private readonly options: {
      config: Config;
      dataSource: DataSource;
      jobs: JobQueue;
      delivery: DeliverySwitch;
      logger: Logger;
      shutdown: AbortSignal;
    },
  ) {}

  async health(): Promise<PlinthHealth> {
    const parts = await this.list();
    const degraded = parts.some((part) => part.state === 'unavailable' || part.state === 'stopped');
    return { status: degraded ? 'degraded' : 'ok', version: PLINTH_VERSION, cliVersion: PLINTH_VERSION, parts };
  }

  async list(): Promise<PartStatus[]> {
    const { config, jobs, delivery } = this.options;
    const worker = config.processRoles.includes('worker');
    const database = await this.database();
    const counts = database.state === 'running' ? await jobs.countsByQueueAndState() : [];
    const workers = new Map(jobs.workers().map((entry) => [entry.queue, entry]));
    const dispatcher = delivery.state();
    const mailProblem = mailDeliveryProblem(config);
    const parts: PartStatus[] = [
      { name: 'http', title: 'HTTP and GraphQL', state: 'running', actions: [], detail: `serving ${config.publicUrl}` },
      {
        name: 'auth',
        title: 'Authentication service',
        state: 'running',
        actions: [],
        detail: config.auth.port ? `under /auth and on port ${config.auth.port}` : 'under /auth',
      },
      database,
      {
        name: 'events',
        title: 'Event dispatcher',
        state: dispatcher === 'not-run-here' ? 'not-run-here' : dispatcher,
        actions: dispatcher === 'running' ? ['stop', 'restart'] : dispatcher === 'stopped' ? ['start', 'restart'] : [],
      },
      {
        name: 'scheduler',
        title: 'Scheduler (recurring tasks and cron triggers)',
        state: worker ? 'running' : 'not-run-here',
        actions: [],
      },
      {
        name: 'mailer',
        title: 'Mailer',
        state: mailProblem ? 'unavailable' : 'running',
        actions: [],
        detail:
          mailProblem ??
          (config.mail.smtp
            ? `SMTP at ${config.mail.smtp.host}:${config.mail.smtp.port}`
            : config.mail.api
              ? 'delivery API'
              : 'written to files (development)'),
      },
    ];
    for (const queue of jobs.declaredQueues().sort()) {
      const here = workers.get(queue);
      const count = (state: string) => counts.filter((entry) => entry.queue === queue && entry.state === state).reduce((sum, entry) => sum + entry.count, 0);
      parts.push({
        name: `${JOBS_PREFIX}${queue}`,
        title: `Job worker: ${queue}`,
        state: !here ? 'not-run-here' : here.claiming ? 'running' : 'stopped',
        actions: !here ? [] : here.claiming ? ['stop', 'restart'] : ['start', 'restart'],
        jobs: { waiting: count('created') + count('retry'), active: count('active'), failed: count('failed'), runningHere: here?.running ?? 0 },
      });
    }
    return parts;
  }

  /** Starts, stops or restarts a part on this instance; answers its state after. */
  async act(name: string, action: PartAction): Promise<PartStatus> {
    const before = (await this.list()).find((part) => part.name === name);
    if (!before) throw new Refusal('UNKNOWN_SERVICE', `There is no service ${name}: see GET /api/services`, 404, { field: 'name' });
    if (this.options.shutdown.aborted) throw new Refusal('SHUTTING_DOWN', 'The server is shutting down', 503);
    if (!before.actions.includes(action)) {
      const why =
        before.state === 'not-run-here'
          ? `${name} does not run in this process (PLINTH_PROCESS_ROLES without worker)`
          : before.actions.length === 0
            ? `${name} is not stopped or started from the dashboard`
            : `${name} is ${before.state}`;
      throw new Refusal('ACTION_NOT_POSSIBLE', `Cannot ${action} ${name}: ${why}`, 409);
    }
    if (name === 'events') {
      if (action !== 'start') await this.options.delivery.stop();
      if (action !== 'stop') await this.options.delivery.start();
    } else {
      const queue = name.slice(JOBS_PREFIX.length);
      if (action !== 'start') this.options.jobs.setWorkerPaused(queue, true);
      if (action !== 'stop') this.options.jobs.setWorkerPaused(queue, false);
    }
    this.options.logger.info({ service: name, action }, 'admin changed a service');
    return (await this.list()).find((part) => part.name === name)!;
  }

  private async database(): Promise<PartStatus> {
    const started = performance.now();
    try {
      await this.options.dataSource.query('SELECT 1');
      return { name: 'database', title: 'PostgreSQL', state: 'running', actions: [], latencyMs: Math.round((performance.now() - started) * 10) / 10 };
    } catch (error) {
      this.options.logger.warn({ err: error }, 'admin health: the database does not answer');
      return { name: 'database', title: 'PostgreSQL', state: 'unavailable', actions: [], detail: 'the database does not answer' };
    }
  }
}
