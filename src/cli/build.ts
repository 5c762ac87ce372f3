import path from 'node:path';
import type { Command } from 'commander';
import { buildApiReference, BuildError } from '../apidocs/build';
import { shownPath } from '../apidocs/declarations';
import type { Config } from '../config';
import { environmentWithEnvFile } from '../config/env-file';
import { createLogger } from '../platform/logger';
import { ScaffoldError, scaffoldDeclaredServices } from './services';

/** `plinth build`: what the proxy and `plinth start` serve, written from the settings and the declarations. */
export function registerBuildCommand(program: Command, configuration: () => Config): void {
  program
    .command('build')
    .description(
      'write the OpenAPI spec and the API reference page (PLINTH_DIST_DIR) and the proxy serving block (PLINTH_PROXY_CONF_DIR), ' +
        'and scaffold each declared custom service (CS_<N>) that has no folder yet; no database needed',
    )
    .option('--metadata-dir <folder>', 'the metadata folder (the actions routed to each custom service)', 'metadata')
    .action(async (options: { metadataDir: string }) => {
      const config = configuration();
      try {
        // The outcome is printed below; info lines would only repeat it.
        const result = await buildApiReference(config, createLogger({ ...config, logLevel: 'warn' }));
        for (const note of result.notes) process.stdout.write(`${note}\n`);
        for (const file of result.written) process.stdout.write(`wrote ${shownPath(file)}\n`);
        for (const file of result.removed) process.stdout.write(`removed ${shownPath(file)}\n`);
        for (const scaffold of scaffoldDeclaredServices(config, path.resolve(options.metadataDir), environmentWithEnvFile(process.env))) {
          const actions = scaffold.actions.length ? scaffold.actions.join(', ') : 'no actions routed to it yet';
          process.stdout.write(
            scaffold.written.length
              ? `scaffolded ${shownPath(scaffold.folder)} (${scaffold.service.template}; ${actions})\n`
              : `${shownPath(scaffold.folder)} exists: left as it is (${actions})\n`,
          );
        }
      } catch (error) {
        if (!(error instanceof BuildError) && !(error instanceof ScaffoldError)) throw error;
        process.stderr.write(`plinth: ${error.message}\n`);
        process.exit(1);
      }
    });
}
