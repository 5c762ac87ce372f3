import type { ModuleMetadata } from '../../platform/metadata';
import type { EventsServices } from './events.services';

const SUCCESS = { message: 'success' } as const;

export function eventsMetadata({ eventTriggers, scheduledEvents }: EventsServices): ModuleMetadata {
  return {
    requests: {
      pg_create_event_trigger: async (args, context) => {
        await eventTriggers.create(args, context);
        return SUCCESS;
      },
      pg_delete_event_trigger: async (args, context) => {
        await eventTriggers.delete(args, context);
        return SUCCESS;
      },
      pg_invoke_event_trigger: (args, { manager }) => eventTriggers.invoke(args, manager),
      pg_redeliver_event: async (args, { manager }) => {
        await eventTriggers.redeliver(args, manager);
        return SUCCESS;
      },
      pg_get_event_logs: (args, { manager }) => eventTriggers.eventLogs(args, manager),
      pg_get_event_invocation_logs: (args, { manager }) => eventTriggers.invocationLogs(args, manager),
      pg_get_event_by_id: (args, { manager }) => eventTriggers.eventById(args, manager),
      create_cron_trigger: async (args, { manager }) => {
        await scheduledEvents.createCronTrigger(args, manager);
        return SUCCESS;
      },
      delete_cron_trigger: async (args, { manager }) => {
        await scheduledEvents.deleteCronTrigger(args, manager);
        return SUCCESS;
      },
      get_cron_triggers: (_args, { manager }) => scheduledEvents.getCronTriggers(manager),
      create_scheduled_event: (args, { manager }) => scheduledEvents.createScheduledEvent(args, manager),
      delete_scheduled_event: async (args, { manager }) => {
        await scheduledEvents.deleteScheduledEvent(args, manager);
        return SUCCESS;
      },
      get_scheduled_events: (args, { manager }) => scheduledEvents.getScheduledEvents(args, manager),
      get_scheduled_event_invocations: (args, { manager }) => scheduledEvents.getInvocations(args, manager),
    },
    section: {
      export: async (metadata, manager) => {
        await eventTriggers.exportTo(metadata, manager);
        await scheduledEvents.exportTo(metadata, manager);
      },
      replace: async (metadata, { manager }) => {
        await eventTriggers.replaceFrom(metadata, manager);
        await scheduledEvents.replaceFrom(metadata, manager);
      },
      reload: async ({ manager }) => eventTriggers.reload(manager),
      followSql: (context) => eventTriggers.followSql(context),
    },
  };
}
