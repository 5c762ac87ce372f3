import { PasswordHasher } from '../../common/passwords';
import type { ModuleServices, Platform } from '../../platform/module';
import { authModule } from '../auth';
import { BulkUserCreation } from './bulk-create-users.service';
import { User } from './user.entity';
import { UsersService } from './users.service';

export interface UsersServices {
  users: UsersService;
  bulkUsers: BulkUserCreation;
}

export function createUsersServices({ config, dataSource, pubSub, mailer, logger }: Platform, modules: ModuleServices): UsersServices {
  return {
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
  };
}
