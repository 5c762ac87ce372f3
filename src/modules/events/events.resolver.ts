import { JSONObjectResolver } from 'graphql-scalars';
import { Arg, Authorized, ID, Int, Mutation, Query, Resolver, Root, Subscription } from 'type-graphql';
import { Refusal } from '../../common/refusal';
import { ADMIN_ROLE } from '../../common/roles';
import { MetadataError } from '../../platform/metadata';
import type { DeliveryOutcome } from './dispatcher';
import { MAX_EVENTS_PAGE } from './events-admin.service';
import {
  CronTrigger,
  DELIVERY_OUTCOMES_TOPIC,
  EventAttempt,
  EventDeliveryOutcome,
  EventStateValue,
  EventTrigger,
  ScheduledEvent,
  TriggerEvent,
} from './events.types';
import type { EventsServices } from './events.services';

@Resolver()
export class EventsResolver {
  constructor(private readonly services: EventsServices) {}

  @Authorized(ADMIN_ROLE)
  @Query(() => [EventTrigger], { description: 'Event triggers, with their pending and dead event counts' })
  eventTriggers(): Promise<EventTrigger[]> {
    return this.services.admin.triggers();
  }

  @Authorized(ADMIN_ROLE)
  @Query(() => [TriggerEvent], { description: 'Event trigger events, newest first' })
  triggerEvents(
    @Arg('trigger', () => String, { nullable: true }) trigger: string | null,
    @Arg('state', () => EventStateValue, { nullable: true }) state: EventStateValue | null,
    @Arg('first', () => Int, { nullable: true, defaultValue: 50, description: `1 to ${MAX_EVENTS_PAGE}` }) first: number | null,
  ): Promise<TriggerEvent[]> {
    return this.services.admin.events({ trigger, state, first });
  }

  @Authorized(ADMIN_ROLE)
  @Query(() => [EventAttempt], { description: 'The delivery attempts of an event or a scheduled event, newest first' })
  eventAttempts(@Arg('eventId', () => ID) eventId: string): Promise<EventAttempt[]> {
    return this.services.admin.attempts(eventId);
  }

  @Authorized(ADMIN_ROLE)
  @Query(() => [CronTrigger], { description: 'Cron triggers, with their next scheduled time' })
  cronTriggers(): Promise<CronTrigger[]> {
    return this.services.admin.cronTriggers();
  }

  @Authorized(ADMIN_ROLE)
  @Query(() => [ScheduledEvent], { description: 'Scheduled events (cron and one-off), latest scheduled first' })
  scheduledEvents(
    @Arg('cronTrigger', () => String, { nullable: true }) cronTrigger: string | null,
    @Arg('status', () => String, { nullable: true, description: 'scheduled, locked, delivered, error or dead' }) status: string | null,
    @Arg('first', () => Int, { nullable: true, defaultValue: 50, description: `1 to ${MAX_EVENTS_PAGE}` }) first: number | null,
  ): Promise<ScheduledEvent[]> {
    return this.services.admin.scheduled({ cronTrigger, status, first });
  }

  @Authorized(ADMIN_ROLE)
  @Mutation(() => Boolean, { description: 'Delivers an event again from its first attempt (a dead one, say), as pg_redeliver_event' })
  async redeliverEvent(@Arg('id', () => ID) id: string): Promise<boolean> {
    await inGraphQLCodes(this.services.eventTriggers.redeliver({ event_id: id }));
    return true;
  }

  @Authorized(ADMIN_ROLE)
  @Mutation(() => ID, { description: 'Raises a MANUAL event of a trigger with enable_manual, as pg_invoke_event_trigger; answers its id' })
  async invokeEventTrigger(
    @Arg('name', () => String) name: string,
    @Arg('payload', () => JSONObjectResolver) payload: Record<string, unknown>,
  ): Promise<string> {
    return (await inGraphQLCodes(this.services.eventTriggers.invoke({ name, payload }))).event_id;
  }

  @Authorized(ADMIN_ROLE)
  @Subscription(() => [EventDeliveryOutcome], {
    topics: DELIVERY_OUTCOMES_TOPIC,
    filter: ({ payload, args }: { payload: DeliveryOutcome[]; args: { trigger?: string | null } }) =>
      payload.some((outcome) => !args.trigger || outcome.group === args.trigger),
    description:
      'The outcomes of delivery attempts (event triggers and scheduled events) as they are recorded: each message carries ' +
      'the attempts recorded together, one or more',
  })
  eventDeliveries(
    @Arg('trigger', () => String, { nullable: true, description: 'Only this event trigger or cron trigger' }) trigger: string | null,
    @Root() outcomes: DeliveryOutcome[],
  ): EventDeliveryOutcome[] {
    return outcomes
      .filter((outcome) => !trigger || outcome.group === trigger)
      .map((outcome) => ({
        kind: outcome.kind,
        eventId: outcome.id,
        trigger: outcome.group,
        state: outcome.state,
        status: outcome.status,
        tries: outcome.tries,
        error: outcome.error ?? null,
        latencyMs: outcome.latencyMs,
      }));
  }
}

/**
 * The metadata API's commands (pg_redeliver_event, pg_invoke_event_trigger) refuse with Hasura's
 * codes and a JSON path; through GraphQL they are refused with GraphQL's.
 */
async function inGraphQLCodes<T>(command: Promise<T>): Promise<T> {
  try {
    return await command;
  } catch (error) {
    if (!(error instanceof MetadataError)) throw error;
    throw error.code === 'not-exists' ? new Refusal('NOT_FOUND', error.message, 404) : new Refusal('BAD_USER_INPUT', error.message, 400);
  }
}
