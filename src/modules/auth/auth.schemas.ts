import { AUTH_ERROR_SCHEMA } from './auth-errors';

// The JSON schemas the auth routes share: bodies, answers, errors.

export const TAGS = ['auth'];
export const text = (maxLength: number) => ({ type: 'string', maxLength }) as const;
export const EMAIL = text(1024);
// Long enough for any AUTH_PASSWORD_MAX_LENGTH; the service applies the configured bounds.
export const PASSWORD = text(16_384);
export const REDIRECT_TO = text(4096);
export const TICKET = text(512);
export const OPTIONS_REDIRECT = { type: 'object', properties: { redirectTo: REDIRECT_TO } } as const;

export const SIGN_UP_OPTIONS = {
  type: 'object',
  properties: {
    displayName: text(1024),
    locale: text(16),
    defaultRole: text(64),
    allowedRoles: { type: 'array', maxItems: 64, items: text(64) },
    metadata: { type: 'object', additionalProperties: true },
    redirectTo: REDIRECT_TO,
  },
} as const;

export const USER_SCHEMA = {
  type: 'object',
  properties: {
    id: { type: 'string', format: 'uuid' },
    createdAt: { type: 'string', format: 'date-time' },
    displayName: { type: 'string' },
    avatarUrl: { type: 'string' },
    locale: { type: 'string' },
    email: { type: ['string', 'null'] },
    isAnonymous: { type: 'boolean' },
    defaultRole: { type: 'string' },
    roles: { type: 'array', items: { type: 'string' } },
    metadata: { type: 'object', additionalProperties: true },
    emailVerified: { type: 'boolean' },
    phoneNumber: { type: ['string', 'null'] },
    phoneNumberVerified: { type: 'boolean' },
    activeMfaType: { type: ['string', 'null'] },
  },
  required: [
    'id',
    'createdAt',
    'displayName',
    'avatarUrl',
    'locale',
    'email',
    'isAnonymous',
    'defaultRole',
    'roles',
    'metadata',
    'emailVerified',
    'phoneNumber',
    'phoneNumberVerified',
    'activeMfaType',
  ],
} as const;

export const SESSION_SCHEMA = {
  type: 'object',
  properties: {
    accessToken: { type: 'string', description: 'JWT, signed HS256 with AUTH_JWT_SECRET' },
    accessTokenExpiresIn: { type: 'integer', description: 'Seconds' },
    refreshToken: { type: 'string', format: 'uuid' },
    refreshTokenId: { type: 'string', format: 'uuid' },
    user: USER_SCHEMA,
  },
  required: ['accessToken', 'accessTokenExpiresIn', 'refreshToken', 'refreshTokenId', 'user'],
} as const;

export const NULLABLE_SESSION = { ...SESSION_SCHEMA, type: ['object', 'null'] } as const;
export const OK = { type: 'string', const: 'OK', description: 'Done' } as const;
export const REDIRECT = { description: 'Redirect to redirectTo', type: 'null' } as const;
export const ERRORS = { 400: AUTH_ERROR_SCHEMA, 401: AUTH_ERROR_SCHEMA, 403: AUTH_ERROR_SCHEMA, 409: AUTH_ERROR_SCHEMA, 429: AUTH_ERROR_SCHEMA };
