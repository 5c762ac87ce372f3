/** The role of the admin secret and of administrators (Hasura's). */
export const ADMIN_ROLE = 'admin';
/** In a list of roles that may call something: every role, the unauthorised one included. */
export const EVERY_ROLE = '*';
