import type { PlinthModule } from '../../platform/module';
import { adminRoutes } from './admin.routes';
import { createAdminServices, type AdminServices } from './admin.services';

const IDLE_SESSION_SWEEP_MS = 10 * 60_000;

/** The admin dashboard's API (spec 3 §4.3) on PLATFORM_ADMIN_PORT: sessions, health, services, configuration, logs. */
export const adminModule: PlinthModule<AdminServices> = {
  name: 'admin',
  create: (platform, modules) => createAdminServices(platform, modules),
  routes: (app, services) => adminRoutes(app, services),
  // The charts' samples, taken by every instance serving the dashboard.
  work: async (services) => (services.listen ? services.history.start() : async () => {}),
  // Only tidies: a session past its idle timeout is refused whether its row is still there or not.
  // Every process answers service actions sent to all instances, and applies the stops that stand.
  work: ({ broadcast }) => broadcast.start(),
  recurring: ({ sessions }) => [{ name: 'idle-sessions', schedule: { everyMs: IDLE_SESSION_SWEEP_MS }, run: () => sessions.deleteIdle() }],
};
