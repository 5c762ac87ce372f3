import type { Platform } from '../../platform/module';
import type { RateLimits } from '../../platform/rate-limits';
import { ErrorsService } from './errors.service';
import { IncidentsService } from './incidents.service';
import { IngestService } from './ingest.service';
import { MaintenanceService } from './maintenance.service';
import { ProjectsService } from './projects.service';
import { SlosService } from './slos.service';
import { StatusPageService } from './status-page.service';

export interface ErrorTrackingServices {
  projects: ProjectsService;
  ingest: IngestService;
  errors: ErrorsService;
  slos: SlosService;
  incidents: IncidentsService;
  statusPage: StatusPageService;
  maintenance: MaintenanceService;
  /** The named limits of ingestion (per DSN key) and of the management API (per secret key). */
  rateLimits: RateLimits;
  maxEventBytes: number;
  statusPageCacheSeconds: number;
}

export function createErrorTrackingServices({ config, dataSource, pubSub, rateLimits, logger }: Platform): ErrorTrackingServices {
  const log = logger.child({ module: 'errortracking' });
  const projects = new ProjectsService(dataSource, config.publicUrl);
  const serviceOf = async (projectId: number) => (await projects.findProject(projectId)).service;
  const slos = new SlosService(dataSource, serviceOf);
  const incidents = new IncidentsService(dataSource, pubSub, serviceOf);
  return {
    projects,
    ingest: new IngestService(dataSource, pubSub, config.errors.ingestMaxBatch, log),
    errors: new ErrorsService(dataSource),
    slos,
    incidents,
    statusPage: new StatusPageService(dataSource, projects, slos, config.errors.statusPageCacheSeconds * 1000),
    maintenance: new MaintenanceService(dataSource, slos, incidents, config.errors),
    rateLimits,
    maxEventBytes: config.errors.maxEventBytes,
    statusPageCacheSeconds: config.errors.statusPageCacheSeconds,
  };
}
