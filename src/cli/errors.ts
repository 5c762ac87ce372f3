import { Command } from 'commander';
import pino from 'pino';
import type { Config } from '../config';
import { createLogger } from '../platform/logger';
import { ProjectsService } from '../modules/errortracking/projects.service';
import { withDatabase } from './database';
import { table } from './table';

/** Runs `use` with the projects service on the configured database. */
function withProjects<T>(config: Config, use: (projects: ProjectsService) => Promise<T>): Promise<T> {
  // Standard output is the command's answer; logs go to standard error.
  const logger = createLogger(config, pino.destination(2));
  return withDatabase(config, logger, (dataSource) => use(new ProjectsService(dataSource, config.publicUrl)));
}

function print(value: unknown, json: boolean | undefined, text: () => string): void {
  process.stdout.write(`${json ? JSON.stringify(value, null, 2) : text()}\n`);
  process.exit(0);
}

const KINDS: Record<string, 'dsn' | 'secret'> = { dsn: 'dsn', secret: 'secret' };

/** `plinth errors project create|list` and `plinth errors token create|list|revoke`: the services of the admin GraphQL API. */
export function errorsCommand(configuration: () => Config): Command {
  const errors = new Command('errors').description('error-tracking projects and their DSN and secret keys');

  const project = errors.command('project').description('error-tracking projects');
  project
    .command('create')
    .description('create a project (its id is numeric, as Sentry DSNs need)')
    .requiredOption('--name <name>', 'what people call it')
    .requiredOption('--slug <slug>', 'lower-case letters, digits and hyphens; the status page path')
    .requiredOption('--service <service>', 'the service it tracks')
    .option('--json', 'print the project as JSON')
    .action(async (options: { name: string; slug: string; service: string; json?: boolean }) => {
      const created = await withProjects(configuration(), (projects) => projects.createProject(options));
      print(created, options.json, () => `created project ${created.id} (${created.slug}) for service ${created.service}`);
    });
  project
    .command('list')
    .description('list the projects')
    .option('--json', 'print the projects as JSON')
    .action(async (options: { json?: boolean }) => {
      const found = await withProjects(configuration(), (projects) => projects.listProjects());
      print(found, options.json, () =>
        table([['ID', 'SLUG', 'NAME', 'SERVICE', 'CREATED'], ...found.map((p) => [String(p.id), p.slug, p.name, p.service, p.createdAt.toISOString()])]),
      );
    });

  const token = errors.command('token').description('DSN keys (ingestion) and secret keys (management API)');
  token
    .command('create')
    .description('create a key; its token is printed this once')
    .requiredOption('--project <project>', 'the project’s id or slug')
    .requiredOption('--kind <kind>', 'dsn or secret')
    .requiredOption('--name <name>', 'what the key is for')
    .option('--json', 'print the key as JSON')
    .action(async (options: { project: string; kind: string; name: string; json?: boolean }) => {
      const kind = KINDS[options.kind.toLowerCase()];
      if (!kind) throw new Error('--kind must be dsn or secret');
      const created = await withProjects(configuration(), (projects) => projects.createToken({ ...options, kind }));
      print(created, options.json, () =>
        [`created ${kind} key ${created.id}`, `token: ${created.token}`, ...(created.dsn ? [`dsn:   ${created.dsn}`] : [])].join('\n'),
      );
    });
  token
    .command('list')
    .description('list keys (never their secrets)')
    .option('--project <project>', 'only this project’s (id or slug)')
    .option('--json', 'print the keys as JSON')
    .action(async (options: { project?: string; json?: boolean }) => {
      const found = await withProjects(configuration(), (projects) => projects.listTokens(options.project));
      print(found, options.json, () =>
        table([
          ['ID', 'PROJECT', 'KIND', 'NAME', 'CREATED', 'REVOKED'],
          ...found.map((t) => [t.id, String(t.projectId), t.kind, t.name, t.createdAt.toISOString(), t.revokedAt?.toISOString() ?? '']),
        ]),
      );
    });
  token
    .command('revoke <id>')
    .description('revoke a key at once')
    .action(async (id: string) => {
      const revoked = await withProjects(configuration(), (projects) => projects.revokeToken(id));
      print(revoked, false, () => `revoked ${revoked.kind} key ${revoked.id}`);
    });

  return errors;
}
