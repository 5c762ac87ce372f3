import 'reflect-metadata';
import { loadConfig } from '../../src/config';
import { startServer } from '../../src/main';
import { createLogger } from '../../src/platform/logger';
import { MODULES } from '../../src/modules';
import { recorderModule } from './job-recorder';

/**
 * A child process for the multi-process job tests: the real server (configured by its
 * environment, as `plinth start` is) with the recorder module added. SIGTERM closes it.
 */
async function main(): Promise<void> {
  const config = loadConfig(process.env);
  const server = await startServer(config, createLogger(config), [...MODULES, recorderModule()]);
  process.once('SIGTERM', () => {
    server.close().then(
      () => process.exit(0),
      (error: unknown) => {
        console.error(error);
        process.exit(1);
      },
    );
  });
}

main().catch((error: unknown) => {
  process.stderr.write(`job-server: ${error instanceof Error ? error.message : String(error)}\n`);
  process.exit(1);
});
