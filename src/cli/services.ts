import fs from 'node:fs';
import { hostname } from 'node:os';
import path from 'node:path';
import { Command } from 'commander';
import type { Logger } from 'pino';
import type { Config } from '../config';
import { MODULES } from '../modules';
import { serviceHandlerUrl } from '../modules/actions/action-calls.service';
import { parseActionsSection } from '../modules/actions/actions.metadata';
import { actionsOfService, RUNNABLE_TEMPLATES, scaffoldServices, type ScaffoldResult } from '../modules/actions/services/scaffold';
import { listening, ServiceSupervisor } from '../modules/actions/services/supervisor';
import type { ChildServices } from '../platform/child-services';
import { MetadataError, type MetadataFiles } from '../platform/metadata';
import { recentLogsOf } from '../platform/recent-logs';
import { directoryReader, metadataFromFiles, MetadataFilesError } from '../platform/metadata-files';

const FILE_LAYOUTS: MetadataFiles[] = MODULES.flatMap((module) => (module.metadataFiles ? [module.metadataFiles] : []));

/** A metadata folder `plinth build` cannot scaffold from: the message names the file. */
export class ScaffoldError extends Error {}

/** The actions declared in the files under `metadataDir` (no database: `plinth build` runs without one). */
function actionsFromFiles(metadataDir: string) {
  try {
    return parseActionsSection(metadataFromFiles(directoryReader(metadataDir), FILE_LAYOUTS), 'metadata');
  } catch (error) {
    if (error instanceof MetadataError) throw new ScaffoldError(`${path.join(metadataDir, 'actions.yaml')}: ${error.message} (at ${error.path})`);
    if (error instanceof MetadataFilesError) throw new ScaffoldError(`${metadataDir}: ${error.message}`);
    throw error;
  }
}

/** `plinth build`'s part for custom services: scaffolds the folder of each declared service that has none. */
export function scaffoldDeclaredServices(config: Config, metadataDir: string, env: Record<string, string | undefined>): ScaffoldResult[] {
  if (!config.customServices.some((service) => service.template !== 'plinth')) return [];
  return scaffoldServices(config.customServices, config.servicesDir, actionsFromFiles(metadataDir), env);
}

/**
 * Where `plinth start` writes the custom services' output: standard output, each line prefixed
 * with the service's name, and (with the dashboard on) the recent log lines the dashboard
 * streams, as lines of the component `custom-service` naming the service.
 */
export function customServiceOutput(logger: Logger): (line: string) => void {
  const recent = recentLogsOf(logger);
  return (line) => {
    process.stdout.write(`${line}\n`);
    const [, service, text] = /^\[([^\]]+)\] (.*)$/s.exec(line) ?? [];
    if (!recent || service === undefined) return;
    recent.add(JSON.stringify({ level: 30, time: Date.now(), pid: process.pid, hostname: hostname(), component: 'custom-service', service, msg: text }));
  };
}

/**
 * Starts the declared Node services beside the server (`plinth start`); undefined when there are
 * none. The supervisor is handed to `childServices` first (the admin API drives it, and applies the
 * stops standing for all instances before the services start).
 */
export async function startDeclaredServices(
  config: Config,
  env: Record<string, string | undefined>,
  write: (line: string) => void,
  childServices?: ChildServices,
): Promise<ServiceSupervisor | undefined> {
  const services = config.customServices.filter((service) => RUNNABLE_TEMPLATES.has(service.template));
  for (const service of config.customServices) {
    if (service.template !== 'plinth' && !RUNNABLE_TEMPLATES.has(service.template))
      write(`[${service.name}] template ${service.template}: not started by plinth start (run it yourself)`);
  }
  if (services.length === 0) return undefined;
  const supervisor = new ServiceSupervisor(services, {
    servicesDir: config.servicesDir,
    env,
    maxRestartDelayMs: config.actionEngine.serviceRestartMaxDelayMs,
    write,
  });
  await childServices?.attach(supervisor);
  supervisor.start();
  return supervisor;
}

/** `plinth services list`: each declared service, its state and its handler URL. */
export function servicesCommand(configuration: () => Config): Command {
  const services = new Command('services').description('the custom services declared with CS_<N>');
  services
    .command('list')
    .description('show each declared service: template, whether it is scaffolded and running, its URL')
    .option('--json', 'print them as JSON')
    .option('--metadata-dir <folder>', 'the metadata folder, to show the actions routed to each', 'metadata')
    .action(async (options: { json?: boolean; metadataDir: string }) => {
      const config = configuration();
      let actions: ReturnType<typeof actionsFromFiles>['actions'] = [];
      try {
        actions = actionsFromFiles(path.resolve(options.metadataDir)).actions;
      } catch {
        // Without readable metadata files the routed actions are unknown; the services still show.
      }
      const rows = await Promise.all(
        config.customServices.map(async (service) => {
          const builtIn = service.template === 'plinth';
          const folder = path.join(config.servicesDir, service.name);
          const scaffolded = builtIn || fs.existsSync(folder);
          const up = await listening(service.host ?? (builtIn ? '127.0.0.1' : service.name), builtIn ? config.port : service.port);
          return {
            name: service.name,
            template: service.template,
            state: up ? 'running' : scaffolded ? 'stopped' : 'not scaffolded',
            started_by_plinth: builtIn || RUNNABLE_TEMPLATES.has(service.template),
            url: serviceHandlerUrl(service, '<action>'),
            called_at: service.host ? `${service.host}:${service.port}` : `${service.name}:${service.port}`,
            actions: actionsOfService(service, actions, process.env).map((action) => action.name),
          };
        }),
      );
      if (options.json) {
        process.stdout.write(`${JSON.stringify(rows, null, 2)}\n`);
        return;
      }
      if (rows.length === 0) {
        process.stdout.write('no custom services are declared (CS_<N>=<name>:<template>:<port>:<route>)\n');
        return;
      }
      const table = [
        ['NAME', 'TEMPLATE', 'STATE', 'URL', 'ACTIONS'],
        ...rows.map((row) => [row.name, row.template, row.state.toUpperCase(), row.url, row.actions.join(', ')]),
      ];
      const widths = table[0].map((_, column) => Math.max(...table.map((row) => row[column].length)));
      process.stdout.write(
        `${table
          .map((row) =>
            row
              .map((cell, column) => cell.padEnd(widths[column]))
              .join('  ')
              .trimEnd(),
          )
          .join('\n')}\n`,
      );
    });
  return services;
}
