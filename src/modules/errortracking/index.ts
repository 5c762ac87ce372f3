import type { PlinthModule } from '../../platform/module';
import { ErrorsResolver } from './errors.resolver';
import { createErrorTrackingServices, type ErrorTrackingServices } from './errortracking.services';
import { ingestRoutes } from './ingest.routes';
import { managementRoutes } from './management.routes';
import { ErrorProjectsResolver } from './projects.resolver';
import { IncidentsResolver, SlosResolver } from './slos-incidents.resolver';

/** Error tracking (spec 2): Sentry-compatible ingestion, grouped errors, SLOs, incidents, the status page. */
export const errorTrackingModule: PlinthModule<ErrorTrackingServices> = {
  name: 'errortracking',
  resolvers: [ErrorProjectsResolver, ErrorsResolver, SlosResolver, IncidentsResolver],
  create: (platform) => createErrorTrackingServices(platform),
  routes: (app, services) => {
    ingestRoutes(app, services, () => services.rateLimits.get('errorIngest'));
    managementRoutes(app, services);
  },
  recurring: ({ maintenance }) => [{ name: 'maintenance', schedule: { everyMs: maintenance.intervalMs }, run: () => maintenance.round() }],
};
