import { Arg, Authorized, Ctx, Mutation, Resolver, Root, Subscription } from 'type-graphql';
import type { GraphQLContext } from '../../graphql/context';
import { ChecksOwnText } from '../../graphql/input-text';
import { ADMIN_ROLE } from '../../common/roles';
import { rowVisible, USERS_TABLE } from '../../platform/row-filter';
import { enforceRateLimit } from '../../graphql/rate-limits';
import { USER_REGISTERED } from './users.service';
import type { UsersServices } from './users.services';
import {
  BULK_CREATE_USERS_ROLES,
  BulkCreateUsersInput,
  BulkCreateUsersOutput,
  REGISTER_USER_ROLES,
  REGISTRATION_LIMITS,
  RegisterUserInput,
  RegisterUserOutput,
  UserInfo,
} from './users.types';

@Resolver()
export class UsersResolver {
  constructor(private readonly services: UsersServices) {}

  @Authorized(REGISTER_USER_ROLES)
  @ChecksOwnText()
  @Mutation(() => RegisterUserOutput, { description: 'Creates an account; failures come back as success=false with errors' })
  async registerUser(@Arg('input', () => RegisterUserInput) input: RegisterUserInput, @Ctx() context: GraphQLContext): Promise<RegisterUserOutput> {
    for (const limit of REGISTRATION_LIMITS) await enforceRateLimit(context, limit);
    return this.services.users.registerUser(input);
  }

  @Authorized(BULK_CREATE_USERS_ROLES)
  @ChecksOwnText()
  @Mutation(() => BulkCreateUsersOutput, {
    description: 'Creates accounts without passwords, each entry on its own; invitations let the users set theirs',
  })
  bulkCreateUsers(@Arg('input', () => BulkCreateUsersInput) input: BulkCreateUsersInput): Promise<BulkCreateUsersOutput> {
    return this.services.bulkUsers.bulkCreateUsers(input);
  }

  @Authorized(ADMIN_ROLE)
  @Subscription(() => UserInfo, {
    topics: USER_REGISTERED,
    description: "Each new account, as it is registered (an admin's own source account's)",
    filter: ({ payload, context }: { payload: UserInfo; context: GraphQLContext }) => rowVisible(context.session, USERS_TABLE, { ...payload }),
  })
  userRegistered(@Root() user: UserInfo): UserInfo {
    return user;
  }
}
