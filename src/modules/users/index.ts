import { PasswordHasher } from '../../common/passwords';
import type { PlinthModule } from '../../platform/module';
import { authModule } from '../auth';
import { BulkUserCreation } from './bulk-create-users.service';
import { User } from './user.entity';
import { UsersResolver } from './users.resolver';
import { usersActions } from './users.routes';
import { UsersService } from './users.service';

export interface UsersServices {
  users: UsersService;
  bulkUsers: BulkUserCreation;
}

/** Accounts: registerUser and bulkCreateUsers on the schema and as engine-compatible actions. */
export const usersModule: PlinthModule<UsersServices> = {
  name: 'users',
  resolvers: [UsersResolver],
  // No mailer.requireDelivery: only bulkCreateUsers with send_invitations sends, and without a
  // way to deliver mail that call fails alone rather than the server refusing to start.
  create: ({ config, dataSource, pubSub, mailer, logger }, modules) => ({
    users: new UsersService(
      dataSource.getRepository(User),
      pubSub,
      modules.get(authModule).signUps,
      new PasswordHasher(config.auth.passwordHash),
      logger.child({ module: 'users' }),
    ),
    bulkUsers: new BulkUserCreation(
      dataSource,
      mailer,
      config,
      { maxUsers: config.actions.bulkCreateMaxUsers, invitationTtlSeconds: config.auth.invitationTtlSeconds },
      logger.child({ module: 'users' }),
    ),
  }),
  actions: (services) => usersActions(services),
};
