import type { GraphQLSchema } from 'graphql';
import type { EntityManager } from 'typeorm';
import { one } from '../../db/sql';
import type { ModuleServices, Platform } from '../../platform/module';
import { actionsModule } from '../actions';
import { readCatalog, tableKey } from './tables.catalog';
import { withJoinFields } from './tables.joins';
import type { TrackedTableEntry } from './tables.metadata';
import { resolveTables } from './tables.model';
import { extendWithTables } from './tables.schema';
import { TablesService } from './tables.service';

/**
 * The module's service, with the stored metadata loaded into the served schema; the actions'
 * relationships to tables are served through it (their fields are added after the tables).
 */
export async function createTablesService(
  { dataSource, schema, pubSub, logger, config, shutdown, metrics }: Platform,
  modules: ModuleServices,
): Promise<TablesService> {
  const service = new TablesService({
    dataSource,
    schema,
    pubSub,
    logger: logger.child({ module: 'tables' }),
    streamIntervalMs: config.graphql.streamingRefetchIntervalMs,
    liveQueries: config.graphql.liveQueries,
    shutdown,
    metrics,
  });
  await service.load();
  modules.get(actionsModule).useTables(service.joins);
  return service;
}

/**
 * Plinth's schema with the stored tracked tables, then the actions' relationships to them (as
 * served: their fields come after the tables), resolving nothing: what `plinth schema
 * --with-metadata` prints.
 */
export async function schemaWithStoredTables(base: GraphQLSchema, manager: EntityManager): Promise<GraphQLSchema> {
  const { tables: entries } = (await one<{ tables: TrackedTableEntry[] }>(manager, 'SELECT tables FROM tables_metadata WHERE id = 1'))!;
  const { tables } = resolveTables(
    entries,
    await readCatalog(
      manager,
      entries.map((entry) => entry.table),
    ),
  );
  const served = new Map(tables.map((table) => [tableKey(table.table), table]));
  return withJoinFields(extendWithTables(base, tables), (await actionsModule.declared?.(manager)) ?? [], served).schema;
}
