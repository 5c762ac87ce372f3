import { randomUUID } from 'node:crypto';
import { hostname } from 'node:os';
import type { Logger } from 'pino';
import type { DataSource } from 'typeorm';
import { Refusal } from '../../common/refusal';
import type { ChildServices } from '../../platform/child-services';
import type { PostgresPubSub } from '../../platform/pubsub';
import { CUSTOM_PREFIX, drivable, type PartAction, type PartState, type PartStatus, type PlinthParts } from './plinth-parts.service';

/** The PubSub topics: an action for every instance, and each instance's acknowledgement. */
const COMMAND_TOPIC = 'plinth.admin.service-command';
const ACK_TOPIC = 'plinth.admin.service-ack';
/** The application name of every instance's LISTEN connection (platform/pubsub.ts): how many instances there are. */
const LISTENER_APPLICATION = 'plinth-pubsub';

interface Command {
  id: string;
  name: string;
  action: PartAction;
}

/** One instance's answer to an action sent to all. */
export interface InstanceAnswer {
  /** A random id of the process's server, new at each start. */
  instance: string;
  hostname: string;
  pid: number;
  /** The part's state there after the action (absent when it failed there). */
  state?: PartState;
  detail?: string;
  /** Why the action failed there. */
  error?: { code: string; message: string };
}

interface Ack extends InstanceAnswer {
  id: string;
}

/** What `?scope=all` answers besides this instance's part. */
export interface ClusterAnswer {
  /** Instances listening on the database when the action was sent. */
  expected: number;
  /** Those that acknowledged within PLATFORM_ADMIN_BROADCAST_TIMEOUT_MS, this one included. */
  instances: InstanceAnswer[];
  /** Whether the wait ended before every expected instance answered. */
  timedOut: boolean;
}

/**
 * Service actions for every instance sharing the database (docs/decisions.md, "Services on all
 * instances"): the action goes out over the PostgreSQL PubSub, each instance (this one by the same
 * path) applies it to its own part and answers on a reply topic; the caller waits until as many
 * instances as hold a PubSub connection to the database have answered, or the timeout. A stop on
 * all instances stands (admin_paused_services): an instance starting meanwhile applies it.
 */
export class ServiceBroadcast {
  readonly instance = randomUUID();
  private readonly waiting = new Map<string, (ack: Ack) => void>();

  constructor(
    private readonly options: {
      parts: PlinthParts;
      pubSub: PostgresPubSub;
      childServices: ChildServices;
      dataSource: DataSource;
      timeoutMs: number;
      logger: Logger;
    },
  ) {}

  /** Applies the standing pauses, then answers actions sent to all instances until the returned function is called. */
  async start(): Promise<() => Promise<void>> {
    const commands = this.options.pubSub.subscribe(COMMAND_TOPIC)[Symbol.asyncIterator]();
    const acks = this.options.pubSub.subscribe(ACK_TOPIC)[Symbol.asyncIterator]();
    const following = Promise.all([
      this.follow(commands, (command) => this.answer(command as Command)),
      this.follow(acks, (ack) => this.waiting.get((ack as Ack).id)?.(ack as Ack)),
    ]);
    await this.applyStandingPauses();
    // The custom services plinth start runs are handed over after the server has started, before they start.
    this.options.childServices.onAttach(async () => {
      for (const name of (await this.options.parts.standingPauses().catch(() => [])).filter((each) => each.startsWith(CUSTOM_PREFIX))) {
        const service = name.slice(CUSTOM_PREFIX.length);
        if (!this.options.childServices.status(service)) continue;
        // Held before the supervisor starts any: it then leaves this one stopped.
        await this.options.childServices.stop(service);
        this.options.logger.info({ service: name }, 'kept a custom service stopped, as stopped on all instances from the admin API');
      }
    });
    return async () => {
      await Promise.all([commands.return?.(), acks.return?.()]);
      await following;
    };
  }

  /** Sends the action to every instance, keeps or ends the standing pause, and gathers the answers. */
  async broadcast(name: string, action: PartAction): Promise<{ part: PartStatus; cluster: ClusterAnswer }> {
    const here = (await this.options.parts.list()).find((part) => part.name === name);
    if (!here) throw new Refusal('UNKNOWN_SERVICE', `There is no service ${name}: see GET /api/services`, 404, { field: 'name' });
    if (!drivable(name)) throw new Refusal('ACTION_NOT_POSSIBLE', `Cannot ${action} ${name}: it is not stopped or started from the dashboard`, 409);
    await this.options.parts.setStandingPause(name, action === 'stop');
    const [{ count: expected }] = (await this.options.dataSource.query(
      'SELECT count(*)::int AS count FROM pg_stat_activity WHERE datname = current_database() AND application_name = $1',
      [LISTENER_APPLICATION],
    )) as { count: number }[];
    const command: Command = { id: randomUUID(), name, action };
    const answers: InstanceAnswer[] = [];
    let timedOut = false;
    await new Promise<void>((resolve) => {
      const timer = setTimeout(() => {
        timedOut = true;
        resolve();
      }, this.options.timeoutMs);
      this.waiting.set(command.id, ({ id: _id, ...answer }) => {
        if (answers.some((each) => each.instance === answer.instance)) return;
        answers.push(answer);
        if (answers.length >= expected) {
          clearTimeout(timer);
          resolve();
        }
      });
      this.options.pubSub.publish(COMMAND_TOPIC, command);
    }).finally(() => this.waiting.delete(command.id));
    this.options.logger.info({ service: name, action, expected, acknowledged: answers.length }, 'admin changed a service on all instances');
    const part = (await this.options.parts.list()).find((each) => each.name === name)!;
    return { part, cluster: { expected, instances: answers, timedOut } };
  }

  private async applyStandingPauses(): Promise<void> {
    for (const name of await this.options.parts.standingPauses().catch(() => [])) {
      const part = await this.options.parts.apply(name, 'stop').catch(() => undefined);
      if (part?.state === 'stopped') this.options.logger.info({ service: name }, 'stopped a service, as stopped on all instances from the admin API');
    }
  }

  private async follow(messages: AsyncIterator<unknown>, handle: (message: unknown) => unknown): Promise<void> {
    for (;;) {
      const next = await messages.next();
      if (next.done) return;
      try {
        await handle(next.value);
      } catch (error) {
        this.options.logger.error({ err: error }, 'could not handle a service action sent to all instances');
      }
    }
  }

  private async answer(command: Command): Promise<void> {
    const ack: Ack = { id: command.id, instance: this.instance, hostname: hostname(), pid: process.pid };
    try {
      const part = await this.options.parts.apply(command.name, command.action);
      ack.state = part.state;
      if (part.detail) ack.detail = part.detail;
    } catch (error) {
      ack.error =
        error instanceof Refusal ? { code: error.code, message: error.message } : { code: 'ACTION_FAILED', message: (error as Error).message ?? String(error) };
    }
    this.options.pubSub.publish(ACK_TOPIC, ack);
  }
}
