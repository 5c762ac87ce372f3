import type { Session } from '../../platform/session';
import type { SessionInfo } from './auth.types';

export class AuthService {
  /** What a caller may learn of its own session: role, user id, allowed roles, variables. */
  describeSession(session: Session): SessionInfo {
    return {
      role: session.role,
      user_id: session.userId,
      allowed_roles: session.allowedRoles,
      variables: session.variables,
    };
  }
}
