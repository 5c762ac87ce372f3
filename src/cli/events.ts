import { Command } from 'commander';
import pino from 'pino';
import type { Config } from '../config';
import { createLogger } from '../platform/logger';
import { EventTriggersService, type EventLogRow } from '../modules/events/event-triggers.service';
import { MetadataError } from '../platform/metadata';
import { withDatabase } from './database';
import { table } from './table';

/** Runs `use` with the event triggers' service on the configured database; nothing is delivered here (the server does it). */
async function withEvents<T>(config: Config, use: (events: EventTriggersService) => Promise<T>): Promise<T> {
  // Standard output is the command's answer; logs go to standard error.
  const logger = createLogger(config, pino.destination(2));
  try {
    return await withDatabase(config, logger, (dataSource) => use(new EventTriggersService(dataSource)));
  } catch (error) {
    if (!(error instanceof MetadataError)) throw error;
    process.stderr.write(`plinth: ${error.message}\n`);
    process.exit(1);
  }
}

function state(event: EventLogRow): string {
  if (event.delivered) return 'DELIVERED';
  if (event.archived) return 'ARCHIVED';
  if (event.error) return 'DEAD';
  return event.locked ? 'DELIVERING' : 'PENDING';
}

function eventTable(events: EventLogRow[]): string {
  const rows = [
    ['ID', 'TRIGGER', 'OP', 'STATE', 'TRIES', 'CREATED', 'NEXT RETRY'],
    ...events.map((event) => [
      event.id,
      event.trigger_name,
      event.payload.op,
      state(event),
      String(event.tries),
      new Date(event.created_at).toISOString(),
      event.next_retry_at ? new Date(event.next_retry_at).toISOString() : '',
    ]),
  ];
  return table(rows);
}

/** `plinth events list|redeliver|invoke`: the same service as the metadata API's pg_* requests. */
export function eventsCommand(configuration: () => Config): Command {
  const events = new Command('events').description('list, redeliver and raise event trigger events (as the metadata API does)');

  events
    .command('list')
    .description('list events, newest first')
    .option('-t, --trigger <name>', 'only this event trigger')
    .option('-s, --status <status>', 'pending, processed, dead or all', 'all')
    .option('-n, --first <count>', 'at most this many (1-10000)', '50')
    .option('--json', 'print the events as JSON')
    .action(async (options: { trigger?: string; status: string; first: string; json?: boolean }) => {
      const found = await withEvents(configuration(), (service) =>
        service.eventLogs({ name: options.trigger, status: options.status, limit: Number(options.first) }),
      );
      process.stdout.write(`${options.json ? JSON.stringify(found, null, 2) : eventTable(found)}\n`);
      process.exit(0);
    });

  events
    .command('redeliver <event-id>')
    .description('deliver an event again from its first attempt (a dead one, say)')
    .action(async (id: string) => {
      await withEvents(configuration(), (service) => service.redeliver({ event_id: id }));
      process.stdout.write(`event ${id} will be delivered again\n`);
      process.exit(0);
    });

  events
    .command('invoke <trigger> [payload]')
    .description('raise a MANUAL event of a trigger with enable_manual (payload: JSON, {} by default)')
    .action(async (trigger: string, payload: string | undefined) => {
      let parsed: unknown = {};
      try {
        if (payload !== undefined) parsed = JSON.parse(payload);
      } catch {
        process.stderr.write('plinth: the payload must be JSON, such as \'{"id": 1}\'\n');
        process.exit(1);
      }
      const { event_id: id } = await withEvents(configuration(), (service) => service.invoke({ name: trigger, payload: parsed }));
      process.stdout.write(`raised event ${id} of ${trigger}\n`);
      process.exit(0);
    });

  return events;
}
