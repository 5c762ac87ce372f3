import type { PlinthModule } from '../../platform/module';
import { ErrorsResolver } from './errors.resolver';
import { ErrorsService } from './errors.service';
import { ingestRoutes } from './ingest.routes';
import { IngestService } from './ingest.service';
import { ErrorProjectsResolver } from './projects.resolver';
import { ProjectsService } from './projects.service';

export interface ErrorTrackingServices {
  projects: ProjectsService;
  ingest: IngestService;
  errors: ErrorsService;
  /** The named limits of ingestion and of the management API. */
  rateLimits: import('../../platform/rate-limits').RateLimits;
  maxEventBytes: number;
}

/** Error tracking (spec 2): Sentry-compatible ingestion, grouped errors, SLOs, incidents, the status page. */
export const errorTrackingModule: PlinthModule<ErrorTrackingServices> = {
  name: 'errortracking',
  resolvers: [ErrorProjectsResolver, ErrorsResolver],
  create: ({ config, dataSource, pubSub, rateLimits, logger }) => {
    const log = logger.child({ module: 'errortracking' });
    return {
      projects: new ProjectsService(dataSource, config.publicUrl),
      ingest: new IngestService(dataSource, pubSub, config.errors.ingestMaxBatch, log),
      errors: new ErrorsService(dataSource),
      rateLimits,
      maxEventBytes: config.errors.maxEventBytes,
    };
  },
  routes: (app, services) => {
    ingestRoutes(app, services, services.maxEventBytes, () => services.rateLimits.get('errorIngest'));
  },
};
