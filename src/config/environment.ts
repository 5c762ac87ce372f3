import { z } from 'zod';
import { actionsVariables } from './actions';
import { adminVariables } from './admin';
import { apidocsVariables } from './apidocs';
import { authVariables } from './auth';
import { customServicesFromEnv } from './custom-services';
import { databaseVariables } from './database';
import { deployVariables } from './deploy';
import { errortrackingVariables } from './errortracking';
import { eventsVariables, externalProvidersFromEnv } from './events';
import { filesVariables } from './files';
import { graphqlVariables } from './graphql';
import { jobsVariables, queueSettingsFromEnv } from './jobs';
import { mailVariables } from './mail';
import { memoryVariables } from './memory';
import { mfaVariables } from './mfa';
import { newsletterVariables } from './newsletter';
import { oauthVariables } from './oauth';
import { oauthProvidersFromEnv } from './oauth-providers';
import { observabilityVariables } from './observability';
import { outboundHttpVariables } from './outbound-http';
import { paymentsVariables, productIdsFromEnv } from './payments';
import { rateLimitsVariables } from './rate-limits';
import { serverVariables } from './server';

/** Every variable of every area, validated together: a problem is reported under its variable's name. */
export const environmentSchema = z.object({
  ...serverVariables,
  ...databaseVariables,
  ...graphqlVariables,
  ...authVariables,
  ...mfaVariables,
  ...oauthVariables,
  ...errortrackingVariables,
  ...mailVariables,
  ...memoryVariables,
  ...observabilityVariables,
  ...rateLimitsVariables,
  ...outboundHttpVariables,
  ...jobsVariables,
  ...eventsVariables,
  ...actionsVariables,
  ...apidocsVariables,
  ...filesVariables,
  ...paymentsVariables,
  ...newsletterVariables,
  ...adminVariables,
  ...deployVariables,
});

/** The validated variables, each of its own type (a number, a list, ...). */
export type Environment = z.output<typeof environmentSchema>;

/** Families of variables read by pattern (CS_<N>, JOBS_<QUEUE>_<SETTING>, ...), validated where they are read. */
export function patternSettingsFromEnv(env: Record<string, string>, problems: string[]) {
  const services = customServicesFromEnv(env);
  problems.push(...services.problems);
  return {
    customServices: services.services,
    queues: queueSettingsFromEnv(env, problems),
    products: productIdsFromEnv(env, problems),
    externalProviders: externalProvidersFromEnv(env, problems),
    oauthProviders: oauthProvidersFromEnv(env, problems),
  };
}

export type PatternSettings = ReturnType<typeof patternSettingsFromEnv>;
