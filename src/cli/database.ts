import type { Logger } from 'pino';
import type { DataSource } from 'typeorm';
import type { Config } from '../config';
import { createDataSource } from '../db/data-source';
import { openDatabaseEndpoint, type DatabaseEndpoint } from '../db/database';

/**
 * Opens the database as a one-off command needs it (DATABASE_URL or the embedded one, a pool of
 * two), runs `use`, and closes everything again, whatever `use` does.
 */
export async function withDatabase<T>(config: Config, logger: Logger, use: (dataSource: DataSource, endpoint: DatabaseEndpoint) => Promise<T>): Promise<T> {
  const endpoint = await openDatabaseEndpoint(config, logger);
  const dataSource = createDataSource(endpoint.url, 2);
  try {
    await dataSource.initialize();
    return await use(dataSource, endpoint);
  } finally {
    await dataSource.destroy().catch(() => undefined);
    await endpoint.stop();
  }
}
