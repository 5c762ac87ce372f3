import type { Area } from './area';
import type { Environment } from './environment';
import { integer } from './validators';

// Error tracking (spec 2 §2.5, §8).
export const errortrackingVariables = {
  ERRORS_INGEST_RATE_LIMIT_PER_MINUTE: integer(1, 100_000_000).default(10_000).describe('error events one DSN key may send per minute'),
  ERRORS_API_RATE_LIMIT_PER_MINUTE: integer(1, 1_000_000)
    .default(100)
    .describe('management calls (REST and `/api/graphql`) one secret key may make per minute'),
  ERRORS_MAX_EVENT_BYTES: integer(1024, 100 * 1024 * 1024)
    .default(1024 * 1024)
    .describe('largest ingestion body, as sent and once decompressed'),
  ERRORS_INGEST_MAX_BATCH: integer(1, 10_000).default(500).describe('most events written in one statement'),
  ERRORS_EVENT_RETENTION_DAYS: integer(1, 3650).default(90).describe('age at which events are removed (errors keep their counts)'),
  ERRORS_MAINTENANCE_INTERVAL_SECONDS: integer(1, 86_400)
    .default(60)
    .describe('how often alerts (SLO burn rates, error spikes) are checked and old events removed'),
  ERRORS_SPIKE_THRESHOLD: integer(1, 100_000_000).default(500).describe('events of one project within the spike window that open an error-spike incident'),
  ERRORS_SPIKE_WINDOW_MINUTES: integer(1, 1440).default(5).describe('the window of `ERRORS_SPIKE_THRESHOLD`'),
  ERRORS_STATUS_PAGE_CACHE_SECONDS: integer(0, 3600).default(5).describe('how long a status page answer is reused'),
};

export const errortracking = {
  name: 'errortracking',
  title: 'Error tracking',
  variables: errortrackingVariables,
  settings: (values: Environment) => ({
    errors: {
      ingestPerMinute: values.ERRORS_INGEST_RATE_LIMIT_PER_MINUTE,
      apiPerMinute: values.ERRORS_API_RATE_LIMIT_PER_MINUTE,
      maxEventBytes: values.ERRORS_MAX_EVENT_BYTES,
      ingestMaxBatch: values.ERRORS_INGEST_MAX_BATCH,
      eventRetentionDays: values.ERRORS_EVENT_RETENTION_DAYS,
      maintenanceIntervalSeconds: values.ERRORS_MAINTENANCE_INTERVAL_SECONDS,
      spikeThreshold: values.ERRORS_SPIKE_THRESHOLD,
      spikeWindowMinutes: values.ERRORS_SPIKE_WINDOW_MINUTES,
      statusPageCacheSeconds: values.ERRORS_STATUS_PAGE_CACHE_SECONDS,
    },
  }),
} satisfies Area;
