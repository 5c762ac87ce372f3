import { yamlKeyFile } from '../../platform/metadata-files';
import type { PlinthModule } from '../../platform/module';
import { eventsMetadata } from './events.metadata';
import { EventsResolver } from './events.resolver';
import { eventsRoutes } from './events.routes';
import { createEventsServices, type EventsServices } from './events.services';
import { cleanUpOldEvents } from './scheduled-delivery';

/** Event triggers, cron triggers and scheduled events (spec 1 §2.4-2.6, §6), Hasura-compatible. */
export const eventsModule: PlinthModule<EventsServices> = {
  name: 'events',
  resolvers: [EventsResolver],
  create: (platform) => createEventsServices(platform),
  routes: eventsRoutes,
  metadata: eventsMetadata,
  metadataFiles: yamlKeyFile('cron_triggers', 'cron_triggers.yaml'),
  // Delivery runs in worker processes only, as the job workers do.
  work: async ({ delivery }, roles) => {
    if (!roles.includes('worker')) return async () => undefined;
    await delivery.start();
    return () => delivery.stop();
  },
  recurring: ({ platform: { config, dataSource }, scheduledEvents }) => [
    // Cron events generated and missed ones marked as often as the dispatcher looks for due work.
    { name: 'scheduled-events', schedule: { everyMs: config.events.pollIntervalMs }, firstRunInMs: async () => 0, run: () => scheduledEvents.maintain() },
    {
      name: 'cleanup',
      schedule: { everyMs: config.events.cleanupIntervalSeconds * 1000 },
      firstRunInMs: async () => 0,
      run: () => cleanUpOldEvents(dataSource, config.events),
    },
  ],
};
