import type { SessionSettings } from '../../platform/session';
import type { ModuleServices, Platform } from '../../platform/module';
import { filesModule } from '../files';
import { ReportRunner } from './report-runner.service';
import { ReportsService } from './reports.service';

export interface ReportsServices {
  reports: ReportsService;
  runner: ReportRunner;
  sessionSettings: SessionSettings;
}

export function createReportsServices({ config, dataSource, jobs, pubSub, logger }: Platform, modules: ModuleServices): ReportsServices {
  // The files module's storage and link signer: one of each per process.
  const { storage, signer, sessionSettings } = modules.get(filesModule);
  const log = logger.child({ module: 'reports' });
  const reports = new ReportsService(dataSource, storage, jobs, pubSub, signer, { urlTtlSeconds: config.files.reportUrlTtlSeconds }, log);
  return { reports, runner: new ReportRunner(dataSource, reports, storage, log), sessionSettings };
}
