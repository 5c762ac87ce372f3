import { Command, InvalidArgumentError, Option } from 'commander';
import pino from 'pino';
import { loadConfig, type Config } from '../config';
import { developmentEncryptionKey, withDevelopmentSecrets } from '../config/dev-secrets';
import { environmentWithEnvFile, writeEnvSettings } from '../config/env-file';
import { OAUTH_PROVIDER_NAMES, OAUTH_PROVIDERS, type OAuthProviderName } from '../config/oauth-providers';
import { withMigrationLock } from '../db/data-source';
import { createLogger } from '../platform/logger';
import { createAuthServices, type AuthServices } from '../modules/auth/auth.services';
import type { AdministeredUser } from '../modules/auth/user-administration.service';
import { JobQueue } from '../platform/job-queue';
import { createMailer } from '../platform/mail/mailer';
import { createOutboundHttp } from '../platform/outbound-http';
import { createRateLimits } from '../platform/rate-limits';
import { withDatabase } from './database';
import { table } from './table';

/**
 * Runs `use` with the auth services on the configured database (DATABASE_URL or the embedded
 * one), whether or not a server runs on it. With `mail`, the mail queue is opened too: a mail
 * is queued like the server's, and the server's workers (or the next start) deliver it.
 */
async function withAuth<T>(config: Config, use: (services: AuthServices) => Promise<T>, options: { mail?: boolean } = {}): Promise<T> {
  // Standard output is the command's answer; logs go to standard error.
  const logger = createLogger({ ...config, logLevel: 'warn' }, pino.destination(2));
  const settings = withDevelopmentSecrets(config, (line) => process.stderr.write(`${line}\n`));
  return withDatabase(settings, logger, async (dataSource, endpoint) => {
    const jobs = new JobQueue({ dataSource, url: endpoint.url, config: settings.jobs, logger, supervise: false, shutdown: new AbortController().signal });
    const mail = createMailer({ config: settings, logger, jobs });
    const http = createOutboundHttp(settings.outboundHttp);
    try {
      if (options.mail) {
        await jobs.start();
        await withMigrationLock(dataSource, () => jobs.declare(mail.jobs));
      }
      const rateLimits = createRateLimits(settings, dataSource, logger);
      return await use(createAuthServices({ config: settings, dataSource, http, mailer: mail.mailer, logger, rateLimits }));
    } finally {
      mail.close();
      await http.close();
      if (options.mail) await jobs.stop();
    }
  });
}

function usersTable(users: AdministeredUser[]): string {
  return table([
    ['ID', 'EMAIL', 'NAME', 'DEFAULT ROLE', 'ROLES', 'VERIFIED', 'STATE', 'CREATED'],
    ...users.map((user) => [
      user.id,
      user.email ?? '(anonymous)',
      user.displayName,
      user.defaultRole,
      user.roles.join(','),
      user.emailVerified ? 'yes' : 'no',
      user.state,
      user.createdAt,
    ]),
  ]);
}

function print(value: unknown, json: boolean | undefined, text: () => string): void {
  process.stdout.write(`${json ? JSON.stringify(value, null, 2) : text()}\n`);
}

const describeUser = (user: AdministeredUser) => `${user.email ?? 'anonymous user'} (${user.id}) is ${user.state}`;

/** `plinth auth ...`: the operator commands of spec 2 §3 and §4.1. */
export function authCommand(configuration: () => Config): Command {
  const auth = new Command('auth').description('manage the accounts of the authentication service and its mail settings');
  const user = auth.command('user').description('list, inspect, disable, enable and delete accounts; reset passwords; manage roles');
  const run = <T>(use: (services: AuthServices) => Promise<T>, options?: { mail?: boolean }) => withAuth(configuration(), use, options);

  user
    .command('list')
    .description('list the accounts, oldest first')
    .option('-r, --role <role>', 'only the accounts that have this role')
    .option('--json', 'print JSON')
    .action(async (options: { role?: string; json?: boolean }) => {
      const users = await run((services) => services.admin.list(options.role));
      print(users, options.json, () => usersTable(users));
    });

  user
    .command('get <email>')
    .description('show one account')
    .option('--json', 'print JSON')
    .action(async (email: string, options: { json?: boolean }) => {
      const found = await run((services) => services.admin.get(email));
      print(found, options.json, () => usersTable([found]));
    });

  for (const [name, description] of [
    ['disable', 'block sign-in and end every session (the account stays)'],
    ['enable', 'allow sign-in again'],
    ['delete', 'soft-delete: the account stays, sign-in is blocked, every session ends'],
  ] as const) {
    user
      .command(`${name} <email>`)
      .description(description)
      .option('--json', 'print JSON')
      .action(async (email: string, options: { json?: boolean }) => {
        const changed = await run((services) => services.admin[name](email));
        print(changed, options.json, () => describeUser(changed));
      });
  }

  user
    .command('password-reset <email>')
    .description('mail the account a password-reset link (template reset-password), through the mail queue')
    .action(async (email: string) => {
      await run(
        async (services) => {
          const found = await services.admin.get(email);
          if (found.state !== 'active') throw new Error(`${found.email} is ${found.state}: no reset link is sent`);
          await services.account.sendPasswordReset(email);
        },
        { mail: true },
      );
      process.stdout.write(`a password-reset link was queued for ${email}\n`);
    });

  const role = user.command('role').description("grant, withdraw and list an account's roles");
  for (const [name, description] of [
    ['add', 'grant a role'],
    ['remove', 'withdraw a role (not the default one)'],
  ] as const) {
    role
      .command(`${name} <email>`)
      .description(description)
      .requiredOption('-r, --role <role>', 'the role')
      .option('--json', 'print JSON')
      .action(async (email: string, options: { role: string; json?: boolean }) => {
        const changed = await run((services) =>
          name === 'add' ? services.admin.addRole(email, options.role) : services.admin.removeRole(email, options.role),
        );
        print(changed, options.json, () => `${changed.email}: ${changed.roles.join(', ')} (default ${changed.defaultRole})`);
      });
  }
  role
    .command('list <email>')
    .description("list the account's roles")
    .option('--json', 'print JSON')
    .action(async (email: string, options: { json?: boolean }) => {
      const found = await run((services) => services.admin.get(email));
      const roles = { defaultRole: found.defaultRole, roles: found.roles };
      print(roles, options.json, () => table([['ROLE', 'DEFAULT'], ...found.roles.map((name) => [name, name === found.defaultRole ? 'yes' : ''])]));
    });

  auth
    .command('email')
    .description('mail settings of the authentication service')
    .command('configure')
    .description('write the SMTP settings to the settings file (.env in the working folder); the server reads them at start')
    .addOption(new Option('--provider <provider>', 'the mail provider').choices(['smtp']).makeOptionMandatory())
    .requiredOption('--host <host>', 'SMTP server')
    .requiredOption('--port <port>', 'SMTP port', portNumber)
    .option('--user <user>', 'SMTP user (with --password)')
    .option('--password <password>', 'SMTP password (with --user)')
    .addOption(new Option('--secure <mode>', 'starttls, tls or none').choices(['starttls', 'tls', 'none']))
    .option('--from <address>', 'sender address (AUTH_EMAIL_FROM)')
    .option('--file <file>', 'the settings file', '.env')
    .action((options: { host: string; port: string; user?: string; password?: string; secure?: string; from?: string; file: string }) => {
      const values: Record<string, string> = { SMTP_HOST: options.host, SMTP_PORT: options.port };
      if (options.user !== undefined) values.SMTP_USER = options.user;
      if (options.password !== undefined) values.SMTP_PASSWORD = options.password;
      if (options.secure !== undefined) values.SMTP_SECURE = options.secure;
      if (options.from !== undefined) values.AUTH_EMAIL_FROM = options.from;
      // The same validation as start-up, before anything is written.
      loadConfig({ ...environmentWithEnvFile(process.env, options.file), ...values });
      writeEnvSettings(values, options.file);
      process.stdout.write(`mail settings written to ${options.file}: ${Object.keys(values).join(', ')}\n`);
    });

  auth
    .command('provider')
    .description('external identity providers of the authentication service')
    .command('enable <provider>')
    .description(`turn sign-in with a provider on in the settings file (.env in the working folder): ${OAUTH_PROVIDER_NAMES.join(', ')}`)
    .option('--client-id <id>', 'the client id (CLIENT_ID)')
    .option('--client-secret <secret>', 'the client secret (CLIENT_SECRET)')
    .option('--consumer-key <key>', 'twitter: the consumer key (CONSUMER_KEY)')
    .option('--consumer-secret <secret>', 'twitter: the consumer secret (CONSUMER_SECRET)')
    .option('--key-id <id>', 'apple: the key id (KEY_ID)')
    .option('--private-key <pem>', 'apple: the private key (PRIVATE_KEY)')
    .option('--team-id <id>', 'apple: the team id (TEAM_ID)')
    .option('--default-connection <id>', 'workos: the default connection (DEFAULT_CONNECTION)')
    .option('--file <file>', 'the settings file', '.env')
    .action((name: string, options: Record<string, string | undefined> & { file: string }) => {
      const provider = name.toLowerCase();
      if (!(provider in OAUTH_PROVIDERS)) throw new InvalidArgumentError(`unknown provider ${name}: one of ${OAUTH_PROVIDER_NAMES.join(', ')}`);
      const prefix = `AUTH_PROVIDER_${provider.toUpperCase()}`;
      const values: Record<string, string> = { [`${prefix}_ENABLED`]: 'true' };
      for (const suffix of OAUTH_PROVIDERS[provider as OAuthProviderName]) {
        // CLIENT_ID is given as --client-id (commander's clientId).
        const option = suffix.toLowerCase().replace(/_([a-z])/g, (_match, letter: string) => letter.toUpperCase());
        if (options[option] !== undefined) values[`${prefix}_${suffix}`] = options[option];
      }
      // The same validation as start-up (a missing credential is named), before anything is written.
      loadConfig({ ...environmentWithEnvFile(process.env, options.file), ...values });
      writeEnvSettings(values, options.file);
      process.stdout.write(`${provider} sign-in enabled in ${options.file}: ${Object.keys(values).join(', ')}\n`);
    });

  auth
    .command('mfa')
    .description('second factors of the authentication service')
    .command('enable')
    .description('turn a second factor on in the settings file (.env in the working folder); the server reads it at start')
    .addOption(new Option('--type <type>', 'the second factor').choices(['totp']).makeOptionMandatory())
    .option('--issuer <name>', 'the name authenticator apps show (AUTH_MFA_TOTP_ISSUER)')
    .option('--file <file>', 'the settings file', '.env')
    .action((options: { type: 'totp'; issuer?: string; file: string }) => {
      const environment = environmentWithEnvFile(process.env, options.file);
      const values: Record<string, string> = { AUTH_MFA_TOTP_ENABLED: 'true' };
      if (options.issuer !== undefined) values.AUTH_MFA_TOTP_ISSUER = options.issuer;
      const config = loadConfig({ ...environment, ...values, NODE_ENV: 'development' });
      // TOTP secrets are encrypted under AUTH_ENCRYPTION_KEY, which production requires: the
      // development key (if the data folder has one, secrets enrolled with it keep working) or a new one.
      const generatedKey = config.auth.mfa.encryptionKey === undefined;
      if (generatedKey) values.AUTH_ENCRYPTION_KEY = developmentEncryptionKey(config.database.dataDir);
      // The same validation as start-up, before anything is written.
      loadConfig({ ...environment, ...values });
      writeEnvSettings(values, options.file);
      const note = generatedKey ? ' (AUTH_ENCRYPTION_KEY was generated: keep it, or enrolled authenticators stop working)' : '';
      process.stdout.write(`TOTP enabled in ${options.file}: ${Object.keys(values).join(', ')}${note}\n`);
    });

  return auth;
}

function portNumber(value: string): string {
  if (!/^\d{1,5}$/.test(value) || Number(value) < 1 || Number(value) > 65535) throw new InvalidArgumentError('must be a port number (1-65535)');
  return value;
}
