/**
 * Every PostgreSQL advisory lock Plinth takes, by name: the one list, so that no two mechanisms
 * pick the same number. A key is a bigint (`pg_advisory_lock(key)`), except the recurring tasks',
 * which use the two-integer form (`pg_advisory_lock(namespace, id)`): PostgreSQL keeps the two
 * forms apart, so they cannot collide with the bigint keys.
 */
export const LOCK_KEYS = {
  /** Schema changes at start-up (migrations, pg-boss's tables): one process at a time. */
  migrations: 7_313_850_201,
  /** Database backups and restores of the admin dashboard: one at a time, across instances. */
  databaseBackups: 7_313_850_401,
  /** Metadata changes (`POST /v1/metadata`): two `replace_metadata` calls never interleave. */
  metadata: 7_346_101,
  /** Live queries' change triggers: instances arming the same table at once create one trigger. */
  liveQueryTriggers: 7_346_102,
  /** The newsletter's issues: this plus the issue number, one send of an issue number at a time. */
  newsletterIssueBase: 7_313_850_301_000_000,
  /**
   * Recurring tasks (platform/recurring.ts): the namespace of the two-integer form; the second
   * integer is the task's `recurring_tasks.id`. Held for the whole run on its scheduler's own
   * connection, so a process that dies releases it with its connection.
   */
  recurringTasks: 7_313_850,
} as const;
