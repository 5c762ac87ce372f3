import type { Logger } from 'pino';
import type { Config } from '../config';
import { startEmbeddedPostgres } from './embedded';

export interface DatabaseEndpoint {
  url: string;
  embedded: boolean;
  /** Stops the embedded cluster; nothing for an external server. */
  stop(): Promise<void>;
}

/** DATABASE_URL when set, otherwise the embedded PostgreSQL under the data folder. */
export async function openDatabaseEndpoint(config: Config, logger: Logger): Promise<DatabaseEndpoint> {
  if (config.database.url) return { url: config.database.url, embedded: false, stop: async () => undefined };
  const embedded = await startEmbeddedPostgres({
    dataDir: config.database.dataDir,
    port: config.database.embeddedPort,
    database: 'plinth',
    logger,
  });
  logger.info({ port: config.database.embeddedPort, dataDir: config.database.dataDir }, 'embedded PostgreSQL started');
  return { url: embedded.url, embedded: true, stop: embedded.stop };
}
