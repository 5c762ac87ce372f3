import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { Command } from 'commander';
import pino from 'pino';
import { PasswordHasher } from '../common/passwords';
import { loadConfig, type Config } from '../config';
import { environmentWithEnvFile, settingsFileOf, writeEnvSettings } from '../config/env-file';
import { pendingMigrations } from '../db/data-source';
import { resetAdminLogins } from '../modules/admin/admin-sessions.service';
import { createLogger } from '../platform/logger';
import { withDatabase } from './database';
import { registerAdminOpsCommands } from './admin-ops';

/** The shortest admin password `plinth admin password` takes. */
const MIN_PASSWORD_LENGTH = 12;
/** A temporary password: 18 random bytes, 24 base64url characters. */
const TEMPORARY_PASSWORD_BYTES = 18;
/** How long `status` waits for the dashboard to answer. */
const STATUS_TIMEOUT_MS = 2_000;

/** Validates `values` with the start-up rules (together with the environment and the file), then writes them to the settings file. */
function writeSettings(file: string, values: Record<string, string>): Config {
  const config = loadConfig({ ...environmentWithEnvFile(process.env, file), ...values });
  writeEnvSettings(values, file);
  return config;
}

/**
 * Reads a password: without echo from a terminal (asked twice), or the first line of standard
 * input when it is not one (a script's pipe).
 */
async function readPassword(): Promise<string> {
  const input = process.stdin;
  if (!input.isTTY) {
    let text = '';
    for await (const chunk of input) text += String(chunk);
    return text.split(/\r?\n/)[0];
  }
  const ask = (question: string) =>
    new Promise<string>((resolve, reject) => {
      process.stderr.write(question);
      input.setRawMode(true);
      input.resume();
      let typed = '';
      const onData = (chunk: Buffer) => {
        for (const character of chunk.toString('utf8')) {
          if (character === '\u0003') {
            finish();
            reject(new Error('cancelled'));
            return;
          }
          if (character === '\r' || character === '\n') {
            finish();
            resolve(typed);
            return;
          }
          // Backspace or delete.
          if (character === '\u007f' || character === '\b') typed = typed.slice(0, -1);
          else typed += character;
        }
      };
      const finish = () => {
        input.off('data', onData);
        input.setRawMode(false);
        input.pause();
        process.stderr.write('\n');
      };
      input.on('data', onData);
    });
  const password = await ask('New admin password: ');
  if ((await ask('Again: ')) !== password) throw new Error('the two passwords differ; nothing was changed');
  return password;
}

function passwordLength(value: string): string {
  if (value.length < MIN_PASSWORD_LENGTH) throw new Error(`the admin password must be at least ${MIN_PASSWORD_LENGTH} characters; nothing was changed`);
  return value;
}

/** Opens `url` in the desktop's browser when there is one; false when there is none to open. */
function openBrowser(url: string): boolean {
  const opener = process.platform === 'darwin' ? 'open' : process.platform === 'win32' ? 'explorer' : 'xdg-open';
  if (process.platform === 'linux' && !process.env.DISPLAY && !process.env.WAYLAND_DISPLAY) return false;
  const child = spawn(opener, [url], { detached: true, stdio: 'ignore' });
  child.on('error', () => undefined);
  child.unref();
  return true;
}

/** `plinth admin`: the dashboard's settings in the settings file, its logins, its address. */
export function adminCommand(configuration: () => Config): Command {
  const admin = new Command('admin').description('the admin dashboard (PLATFORM_ADMIN_*): turn it on or off, set its password, see where it is');
  const settingsFile = () => settingsFileOf(process.env);

  admin
    .command('enable')
    .description('turn the dashboard on in the settings file; without a password yet, set a temporary one and print it once')
    .action(async () => {
      const file = settingsFile();
      const current = configuration();
      const values: Record<string, string> = { PLATFORM_ADMIN_ENABLED: 'true' };
      let temporary: string | undefined;
      if (!current.admin.passwordHash) {
        temporary = randomBytes(TEMPORARY_PASSWORD_BYTES).toString('base64url');
        values.PLATFORM_ADMIN_PASSWORD = await new PasswordHasher(current.auth.passwordHash).hash(temporary);
      }
      const config = writeSettings(file, values);
      process.stdout.write(`the admin dashboard is enabled in ${file}; it serves ${config.admin.url} from the next start\n`);
      if (temporary) {
        process.stdout.write(`user: ${config.admin.user}\ntemporary password: ${temporary}\n`);
        process.stdout.write('it is shown only now (the settings file keeps its hash): change it with `plinth admin password`\n');
      }
    });

  admin
    .command('disable')
    .description('turn the dashboard off in the settings file (from the next start)')
    .action(() => {
      const file = settingsFile();
      writeSettings(file, { PLATFORM_ADMIN_ENABLED: 'false' });
      process.stdout.write(`the admin dashboard is disabled in ${file} from the next start\n`);
    });

  admin
    .command('status')
    .description('whether the dashboard is on, where, with which user, and whether it answers now')
    .option('--json', 'print JSON')
    .action(async (options: { json?: boolean }) => {
      const config = configuration();
      const url = config.admin.url;
      let answering = false;
      if (config.admin.enabled) {
        // The health route answers 401 without a session: a dashboard is listening there.
        const response = await fetch(`${url}/api/health`, { signal: AbortSignal.timeout(STATUS_TIMEOUT_MS) }).catch(() => undefined);
        answering = response?.status === 401 || response?.status === 200;
      }
      const status = {
        enabled: config.admin.enabled,
        url,
        user: config.admin.user,
        passwordSet: config.admin.passwordHash !== undefined,
        totp: config.admin.totpSecret !== undefined,
        settingsFile: settingsFile(),
        answering,
      };
      if (options.json) {
        process.stdout.write(`${JSON.stringify(status)}\n`);
        return;
      }
      process.stdout.write(
        [
          `enabled: ${status.enabled ? 'yes' : 'no (plinth admin enable)'}`,
          `url: ${url}`,
          `user: ${status.user}`,
          `password: ${status.passwordSet ? 'set' : 'not set (plinth admin password)'}`,
          `totp: ${status.totp ? 'on' : 'off'}`,
          `settings file: ${status.settingsFile}`,
          `answering: ${answering ? 'yes' : 'no'}`,
          '',
        ].join('\n'),
      );
    });

  admin
    .command('password [password]')
    .description(`set the admin password (at least ${MIN_PASSWORD_LENGTH} characters; asked without echo when not given); only its argon2id hash is stored`)
    .action(async (given: string | undefined) => {
      const password = passwordLength(given ?? (await readPassword()));
      const config = configuration();
      const file = settingsFile();
      writeSettings(file, { PLATFORM_ADMIN_PASSWORD: await new PasswordHasher(config.auth.passwordHash).hash(password) });
      process.stdout.write(`the admin password's hash is written to ${file}; a running server takes it at its next start\n`);
    });

  admin
    .command('reset')
    .description('end every admin session and lift the lock-out after failed logins (in the database)')
    .action(async () => {
      const config = configuration();
      const logger = createLogger({ ...config, logLevel: 'warn' }, pino.destination(2));
      const { sessions } = await withDatabase(config, logger, async (dataSource) => {
        if (await pendingMigrations(dataSource)) throw new Error('the database has pending migrations: run "plinth migrate" (or start the server) first');
        return resetAdminLogins(dataSource);
      });
      process.stdout.write(`ended ${sessions} admin session(s); logins are no longer locked out\n`);
    });

  admin
    .command('open')
    .description("print the dashboard's address, and open it in a browser where there is one")
    .option('--no-browser', 'only print the address')
    .action((options: { browser: boolean }) => {
      const config = configuration();
      const url = config.admin.url;
      process.stdout.write(`${url}\n`);
      if (!config.admin.enabled) process.stderr.write('the dashboard is disabled: turn it on with `plinth admin enable`\n');
      else if (options.browser && !openBrowser(url)) process.stderr.write('no browser to open here: open the address above\n');
    });

  registerAdminOpsCommands(admin, configuration, { file: settingsFile, write: writeSettings });
  return admin;
}
