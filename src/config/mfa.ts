import { z } from 'zod';
import type { Area } from './area';
import type { Environment } from './environment';
import { baseUrl, boolean, distinctList, hexSecret, integer, nonEmpty, oneLine, roleName } from './validators';

const SMS_GATEWAY = ['AUTH_SMS_GATEWAY_ACCOUNT_SID', 'AUTH_SMS_GATEWAY_AUTH_TOKEN', 'AUTH_SMS_GATEWAY_MESSAGING_SERVICE_ID'] as const;

// Second factors (spec 2 §1.2, §2.4): TOTP, its secrets encrypted at rest, roles that require one, codes by SMS.
export const mfaVariables = {
  AUTH_MFA_TOTP_ENABLED: boolean.default(false).describe('users may enrol an authenticator app (TOTP)'),
  AUTH_MFA_TOTP_ISSUER: oneLine.default('Plinth').describe('the name the authenticator app shows'),
  AUTH_ENCRYPTION_KEY: hexSecret.optional().meta({
    description: 'encrypts TOTP secrets at rest: 64 hex digits (`openssl rand -hex 32`); required with TOTP in production',
    unset: 'generated under `PLINTH_DATA_DIR` outside production',
  }),
  AUTH_MFA_REQUIRED_ROLES: z
    .string()
    .transform(distinctList)
    .refine((roles) => roles.every((role) => roleName.safeParse(role).success), { error: 'must be a comma-separated list of role names such as admin' })
    .default([])
    .describe('roles a session carries only once the user has a second factor on, comma-separated'),
  AUTH_MFA_MAX_ATTEMPTS_PER_TICKET: integer(1, 100).default(5).describe('wrong codes one sign-in ticket (or one SMS code) allows before it is void'),
  AUTH_RATE_LIMIT_MFA_BURST: integer(1, 1_000_000).default(10).describe('second-factor codes tried per user (whatever the address) and window'),
  AUTH_RATE_LIMIT_MFA_INTERVAL_SECONDS: integer(1, 86_400).default(300).describe('the window, in seconds, of `AUTH_RATE_LIMIT_MFA_BURST`'),
  AUTH_MFA_SMS_ENABLED: boolean.default(false).describe('codes by SMS through the gateway (`AUTH_SMS_*` required then)'),
  AUTH_SMS_PROVIDER: z
    .enum(['twilio'], { error: 'must be twilio' })
    .optional()
    .meta({ description: 'the SMS gateway: `twilio` (its Messages API)', unset: 'none' }),
  AUTH_SMS_GATEWAY_ACCOUNT_SID: nonEmpty.optional().meta({ description: "the gateway's account id", unset: 'none' }),
  AUTH_SMS_GATEWAY_AUTH_TOKEN: nonEmpty.optional().meta({ description: "the gateway's token", unset: 'none' }),
  AUTH_SMS_GATEWAY_MESSAGING_SERVICE_ID: nonEmpty.optional().meta({ description: 'the messaging service the codes are sent from', unset: 'none' }),
  AUTH_SMS_GATEWAY_API_URL: baseUrl.default('https://api.twilio.com').describe("the gateway's API"),
  AUTH_SMS_CODE_TTL_SECONDS: integer(60, 3_600).default(300).describe('how long an SMS code is valid'),
  AUTH_RATE_LIMIT_SMS_BURST: integer(1, 1_000_000).default(5).describe('SMS codes sent per phone number and window'),
  AUTH_RATE_LIMIT_SMS_INTERVAL_SECONDS: integer(1, 86_400).default(3_600).describe('the window, in seconds, of both SMS limits'),
  AUTH_RATE_LIMIT_SMS_ADDRESS_BURST: integer(1, 1_000_000).default(20).describe('SMS codes sent per client address and window'),
};

/** The limits of second factors, among the auth service's. */
export function mfaRateLimits(values: Environment) {
  return {
    mfa: { points: values.AUTH_RATE_LIMIT_MFA_BURST, durationSeconds: values.AUTH_RATE_LIMIT_MFA_INTERVAL_SECONDS },
    sms: { points: values.AUTH_RATE_LIMIT_SMS_BURST, durationSeconds: values.AUTH_RATE_LIMIT_SMS_INTERVAL_SECONDS },
    smsAddress: { points: values.AUTH_RATE_LIMIT_SMS_ADDRESS_BURST, durationSeconds: values.AUTH_RATE_LIMIT_SMS_INTERVAL_SECONDS },
  };
}

export const mfa = {
  name: 'mfa',
  title: 'Second factors (auth)',
  variables: mfaVariables,
  problems: (values: Environment) => {
    const problems: string[] = [];
    if (values.NODE_ENV === 'production' && values.AUTH_MFA_TOTP_ENABLED && !values.AUTH_ENCRYPTION_KEY) {
      problems.push('AUTH_ENCRYPTION_KEY is required when AUTH_MFA_TOTP_ENABLED=true and NODE_ENV=production (it encrypts the TOTP secrets)');
    }
    if (values.AUTH_MFA_REQUIRED_ROLES.length > 0 && !values.AUTH_MFA_TOTP_ENABLED && !values.AUTH_MFA_SMS_ENABLED) {
      problems.push('AUTH_MFA_REQUIRED_ROLES needs a second factor users can enrol: set AUTH_MFA_TOTP_ENABLED=true');
    }
    if (values.AUTH_MFA_SMS_ENABLED) {
      if (!values.AUTH_SMS_PROVIDER) problems.push('AUTH_SMS_PROVIDER is required when AUTH_MFA_SMS_ENABLED=true (twilio)');
      for (const variable of SMS_GATEWAY) if (!values[variable]) problems.push(`${variable} is required when AUTH_MFA_SMS_ENABLED=true`);
    }
    return problems;
  },
  /** config.auth.mfa */
  settings: (values: Environment) => ({
    totpEnabled: values.AUTH_MFA_TOTP_ENABLED,
    totpIssuer: values.AUTH_MFA_TOTP_ISSUER,
    /** Generated under the data folder outside production (dev-secrets.ts). */
    encryptionKey: values.AUTH_ENCRYPTION_KEY?.toLowerCase(),
    requiredRoles: values.AUTH_MFA_REQUIRED_ROLES,
    maxAttemptsPerTicket: values.AUTH_MFA_MAX_ATTEMPTS_PER_TICKET,
    sms: {
      enabled: values.AUTH_MFA_SMS_ENABLED,
      /** Set whenever SMS is on. */
      gateway:
        values.AUTH_SMS_PROVIDER && values.AUTH_SMS_GATEWAY_ACCOUNT_SID && values.AUTH_SMS_GATEWAY_AUTH_TOKEN && values.AUTH_SMS_GATEWAY_MESSAGING_SERVICE_ID
          ? {
              provider: values.AUTH_SMS_PROVIDER,
              accountSid: values.AUTH_SMS_GATEWAY_ACCOUNT_SID,
              authToken: values.AUTH_SMS_GATEWAY_AUTH_TOKEN,
              messagingServiceId: values.AUTH_SMS_GATEWAY_MESSAGING_SERVICE_ID,
              apiUrl: values.AUTH_SMS_GATEWAY_API_URL,
            }
          : undefined,
      codeTtlSeconds: values.AUTH_SMS_CODE_TTL_SECONDS,
    },
  }),
} satisfies Area;
