import type { PlinthModule } from '../../platform/module';
import { UsersResolver } from './users.resolver';
import { usersActions } from './users.routes';
import { createUsersServices, type UsersServices } from './users.services';

/** Accounts: registerUser and bulkCreateUsers on the schema and as engine-compatible actions. */
export const usersModule: PlinthModule<UsersServices> = {
  name: 'users',
  resolvers: [UsersResolver],
  // No mailer.requireDelivery: only bulkCreateUsers with send_invitations sends, and without a
  // way to deliver mail that call fails alone rather than the server refusing to start.
  create: (platform, modules) => createUsersServices(platform, modules),
  actions: (services) => usersActions(services),
};
