import type { ActionDefinition } from '../../platform/actions';
import type { UsersServices } from './users.services';
import { BULK_CREATE_USERS_ROLES, REGISTER_USER_ROLES, REGISTRATION_LIMITS } from './users.types';

/** The engine-compatible handler routes of the users actions. */
export function usersActions({ users, bulkUsers }: UsersServices): ActionDefinition[] {
  return [
    {
      name: 'registerUser',
      roles: REGISTER_USER_ROLES,
      // The fields themselves are checked by the service, which answers success=false per field.
      argumentsSchema: { type: 'object', required: ['input'], properties: { input: { type: 'object' } } },
      rateLimits: REGISTRATION_LIMITS,
      handle: (args) => users.registerUser(args.input),
    },
    {
      name: 'bulkCreateUsers',
      roles: BULK_CREATE_USERS_ROLES,
      // Each entry is checked by the service, which answers per entry.
      argumentsSchema: {
        type: 'object',
        required: ['input'],
        properties: {
          input: {
            type: 'object',
            required: ['users'],
            properties: { users: { type: 'array', items: { type: 'object' } }, send_invitations: { type: ['boolean', 'null'] } },
          },
        },
      },
      handle: (args) => bulkUsers.bulkCreateUsers(args.input),
    },
  ];
}
