import type { Area } from './area';
import type { Environment } from './environment';
import { integer } from './validators';

// Calls Plinth makes to handlers, webhooks and providers.
export const outboundHttpVariables = {
  OUTBOUND_HTTP_CONNECT_TIMEOUT_MS: integer(1, 600_000)
    .default(5_000)
    .describe('how long an outbound call (to handlers, webhooks, providers) may take to connect'),
  OUTBOUND_HTTP_TIMEOUT_MS: integer(1, 3_600_000).default(30_000).describe('how long an outbound call may take, whole'),
  OUTBOUND_HTTP_MAX_RESPONSE_BYTES: integer(1, 1024 * 1024 * 1024)
    .default(10 * 1024 * 1024)
    .describe('largest answer to an outbound call'),
  OUTBOUND_HTTP_MAX_CONNECTIONS_PER_ORIGIN: integer(1, 10_000).default(32).describe('most connections open to one origin at once'),
};

export const outboundHttp = {
  name: 'outbound-http',
  title: 'Outbound HTTP',
  variables: outboundHttpVariables,
  settings: (values: Environment) => ({
    outboundHttp: {
      connectTimeoutMs: values.OUTBOUND_HTTP_CONNECT_TIMEOUT_MS,
      timeoutMs: values.OUTBOUND_HTTP_TIMEOUT_MS,
      maxResponseBytes: values.OUTBOUND_HTTP_MAX_RESPONSE_BYTES,
      maxConnectionsPerOrigin: values.OUTBOUND_HTTP_MAX_CONNECTIONS_PER_ORIGIN,
    },
  }),
} satisfies Area;
