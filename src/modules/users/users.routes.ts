import type { ActionDefinition } from '../../http/actions';
import type { UsersService } from './users.service';
import { REGISTER_USER_ROLES } from './users.types';

/** The engine-compatible handler routes of the users actions. */
export function usersActions(users: UsersService): ActionDefinition[] {
  return [
    {
      name: 'registerUser',
      roles: REGISTER_USER_ROLES,
      // The fields themselves are checked by the service, which answers success=false per field.
      argumentsSchema: { type: 'object', required: ['input'], properties: { input: { type: 'object' } } },
      rateLimit: 'registration',
      handle: (args) => users.registerUser(args.input),
    },
  ];
}
