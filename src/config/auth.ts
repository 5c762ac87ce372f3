import { z } from 'zod';
import { ADMIN_ROLE } from '../common/roles';
import type { Area } from './area';
import type { Environment, PatternSettings } from './environment';
import { jwtSecretSchema } from './jwt-secret';
import { mfa, mfaRateLimits } from './mfa';
import { oauth } from './oauth';
import { owaspMinimumMemoryKib } from './password-hash';
import { publicUrlOf } from './server';
import { baseUrl, boolean, distinctList, integer, nonEmpty, roleName } from './validators';

/** AUTH_CLIENT_URL and AUTH_ALLOWED_REDIRECT_URLS entries: an absolute URL, `*` allowed for one host label. */
const redirectBase = nonEmpty.refine(
  (value) => {
    const probe = value.replace(/\*/g, 'wildcard');
    if (!URL.canParse(probe)) return false;
    const url = new URL(probe);
    return !url.username && !url.password && !url.hash && url.host !== '';
  },
  { error: 'must be an absolute URL such as https://app.example.com (a * stands for one host label)' },
);

/** AUTH_JWT_SECRET: a raw key of 32 bytes or more, or the engine's JSON object (HS256, HS384 or HS512). */
const authJwtSecret = z.string().transform((text, ctx): { type?: 'HS256' | 'HS384' | 'HS512'; key: string; claims_namespace?: string } => {
  if (!text.trimStart().startsWith('{')) {
    if (Buffer.byteLength(text) < 32) ctx.addIssue({ code: 'custom', message: 'must be at least 32 bytes' });
    return { key: text };
  }
  const parsed = jwtSecretSchema.safeParse(text);
  if (!parsed.success) {
    ctx.addIssue({
      code: 'custom',
      message: `must be a key of 32+ bytes or a JSON object such as {"type":"HS256","key":"..."}: ${parsed.error.issues[0].message}`,
    });
    return z.NEVER;
  }
  const { type, key } = parsed.data;
  // Only a namespace the object names itself replaces the engine's.
  const { claims_namespace } = JSON.parse(text) as { claims_namespace?: string };
  if (type !== 'HS256' && type !== 'HS384' && type !== 'HS512') {
    ctx.addIssue({ code: 'custom', message: 'type must be HS256, HS384 or HS512: the auth service signs with a shared secret' });
    return z.NEVER;
  }
  return { type, key, claims_namespace };
});

const burst = (points: number, what: string) => integer(1, 1_000_000).default(points).describe(`requests per client address and window: ${what}`);
const interval = (seconds: number, what: string) => integer(1, 86_400).default(seconds).describe(`the window, in seconds, of ${what}`);

export const authVariables = {
  AUTH_SERVER_URL: baseUrl.optional().meta({ description: 'address of the auth service (`{auth_url}` in the spec)', unset: '`<PLINTH_PUBLIC_URL>/auth`' }),
  AUTH_PASSWORD_MIN_LENGTH: integer(1, 1024).default(8).describe('shortest accepted password'),
  AUTH_PASSWORD_MAX_LENGTH: integer(8, 4096).default(256).describe('longest accepted password (not below `AUTH_PASSWORD_MIN_LENGTH`)'),
  // argon2id's cost; the default is libsodium's interactive profile (64 MiB, 2 passes), above OWASP's minimum.
  AUTH_PASSWORD_HASH_MEMORY_KIB: integer(7_168, 4_194_304)
    .default(65_536)
    .describe(
      "argon2id's memory for new password hashes (libsodium's interactive profile; below OWASP's minimum for the iterations is refused); a sign-in replaces a hash made at another cost",
    ),
  AUTH_PASSWORD_HASH_ITERATIONS: integer(1, 64).default(2).describe("argon2id's passes for new password hashes"),
  AUTH_PASSWORD_HASH_PARALLELISM: integer(1, 16).default(1).describe("argon2id's lanes for new password hashes"),
  AUTH_INVITATION_TTL_SECONDS: integer(60, 365 * 86_400)
    .default(7 * 86_400)
    .describe('how long an invitation link from bulkCreateUsers stays valid'),
  AUTH_JWT_SECRET: authJwtSecret.optional().meta({
    description: "signing key of the auth service's tokens (a 32+ byte key, or the engine's JSON object, HS*)",
    unset: 'the key of `GQL_GRAPHQL_JWT_SECRET`',
  }),
  AUTH_ACCESS_TOKEN_EXPIRES_IN: integer(10, 7 * 86_400)
    .optional()
    .meta({ description: 'access token lifetime, seconds; it and its alias must agree when both are set', unset: '`900`' }),
  AUTH_TOKEN_EXPIRY_SECONDS: integer(10, 7 * 86_400)
    .optional()
    .meta({ description: 'alias of `AUTH_ACCESS_TOKEN_EXPIRES_IN`', unset: '`900`' }),
  AUTH_REFRESH_TOKEN_EXPIRES_IN: integer(1, 10 * 525_600)
    .default(43_200)
    .describe('refresh token lifetime, in minutes'),
  AUTH_REFRESH_TOKEN_REUSE_GRACE_SECONDS: integer(0, 300)
    .default(5)
    .describe("how long a rotated refresh token may come back (a client's retry) before its session is revoked as stolen"),
  AUTH_RECENT_SIGN_IN_SECONDS: integer(0, 365 * 86_400)
    .default(86_400)
    .describe(
      'a change of password or address with a bearer token needs a session signed in this recently (403 `reauthentication-required` otherwise; `0`: any live session)',
    ),
  AUTH_EMAIL_SIGNIN_EMAIL_VERIFIED_REQUIRED: boolean.default(true).describe('sign-in needs a verified address'),
  AUTH_DISABLE_SIGNUP: boolean
    .default(false)
    .describe('sign-up refused on every path (`/auth` sign-up, anonymous, passwordless and provider sign-in of a new address, registerUser)'),
  AUTH_PASSWORD_HIBP_ENABLED: boolean.default(false).describe('refuse breached passwords (k-anonymity range API; accepted when it is down)'),
  AUTH_PASSWORD_HIBP_API_URL: baseUrl.default('https://api.pwnedpasswords.com').describe('the breached-passwords range API'),
  AUTH_PASSWORD_HIBP_TIMEOUT_MS: integer(100, 60_000).default(3_000).describe('how long the breached-passwords API may take before the password is accepted'),
  AUTH_ANONYMOUS_USERS_ENABLED: boolean.default(false).describe('anonymous sessions'),
  AUTH_GRAVATAR_ENABLED: boolean.default(true).describe('Gravatar `avatarUrl` for new users'),
  AUTH_GRAVATAR_DEFAULT: z
    .enum(['404', 'mp', 'identicon', 'monsterid', 'wavatar', 'retro', 'robohash', 'blank'])
    .default('blank')
    .describe("Gravatar's image for an address it does not know"),
  AUTH_GRAVATAR_RATING: z.enum(['g', 'pg', 'r', 'x']).default('g').describe('the highest Gravatar rating shown'),
  AUTH_CLIENT_URL: redirectBase.optional().meta({ description: 'the app: the default `redirectTo` target', unset: '`PLINTH_PUBLIC_URL`' }),
  AUTH_ALLOWED_REDIRECT_URLS: z
    .string()
    .transform((value) =>
      value
        .split(',')
        .map((entry) => entry.trim())
        .filter(Boolean),
    )
    .refine((entries) => entries.every((entry) => redirectBase.safeParse(entry).success), {
      error: 'must be a comma-separated list of URLs such as https://app.example.com,https://*.example.com/callback',
    })
    .optional()
    .meta({ description: 'further comma-separated `redirectTo` targets besides `AUTH_CLIENT_URL` (`*` is one host label)', unset: 'none' }),
  AUTH_EMAIL_PASSWORDLESS_EMAIL_ENABLED: boolean.default(false).describe('sign-in links by mail (magic links)'),
  AUTH_DEFAULT_ROLE: roleName.default('user').describe("a new user's role (one of `AUTH_ALLOWED_ROLES`)"),
  AUTH_ALLOWED_ROLES: z
    .string()
    .default('user,me')
    .transform(distinctList)
    .refine((roles) => roles.length > 0 && roles.every((role) => roleName.safeParse(role).success), {
      error: 'must be a comma-separated list of role names such as user,me,premium',
    })
    .describe('the roles a sign-up may ask for (never `admin`: start-up refuses it; grant it with `plinth auth user role add`)'),
  AUTH_CUSTOM_CLAIMS_WEBHOOK: z
    .url({ protocol: /^https?$/, error: 'must be an http(s) URL' })
    .optional()
    .meta({ description: "URL POSTed `{userId, claims}` for each token's extra `x-gql-*` claims", unset: 'none' }),
  AUTH_CUSTOM_CLAIMS_WEBHOOK_TIMEOUT_MS: integer(50, 60_000).default(2_000).describe('how long the custom claims webhook may take'),
  AUTH_PORT: integer(1, 65535)
    .optional()
    .meta({ description: 'also serve the auth service at the root of `127.0.0.1:<port>` (4000 behind `auth.<domain>`)', unset: 'none' }),
  AUTH_TICKET_VERIFY_EMAIL_TTL_SECONDS: integer(60, 365 * 86_400)
    .default(7 * 86_400)
    .describe('lifetime of a mailed address-verification ticket'),
  AUTH_TICKET_PASSWORD_RESET_TTL_SECONDS: integer(60, 30 * 86_400)
    .default(3_600)
    .describe('lifetime of a mailed password-reset ticket'),
  AUTH_TICKET_EMAIL_CHANGE_TTL_SECONDS: integer(60, 30 * 86_400)
    .default(3_600)
    .describe('lifetime of a mailed address-change ticket'),
  AUTH_TICKET_PASSWORDLESS_TTL_SECONDS: integer(60, 30 * 86_400)
    .default(3_600)
    .describe('lifetime of a mailed sign-in link'),
  AUTH_TICKET_MFA_TTL_SECONDS: integer(30, 86_400).default(300).describe('lifetime of the ticket between a password and its second factor'),
  AUTH_CLEANUP_INTERVAL_SECONDS: integer(1, 86_400).default(3_600).describe('how often expired refresh tokens and tickets are deleted'),
  AUTH_RATE_LIMIT_GLOBAL_BURST: burst(100, 'every `/auth` request'),
  AUTH_RATE_LIMIT_GLOBAL_INTERVAL_SECONDS: interval(60, '`AUTH_RATE_LIMIT_GLOBAL_BURST`'),
  AUTH_RATE_LIMIT_BRUTE_FORCE_BURST: burst(10, 'sign-in attempts and other guesses'),
  AUTH_RATE_LIMIT_BRUTE_FORCE_INTERVAL_SECONDS: interval(300, '`AUTH_RATE_LIMIT_BRUTE_FORCE_BURST`'),
  AUTH_RATE_LIMIT_SIGNUPS_BURST: burst(10, 'sign-ups (registerUser included)'),
  AUTH_RATE_LIMIT_SIGNUPS_INTERVAL_SECONDS: interval(300, '`AUTH_RATE_LIMIT_SIGNUPS_BURST`'),
  AUTH_RATE_LIMIT_EMAIL_BURST: burst(10, 'requests that send a mail'),
  AUTH_RATE_LIMIT_EMAIL_INTERVAL_SECONDS: interval(3_600, '`AUTH_RATE_LIMIT_EMAIL_BURST`'),
};

export const auth = {
  name: 'auth',
  title: 'Authentication service (/auth)',
  variables: authVariables,
  problems: (values: Environment) => {
    const problems: string[] = [];
    if (values.AUTH_PASSWORD_MAX_LENGTH < values.AUTH_PASSWORD_MIN_LENGTH) {
      problems.push('AUTH_PASSWORD_MAX_LENGTH must not be below AUTH_PASSWORD_MIN_LENGTH');
    }
    const minimumHashMemory = owaspMinimumMemoryKib(values.AUTH_PASSWORD_HASH_ITERATIONS);
    if (values.AUTH_PASSWORD_HASH_MEMORY_KIB < minimumHashMemory) {
      problems.push(
        `AUTH_PASSWORD_HASH_MEMORY_KIB must be at least ${minimumHashMemory} with AUTH_PASSWORD_HASH_ITERATIONS=${values.AUTH_PASSWORD_HASH_ITERATIONS} (OWASP's minimum for argon2id)`,
      );
    }
    if (
      values.AUTH_ACCESS_TOKEN_EXPIRES_IN !== undefined &&
      values.AUTH_TOKEN_EXPIRY_SECONDS !== undefined &&
      values.AUTH_ACCESS_TOKEN_EXPIRES_IN !== values.AUTH_TOKEN_EXPIRY_SECONDS
    ) {
      problems.push('AUTH_ACCESS_TOKEN_EXPIRES_IN and AUTH_TOKEN_EXPIRY_SECONDS (its alias) must not differ; set one');
    }
    // A sign-up may ask for any role of the list, and admin passes every permission check.
    if (values.AUTH_ALLOWED_ROLES.includes(ADMIN_ROLE)) {
      problems.push(`AUTH_ALLOWED_ROLES must not contain ${ADMIN_ROLE}: any sign-up could ask for it; grant it with plinth auth user role add`);
    }
    if (!values.AUTH_ALLOWED_ROLES.includes(values.AUTH_DEFAULT_ROLE)) {
      problems.push(`AUTH_DEFAULT_ROLE (${values.AUTH_DEFAULT_ROLE}) must be one of AUTH_ALLOWED_ROLES`);
    }
    return problems;
  },
  settings: (values: Environment, found: PatternSettings) => {
    const publicUrl = publicUrlOf(values);
    const rateLimit = (points: number, durationSeconds: number) => ({ points, durationSeconds });
    return {
      auth: {
        passwordMinLength: values.AUTH_PASSWORD_MIN_LENGTH,
        passwordMaxLength: values.AUTH_PASSWORD_MAX_LENGTH,
        passwordHash: {
          memoryKib: values.AUTH_PASSWORD_HASH_MEMORY_KIB,
          iterations: values.AUTH_PASSWORD_HASH_ITERATIONS,
          parallelism: values.AUTH_PASSWORD_HASH_PARALLELISM,
        },
        serverUrl: values.AUTH_SERVER_URL ?? `${publicUrl}/auth`,
        invitationTtlSeconds: values.AUTH_INVITATION_TTL_SECONDS,
        /** Unset: the engine's GQL_GRAPHQL_JWT_SECRET signs (one secret for both sides). */
        jwtSecret: values.AUTH_JWT_SECRET,
        accessTokenExpiresInSeconds: values.AUTH_ACCESS_TOKEN_EXPIRES_IN ?? values.AUTH_TOKEN_EXPIRY_SECONDS ?? 900,
        refreshTokenExpiresInMinutes: values.AUTH_REFRESH_TOKEN_EXPIRES_IN,
        refreshTokenReuseGraceSeconds: values.AUTH_REFRESH_TOKEN_REUSE_GRACE_SECONDS,
        recentSignInSeconds: values.AUTH_RECENT_SIGN_IN_SECONDS,
        emailVerifiedRequired: values.AUTH_EMAIL_SIGNIN_EMAIL_VERIFIED_REQUIRED,
        signupDisabled: values.AUTH_DISABLE_SIGNUP,
        hibp: { enabled: values.AUTH_PASSWORD_HIBP_ENABLED, apiUrl: values.AUTH_PASSWORD_HIBP_API_URL, timeoutMs: values.AUTH_PASSWORD_HIBP_TIMEOUT_MS },
        anonymousUsersEnabled: values.AUTH_ANONYMOUS_USERS_ENABLED,
        gravatar: { enabled: values.AUTH_GRAVATAR_ENABLED, default: values.AUTH_GRAVATAR_DEFAULT, rating: values.AUTH_GRAVATAR_RATING },
        clientUrl: values.AUTH_CLIENT_URL ?? publicUrl,
        /** Where redirectTo may point: the app, then AUTH_ALLOWED_REDIRECT_URLS. */
        allowedRedirectUrls: [values.AUTH_CLIENT_URL ?? publicUrl, ...(values.AUTH_ALLOWED_REDIRECT_URLS ?? [])],
        passwordlessEmailEnabled: values.AUTH_EMAIL_PASSWORDLESS_EMAIL_ENABLED,
        defaultRole: values.AUTH_DEFAULT_ROLE,
        allowedRoles: values.AUTH_ALLOWED_ROLES,
        customClaimsWebhook: values.AUTH_CUSTOM_CLAIMS_WEBHOOK
          ? { url: values.AUTH_CUSTOM_CLAIMS_WEBHOOK, timeoutMs: values.AUTH_CUSTOM_CLAIMS_WEBHOOK_TIMEOUT_MS }
          : undefined,
        port: values.AUTH_PORT,
        /** Lifetime of each kind of single-use ticket, in seconds. */
        ticketTtlSeconds: {
          verifyEmail: values.AUTH_TICKET_VERIFY_EMAIL_TTL_SECONDS,
          passwordReset: values.AUTH_TICKET_PASSWORD_RESET_TTL_SECONDS,
          emailChange: values.AUTH_TICKET_EMAIL_CHANGE_TTL_SECONDS,
          passwordless: values.AUTH_TICKET_PASSWORDLESS_TTL_SECONDS,
          mfa: values.AUTH_TICKET_MFA_TTL_SECONDS,
        },
        cleanupIntervalSeconds: values.AUTH_CLEANUP_INTERVAL_SECONDS,
        rateLimits: {
          global: rateLimit(values.AUTH_RATE_LIMIT_GLOBAL_BURST, values.AUTH_RATE_LIMIT_GLOBAL_INTERVAL_SECONDS),
          bruteForce: rateLimit(values.AUTH_RATE_LIMIT_BRUTE_FORCE_BURST, values.AUTH_RATE_LIMIT_BRUTE_FORCE_INTERVAL_SECONDS),
          signups: rateLimit(values.AUTH_RATE_LIMIT_SIGNUPS_BURST, values.AUTH_RATE_LIMIT_SIGNUPS_INTERVAL_SECONDS),
          email: rateLimit(values.AUTH_RATE_LIMIT_EMAIL_BURST, values.AUTH_RATE_LIMIT_EMAIL_INTERVAL_SECONDS),
          ...mfaRateLimits(values),
        },
        mfa: mfa.settings(values),
        ...oauth.settings(values, found),
      },
    };
  },
} satisfies Area;
