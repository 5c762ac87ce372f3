import type { Logger } from 'pino';
import type { DataSource } from 'typeorm';
import { PLINTH_VERSION } from '../../common/package-version';
import { Refusal } from '../../common/refusal';
import type { Config, CustomService } from '../../config';
import type { ChildServices } from '../../platform/child-services';
import type { JobQueue } from '../../platform/job-queue';
import type { RecurringPause } from '../../platform/recurring';
import { mailDeliveryProblem } from '../../platform/mail/transport';
import type { DeliverySwitch } from '../events/events.services';

/** What the admin API may do to a part. */
export const PART_ACTIONS = ['start', 'stop', 'restart'] as const;
export type PartAction = (typeof PART_ACTIONS)[number];

/**
 * A part's state on this instance: `running`; `stopped` (by the admin API); `not-run-here` (a
 * process without the worker role runs no workers, dispatcher or scheduler); `unavailable` (it
 * cannot do its work: the database does not answer, mail has no way out, a custom service does
 * not answer its health check).
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
  /** The database: how long `SELECT 1` took; a custom service: how long its health check took. */
  latencyMs?: number;
  /** Stopped on every instance (`?scope=all`): instances that start meanwhile stop it too. */
  pausedOnAllInstances?: boolean;
}

/** The health answer: each part, and the CLI version (spec 3 §9: the admin UI ships with the CLI, in lockstep). */
export interface PlinthHealth {
  status: 'ok' | 'degraded';
  version: string;
  cliVersion: string;
  parts: PartStatus[];
}

const JOBS_PREFIX = 'jobs.';
/** A declared custom service `CS_<N>` is the part `cs.<name>`. */
export const CUSTOM_PREFIX = 'cs.';
/** The route the scaffolded services answer their health on (services/templates). */
const HEALTH_ROUTE = '/healthz';
/** How long a start waits for the custom service to answer before answering its state. */
const CUSTOM_START_WAIT_MS = 5_000;
/** The parts that take actions somewhere (here or on another instance): the others are only shown. */
export function drivable(name: string): boolean {
  return name === 'events' || name === 'scheduler' || name.startsWith(JOBS_PREFIX) || name.startsWith(CUSTOM_PREFIX);
}

/** The actions a part takes in a state: stop when it runs, start when it is stopped, restart both. */
function actionsFor(state: PartState | 'failed'): PartAction[] {
  return state === 'running' ? ['stop', 'restart'] : state === 'stopped' ? ['start', 'restart'] : state === 'failed' ? ['start', 'restart'] : [];
}

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
      recurringPause: RecurringPause;
      childServices: ChildServices;
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
    // The job counts and the standing pauses beside the database's check (one round trip's wait, not three); used when the database answers.
    const countsAsked = jobs.countsByQueueAndState();
    countsAsked.catch(() => undefined);
    const standingAsked = this.standingPauses();
    standingAsked.catch(() => undefined);
    const [database, custom] = await Promise.all([this.database(), Promise.all(this.customServices().map((service) => this.customService(service)))]);
    const counts = database.state === 'running' ? await countsAsked : [];
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
        ...(worker
          ? {
              state: this.options.recurringPause.paused ? 'stopped' : 'running',
              actions: actionsFor(this.options.recurringPause.paused ? 'stopped' : 'running'),
            }
          : { state: 'not-run-here', actions: [] }),
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
    parts.push(...custom);
    if (database.state === 'running') {
      const standing = new Set(await standingAsked);
      for (const part of parts) if (standing.has(part.name)) part.pausedOnAllInstances = true;
    }
    return parts;
  }

  /** The parts stopped on every instance (`?scope=all`), as stored. */
  async standingPauses(): Promise<string[]> {
    const rows = (await this.options.dataSource.query('SELECT name FROM admin_paused_services ORDER BY name')) as { name: string }[];
    return rows.map((row) => row.name);
  }

  /** Keeps (or ends) a stop on every instance: instances that start meanwhile apply it. */
  async setStandingPause(name: string, paused: boolean): Promise<void> {
    await this.options.dataSource.query(
      paused ? 'INSERT INTO admin_paused_services (name) VALUES ($1) ON CONFLICT (name) DO NOTHING' : 'DELETE FROM admin_paused_services WHERE name = $1',
      [name],
    );
  }

  /** The declared custom services but Plinth's own (template plinth is this server). */
  private customServices(): CustomService[] {
    return this.options.config.customServices.filter((service) => service.template !== 'plinth');
  }

  /**
   * A custom service: run by this process (`plinth start`), its supervisor's state, and stop,
   * start and restart; otherwise its health, `GET /healthz` at its host and port within
   * PLATFORM_ADMIN_SERVICE_CHECK_TIMEOUT_MS (any answer below 500 counts as running).
   */
  private async customService(service: CustomService): Promise<PartStatus> {
    const name = `${CUSTOM_PREFIX}${service.name}`;
    const title = `Custom service: ${service.name} (${service.template})`;
    const supervised = this.options.childServices.status(service.name);
    if (supervised && (supervised.state === 'stopped' || supervised.state === 'failed' || supervised.state === 'not-scaffolded')) {
      return {
        name,
        title,
        state: supervised.state === 'stopped' ? 'stopped' : 'unavailable',
        actions: supervised.state === 'stopped' ? actionsFor('stopped') : actionsFor('failed'),
        detail: supervised.state === 'stopped' ? 'run by plinth start; stopped' : `run by plinth start; ${supervised.state}`,
      };
    }
    const health = await this.check(service);
    if (!supervised)
      return {
        name,
        title,
        state: health.ok ? 'running' : 'unavailable',
        actions: [],
        latencyMs: health.latencyMs,
        detail: `health-checked: ${health.detail}`,
      };
    return {
      name,
      title,
      state: health.ok ? 'running' : 'unavailable',
      actions: actionsFor('running'),
      latencyMs: health.latencyMs,
      detail: `run by plinth start (pid ${supervised.pid ?? 'none'}, ${supervised.state}); ${health.detail}`,
    };
  }

  /** Waits (up to CUSTOM_START_WAIT_MS) for a service just started to answer its health check. */
  private async answering(service: CustomService): Promise<void> {
    const until = Date.now() + CUSTOM_START_WAIT_MS;
    while (Date.now() < until && !this.options.shutdown.aborted) {
      if ((await this.check(service)).ok) return;
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  }

  private async check(service: CustomService): Promise<{ ok: boolean; latencyMs: number; detail: string }> {
    const host = service.host ?? service.name;
    const url = `http://${host}:${service.port}${HEALTH_ROUTE}`;
    const started = performance.now();
    const latency = () => Math.round((performance.now() - started) * 10) / 10;
    try {
      const response = await fetch(url, { signal: AbortSignal.timeout(this.options.config.admin.serviceCheckTimeoutMs), redirect: 'manual' });
      await response.body?.cancel();
      return { ok: response.status < 500, latencyMs: latency(), detail: `GET ${url} answered ${response.status}` };
    } catch (error) {
      const timedOut = (error as Error).name === 'TimeoutError';
      return {
        ok: false,
        latencyMs: latency(),
        detail: timedOut ? `GET ${url}: no answer within ${this.options.config.admin.serviceCheckTimeoutMs} ms` : `GET ${url}: nothing answers`,
      };
    }
  }

  /** Starts, stops or restarts a part on this instance; answers its state after. */
  async act(name: string, action: PartAction): Promise<PartStatus> {
    const before = await this.part(name);
    if (!before.actions.includes(action)) {
      const why =
        before.state === 'not-run-here'
          ? `${name} does not run in this process (PLINTH_PROCESS_ROLES without worker)`
          : name.startsWith(CUSTOM_PREFIX)
            ? `${name} is not run by this process's plinth start: it is only health-checked`
            : before.actions.length === 0
              ? `${name} is not stopped or started from the dashboard`
              : `${name} is ${before.state}`;
      throw new Refusal('ACTION_NOT_POSSIBLE', `Cannot ${action} ${name}: ${why}`, 409);
    }
    return this.perform(before, action);
  }

  /**
   * Applies an action sent to every instance: as `act`, but a part this process does not drive is
   * answered as it is, and stopping a stopped part (or starting a running one) changes nothing.
   */
  async apply(name: string, action: PartAction): Promise<PartStatus> {
    const before = await this.part(name);
    const already = (action === 'stop' && before.state === 'stopped') || (action === 'start' && before.state === 'running');
    if (already || !before.actions.includes(action)) return before;
    return this.perform(before, action);
  }

  private async part(name: string): Promise<PartStatus> {
    const part = (await this.list()).find((each) => each.name === name);
    if (!part) throw new Refusal('UNKNOWN_SERVICE', `There is no service ${name}: see GET /api/services`, 404, { field: 'name' });
    if (this.options.shutdown.aborted) throw new Refusal('SHUTTING_DOWN', 'The server is shutting down', 503);
    return part;
  }

  private async perform(before: PartStatus, action: PartAction): Promise<PartStatus> {
    const { name } = before;
    const stop = action !== 'start';
    const start = action !== 'stop';
    if (name === 'events') {
      if (stop) await this.options.delivery.stop();
      if (start) await this.options.delivery.start();
    } else if (name === 'scheduler') {
      if (stop) await this.options.recurringPause.pause();
      if (start) this.options.recurringPause.resume();
    } else if (name.startsWith(CUSTOM_PREFIX)) {
      const service = name.slice(CUSTOM_PREFIX.length);
      if (stop) await this.options.childServices.stop(service);
      if (start) {
        this.options.childServices.start(service);
        await this.answering(this.customServices().find((each) => each.name === service)!);
      }
    } else {
      const queue = name.slice(JOBS_PREFIX.length);
      if (stop) this.options.jobs.setWorkerPaused(queue, true);
      if (start) this.options.jobs.setWorkerPaused(queue, false);
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
