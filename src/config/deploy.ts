import path from 'node:path';
import type { Area } from './area';
import type { Environment } from './environment';
import { integer, nonEmpty, oneLine } from './validators';

/** The environments the admin API deploys to (POST /api/deploy/{environment}). */
export const DEPLOY_ENVIRONMENTS = ['staging', 'production'] as const;
export type DeployEnvironment = (typeof DEPLOY_ENVIRONMENTS)[number];

const commandOf = (environment: string) =>
  oneLine.optional().meta({
    description: `the command \`POST /api/deploy/${environment}\` runs (with \`/bin/sh -c\`, in \`PLATFORM_PROJECT_PATH\`); the request adds nothing to it`,
    unset: `no ${environment} deployment: the route answers 409 DEPLOY_NOT_CONFIGURED`,
  });

// Deployments and certificates of the admin dashboard (spec 3 §4.3, §5.4).
export const deployVariables = {
  PLATFORM_DEPLOY_STAGING_COMMAND: commandOf('staging'),
  PLATFORM_DEPLOY_PRODUCTION_COMMAND: commandOf('production'),
  PLATFORM_DEPLOY_TIMEOUT_SECONDS: integer(1, 24 * 3600)
    .default(1800)
    .describe('a deployment still running after this many seconds is stopped (SIGTERM, then SIGKILL 10 s later) and recorded as timed out'),
  PLATFORM_TLS_CERT_FILES: nonEmpty
    .transform((value) => value.split(',').map((file) => file.trim()))
    .refine((files) => files.every((file) => file.length > 0), { error: 'must be a comma-separated list of PEM files or folders' })
    .optional()
    .meta({
      description:
        'the PEM certificates the TLS terminator in front of Plinth serves (files, or folders whose `.pem`, `.crt` and `.cer` files are read), shown by `GET /api/certificates`',
      unset: 'TLS not configured',
    }),
};

export const deploy = {
  name: 'deploy',
  title: 'Deployments and certificates',
  variables: deployVariables,
  settings: (values: Environment) => ({
    deploy: {
      commands: {
        staging: values.PLATFORM_DEPLOY_STAGING_COMMAND,
        production: values.PLATFORM_DEPLOY_PRODUCTION_COMMAND,
      } satisfies Record<DeployEnvironment, string | undefined>,
      /** Where the commands run: the project folder. */
      workingDirectory: path.resolve(values.PLATFORM_PROJECT_PATH ?? '.'),
      timeoutMs: values.PLATFORM_DEPLOY_TIMEOUT_SECONDS * 1000,
    },
    /** The certificate files (or folders of them) the dashboard reports on; undefined: no TLS. */
    tlsCertFiles: values.PLATFORM_TLS_CERT_FILES?.map((file) => path.resolve(values.PLATFORM_PROJECT_PATH ?? '.', file)),
  }),
} satisfies Area;
