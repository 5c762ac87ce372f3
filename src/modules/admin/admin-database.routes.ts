import type { FastifyInstance } from 'fastify';
import type { AdminServices } from './admin.services';
import { CHANGE_ERRORS, CSRF_HEADER, error, NO_BODY, SESSION_ERRORS, TAGS } from './admin.schemas';

const BACKUP = {
  type: 'object',
  properties: {
    file: { type: 'string', description: 'Its name in the backups folder (PLATFORM_ADMIN_BACKUPS_DIR)' },
    sizeBytes: { type: 'integer' },
    sha256: { type: ['string', 'null'], description: 'The SHA-256 recorded when it was taken (hex); null for a file not taken here' },
    createdAt: { type: 'string', format: 'date-time' },
    safety: { type: 'boolean', description: 'Taken by a restore just before it changed the database' },
    serverVersion: { type: ['string', 'null'] },
    pgDumpVersion: { type: ['string', 'null'] },
  },
  required: ['file', 'sizeBytes', 'sha256', 'createdAt', 'safety', 'serverVersion', 'pgDumpVersion'],
} as const;

const MIGRATION = {
  type: 'object',
  properties: {
    name: { type: 'string' },
    timestamp: { type: 'integer' },
    status: { type: 'string', enum: ['applied', 'pending'] },
    appliedAt: {
      type: ['string', 'null'],
      format: 'date-time',
      description: 'Recorded for migrations applied since MigrationAppliedAt1797300000000 (or known from commit times with track_commit_timestamp)',
    },
    unknownToThisVersion: { type: 'boolean', description: 'Applied, but not a migration of this version of Plinth' },
  },
  required: ['name', 'timestamp', 'status', 'appliedAt', 'unknownToThisVersion'],
} as const;

const MIGRATIONS = { type: 'array', items: MIGRATION } as const;

const TABLE = {
  type: 'object',
  properties: {
    schema: { type: 'string' },
    name: { type: 'string' },
    kind: { type: 'string', enum: ['table', 'partitioned table', 'view', 'materialized view', 'foreign table'] },
    rowEstimate: { type: ['integer', 'null'], description: "PostgreSQL's estimate; null before the table was first analysed" },
    totalBytes: { type: 'integer' },
    primaryKey: { type: 'array', items: { type: 'string' } },
    columns: {
      type: 'array',
      items: {
        type: 'object',
        properties: { name: { type: 'string' }, type: { type: 'string' }, nullable: { type: 'boolean' }, default: { type: ['string', 'null'] } },
        required: ['name', 'type', 'nullable', 'default'],
      },
    },
    indexes: {
      type: 'array',
      items: {
        type: 'object',
        properties: { name: { type: 'string' }, definition: { type: 'string' }, unique: { type: 'boolean' }, primary: { type: 'boolean' } },
        required: ['name', 'definition', 'unique', 'primary'],
      },
    },
    tracked: { type: 'boolean', description: 'Tracked by the generated GraphQL API' },
  },
  required: ['schema', 'name', 'kind', 'rowEstimate', 'totalBytes', 'primaryKey', 'columns', 'indexes', 'tracked'],
} as const;

const TOOLS_ERROR = error(
  'No pg_dump/pg_restore found (PG_TOOLS_MISSING), or only older than the server (PG_TOOLS_TOO_OLD); or the tool failed (BACKUP_FAILED, RESTORE_FAILED: nothing changed)',
);
const BUSY = error('Another backup or restore is running (BACKUP_BUSY)');

/** The database area of the dashboard (spec 3 §4.3): backups and restores, migrations, the schema. */
export function adminDatabaseRoutes(scope: FastifyInstance, services: AdminServices): void {
  scope.get(
    '/api/database/backups',
    {
      schema: {
        tags: TAGS,
        summary: 'The backups in the backups folder, newest first',
        response: { 200: { type: 'object', properties: { backups: { type: 'array', items: BACKUP } }, required: ['backups'] }, ...SESSION_ERRORS },
      },
    },
    async () => ({ backups: await services.database.backups.list() }),
  );

  scope.post(
    '/api/database/backups',
    {
      schema: {
        tags: TAGS,
        summary: 'Take a backup of the database now',
        description:
          "pg_dump in its custom format into PLATFORM_ADMIN_BACKUPS_DIR, with a manifest beside it (`<file>.json`) recording its size and SHA-256. The embedded PostgreSQL's package's programs serve when it is the database and has them; otherwise the first pg_dump as new as the server on PATH or PLATFORM_ADMIN_PG_BIN_DIR.",
        headers: CSRF_HEADER,
        body: NO_BODY,
        response: { 201: { ...BACKUP, description: 'Taken' }, ...CHANGE_ERRORS, 409: BUSY, 503: TOOLS_ERROR },
      },
    },
    async (_request, reply) => reply.code(201).send(await services.database.backups.create()),
  );

  scope.post<{ Body: { file: string; sha256?: string } }>(
    '/api/database/backups/restore',
    {
      schema: {
        tags: TAGS,
        summary: 'Restore the database from a backup',
        description:
          "Checks the file's SHA-256 against the one recorded when it was taken (and `sha256` when given), takes a safety backup, then " +
          'restores with pg_restore --clean --if-exists in one transaction (a failure changes nothing). The dashboard’s sessions and ' +
          'lock-out state are left as they are. Processes keep what they loaded at start-up: restart them after a restore.',
        headers: CSRF_HEADER,
        body: {
          type: 'object',
          required: ['file'],
          additionalProperties: false,
          properties: {
            file: { type: 'string', maxLength: 300, description: 'The name of a backup, as listed' },
            sha256: { type: 'string', pattern: '^[0-9a-fA-F]{64}$', description: 'The SHA-256 you expect it to have' },
          },
        },
        response: {
          200: {
            type: 'object',
            properties: {
              restored: BACKUP,
              safetyBackup: { ...BACKUP, description: 'Taken just before the restore' },
              durationMs: { type: 'integer' },
              keptTables: { type: 'array', items: { type: 'string' }, description: 'Tables the restore leaves as they were' },
              restartRecommended: { type: 'boolean' },
            },
            required: ['restored', 'safetyBackup', 'durationMs', 'keptTables', 'restartRecommended'],
          },
          400: error('Not the name of a backup (INVALID_BACKUP_NAME: a path, `..`, not ending in .dump), or a bad body'),
          ...CHANGE_ERRORS,
          404: error('No such backup (BACKUP_NOT_FOUND)'),
          409: error(
            'Another backup or restore is running (BACKUP_BUSY); the file does not match its recorded SHA-256 or the one given (BACKUP_CHECKSUM_MISMATCH), or has none (BACKUP_CHECKSUM_UNKNOWN): nothing changed',
          ),
          503: TOOLS_ERROR,
        },
      },
    },
    // The file name is checked by the service (INVALID_BACKUP_NAME), with a more telling answer than a schema pattern's.
    (request) => services.database.backups.restore(request.body.file, request.body.sha256),
  );

  scope.get(
    '/api/database/migrations',
    {
      schema: {
        tags: TAGS,
        summary: "The database's migrations: applied and pending",
        response: { 200: { type: 'object', properties: { migrations: MIGRATIONS }, required: ['migrations'] }, ...SESSION_ERRORS },
      },
    },
    async () => ({ migrations: await services.database.insight.migrations() }),
  );

  scope.post(
    '/api/database/migrations/run',
    {
      schema: {
        tags: TAGS,
        summary: 'Run the pending migrations',
        description: 'Under the lock start-up takes for migrations (one process at a time), each in its own transaction.',
        headers: CSRF_HEADER,
        body: NO_BODY,
        response: {
          200: {
            type: 'object',
            properties: { ran: { type: 'array', items: { type: 'string' }, description: 'The migrations run, in order' }, migrations: MIGRATIONS },
            required: ['ran', 'migrations'],
          },
          ...CHANGE_ERRORS,
        },
      },
    },
    () => services.database.insight.runPending(),
  );

  scope.get(
    '/api/database/schema',
    {
      schema: {
        tags: TAGS,
        summary: "The database's tables and views (every schema but PostgreSQL's own), their columns and indexes, and which are tracked",
        response: { 200: { type: 'object', properties: { tables: { type: 'array', items: TABLE } }, required: ['tables'] }, ...SESSION_ERRORS },
      },
    },
    () => services.database.insight.schema(),
  );
}
