import type { MetadataRequestContext } from '../../platform/metadata';
import type { PlinthModule } from '../../platform/module';
import { PERMISSION_KINDS } from './tables.metadata';
import type { TablesService } from './tables.service';
import { createTablesService, schemaWithStoredTables } from './tables.services';

/**
 * The generated API over tracked tables (spec 1 §1.1, spec 2 §2.3, §5.1): Hasura's table
 * metadata (POST /v1/metadata), the generated types and root fields in the served schema, each
 * root field compiled to one SQL statement with the role's permission inside it.
 */
export const tablesModule: PlinthModule<TablesService> = {
  name: 'tables',
  create: (platform, modules) => createTablesService(platform, modules),
  work: (service) => service.followChanges(),
  // Handlers reach the service only when a request comes (plinth build passes a stand-in).
  metadata: (service) => ({
    requests: {
      pg_track_table: (args, context) => service.trackTable(args, context),
      pg_untrack_table: (args, context) => service.untrackTable(args, context),
      pg_set_table_customization: (args, context) => service.setTableCustomization(args, context),
      pg_create_object_relationship: (args, context) => service.createRelationship('object', args, context),
      pg_create_array_relationship: (args, context) => service.createRelationship('array', args, context),
      pg_rename_relationship: (args, context) => service.renameRelationship(args, context),
      pg_drop_relationship: (args, context) => service.dropRelationship(args, context),
      ...Object.fromEntries(
        PERMISSION_KINDS.flatMap((kind) => [
          [`pg_create_${kind}_permission`, (args: unknown, context: MetadataRequestContext) => service.createPermission(kind, args, context)],
          [`pg_drop_${kind}_permission`, (args: unknown, context: MetadataRequestContext) => service.dropPermission(kind, args, context)],
        ]),
      ),
    },
    queries: {
      run_sql: (args, context) => service.runSql(args, context),
      pg_run_sql: (args, context) => service.runSql(args, context),
    },
    section: {
      export: (metadata, manager) => service.exportTo(metadata, manager),
      replace: (metadata, context) => service.replaceFrom(metadata, context),
      reload: (context) => service.reloadMetadata(context),
      inconsistencies: (context) => service.inconsistenciesNow(context),
    },
  }),
  declaredSchema: schemaWithStoredTables,
};
