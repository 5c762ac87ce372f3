import type { PlinthModule } from '../../platform/module';
import { adminRoutes } from './admin.routes';
import { createAdminServices, type AdminServices } from './admin.services';

const IDLE_SESSION_SWEEP_MS = 10 * 60_000;

/** The admin dashboard's API (spec 3 §4.3) on PLATFORM_ADMIN_PORT: sessions, health, services, configuration, logs. */
export const adminModule: PlinthModule<AdminServices> = {
  name: 'admin',
  create: (platform, modules) => createAdminServices(platform, modules),
  routes: (app, services) => adminRoutes(app, services),
  // Every process answers service actions sent to all instances, and applies the stops that stand;
  // every instance serving the dashboard samples its charts; a deployment still running at shutdown
  // is stopped and recorded as interrupted.
  work: async (services) => {
    const stopBroadcast = await services.broadcast.start();
    const stopHistory = services.listen ? await services.history.start() : async () => {};
    return async () => {
      await services.deploys.close();
      await stopHistory();
      await stopBroadcast();
    };
  },
  // Only tidies: a session past its idle timeout is refused whether its row is still there or not.
  recurring: ({ sessions }) => [{ name: 'idle-sessions', schedule: { everyMs: IDLE_SESSION_SWEEP_MS }, run: () => sessions.deleteIdle() }],
};
