import type { PlinthModule } from '../../platform/module';
import { User } from './user.entity';
import { UsersResolver } from './users.resolver';
import { usersActions } from './users.routes';
import { UsersService } from './users.service';

export interface UsersServices {
  users: UsersService;
}

/** Accounts: registerUser on the schema and as an engine-compatible action. */
export const usersModule: PlinthModule<UsersServices> = {
  name: 'users',
  resolvers: [UsersResolver],
  create: ({ config, dataSource, pubSub, logger }) => ({
    users: new UsersService(
      dataSource.getRepository(User),
      pubSub,
      { minLength: config.auth.passwordMinLength, maxLength: config.auth.passwordMaxLength },
      logger.child({ module: 'users' }),
    ),
  }),
  actions: ({ users }) => usersActions(users),
};
