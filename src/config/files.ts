import path from 'node:path';
import { z } from 'zod';
import type { Area } from './area';
import type { Environment } from './environment';
import { integer, nonEmpty } from './validators';

/** What uploadAndProcessFile accepts by default: images it can process, data it can parse, and inert documents. */
export const DEFAULT_FILE_TYPES = ['image/png', 'image/jpeg', 'image/gif', 'image/webp', 'text/csv', 'application/json', 'text/plain', 'application/pdf'];
/** Room in an upload's request for everything but the file: the query, the other fields, JSON. */
const UPLOAD_ENVELOPE_BYTES = 64 * 1024;
const MEDIA_TYPE = /^[a-z0-9][a-z0-9!#$&^_.+-]{0,63}\/[a-z0-9][a-z0-9!#$&^_.+-]{0,63}$/;

// Files and reports (uploadAndProcessFile, generateReport, the storage behind them).
export const filesVariables = {
  FILES_MAX_BYTES: integer(1, 1024 * 1024 * 1024)
    .default(10 * 1024 * 1024)
    .describe('largest file uploadAndProcessFile takes (decoded); its requests may be that much in base64 plus 64 KiB'),
  FILES_ALLOWED_TYPES: z
    .string()
    .default(DEFAULT_FILE_TYPES.join(','))
    .transform((value) => [
      ...new Set(
        value
          .split(',')
          .map((type) => type.trim().toLowerCase())
          .filter(Boolean),
      ),
    ])
    .refine((types) => types.length > 0 && types.every((type) => MEDIA_TYPE.test(type)), {
      error: 'must be a comma-separated list of media types such as image/png,text/csv',
    })
    .describe('media types an upload may declare, comma-separated'),
  FILES_URL_TTL_SECONDS: integer(10, 7 * 86_400)
    .default(3600)
    .describe('how long a signed link to a file works'),
  REPORTS_URL_TTL_SECONDS: integer(10, 7 * 86_400)
    .default(3600)
    .describe('how long a signed link to a report result works'),
  STORAGE_DRIVER: z
    .enum(['postgres', 'local'], { error: 'must be postgres or local' })
    .default('postgres')
    .describe('where files and reports are kept: `postgres` (in the database: every instance serves them) or `local` (`STORAGE_LOCAL_DIR`, one instance)'),
  STORAGE_LOCAL_DIR: nonEmpty.optional().meta({ description: 'the folder of the `local` driver', unset: '`<PLINTH_DATA_DIR>/storage`' }),
  STORAGE_URL_SIGNING_SECRET: z.string().min(32, { error: 'must be at least 32 characters' }).optional().meta({
    description: 'key of signed links (32+ characters); required with `NODE_ENV=production`; changing it voids every link',
    unset: 'outside production: derived from the admin secret',
  }),
};

export const files = {
  name: 'files',
  title: 'Files, reports and storage',
  variables: filesVariables,
  problems: (values: Environment) =>
    values.NODE_ENV === 'production' && !values.STORAGE_URL_SIGNING_SECRET
      ? ['STORAGE_URL_SIGNING_SECRET is required when NODE_ENV=production (the key of signed file and report links)']
      : [],
  settings: (values: Environment) => ({
    /** uploadAndProcessFile and generateReport. */
    files: {
      maxBytes: values.FILES_MAX_BYTES,
      /**
       * The body limit of a request carrying an upload (the GraphQL mutation or its action route):
       * the file in base64 plus room for the rest of the request. Every other request keeps
       * GQL_GRAPHQL_BODY_LIMIT.
       */
      uploadBodyLimit: 4 * Math.ceil(values.FILES_MAX_BYTES / 3) + UPLOAD_ENVELOPE_BYTES,
      /** Lower-case. */
      allowedTypes: values.FILES_ALLOWED_TYPES,
      urlTtlSeconds: values.FILES_URL_TTL_SECONDS,
      reportUrlTtlSeconds: values.REPORTS_URL_TTL_SECONDS,
    },
    storage: {
      driver: values.STORAGE_DRIVER,
      localDir: path.resolve(values.STORAGE_LOCAL_DIR ?? path.join(values.PLINTH_DATA_DIR, 'storage')),
      /** Unset outside production: one is derived from the admin secret. */
      signingSecret: values.STORAGE_URL_SIGNING_SECRET,
    },
  }),
} satisfies Area;
