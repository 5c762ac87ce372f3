import type { SessionSettings } from '../../http/session';
import type { PlinthModule } from '../../platform/module';
import { filesModule } from '../files';
import { ReportRunner } from './report-runner.service';
import { reportsJobs } from './reports.jobs';
import { ReportsResolver } from './reports.resolver';
import { reportsActions, reportsRoutes } from './reports.routes';
import { ReportsService } from './reports.service';

export interface ReportsServices {
  reports: ReportsService;
  runner: ReportRunner;
  sessionSettings: SessionSettings;
}

/** generateReport: asynchronous reports streamed from the database, with progress, cancellation and a signed result. */
export const reportsModule: PlinthModule<ReportsServices> = {
  name: 'reports',
  resolvers: [ReportsResolver],
  create: ({ config, dataSource, jobs, pubSub, logger }, modules) => {
    // The files module's storage and link signer: one of each per process.
    const { storage, signer, sessionSettings } = modules.get(filesModule);
    const log = logger.child({ module: 'reports' });
    const reports = new ReportsService(dataSource, storage, jobs, pubSub, signer, { urlTtlSeconds: config.files.reportUrlTtlSeconds }, log);
    return { reports, runner: new ReportRunner(dataSource, reports, storage, log), sessionSettings };
  },
  routes: (app, services) => reportsRoutes(app, services),
  actions: (services) => reportsActions(services),
  jobs: (services) => reportsJobs(services),
};
