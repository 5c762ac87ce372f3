import { Authorized, Ctx, Query, Resolver } from 'type-graphql';
import type { GraphQLContext } from '../../graphql/context';
import { EVERY_ROLE } from '../../common/roles';
import type { AuthServices } from './auth.services';
import { SessionInfo } from './auth.types';

@Resolver()
export class AuthResolver {
  constructor(private readonly services: Pick<AuthServices, 'auth'>) {}

  @Authorized(EVERY_ROLE)
  @Query(() => SessionInfo, { description: "The caller's own session: a quick check of a token or of headers" })
  session(@Ctx() context: GraphQLContext): SessionInfo {
    return this.services.auth.describeSession(context.session);
  }
}
