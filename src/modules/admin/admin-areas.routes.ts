import type { FastifyInstance } from 'fastify';
import type { AdminAreas } from './admin-areas.schemas';
import { adminErrorRoutes } from './admin-errors.routes';
import { adminEventRoutes } from './admin-events.routes';
import { adminJobRoutes } from './admin-jobs.routes';
import { adminNewsletterRoutes } from './admin-newsletter.routes';

/** The views of Plinth's own areas (behind the session, like every /api route): error tracking, events, jobs, the newsletter. */
export function adminAreaRoutes(scope: FastifyInstance, areas: AdminAreas): void {
  adminErrorRoutes(scope, areas);
  adminEventRoutes(scope, areas);
  adminJobRoutes(scope, areas);
  adminNewsletterRoutes(scope, areas);
}
