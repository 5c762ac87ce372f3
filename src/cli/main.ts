#!/usr/bin/env node
import 'reflect-metadata';
import { Command, InvalidArgumentError } from 'commander';
import { PLINTH_VERSION } from '../common/package-version';
import { ConfigError, loadConfig, type Config } from '../config';
import { environmentWithEnvFile } from '../config/env-file';
import { createLogger } from '../platform/logger';
import { emitGenerated } from './generated-file';

/** Reads the configuration (environment over .env, then command-line overrides) or exits naming the bad variable. */
function configuration(overrides: Record<string, string | undefined> = {}): Config {
  const defined = Object.fromEntries(Object.entries(overrides).filter(([, value]) => value !== undefined));
  try {
    return loadConfig({ ...environmentWithEnvFile(process.env), ...defined });
  } catch (error) {
    if (!(error instanceof ConfigError)) throw error;
    process.stderr.write(`plinth: ${error.message}\n`);
    process.exit(1);
  }
}

function port(value: string): string {
  if (!/^\d{1,5}$/.test(value) || Number(value) > 65535) throw new InvalidArgumentError('must be a port number (0-65535)');
  return value;
}

/** How long after PLINTH_SHUTDOWN_TIMEOUT_MS the process exits anyway: time for the steps after a hung one (at least a second each). */
const SHUTDOWN_BACKSTOP_MARGIN_MS = 5_000;

const program = new Command()
  .name('plinth')
  .description('Plinth: a GraphQL-first backend server (actions, auth, events, error tracking on one schema)')
  .version(PLINTH_VERSION);

program
  .command('start')
  .description('start the server: open the database (DATABASE_URL or the embedded one), migrate, listen')
  .option('-p, --port <port>', 'port to listen on (overrides PORT)', port)
  .option('-H, --host <host>', 'address to listen on (overrides HOST)')
  .action(async (options: { port?: string; host?: string }) => {
    const config = configuration({ PORT: options.port, HOST: options.host });
    const logger = createLogger(config);
    const { startServer } = require('../main') as typeof import('../main');
    const { startDeclaredServices, customServiceOutput } = require('./services') as typeof import('./services');
    const server = await startServer(config, logger);
    // The declared custom services run beside the server, their output prefixed with their names.
    // The admin API served by this process stops and starts them.
    const services = await startDeclaredServices(config, environmentWithEnvFile(process.env), customServiceOutput(logger), server.childServices);
    let stopping = false;
    const stop = (signal: NodeJS.Signals) => {
      if (stopping) {
        logger.warn({ signal }, 'second signal: exiting at once');
        process.exit(1);
      }
      stopping = true;
      logger.info({ signal }, 'shutting down');
      // A backstop: close() bounds its steps by the same setting and names one that hangs.
      setTimeout(() => {
        logger.error({ timeoutMs: config.shutdownTimeoutMs }, 'shutdown timed out (PLINTH_SHUTDOWN_TIMEOUT_MS)');
        process.exit(1);
      }, config.shutdownTimeoutMs + SHUTDOWN_BACKSTOP_MARGIN_MS).unref();
      Promise.all([server.close(), services?.stop()]).then(
        ([unfinished]) => process.exit(unfinished.length === 0 ? 0 : 1),
        (error: unknown) => {
          logger.error({ err: error }, 'shutdown failed');
          process.exit(1);
        },
      );
    };
    process.on('SIGINT', stop);
    process.on('SIGTERM', stop);
  });

program
  .command('migrate')
  .description('apply pending database migrations and exit')
  .option('--revert', 'revert the most recent migration instead')
  .option('--check', 'only report whether migrations are pending (exit code 2 when they are)')
  .action(async (options: { revert?: boolean; check?: boolean }) => {
    const config = configuration();
    const { pendingMigrations, revertLastMigration, runMigrations } = require('../db/data-source') as typeof import('../db/data-source');
    const { withDatabase } = require('./database') as typeof import('./database');
    const exitCode = await withDatabase(config, createLogger(config), async (dataSource) => {
      if (options.check) {
        const pending = await pendingMigrations(dataSource);
        process.stdout.write(pending ? 'migrations are pending\n' : 'the database is up to date\n');
        return pending ? 2 : 0;
      }
      if (options.revert) {
        await revertLastMigration(dataSource);
        process.stdout.write('reverted the most recent migration\n');
      } else {
        const applied = await runMigrations(dataSource);
        process.stdout.write(applied.length ? `applied: ${applied.join(', ')}\n` : 'the database is up to date\n');
      }
      return 0;
    });
    process.exit(exitCode);
  });

program
  .command('schema')
  .description('print the GraphQL schema (SDL) the resolvers emit')
  .option('-o, --output <file>', 'write it to a file instead of standard output')
  .option('--check <file>', 'exit 1 when <file> differs from what the resolvers emit')
  .option('--with-metadata', "the schema as served: with the actions the database's metadata declares (opens the database)")
  .action(async (options: { output?: string; check?: string; withMetadata?: boolean }) => {
    const { buildDeclaredSchema, printPlinthSchema } = require('../graphql/schema') as typeof import('../graphql/schema');
    const { MODULES } = require('../modules') as typeof import('../modules');
    const { resolverClasses } = require('../platform/module') as typeof import('../platform/module');
    const { pendingMigrations } = require('../db/data-source') as typeof import('../db/data-source');
    const { withDatabase } = require('./database') as typeof import('./database');
    let schema = await buildDeclaredSchema(resolverClasses(MODULES));
    if (options.withMetadata) {
      const config = configuration();
      const base = schema;
      schema = await withDatabase(config, createLogger({ ...config, logLevel: 'warn' }), async (dataSource) => {
        if (await pendingMigrations(dataSource)) throw new Error('the database has pending migrations: run "plinth migrate" (or start the server) first');
        let served = base;
        for (const module of MODULES) if (module.declaredSchema) served = await module.declaredSchema(served, dataSource.manager);
        return served;
      });
    }
    emitGenerated(printPlinthSchema(schema), options, 'the resolvers', 'npm run schema');
  });

/**
 * The other commands, each in its file. Only the file of the command named on the command line is
 * loaded (all of them for the help that lists them): a one-off command then loads what it uses, a
 * fraction of the server's modules, and answers in about half the time.
 */
const COMMAND_FILES: Record<string, () => void> = {
  mail: () => (require('./mail') as typeof import('./mail')).registerMailCommands(program, configuration),
  jobs: () => program.addCommand((require('./jobs') as typeof import('./jobs')).jobsCommand(configuration)),
  metadata: () => program.addCommand((require('./metadata') as typeof import('./metadata')).metadataCommand(configuration)),
  services: () => program.addCommand((require('./services') as typeof import('./services')).servicesCommand(configuration)),
  newsletter: () => program.addCommand((require('./newsletter') as typeof import('./newsletter')).newsletterCommand(configuration)),
  auth: () => program.addCommand((require('./auth') as typeof import('./auth')).authCommand(configuration)),
  errors: () => program.addCommand((require('./errors') as typeof import('./errors')).errorsCommand(configuration)),
  events: () => program.addCommand((require('./events') as typeof import('./events')).eventsCommand(configuration)),
  config: () => program.addCommand((require('./config') as typeof import('./config')).configCommand()),
  admin: () => program.addCommand((require('./admin') as typeof import('./admin')).adminCommand(configuration)),
  build: () => (require('./build') as typeof import('./build')).registerBuildCommand(program, configuration),
};
const named = process.argv.slice(2).find((argument) => !argument.startsWith('-'));
const builtIn = program.commands.some((command) => command.name() === named);
if (!builtIn) for (const [name, register] of Object.entries(COMMAND_FILES)) if (!(named !== undefined && named in COMMAND_FILES) || named === name) register();

program.parseAsync().catch((error: unknown) => {
  process.stderr.write(`plinth: ${error instanceof Error ? error.message : String(error)}\n`);
  process.exit(1);
});
