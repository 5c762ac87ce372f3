/**
 * Every PostgreSQL advisory lock Plinth takes, by name: the one list, so that no two mechanisms
 * pick the same number. Each key is a bigint (`pg_advisory_lock(key)`).
 */
export const LOCK_KEYS = {
  /** Schema changes at start-up (migrations, pg-boss's tables): one process at a time. */
  migrations: 7_313_850_201,
  /** Metadata changes (`POST /v1/metadata`): two `replace_metadata` calls never interleave. */
  metadata: 7_346_101,
  /** Error-tracking maintenance: one process at a time runs a round. */
  errorTrackingMaintenance: 7_313_850_212,
  /** The clean-up of old events: one process at a time. */
  eventsCleanup: 7_346_102,
  /** The newsletter's issues: this plus the issue number, one send of an issue number at a time. */
  newsletterIssueBase: 7_313_850_301_000_000,
} as const;

