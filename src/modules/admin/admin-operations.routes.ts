import type { ServerResponse } from 'node:http';
import type { FastifyInstance } from 'fastify';
import type { AdminServices } from './admin.services';
import { adminCertificateRoutes, adminDeployRoutes } from './admin-deploy.routes';
import { adminPluginRoutes } from './admin-plugins.routes';

/** Plugins, deployments and certificates of the dashboard's API (spec 3 §4.3, §5.4). */
export function adminOperationsRoutes(scope: FastifyInstance, services: AdminServices, streams: Set<ServerResponse>): void {
  adminPluginRoutes(scope, services);
  adminDeployRoutes(scope, services, streams);
  adminCertificateRoutes(scope, services);
}
