import type { PlinthModule } from '../../platform/module';
import { AuthResolver } from './auth.resolver';
import { AuthService } from './auth.service';

export interface AuthServices {
  auth: AuthService;
}

/** Sessions: what a caller may learn of its own credentials. */
export const authModule: PlinthModule<AuthServices> = {
  name: 'auth',
  resolvers: [AuthResolver],
  create: () => ({ auth: new AuthService() }),
};
