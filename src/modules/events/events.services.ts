import { Counter, Histogram } from 'prom-client';
import type { Platform } from '../../platform/module';
import { PostgresListener } from '../../platform/pg-listener';
import { Dispatcher, type DeliveryOutcome } from './dispatcher';
import { EventTriggerLane } from './event-delivery';
import { EVENTS_CHANNEL, EventTriggersService } from './event-triggers.service';
import { EventsAdminService } from './events-admin.service';
import { DELIVERY_OUTCOMES_TOPIC } from './events.types';
import { ExternalWebhooksService } from './external-webhooks.service';
import { ScheduledEventLane } from './scheduled-delivery';
import { ScheduledEventsService } from './scheduled-events.service';

export interface EventsServices {
  eventTriggers: EventTriggersService;
  scheduledEvents: ScheduledEventsService;
  externalWebhooks: ExternalWebhooksService;
  admin: EventsAdminService;
  /** This process's dispatcher: run by worker processes, stopped and started again by the admin API. */
  delivery: DeliverySwitch;
  platform: Platform;
  /** Counts and times outcomes (Prometheus) and announces them to subscribers, one message per recorded batch. */
  reportOutcomes(outcomes: DeliveryOutcome[]): void;
}

/** The services, and the delivery metrics their outcomes are counted in. */
export function createEventsServices(platform: Platform): EventsServices {
  const { dataSource, metrics, config, pubSub } = platform;
  const labels = ['kind', 'trigger'] as const;
  const counter = (name: string, help: string) => new Counter({ name, help, labelNames: labels, registers: [metrics.registry] });
  const delivered = counter('plinth_events_delivered_total', 'Event and scheduled-event deliveries answered with a 2xx');
  const failed = counter('plinth_events_failed_total', 'Failed delivery attempts (non-2xx, timeout, connection error)');
  const retried = counter('plinth_events_retried_total', 'Failed attempts that will be retried');
  const dead = counter('plinth_events_dead_total', 'Events that used up their retries or were refused for good');
  const latency = new Histogram({
    name: 'plinth_events_delivery_latency_seconds',
    help: 'From the event (or its scheduled time) to the end of its successful delivery',
    labelNames: labels,
    buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300],
    registers: [metrics.registry],
  });
  const eventTriggers = new EventTriggersService(dataSource);
  const scheduledEvents = new ScheduledEventsService(dataSource, config.events);
  const services: EventsServices = {
    delivery: new DeliverySwitch(() => startDelivery(services)),
    eventTriggers,
    scheduledEvents,
    admin: new EventsAdminService(dataSource, eventTriggers, scheduledEvents),
    externalWebhooks: new ExternalWebhooksService(dataSource, config.events.externalProviders, config.events.externalDedupWindowHours),
    platform,
    reportOutcomes: (outcomes) => {
      for (const outcome of outcomes) {
        const label = { kind: outcome.kind, trigger: outcome.group };
        if (outcome.state === 'delivered') {
          delivered.inc(label);
          latency.observe(label, outcome.latencyMs / 1000);
        } else {
          failed.inc(label);
          if (outcome.state === 'retrying') retried.inc(label);
          else dead.inc(label);
        }
      }
      // One NOTIFY per batch, not per event: the subscription sends each outcome on its own.
      pubSub.publish(DELIVERY_OUTCOMES_TOPIC, outcomes);
    },
  };
  return services;
}

/** Where a process's dispatcher is: delivering, stopped by the admin API, or not run here (not a worker process). */
export type DispatcherState = 'running' | 'stopped' | 'not-run-here';

/**
 * The dispatcher of this process, as a switch: the module's work turns it on in a worker process,
 * the admin API off and on again (claimed events are released at once, attempts in flight are
 * finished), and shutdown off. Turns happen one at a time, in order.
 */
export class DeliverySwitch {
  private stopRunning: (() => Promise<void>) | undefined;
  private runsHere = false;
  private turning: Promise<void> = Promise.resolve();

  constructor(private readonly begin: () => Promise<() => Promise<void>>) {}

  state(): DispatcherState {
    if (!this.runsHere) return 'not-run-here';
    return this.stopRunning ? 'running' : 'stopped';
  }

  /** Runs the dispatcher (once the process runs delivery at all: `work`). */
  start(): Promise<void> {
    return this.turn(async () => {
      this.runsHere = true;
      this.stopRunning ??= await this.begin();
    });
  }

  stop(): Promise<void> {
    return this.turn(async () => {
      const stop = this.stopRunning;
      this.stopRunning = undefined;
      await stop?.();
    });
  }

  private turn(change: () => Promise<void>): Promise<void> {
    this.turning = this.turning.then(change, change);
    return this.turning;
  }
}

/** Starts the dispatcher: NOTIFY wakes it, the poll covers retries and takeovers. */
export async function startDelivery(services: EventsServices): Promise<() => Promise<void>> {
  const { platform } = services;
  const { config, dataSource, logger, http, shutdown } = platform;
  const templateValues = () => ({ adminSecret: config.graphql.adminSecret, env: process.env });
  const dispatcher = new Dispatcher({
    config: config.events,
    http,
    logger: logger.child({ component: 'events' }),
    shutdown,
    lanes: [
      new EventTriggerLane(dataSource, services.eventTriggers, templateValues),
      new ScheduledEventLane(dataSource, services.scheduledEvents, config.events, templateValues),
    ],
    onOutcomes: (outcomes) => services.reportOutcomes(outcomes),
  });
  const listener = new PostgresListener({
    url: (dataSource.options as unknown as { url: string }).url,
    channel: EVENTS_CHANNEL,
    applicationName: 'plinth-events',
    logger: logger.child({ component: 'events' }),
    shutdown,
    onNotification: () => dispatcher.wake(),
    // Events written while the connection was down were not announced.
    onListening: () => dispatcher.wake(),
  });
  await listener.start();
  dispatcher.start();
  return async () => {
    await listener.close();
    await dispatcher.stop();
  };
}
