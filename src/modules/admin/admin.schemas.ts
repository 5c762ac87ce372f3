import { ENVELOPE_ERROR_SCHEMA } from '../../http/errors';
import { PART_ACTIONS } from './plinth-parts.service';

/** The dashboard API's tag in the API reference. */
export const TAGS = ['admin'];

/** Every error answer: the envelope with its code (http/errors.ts). */
export const error = (description: string) => ({ ...ENVELOPE_ERROR_SCHEMA, description });

/** A 429 (a login too soon after a failure, or locked out) also says `error: "rate-limited"`, with Retry-After. */
export const tooSoon = {
  description: 'A failed login was too recent (LOGIN_DELAYED), or logins are locked out (LOGIN_LOCKED); Retry-After says when to try again',
  type: 'object',
  properties: { ...ENVELOPE_ERROR_SCHEMA.properties, error: { type: 'string' } },
  required: ['success', 'message', 'error_code'],
} as const;

/** The answers every route behind the session shares. */
export const SESSION_ERRORS = {
  401: error('No admin session (UNAUTHENTICATED): log in first, or the session ended after PLATFORM_ADMIN_SESSION_IDLE_MINUTES'),
};

/** The answers every state-changing route behind the session shares. */
export const CHANGE_ERRORS = {
  ...SESSION_ERRORS,
  403: error('X-CSRF-Token missing or not the session’s (CSRF_TOKEN_INVALID)'),
};

/** The session cookie proves the caller, and X-CSRF-Token a change (the reference shows no scheme for a cookie of its own). */
export const CSRF_HEADER = {
  type: 'object',
  properties: { 'x-csrf-token': { type: 'string', maxLength: 200, description: 'The csrfToken of the login or session answer' } },
} as const;

/** The body of a change that takes none (the route, the session and the CSRF token say everything). */
export const NO_BODY = { type: ['object', 'null'], maxProperties: 0, description: 'Nothing (or {})' } as const;

export const SESSION = {
  type: 'object',
  properties: {
    username: { type: 'string' },
    csrfToken: { type: 'string', description: 'Send it in X-CSRF-Token with every POST, PUT, PATCH and DELETE' },
    createdAt: { type: 'string', format: 'date-time' },
    idleExpiresAt: { type: 'string', format: 'date-time', description: 'The session ends then unless a request comes before' },
  },
  required: ['username', 'csrfToken', 'createdAt', 'idleExpiresAt'],
} as const;

export const PART = {
  type: 'object',
  properties: {
    name: { type: 'string', description: 'http, auth, database, events, scheduler, mailer, jobs.<queue>, or cs.<name> (a CS_<N> custom service)' },
    title: { type: 'string' },
    state: { type: 'string', enum: ['running', 'stopped', 'not-run-here', 'unavailable'] },
    actions: { type: 'array', items: { type: 'string', enum: [...PART_ACTIONS] }, description: 'What POST /api/services/{name}/{action} takes now' },
    detail: { type: 'string' },
    latencyMs: { type: 'number' },
    jobs: {
      type: 'object',
      properties: { waiting: { type: 'integer' }, active: { type: 'integer' }, failed: { type: 'integer' }, runningHere: { type: 'integer' } },
      required: ['waiting', 'active', 'failed', 'runningHere'],
    },
    pausedOnAllInstances: { type: 'boolean', description: 'Stopped on every instance (scope=all): an instance that starts meanwhile stops it too' },
  },
  required: ['name', 'title', 'state', 'actions'],
} as const;

export const SETTING = {
  type: 'object',
  properties: {
    name: { type: 'string' },
    area: { type: 'string' },
    description: { type: 'string' },
    default: { type: 'string' },
    secret: { type: 'boolean', description: 'Its value is never shown: only whether it is set' },
    value: { type: ['string', 'null'], description: 'The value this process runs with (masked for a secret)' },
    fileValue: { type: ['string', 'null'], description: 'The value in the settings file now (masked for a secret)' },
    source: { type: 'string', enum: ['environment', 'settings file', 'default'] },
    pendingRestart: { type: 'boolean', description: 'The settings file holds another value, which applies at the next start' },
  },
  required: ['name', 'area', 'description', 'default', 'secret', 'value', 'fileValue', 'source', 'pendingRestart'],
} as const;
