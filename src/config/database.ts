import path from 'node:path';
import { z } from 'zod';
import type { Area } from './area';
import type { Environment } from './environment';
import { integer, nonEmpty } from './validators';

export const databaseVariables = {
  DATABASE_URL: z
    .url({ protocol: /^postgres(ql)?$/, error: 'must be a postgres:// or postgresql:// URL' })
    .optional()
    .meta({ description: '`postgres://` URL of an existing PostgreSQL', unset: 'the embedded PostgreSQL' }),
  DATABASE_POOL_SIZE: integer(1, 1000).default(10).describe('database connections each process keeps'),
  PLINTH_DATA_DIR: nonEmpty
    .default('.data')
    .describe('the folder of the embedded PostgreSQL, and of what development keeps (generated secrets, mail as .eml files, local storage)'),
  PLINTH_EMBEDDED_PG_PORT: integer(1, 65535).default(5433).describe('the port of the embedded PostgreSQL'),
};

export const database = {
  name: 'database',
  title: 'Database',
  variables: databaseVariables,
  settings: (values: Environment) => ({
    database: {
      /** Unset: the embedded PostgreSQL under `dataDir` is used. */
      url: values.DATABASE_URL,
      poolSize: values.DATABASE_POOL_SIZE,
      dataDir: path.resolve(values.PLINTH_DATA_DIR),
      embeddedPort: values.PLINTH_EMBEDDED_PG_PORT,
    },
  }),
} satisfies Area;
