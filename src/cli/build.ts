import type { Command } from 'commander';
import { buildApiReference, BuildError } from '../apidocs/build';
import { shownPath } from '../apidocs/declarations';
import type { Config } from '../config';
import { createLogger } from '../main';

/** `plinth build`: what the proxy and `plinth start` serve, written from the settings and the declarations. */
export function registerBuildCommand(program: Command, configuration: () => Config): void {
  program
    .command('build')
    .description('write the OpenAPI spec and the API reference page (PLINTH_DIST_DIR) and the proxy serving block (PLINTH_PROXY_CONF_DIR); no database needed')
    .action(async () => {
      const config = configuration();
      try {
        // The outcome is printed below; info lines would only repeat it.
        const result = await buildApiReference(config, createLogger({ ...config, logLevel: 'warn' }));
        for (const note of result.notes) process.stdout.write(`${note}\n`);
        for (const file of result.written) process.stdout.write(`wrote ${shownPath(file)}\n`);
        for (const file of result.removed) process.stdout.write(`removed ${shownPath(file)}\n`);
      } catch (error) {
        if (!(error instanceof BuildError)) throw error;
        process.stderr.write(`plinth: ${error.message}\n`);
        process.exit(1);
      }
    });
}
