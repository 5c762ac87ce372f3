/**
 * The 13 external identity providers of spec 2 §2.4, by the lower-case name of their sign-in
 * path, with the credential suffixes each requires after `AUTH_PROVIDER_<NAME>`.
 */
export const OAUTH_PROVIDERS = {
  google: ['CLIENT_ID', 'CLIENT_SECRET'],
  github: ['CLIENT_ID', 'CLIENT_SECRET'],
  gitlab: ['CLIENT_ID', 'CLIENT_SECRET'],
  bitbucket: ['CLIENT_ID', 'CLIENT_SECRET'],
  linkedin: ['CLIENT_ID', 'CLIENT_SECRET'],
  facebook: ['CLIENT_ID', 'CLIENT_SECRET'],
  discord: ['CLIENT_ID', 'CLIENT_SECRET'],
  spotify: ['CLIENT_ID', 'CLIENT_SECRET'],
  twitch: ['CLIENT_ID', 'CLIENT_SECRET'],
  windowslive: ['CLIENT_ID', 'CLIENT_SECRET'],
  apple: ['CLIENT_ID', 'KEY_ID', 'PRIVATE_KEY', 'TEAM_ID'],
  twitter: ['CONSUMER_KEY', 'CONSUMER_SECRET'],
  workos: ['CLIENT_ID', 'CLIENT_SECRET', 'DEFAULT_CONNECTION'],
} as const satisfies Record<string, readonly string[]>;

export type OAuthProviderName = keyof typeof OAUTH_PROVIDERS;
export const OAUTH_PROVIDER_NAMES = Object.keys(OAUTH_PROVIDERS) as OAuthProviderName[];

/** One enabled provider's settings. */
export interface OAuthProviderSettings {
  /** Its credentials by suffix (CLIENT_ID, CLIENT_SECRET, ...). */
  credentials: Record<string, string>;
  /** AUTH_PROVIDER_<NAME>_AUTH_URL, _TOKEN_URL, _API_URL: the provider's endpoints elsewhere (a local server in tests). */
  authUrl: string | undefined;
  tokenUrl: string | undefined;
  apiUrl: string | undefined;
}

const TRUE = /^(true|1|yes|on)$/i;
const FALSE = /^(false|0|no|off)$/i;
const ENDPOINTS = ['AUTH_URL', 'TOKEN_URL', 'API_URL'] as const;

/**
 * The enabled providers from AUTH_PROVIDER_<NAME>_* variables. Each problem names its variable:
 * an enabled provider without a credential, a bad boolean, an endpoint that is not an http(s) URL.
 */
export function oauthProvidersFromEnv(env: NodeJS.ProcessEnv, problems: string[]): Partial<Record<OAuthProviderName, OAuthProviderSettings>> {
  const enabled: Partial<Record<OAuthProviderName, OAuthProviderSettings>> = {};
  for (const name of OAUTH_PROVIDER_NAMES) {
    const prefix = `AUTH_PROVIDER_${name.toUpperCase()}`;
    const flag = env[`${prefix}_ENABLED`]?.trim();
    if (flag === undefined || flag === '' || FALSE.test(flag)) continue;
    if (!TRUE.test(flag)) {
      problems.push(`${prefix}_ENABLED must be true or false`);
      continue;
    }
    const credentials: Record<string, string> = {};
    for (const suffix of OAUTH_PROVIDERS[name]) {
      const value = env[`${prefix}_${suffix}`]?.trim();
      if (!value) problems.push(`${prefix}_${suffix} is required when ${prefix}_ENABLED=true`);
      else credentials[suffix] = value;
    }
    const endpoints: Partial<Record<(typeof ENDPOINTS)[number], string>> = {};
    for (const endpoint of ENDPOINTS) {
      const value = env[`${prefix}_${endpoint}`]?.trim();
      if (!value) continue;
      if (!URL.canParse(value) || !/^https?:$/.test(new URL(value).protocol)) problems.push(`${prefix}_${endpoint} must be an http(s) URL`);
      else endpoints[endpoint] = value.replace(/\/+$/, '');
    }
    enabled[name] = { credentials, authUrl: endpoints.AUTH_URL, tokenUrl: endpoints.TOKEN_URL, apiUrl: endpoints.API_URL };
  }
  return enabled;
}
