import type { GraphQLField } from 'graphql';
import { Authorized, Extensions } from 'type-graphql';
import type { RootFieldRule } from '../../graphql/root-fields';
import type { Session } from '../../platform/session';
import { ADMIN_ROLE } from '../../common/roles';

/** The role a secret key's calls to /api/graphql run as: the management API of its project only. */
export const ERROR_API_ROLE = 'error_api';
/** The session variable that holds the secret key's project. */
export const PROJECT_VARIABLE = 'x-plinth-error-project-id';
/** Who may read and manage errors, SLOs and incidents. */
const ERROR_MANAGERS = [ADMIN_ROLE, ERROR_API_ROLE];
/** Field extension of error tracking's management fields, the only root fields a secret key may use. */
const ERROR_MANAGEMENT_FIELD = 'errorManagement';

/**
 * A root field of error tracking's management API (spec 2 §4.2): administrators and secret keys
 * may use it (the resolver keeps a key to its project, through projectScope). A secret key's
 * session reaches these fields and no other (SECRET_KEY_FIELDS).
 */
export function ErrorManagement(): MethodDecorator {
  const authorized = Authorized(ERROR_MANAGERS);
  const marked = Extensions({ [ERROR_MANAGEMENT_FIELD]: true });
  return (target, key, descriptor) => {
    authorized(target, key, descriptor);
    marked(target, key, descriptor);
  };
}

/**
 * What a secret key's GraphQL request at /api/graphql may select: error tracking's management
 * fields. Any other root field, though its roles would admit the key's authenticated session
 * (uploads, reports, sign-up), refuses the whole request before anything runs.
 */
export const SECRET_KEY_FIELDS: RootFieldRule = {
  allows: (field: GraphQLField<unknown, unknown>) => field.extensions[ERROR_MANAGEMENT_FIELD] === true,
  caller: "A project's secret key (error tracking's errors, SLOs and incidents only)",
};

/** The session of a secret key's management call. */
export function secretKeySession(projectId: number, tokenId: string): Session {
  return {
    role: ERROR_API_ROLE,
    userId: null,
    allowedRoles: [ERROR_API_ROLE],
    variables: { 'x-gql-role': ERROR_API_ROLE, [PROJECT_VARIABLE]: String(projectId), 'x-plinth-error-token-id': tokenId },
    authenticated: true,
    viaAdminSecret: false,
    expiresAt: null,
  };
}

/** The one project a caller may see, or null for every project (an administrator). */
export function projectScope(session: Session): number | null {
  if (session.role !== ERROR_API_ROLE) return null;
  return Number(session.variables[PROJECT_VARIABLE]);
}

/** Who made a change, as incidents record it. */
export function actorOf(session: Session): string {
  if (session.role === ERROR_API_ROLE) return `secret key ${session.variables['x-plinth-error-token-id']}`;
  return session.userId ? `user ${session.userId}` : session.role;
}
