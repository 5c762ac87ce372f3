import path from 'node:path';
import { DataSource } from 'typeorm';
import { LOCK_KEYS } from './lock-keys';
import { SessionVariablesSubscriber } from './session-variables';

/** Compiled entities and migrations, found next to this file in dist/. */
const ENTITIES = path.join(__dirname, '..', 'modules', '**', '*.entity.js');
const MIGRATIONS = path.join(__dirname, '..', '..', 'migrations', '*.js');

export function createDataSource(url: string, poolSize: number): DataSource {
  return new DataSource({
    type: 'postgres',
    url,
    entities: [ENTITIES],
    migrations: [MIGRATIONS],
    migrationsTableName: 'plinth_migrations',
    subscribers: [SessionVariablesSubscriber],
    // Schema changes come only from migrations/.
    synchronize: false,
    migrationsRun: false,
    logging: false,
    extra: { max: poolSize, application_name: 'plinth', connectionTimeoutMillis: 10_000 },
  });
}

/**
 * Runs `work` while holding the migration lock: schema changes at start-up (ours, and the
 * tables pg-boss creates for itself) happen one process at a time.
 */
export async function withMigrationLock<T>(dataSource: DataSource, work: () => Promise<T>): Promise<T> {
  const runner = dataSource.createQueryRunner();
  await runner.connect();
  try {
    await runner.query('SELECT pg_advisory_lock($1)', [LOCK_KEYS.migrations]);
    return await work();
  } finally {
    await runner.query('SELECT pg_advisory_unlock($1)', [LOCK_KEYS.migrations]).catch(() => undefined);
    await runner.release();
  }
}

export async function runMigrations(dataSource: DataSource): Promise<string[]> {
  return withMigrationLock(dataSource, async () => {
    const applied = await dataSource.runMigrations({ transaction: 'each' });
    return applied.map((migration) => migration.name);
  });
}

export async function revertLastMigration(dataSource: DataSource): Promise<void> {
  await dataSource.undoLastMigration({ transaction: 'each' });
}

export async function pendingMigrations(dataSource: DataSource): Promise<boolean> {
  return dataSource.showMigrations();
}
