import type { PlinthModule } from '../../platform/module';
import { AuthResolver } from './auth.resolver';
import { authRoutes } from './auth.routes';
import { createAuthServices, type AuthServices } from './auth.services';

/** Sessions and the authentication service under /auth (spec 2, Nhost-compatible). */
export const authModule: PlinthModule<AuthServices> = {
  name: 'auth',
  resolvers: [AuthResolver],
  create: (platform) => createAuthServices(platform),
  routes: (app, services) => authRoutes(app, services),
  // An idempotent DELETE: rotated tokens stay until their own expiry, so reuse is still recognised.
  recurring: ({ tokens, oauth, cleanupIntervalSeconds }) => [
    {
      name: 'expired-sessions',
      schedule: { everyMs: cleanupIntervalSeconds * 1000 },
      run: () => Promise.all([tokens.deleteExpired(), oauth.deleteExpired()]),
    },
  ],
};
