import { GraphQLError } from 'graphql';
import type { AuthChecker } from 'type-graphql';
import { isRoleAllowed } from '../platform/session';
import type { GraphQLContext } from './context';

/**
 * type-graphql's @Authorized(roles) check. The roles a field lists may call it; admin may call
 * everything (as in Hasura); @Authorized() without roles admits any authenticated caller.
 */
export const authChecker: AuthChecker<GraphQLContext> = ({ context, info }, roles) => {
  if (isRoleAllowed(context.session, roles)) return true;
  throw new GraphQLError(`The role "${context.session.role}" may not use ${info.parentType.name}.${info.fieldName}`, {
    extensions: { code: 'FORBIDDEN' },
  });
};
