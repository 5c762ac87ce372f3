import { actions } from './actions';
import { admin } from './admin';
import { apidocs } from './apidocs';
import { deploy } from './deploy';
import type { Area } from './area';
import { auth } from './auth';
import { database } from './database';
import { environmentSchema, patternSettingsFromEnv, type Environment, type PatternSettings } from './environment';
import { errortracking } from './errortracking';
import { events } from './events';
import { files } from './files';
import { graphql } from './graphql';
import { jobs } from './jobs';
import { mail } from './mail';
import { memory } from './memory';
import { mfa } from './mfa';
import { newsletter } from './newsletter';
import { oauth } from './oauth';
import { observability } from './observability';
import { outboundHttp } from './outbound-http';
import { payments } from './payments';
import { rateLimits } from './rate-limits';
import { server } from './server';

export type { JwtSecretConfig } from './jwt-secret';
export type { CustomService } from './custom-services';
export type { OAuthProviderName, OAuthProviderSettings } from './oauth-providers';
export { TRUSTED_PROXY_NAMES, type ProcessRole, type TrustProxy } from './server';
export type { MetricsAccess } from './observability';
export { queueVariableName, queueSettingProblem, type QueueSettings } from './jobs';
export { EXTERNAL_WEBHOOK_SCHEMES, TIMESTAMPED_SCHEMES, type ExternalProvider, type ExternalWebhookScheme } from './events';
export { PAYMENT_PROVIDERS, type PaymentProviderName } from './payments';
export { API_DOCS_THEMES, type ApiDocsTheme } from './apidocs';
export { DEPLOY_ENVIRONMENTS, type DeployEnvironment } from './deploy';
export { DEFAULT_FILE_TYPES } from './files';

/** The areas, in the order of the reference (docs/configuration.md) and of their problems. */
export const AREAS: readonly Area[] = [
  server,
  database,
  graphql,
  auth,
  mfa,
  oauth,
  errortracking,
  mail,
  memory,
  observability,
  rateLimits,
  outboundHttp,
  jobs,
  events,
  actions,
  apidocs,
  files,
  payments,
  newsletter,
  admin,
  deploy,
];

/** Config: each area's settings, from its variables. */
function configOf(values: Environment, found: PatternSettings, env: Record<string, string>) {
  return {
    ...server.settings(values),
    ...observability.settings(values),
    ...memory.settings(values),
    ...database.settings(values),
    ...graphql.settings(values),
    ...auth.settings(values, found),
    ...errortracking.settings(values),
    ...mail.settings(values),
    ...files.settings(values),
    ...actions.settings(values, found),
    ...rateLimits.settings(values),
    ...outboundHttp.settings(values),
    ...jobs.settings(values, found),
    ...events.settings(values, found),
    ...apidocs.settings(values, found, env),
    ...payments.settings(values, found),
    ...newsletter.settings(values),
    ...admin.settings(values, found, env),
    ...deploy.settings(values),
  };
}

/** The settings of every area, as loadConfig returns them. */
export type Config = ReturnType<typeof configOf>;
export type WebSocketLimits = Config['graphql']['wsLimits'];
export type NewsletterConfig = Config['newsletter'];
export type PaymentsConfig = Config['payments'];
export type ErrorTrackingConfig = Config['errors'];
export type MfaSettings = Config['auth']['mfa'];
export type SmsGatewaySettings = NonNullable<MfaSettings['sms']['gateway']>;
export type SmtpSettings = NonNullable<Config['mail']['smtp']>;
export type JobsConfig = Config['jobs'];
export type EventsConfig = Config['events'];
export type AdminConfig = Config['admin'];

/** Variables whose values are never repeated in a message (nor shown by the admin API). */
export const SECRET_NAME = /SECRET|TOKEN|PASSWORD|KEY/;

export class ConfigError extends Error {
  constructor(readonly problems: string[]) {
    super(`Invalid configuration:\n${problems.map((problem) => `  - ${problem}`).join('\n')}`);
    this.name = 'ConfigError';
  }
}

/** Reads and validates the configuration; throws ConfigError naming every bad variable. */
export function loadConfig(env: NodeJS.ProcessEnv = process.env): Config {
  // Empty strings count as unset, as in most .env tooling.
  const present = Object.fromEntries(Object.entries(env).filter((entry): entry is [string, string] => entry[1] !== '' && entry[1] !== undefined));
  const parsed = environmentSchema.safeParse(present);
  const problems: string[] = [];
  if (!parsed.success) {
    for (const issue of parsed.error.issues) {
      const variable = String(issue.path[0]);
      const shown = SECRET_NAME.test(variable) ? '' : ` (got ${JSON.stringify(present[variable] ?? '')})`;
      problems.push(`${issue.path.join('.')} ${issue.message}${shown}`);
    }
  }
  const found = patternSettingsFromEnv(present, problems);
  if (!parsed.success || problems.length > 0) throw new ConfigError(problems);
  // Rules between variables, once each variable is valid.
  for (const area of AREAS) problems.push(...(area.problems?.(parsed.data, present) ?? []));
  if (problems.length > 0) throw new ConfigError(problems);
  return configOf(parsed.data, found, present);
}
