import { PasswordHasher } from '../../common/passwords';
import type { ModuleServices, Platform } from '../../platform/module';
import { recentLogsOf, type RecentLogs } from '../../platform/recent-logs';
import { errorTrackingModule } from '../errortracking';
import { eventsModule } from '../events';
import { jobsModule } from '../jobs';
import { newsletterModule } from '../newsletter';
import { tablesModule } from '../tables';
import { DatabaseBackups } from './admin-backups.service';
import { DatabaseInsight } from './admin-database.service';
import { certificatesReport, type CertificatesReport } from './admin-certificates.service';
import { AdminDeploys } from './admin-deploy.service';
import { environmentInfo, type EnvironmentInfo } from './admin-environment.service';
import type { AdminAreas } from './admin-areas.schemas';
import { AdminPlugins } from './admin-plugins.service';
import type { AdminListen } from './admin-port';
import { AdminData } from './admin-data.service';
import { MetricsHistory } from './admin-history.service';
import { AdminSessions } from './admin-sessions.service';
import { AdminSettings } from './admin-settings.service';
import { PlinthParts } from './plinth-parts.service';
import { ServiceBroadcast } from './admin-cluster.service';

export interface AdminServices {
  /** Where the dashboard listens; undefined when PLATFORM_ADMIN_ENABLED is off. */
  listen: Omit<AdminListen, 'beforeClose'> | undefined;
  sessions: AdminSessions;
  parts: PlinthParts;
  /** Service actions on every instance (`?scope=all`). */
  broadcast: ServiceBroadcast;
  settings: AdminSettings;
  /** The process's recent log lines; undefined for a logger that keeps none (not made by createLogger). */
  logs: RecentLogs | undefined;
  environment(): Promise<EnvironmentInfo>;
  database: { backups: DatabaseBackups; insight: DatabaseInsight };
  /** The services of Plinth's own areas the dashboard shows: error tracking, events, jobs, the newsletter. */
  areas: AdminAreas;
  plugins: AdminPlugins;
  deploys: AdminDeploys;
  certificates(): CertificatesReport;
  /** The charts' samples of the last hour (taken while the dashboard is on). */
  history: MetricsHistory;
  /** The data browser's tracked tables. */
  data: AdminData;
}

export function createAdminServices(platform: Platform, modules: ModuleServices): AdminServices {
  const { config, dataSource, jobs, shutdown, metrics } = platform;
  const events = modules.get(eventsModule);
  const tables = modules.get(tablesModule);
  const logger = platform.logger.child({ module: 'admin' });
  if (config.admin.enabled && !config.admin.passwordHash) {
    logger.warn('the admin dashboard is enabled without PLATFORM_ADMIN_PASSWORD: nobody can log in (plinth admin password)');
  }
  const parts = new PlinthParts({
    config,
    dataSource,
    jobs,
    delivery: events.delivery,
    recurringPause: platform.recurringPause,
    childServices: platform.childServices,
    logger,
    shutdown,
  });
  return {
    listen: config.admin.enabled ? { host: config.admin.host, port: config.admin.port } : undefined,
    sessions: new AdminSessions(dataSource, config.admin, new PasswordHasher(config.auth.passwordHash), logger),
    parts,
    broadcast: new ServiceBroadcast({
      parts,
      pubSub: platform.pubSub,
      childServices: platform.childServices,
      dataSource,
      timeoutMs: config.admin.broadcastTimeoutMs,
      logger,
    }),
    settings: new AdminSettings(config.admin.environment, config.admin.settingsFile, logger),
    logs: recentLogsOf(platform.logger),
    environment: () => environmentInfo(config, dataSource),
    database: {
      backups: new DatabaseBackups(
        dataSource,
        { backupsDir: config.admin.backupsDir, pgBinDir: config.admin.pgBinDir, timeoutMs: config.admin.backupTimeoutMs, embedded: !config.database.url },
        logger,
      ),
      insight: new DatabaseInsight(dataSource, tables, dataSource.options.migrationsTableName ?? 'migrations'),
    },
    areas: {
      errors: modules.get(errorTrackingModule),
      events: modules.get(eventsModule),
      jobs: modules.get(jobsModule),
      newsletter: modules.get(newsletterModule),
    },
    plugins: new AdminPlugins(config.pluginsDir, config.admin.projectPath, dataSource, platform.http, modules.get(eventsModule).admin, logger),
    deploys: new AdminDeploys(config.deploy, dataSource, logger),
    certificates: () => certificatesReport(config.tlsCertFiles),
    history: new MetricsHistory({ metrics, jobs, eventBacklog: () => events.admin.backlog(), logger }, config.admin.metricsIntervalSeconds),
    data: new AdminData(
      () => tables.servedTables(),
      (field) => platform.schema.current.getMutationType()?.getFields()[field] !== undefined,
    ),
  };
}
