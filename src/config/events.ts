import type { Area } from './area';
import type { Environment, PatternSettings } from './environment';
import { integer, nonEmpty, PRODUCTION_SECRET_LENGTH } from './validators';

/**
 * How a provider signs its webhooks: `hmac-sha256` is the hex HMAC of the body in a configurable
 * header (GitHub's `X-Hub-Signature-256`); the others are the providers' documented schemes, the
 * timestamped ones (stripe, slack, standard-webhooks) checked against a tolerance.
 */
export const EXTERNAL_WEBHOOK_SCHEMES = ['hmac-sha256', 'stripe', 'slack', 'shopify', 'standard-webhooks'] as const;
export type ExternalWebhookScheme = (typeof EXTERNAL_WEBHOOK_SCHEMES)[number];
/** The schemes whose signature covers a timestamp. */
export const TIMESTAMPED_SCHEMES: readonly ExternalWebhookScheme[] = ['stripe', 'slack', 'standard-webhooks'];

export interface ExternalProvider {
  scheme: ExternalWebhookScheme;
  /** The signing secret (standard-webhooks: the key's bytes, decoded from `whsec_<base64>`). */
  secret: string | Buffer;
  /** hmac-sha256: the header carrying the signature (x-hub-signature-256 by default). */
  signatureHeader: string;
  /** hmac-sha256: what comes before the hex digest in that header (sha256= by default). */
  signaturePrefix: string;
  /** hmac-sha256: the header carrying the provider's delivery id (none unless set; x-github-delivery for github). */
  deliveryHeader: string | undefined;
  /** Timestamped schemes: how far the signed timestamp may be from now, in seconds. */
  toleranceSeconds: number;
}

const EXTERNAL_WEBHOOK_VARIABLE = /^EXTERNAL_WEBHOOK_([A-Z0-9_]+?)_(SECRET|SIGNATURE_HEADER|SIGNATURE_PREFIX|DELIVERY_HEADER|SCHEME|TOLERANCE_SECONDS)$/;
const HEADER_NAME = /^[A-Za-z0-9!#$%&'*+.^_`|~-]+$/;
/** The settings only the hmac-sha256 scheme reads (the others' headers are the providers' own). */
const HMAC_SCHEME_SETTINGS = ['SIGNATURE_HEADER', 'SIGNATURE_PREFIX', 'DELIVERY_HEADER'] as const;
/**
 * The longest tolerance: at most the shortest dedup window (1 hour), so a replay inside the
 * tolerance always meets the first delivery's dedup record.
 */
const MAX_TOLERANCE_SECONDS = 3600;

/**
 * EXTERNAL_WEBHOOK_<PROVIDER>_SECRET (required per provider; with the hmac-sha256 scheme, whose
 * secret the operator makes up in GitHub's form, 32 characters or more in production), _SCHEME,
 * _TOLERANCE_SECONDS, and for the hmac-sha256 scheme _SIGNATURE_HEADER, _SIGNATURE_PREFIX and
 * _DELIVERY_HEADER, by provider name in lower case with dashes (`GIT_HUB` -> `git-hub`).
 */
export function externalProvidersFromEnv(env: Record<string, string | undefined>, problems: string[]): Record<string, ExternalProvider> {
  const minimumSecretLength = env.NODE_ENV === 'production' ? PRODUCTION_SECRET_LENGTH : 8;
  const settings: Record<string, Record<string, string>> = {};
  for (const [variable, value] of Object.entries(env)) {
    const match = EXTERNAL_WEBHOOK_VARIABLE.exec(variable);
    if (!match || value === undefined) continue;
    (settings[match[1]] ??= {})[match[2]] = value;
  }
  const providers: Record<string, ExternalProvider> = {};
  for (const [upper, values] of Object.entries(settings)) {
    const name = upper.toLowerCase().replace(/_/g, '-');
    const prefix = `EXTERNAL_WEBHOOK_${upper}`;
    const before = problems.length;
    const scheme = (values.SCHEME ?? 'hmac-sha256').trim().toLowerCase() as ExternalWebhookScheme;
    if (!EXTERNAL_WEBHOOK_SCHEMES.includes(scheme)) {
      problems.push(`${prefix}_SCHEME must be one of ${EXTERNAL_WEBHOOK_SCHEMES.join(', ')} (got ${JSON.stringify(values.SCHEME)})`);
      continue;
    }
    // The other schemes' secrets are issued by their providers, in their own formats.
    const minimumLength = scheme === 'hmac-sha256' ? minimumSecretLength : 8;
    if (!values.SECRET || values.SECRET.length < minimumLength) {
      problems.push(`${prefix}_SECRET must be set to the provider's signing secret (${minimumLength} characters or more)`);
      continue;
    }
    let secret: string | Buffer = values.SECRET;
    if (scheme === 'standard-webhooks') {
      // Standard Webhooks' secrets are `whsec_` and the key in base64; the key's bytes sign.
      const encoded = secret.replace(/^whsec_/, '');
      secret = Buffer.from(encoded, 'base64');
      if (!/^[A-Za-z0-9+/]+={0,2}$/.test(encoded) || secret.length < 16)
        problems.push(`${prefix}_SECRET must be the provider's whsec_<base64> secret (a key of 16 bytes or more)`);
    }
    for (const key of HMAC_SCHEME_SETTINGS) {
      if (values[key] === undefined) continue;
      if (scheme !== 'hmac-sha256')
        problems.push(`${prefix}_${key} applies to the hmac-sha256 scheme only; the ${scheme} scheme reads the provider's own headers`);
      else if (key !== 'SIGNATURE_PREFIX' && !HEADER_NAME.test(values[key]))
        problems.push(`${prefix}_${key} must be an HTTP header name (got ${JSON.stringify(values[key])})`);
    }
    let toleranceSeconds = 300;
    if (values.TOLERANCE_SECONDS !== undefined) {
      toleranceSeconds = Number(values.TOLERANCE_SECONDS);
      if (!TIMESTAMPED_SCHEMES.includes(scheme)) {
        problems.push(`${prefix}_TOLERANCE_SECONDS applies to schemes that sign a timestamp (${TIMESTAMPED_SCHEMES.join(', ')}); ${scheme} signs none`);
      } else if (!/^\d+$/.test(values.TOLERANCE_SECONDS.trim()) || toleranceSeconds < 1 || toleranceSeconds > MAX_TOLERANCE_SECONDS) {
        problems.push(
          `${prefix}_TOLERANCE_SECONDS must be a whole number of seconds from 1 to ${MAX_TOLERANCE_SECONDS} (got ${JSON.stringify(values.TOLERANCE_SECONDS)})`,
        );
      }
    }
    if (problems.length > before) continue;
    providers[name] = {
      scheme,
      secret,
      signatureHeader: (values.SIGNATURE_HEADER ?? 'x-hub-signature-256').toLowerCase(),
      signaturePrefix: values.SIGNATURE_PREFIX ?? 'sha256=',
      deliveryHeader: (values.DELIVERY_HEADER ?? (name === 'github' && scheme === 'hmac-sha256' ? 'x-github-delivery' : undefined))?.toLowerCase(),
      toleranceSeconds,
    };
  }
  return providers;
}

// Event triggers, scheduled events and inbound webhooks (the events module).
export const eventsVariables = {
  EVENTS_CONCURRENCY: integer(1, 10_000).default(100).describe('event deliveries in flight in one process, all triggers together'),
  EVENTS_TRIGGER_CONCURRENCY: integer(1, 10_000)
    .default(20)
    .describe('deliveries in flight in one process for one trigger (or cron trigger), so a slow webhook cannot take every slot'),
  EVENTS_LEASE_MARGIN_SECONDS: integer(1, 86_400).default(30).describe('a claimed event whose process died is taken over this long after its webhook timeout'),
  EVENTS_POLL_INTERVAL_MS: integer(50, 600_000).default(2000).describe('how often due retries and abandoned events are looked for besides the NOTIFY wake-ups'),
  EVENTS_RETRY_SECOND_MS: integer(1, 1000).default(1000).describe('the length of one second of `interval_sec` and `Retry-After` (tests shorten it)'),
  EVENTS_CLEANUP_AFTER_HOURS: integer(0, 100_000)
    .default(168)
    .describe('delivered and dead events (and their invocation logs) older than this are deleted; `0` keeps them'),
  EVENTS_CLEANUP_INTERVAL_SECONDS: integer(1, 86_400).default(3600).describe('how often old events are deleted'),
  EVENTS_CRON_TIME_ZONE: nonEmpty
    .refine((zone) => Intl.supportedValuesOf('timeZone').includes(zone) || zone === 'UTC', {
      error: 'must be an IANA time zone such as UTC or Europe/Paris',
    })
    .default('UTC')
    .describe('the time zone cron schedules are read in'),
  EVENTS_CRON_AHEAD: integer(1, 10_000).default(100).describe('how many upcoming events of each cron trigger are kept generated'),
  EVENTS_MISSED_TOLERANCE_SECONDS: integer(0, 31 * 86_400)
    .default(6 * 3600)
    .describe('a scheduled event more than this late (after downtime) is marked dead instead of fired'),
  // A week: longer than Stripe's three days of retries and GitHub's three days of redeliveries.
  EXTERNAL_WEBHOOK_DEDUP_WINDOW_HOURS: integer(1, 8760)
    .default(168)
    .describe(
      'a delivery whose provider delivery id, or exact body (when the id is not signed), was received within this many hours is answered 200 `duplicate: true` and neither stored nor fired',
    ),
};

export const events = {
  name: 'events',
  title: 'Events and inbound webhooks',
  variables: eventsVariables,
  patterns: [
    {
      variable: 'EXTERNAL_WEBHOOK_<P>_SECRET',
      default: 'none',
      description:
        "a provider whose webhooks `POST /actions/external/<p>` receives (`<P>` upper-case, `_` for `-`): its signing secret (the `hmac-sha256` scheme's 32+ characters in production; `standard-webhooks`: `whsec_<base64>`)",
    },
    {
      variable: 'EXTERNAL_WEBHOOK_<P>_SCHEME',
      default: '`hmac-sha256`',
      description: "how the provider signs: `hmac-sha256` (hex HMAC of the body, GitHub's), `stripe`, `slack`, `shopify` or `standard-webhooks` (Svix)",
    },
    {
      variable: 'EXTERNAL_WEBHOOK_<P>_SIGNATURE_HEADER',
      default: '`x-hub-signature-256`',
      description: '`hmac-sha256` only: the header carrying the signature (also `_SIGNATURE_PREFIX`, default `sha256=`, before the hex digest)',
    },
    {
      variable: 'EXTERNAL_WEBHOOK_<P>_DELIVERY_HEADER',
      default: 'none (`x-github-delivery` for `github`)',
      description: "`hmac-sha256` only: the header carrying the provider's delivery id",
    },
    {
      variable: 'EXTERNAL_WEBHOOK_<P>_TOLERANCE_SECONDS',
      default: '`300`',
      description: '`stripe`, `slack`, `standard-webhooks`: a signed timestamp further from now (1 to 3600) is refused as a replay (401)',
    },
  ],
  settings: (values: Environment, found: PatternSettings) => ({
    events: {
      concurrency: values.EVENTS_CONCURRENCY,
      triggerConcurrency: values.EVENTS_TRIGGER_CONCURRENCY,
      leaseMarginSeconds: values.EVENTS_LEASE_MARGIN_SECONDS,
      pollIntervalMs: values.EVENTS_POLL_INTERVAL_MS,
      retrySecondMs: values.EVENTS_RETRY_SECOND_MS,
      cleanupAfterHours: values.EVENTS_CLEANUP_AFTER_HOURS,
      cleanupIntervalSeconds: values.EVENTS_CLEANUP_INTERVAL_SECONDS,
      cronTimeZone: values.EVENTS_CRON_TIME_ZONE,
      cronAhead: values.EVENTS_CRON_AHEAD,
      missedToleranceSeconds: values.EVENTS_MISSED_TOLERANCE_SECONDS,
      /** EXTERNAL_WEBHOOK_<PROVIDER>_*: the providers whose signed webhooks are received. */
      externalProviders: found.externalProviders,
      externalDedupWindowHours: values.EXTERNAL_WEBHOOK_DEDUP_WINDOW_HOURS,
    },
  }),
} satisfies Area;
