import type { Platform } from '../../platform/module';
import { ActionCalls } from './action-calls.service';
import { ActionsService } from './actions.service';

/** The action engine's service, its stored actions loaded. */
export async function createActionsService({ config, dataSource, schema, http, jobs, pubSub, logger }: Platform): Promise<ActionsService> {
  const moduleLogger = logger.child({ module: 'actions' });
  const calls = new ActionCalls(
    http,
    {
      adminSecret: config.graphql.adminSecret ?? '',
      defaultTimeoutSeconds: config.actionEngine.handlerTimeoutSeconds,
      customServices: config.customServices,
      env: process.env,
    },
    moduleLogger,
  );
  const service = new ActionsService({ dataSource, schema, calls, jobs, pubSub, logger: moduleLogger });
  await service.load();
  return service;
}
