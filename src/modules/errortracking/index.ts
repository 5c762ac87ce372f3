import type { PlinthModule } from '../../platform/module';
import type { RateLimits } from '../../platform/rate-limits';
import { ErrorsResolver } from './errors.resolver';
import { ErrorsService } from './errors.service';
import { IncidentsService } from './incidents.service';
import { ingestRoutes } from './ingest.routes';
import { IngestService } from './ingest.service';
import { MaintenanceService } from './maintenance.service';
import { managementRoutes } from './management.routes';
import { ErrorProjectsResolver } from './projects.resolver';
import { ProjectsService } from './projects.service';
import { IncidentsResolver, SlosResolver } from './slos-incidents.resolver';
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

/** Error tracking (spec 2): Sentry-compatible ingestion, grouped errors, SLOs, incidents, the status page. */
export const errorTrackingModule: PlinthModule<ErrorTrackingServices> = {
  name: 'errortracking',
  resolvers: [ErrorProjectsResolver, ErrorsResolver, SlosResolver, IncidentsResolver],
  create: ({ config, dataSource, pubSub, rateLimits, logger }) => {
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
  },
  routes: (app, services) => {
    ingestRoutes(app, services, () => services.rateLimits.get('errorIngest'));
    managementRoutes(app, services);
  },
  recurring: ({ maintenance }) => [{ name: 'maintenance', schedule: { everyMs: maintenance.intervalMs }, run: () => maintenance.round() }],
};
