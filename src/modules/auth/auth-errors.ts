import { Refusal } from '../../common/refusal';

/**
 * The auth service's errors: Nhost's codes, statuses and body `{status, message, error}` so that
 * Nhost's clients read them unchanged (docs/decisions.md lists them); auth.route-helpers.ts answers them.
 */
export const AUTH_ERRORS = {
  'invalid-request': { status: 400, message: 'The request payload is incorrect' },
  'password-too-short': { status: 400, message: 'Password is too short' },
  'password-in-hibp-database': { status: 400, message: 'Password is too weak: it appears in a list of breached passwords' },
  'redirectTo-not-allowed': { status: 400, message: 'The value of "options.redirectTo" is not allowed' },
  'role-not-allowed': { status: 400, message: 'Role not allowed' },
  'default-role-must-be-in-allowed-roles': { status: 400, message: 'Default role must be in allowed roles' },
  'user-not-anonymous': { status: 400, message: 'Logged in user is not anonymous' },
  'no-totp-secret': { status: 400, message: 'OTP secret is not set for user' },
  'totp-already-active': { status: 400, message: 'TOTP MFA already active' },
  'mfa-type-not-found': { status: 400, message: 'There is no active MFA set for the user' },
  'disabled-mfa-totp': { status: 400, message: 'MFA TOTP is not enabled for this user' },
  'invalid-email-password': { status: 401, message: 'Incorrect email or password' },
  'unverified-user': { status: 401, message: 'Email is not verified' },
  'disabled-user': { status: 401, message: 'User is disabled' },
  'invalid-refresh-token': { status: 401, message: 'Invalid or expired refresh token' },
  'invalid-ticket': { status: 401, message: 'Invalid or expired ticket' },
  'invalid-otp': { status: 401, message: 'Invalid or expired OTP' },
  'unauthenticated-user': { status: 401, message: 'User is not authenticated' },
  'forbidden-anonymous': { status: 403, message: 'Forbidden, user is anonymous' },
  'reauthentication-required': { status: 403, message: 'Sign in again to do this: the session is not recent enough' },
  'signup-disabled': { status: 403, message: 'Sign up is disabled' },
  'disabled-endpoint': { status: 409, message: 'This endpoint is disabled' },
  'email-already-in-use': { status: 409, message: 'Email already in use' },
  'last-sign-in-method': { status: 409, message: 'This is the only way the user can sign in' },
  'too-many-requests': { status: 429, message: 'Too many requests' },
  'sms-delivery-failed': { status: 503, message: 'The SMS could not be sent; try again later' },
  'internal-server-error': { status: 500, message: 'Internal server error' },
} as const satisfies Record<string, { status: number; message: string }>;

export type AuthErrorCode = keyof typeof AUTH_ERRORS;

/** A refusal of the auth service: Nhost's code, status and message (or this message). */
export function authError(code: AuthErrorCode, message: string = AUTH_ERRORS[code].message): Refusal {
  return new Refusal(code, message, AUTH_ERRORS[code].status);
}

/** A refusal with one of Nhost's codes (authError). */
export function isAuthError(error: unknown): error is Refusal & { code: AuthErrorCode } {
  return error instanceof Refusal && Object.hasOwn(AUTH_ERRORS, error.code);
}

/** An invalid field of a request: 400 invalid-request naming it. */
export const invalidRequest = (message: string) => authError('invalid-request', message);

/** The JSON schema of that body, for route schemas and the API reference. */
export const AUTH_ERROR_SCHEMA = {
  type: 'object',
  properties: {
    status: { type: 'integer' },
    message: { type: 'string' },
    error: { type: 'string' },
  },
  required: ['status', 'message', 'error'],
} as const;
