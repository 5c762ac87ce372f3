import { z } from 'zod';

/** The rules several variables share; each area's variables are built from them. */

export const integer = (min: number, max: number) =>
  z.coerce
    .number({ error: 'must be a number' })
    .int({ error: 'must be a whole number' })
    .min(min, { error: `must be at least ${min}` })
    .max(max, { error: `must be at most ${max}` });

export const boolean = z
  .enum(['true', 'false', '1', '0', 'yes', 'no'], { error: 'must be true or false' })
  .transform((value) => value === 'true' || value === '1' || value === 'yes');

export const nonEmpty = z.string().trim().min(1, { error: 'must not be empty' });

export const oneLine = nonEmpty.refine((value) => !/[\r\n]/.test(value), { error: 'must be one line' });

/** Where people reach a service: links in mails are built on it, so it must be absolute and end without a slash. */
export const baseUrl = nonEmpty.refine(
  (value) => {
    if (!URL.canParse(value)) return false;
    const url = new URL(value);
    return (
      (url.protocol === 'http:' || url.protocol === 'https:') &&
      !url.username &&
      !url.password &&
      !url.search &&
      !url.hash &&
      !value.includes('?') &&
      !value.includes('#') &&
      !value.endsWith('/')
    );
  },
  { error: 'must be an absolute http(s) URL without a trailing slash, query or fragment, such as https://api.example.com' },
);

/** A secret of 32 random bytes written as 64 hex digits (`openssl rand -hex 32`). */
export const hexSecret = z
  .string()
  .trim()
  .regex(/^[0-9a-fA-F]{64}$/, { error: 'must be 32 random bytes as 64 hex digits (openssl rand -hex 32)' });

/** A role name: letters, digits, _ and -, as in X-Gql-Role. */
export const roleName = z
  .string()
  .trim()
  .regex(/^[A-Za-z][A-Za-z0-9_-]{0,63}$/, { error: 'must be a role name such as user' });

/** A URL path such as /docs: a slash, then letters, digits and . _ ~ - /, no trailing slash. */
export const urlPath = nonEmpty.regex(/^\/([A-Za-z0-9._~-]+(\/[A-Za-z0-9._~-]+)*)?$/, {
  error: 'must be a path such as /docs: a leading slash, letters, digits and . _ ~ - /, no trailing slash',
});

/** Comma-separated entries, trimmed, empty ones dropped, each kept once. */
export const distinctList = (value: string) => [
  ...new Set(
    value
      .split(',')
      .map((entry) => entry.trim())
      .filter(Boolean),
  ),
];

/**
 * Secrets the operator chooses must be this long in production: whoever holds what one signs (a
 * signed link, a webhook delivery) can guess at it offline. Secrets of a fixed format (the JWT
 * keys, the 64-hex-digit keys) or issued by someone else (provider API keys, Stripe's whsec_
 * secret, the SMS gateway's token, the SMTP password) are not held to it.
 */
export const PRODUCTION_SECRET_LENGTH = 32;

/** The problem of an operator's secret too short for production; the message names the variable only. */
export function productionSecretProblem(variable: string, value: string | undefined, env: string): string[] {
  return env === 'production' && value !== undefined && value.length < PRODUCTION_SECRET_LENGTH
    ? [`${variable} must be at least ${PRODUCTION_SECRET_LENGTH} characters when NODE_ENV=production (openssl rand -hex 32 makes one)`]
    : [];
}
