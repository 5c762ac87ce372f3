import type { PlinthModule } from '../../platform/module';
import { actionsFiles } from './actions.files';
import { createActionsService } from './actions.services';
import type { JoinedType } from '../tables/tables.joins';
import { type ActionsService, ASYNC_ACTION_QUEUE, schemaWithStoredActions, storedJoinedTypes } from './actions.service';

/**
 * The action engine (spec 1 §1.2, §2.3, §5): user-declared actions and their custom types are
 * metadata (POST /v1/metadata, metadata/actions.graphql and actions.yaml), added to the served
 * schema, and resolved by POSTing Hasura's payload to their handlers.
 */
export const actionsModule: PlinthModule<ActionsService, JoinedType[]> = {
  name: 'actions',
  create: (platform) => createActionsService(platform),
  work: (service) => service.followChanges(),
  // Handlers reach the service only when a request comes (plinth build passes a stand-in).
  metadata: (service) => ({
    requests: {
      set_custom_types: (args, context) => service.setCustomTypes(args, context),
      create_action: (args, context) => service.createAction(args, context),
      update_action: (args, context) => service.updateAction(args, context),
      drop_action: (args, context) => service.dropAction(args, context),
      create_action_permission: (args, context) => service.createPermission(args, context),
      drop_action_permission: (args, context) => service.dropPermission(args, context),
    },
    section: {
      export: (metadata, manager) => service.exportTo(metadata, manager),
      replace: (metadata, context) => service.replaceFrom(metadata, context),
      reload: (context) => service.reloadMetadata(context),
      inconsistencies: (context) => service.inconsistenciesNow(context),
    },
  }),
  metadataFiles: actionsFiles,
  declaredSchema: schemaWithStoredActions,
  declared: storedJoinedTypes,
  jobs: (service) => [
    {
      queue: ASYNC_ACTION_QUEUE,
      // A handler may take up to an hour (an action's timeout); a crashed call is taken back after this.
      settings: { timeoutSeconds: 3660, retryLimit: 5 },
      work: (data: { id: string }) => service.runQueued(data.id),
    },
  ],
};
