import type { Platform, PlinthModule } from '../../platform/module';
import { AuthResolver } from './auth.resolver';
import { authRoutes } from './auth.routes';
import { createAuthServices, type AuthServices } from './auth.services';

/** Every AUTH_CLEANUP_INTERVAL_SECONDS until shutdown, expired refresh tokens and tickets go. */
function sweepExpired({ tokens, oauth }: AuthServices, { config, logger, shutdown }: Pick<Platform, 'config' | 'logger' | 'shutdown'>): void {
  const timer = setInterval(() => {
    Promise.all([tokens.deleteExpired(), oauth.deleteExpired()]).catch((error: unknown) => logger.warn({ err: error }, 'deleting expired refresh tokens and tickets failed; next time'));
  }, config.auth.cleanupIntervalSeconds * 1000);
  timer.unref();
  shutdown.addEventListener('abort', () => clearInterval(timer), { once: true });
}

/** Sessions and the authentication service under /auth (spec 2, Nhost-compatible). */
export const authModule: PlinthModule<AuthServices> = {
  name: 'auth',
  resolvers: [AuthResolver],
  create: (platform) => {
    const services = createAuthServices(platform);
    sweepExpired(services, platform);
    return services;
  },
  routes: (app, services) => authRoutes(app, services),
};
