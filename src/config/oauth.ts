import type { Area } from './area';
import type { Environment, PatternSettings } from './environment';
import { OAUTH_PROVIDER_NAMES, OAUTH_PROVIDERS } from './oauth-providers';
import { integer } from './validators';

export const oauthVariables = {
  AUTH_PROVIDER_STATE_TTL_SECONDS: integer(30, 3_600)
    .default(600)
    .describe(
      'how long a sign-in with a provider may take: its `state`, and the HttpOnly cookie `plinth_oauth_state` that binds it to the browser that started it',
    ),
};

export const oauth = {
  name: 'oauth',
  title: 'External identity providers (auth)',
  variables: oauthVariables,
  patterns: [
    {
      variable: 'AUTH_PROVIDER_<NAME>_ENABLED',
      default: '`false`',
      description: `signs in with the provider \`<NAME>\` (${OAUTH_PROVIDER_NAMES.map((name) => `\`${name.toUpperCase()}\``).join(', ')}) at \`/auth/signin/provider/<name>\``,
    },
    {
      variable: 'AUTH_PROVIDER_<NAME>_<CREDENTIAL>',
      default: 'none',
      description: `required when the provider is enabled: ${OAUTH_PROVIDER_NAMES.map((name) => `\`${name.toUpperCase()}\` ${OAUTH_PROVIDERS[name].join(', ')}`).join('; ')}`,
    },
    {
      variable: 'AUTH_PROVIDER_<NAME>_AUTH_URL',
      default: "the provider's",
      description: "the provider's endpoints elsewhere (also `_TOKEN_URL`, `_API_URL`): http(s) URLs, such as a local server in tests",
    },
  ],
  /** config.auth.providers (AUTH_PROVIDER_<NAME>_*: the enabled providers) and the state's lifetime. */
  settings: (values: Environment, found: PatternSettings) => ({
    providers: found.oauthProviders,
    providerStateTtlSeconds: values.AUTH_PROVIDER_STATE_TTL_SECONDS,
  }),
} satisfies Area;
