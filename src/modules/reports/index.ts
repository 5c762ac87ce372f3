import type { PlinthModule } from '../../platform/module';
import { reportsJobs } from './reports.jobs';
import { ReportsResolver } from './reports.resolver';
import { reportsActions, reportsRoutes } from './reports.routes';
import { createReportsServices, type ReportsServices } from './reports.services';

/** generateReport: asynchronous reports streamed from the database, with progress, cancellation and a signed result. */
export const reportsModule: PlinthModule<ReportsServices> = {
  name: 'reports',
  resolvers: [ReportsResolver],
  create: (platform, modules) => createReportsServices(platform, modules),
  routes: (app, services) => reportsRoutes(app, services),
  actions: (services) => reportsActions(services),
  jobs: (services) => reportsJobs(services),
};
