import net from 'node:net';
import path from 'node:path';
import { z } from 'zod';
import type { Area } from './area';
import { settingsFileOf } from './env-file';
import type { Environment, PatternSettings } from './environment';
import { boolean, integer, nonEmpty } from './validators';

/**
 * An argon2id hash as `@node-rs/argon2` writes it (`$argon2id$v=19$m=…,t=…,p=…$salt$hash`): the
 * only form PLATFORM_ADMIN_PASSWORD takes, so the settings file never holds the password itself.
 */
export const ARGON2ID_HASH = /^\$argon2id\$v=19\$m=\d+,t=\d+,p=\d+\$[A-Za-z0-9+/]+\$[A-Za-z0-9+/]+$/;

// The admin dashboard and its REST API (spec 3 §2.5, §4.3, §5.4), on a port of its own.
export const adminVariables = {
  PLATFORM_ADMIN_ENABLED: boolean.default(false).describe('serve the admin dashboard and its API on `PLATFORM_ADMIN_PORT` (`plinth admin enable`)'),
  PLATFORM_ADMIN_PORT: integer(0, 65535).default(3021).describe('the port of the admin dashboard (0: any free port)'),
  PLATFORM_ADMIN_HOST: nonEmpty
    .refine((value) => net.isIP(value) !== 0 || /^[A-Za-z0-9](?:[A-Za-z0-9.-]{0,251}[A-Za-z0-9])?$/.test(value), {
      error: 'must be an IP address or a host name, such as 127.0.0.1',
    })
    .default('127.0.0.1')
    .describe('the address the admin dashboard listens on (loopback unless a proxy must reach it)'),
  PLATFORM_ADMIN_USER: z
    .string()
    .trim()
    .regex(/^[A-Za-z0-9._@-]{1,64}$/, { error: 'must be 1 to 64 letters, digits, ".", "_", "@" or "-"' })
    .default('admin')
    .describe('the user name of the admin dashboard'),
  PLATFORM_ADMIN_PASSWORD: z
    .string()
    .trim()
    .regex(ARGON2ID_HASH, { error: 'must be an argon2id hash, never the password itself: set it with `plinth admin password`' })
    .optional()
    .meta({
      description: 'the argon2id hash of the admin password (`plinth admin password`, or `plinth admin enable` makes a temporary one)',
      unset: 'no login possible',
    }),
  PLATFORM_ADMIN_TOTP_SECRET: z
    .string()
    .trim()
    .regex(/^[A-Z2-7]{16,128}$/, { error: 'must be a base32 secret of 16 to 128 characters (A-Z, 2-7), as authenticator apps take' })
    .optional()
    .meta({ description: 'a TOTP secret: set, a login also needs the 6-digit code of an authenticator app holding it', unset: 'no second factor' }),
  PLATFORM_ADMIN_SESSION_IDLE_MINUTES: integer(1, 24 * 60)
    .default(30)
    .describe('an admin session ends after this many minutes without a request'),
  PLATFORM_ADMIN_LOGIN_MAX_FAILURES: integer(1, 1000)
    .default(5)
    .describe('failed admin logins in a row (each waiting twice as long as the last) before logins are locked out'),
  PLATFORM_ADMIN_LOGIN_DELAY_MS: integer(0, 60_000)
    .default(1000)
    .describe('after a failed admin login the next one waits this long, twice as long after each further failure'),
  PLATFORM_ADMIN_LOGIN_LOCKOUT_MINUTES: integer(1, 24 * 60)
    .default(15)
    .describe('how long admin logins stay locked out after `PLATFORM_ADMIN_LOGIN_MAX_FAILURES` failures'),
  PLATFORM_ADMIN_LOG_LINES: integer(100, 100_000).default(2000).describe('recent log lines kept in memory for the admin log stream'),
  PLATFORM_ADMIN_BROADCAST_TIMEOUT_MS: integer(100, 60_000)
    .default(3000)
    .describe('how long a service action on all instances (`?scope=all`) waits for the instances to acknowledge it'),
  PLATFORM_ADMIN_SERVICE_CHECK_TIMEOUT_MS: integer(100, 30_000)
    .default(1000)
    .describe("how long the dashboard waits for a custom service's `GET /healthz` when this process does not run it"),
  PLATFORM_ADMIN_BACKUPS_DIR: nonEmpty.optional().meta({
    description: 'the folder of the database backups the admin dashboard takes and restores (pg_dump custom format)',
    unset: '`<PLINTH_DATA_DIR>/backups`',
  }),
  PLATFORM_ADMIN_PG_BIN_DIR: nonEmpty
    .refine((value) => path.isAbsolute(value), { error: 'must be an absolute path' })
    .optional()
    .meta({
      description: 'the folder holding the `pg_dump`, `pg_restore` and `psql` the dashboard runs for backups (pg_dump’s major version at least the server’s)',
      unset: 'the embedded PostgreSQL package’s when it has them, then `PATH`, then `/usr/lib/postgresql/<version>/bin`',
    }),
  PLATFORM_ADMIN_BACKUP_TIMEOUT_SECONDS: integer(10, 24 * 3600)
    .default(3600)
    .describe('a backup or restore of the database (pg_dump, pg_restore) is stopped after this long'),
  PLATFORM_ADMIN_METRICS_INTERVAL_SECONDS: integer(1, 300)
    .default(10)
    .describe(
      "how often each instance samples the dashboard's charts (request and error rates, event backlog, job queue depth); the last hour is kept in memory",
    ),
  PLATFORM_PROJECT_PATH: nonEmpty
    .refine((value) => path.isAbsolute(value), { error: 'must be an absolute path' })
    .optional()
    .meta({ description: 'the project folder: its `.env` is the settings file the admin API and `plinth admin` write', unset: 'the working folder' }),
};

export const admin = {
  name: 'admin',
  title: 'Admin dashboard',
  variables: adminVariables,
  settings: (values: Environment, _found: PatternSettings, env: Record<string, string>) => {
    const projectPath = path.resolve(values.PLATFORM_PROJECT_PATH ?? '.');
    // A browser on this machine reaches a dashboard listening on every address at the loopback one.
    const host = ['0.0.0.0', '::'].includes(values.PLATFORM_ADMIN_HOST) ? '127.0.0.1' : values.PLATFORM_ADMIN_HOST;
    return {
      admin: {
        enabled: values.PLATFORM_ADMIN_ENABLED,
        port: values.PLATFORM_ADMIN_PORT,
        host: values.PLATFORM_ADMIN_HOST,
        /** The dashboard's address (for `plinth admin open` and the API reference). */
        url: `http://${host.includes(':') ? `[${host}]` : host}:${values.PLATFORM_ADMIN_PORT}`,
        user: values.PLATFORM_ADMIN_USER,
        /** The argon2id hash; unset: nobody can log in. */
        passwordHash: values.PLATFORM_ADMIN_PASSWORD,
        totpSecret: values.PLATFORM_ADMIN_TOTP_SECRET,
        sessionIdleMinutes: values.PLATFORM_ADMIN_SESSION_IDLE_MINUTES,
        loginMaxFailures: values.PLATFORM_ADMIN_LOGIN_MAX_FAILURES,
        loginDelayMs: values.PLATFORM_ADMIN_LOGIN_DELAY_MS,
        loginLockoutMinutes: values.PLATFORM_ADMIN_LOGIN_LOCKOUT_MINUTES,
        logLines: values.PLATFORM_ADMIN_LOG_LINES,
        broadcastTimeoutMs: values.PLATFORM_ADMIN_BROADCAST_TIMEOUT_MS,
        serviceCheckTimeoutMs: values.PLATFORM_ADMIN_SERVICE_CHECK_TIMEOUT_MS,
        /** Where database backups are written and read (relative to the working folder). */
        backupsDir: path.resolve(values.PLATFORM_ADMIN_BACKUPS_DIR ?? path.join(values.PLINTH_DATA_DIR, 'backups')),
        /** The folder of pg_dump and pg_restore; undefined: looked for (admin-database.service.ts). */
        pgBinDir: values.PLATFORM_ADMIN_PG_BIN_DIR,
        backupTimeoutMs: values.PLATFORM_ADMIN_BACKUP_TIMEOUT_SECONDS * 1000,
        metricsIntervalSeconds: values.PLATFORM_ADMIN_METRICS_INTERVAL_SECONDS,
        projectPath,
        /** The settings file the dashboard and `plinth admin` read and write. */
        settingsFile: settingsFileOf({ PLATFORM_PROJECT_PATH: projectPath }),
        /** The environment the configuration was read from (the admin API shows and checks settings against it). */
        environment: env,
      },
    };
  },
} satisfies Area;
