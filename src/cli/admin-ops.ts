import { Command, InvalidArgumentError } from 'commander';
import pino from 'pino';
import { acceptedTotpStep, generateTotpSecret, totpUri } from '../common/totp';
import type { Config } from '../config';
import { pendingMigrations } from '../db/data-source';
import { ADMIN_SESSION_COOKIE, openCommandSession } from '../modules/admin/admin-sessions.service';
import { createLogger } from '../platform/logger';
import { withDatabase } from './database';

const LEVELS = ['trace', 'debug', 'info', 'warn', 'error', 'fatal'] as const;
const LEVEL_NAMES: Record<number, string> = { 10: 'TRACE', 20: 'DEBUG', 30: 'INFO', 40: 'WARN', 50: 'ERROR', 60: 'FATAL' };
/** A log line's fields printed in their own place, or not at all (the process's). */
const SHOWN_APART = new Set(['level', 'time', 'pid', 'hostname', 'msg']);
/** How long `logs` waits for the dashboard to answer before saying it does not. */
const CONNECT_TIMEOUT_MS = 5_000;
/** A TOTP secret of 20 random bytes (32 base32 characters), as authenticator apps expect. */
const TOTP_SECRET_BYTES = 20;

/** A command's refusal: the message is printed after `plinth: ` and the exit code is 1. */
class CommandError extends Error {}

/** One pino line as a person reads it: time, level, message, then the other fields as name=value. */
export function formatLogLine(text: string): string {
  let line: Record<string, unknown>;
  try {
    line = JSON.parse(text) as Record<string, unknown>;
  } catch {
    return text;
  }
  const time = typeof line.time === 'number' ? new Date(line.time).toISOString() : '';
  const level = (LEVEL_NAMES[line.level as number] ?? String(line.level)).padEnd(5);
  const fields = Object.entries(line)
    .filter(([name]) => !SHOWN_APART.has(name))
    .map(([name, value]) => `${name}=${typeof value === 'string' ? value : JSON.stringify(value)}`)
    .join(' ');
  return `${time} ${level} ${String(line.msg ?? '')}${fields ? ` ${fields}` : ''}`;
}

/**
 * Reads one line: asked on standard error from a terminal, or the next line of standard input
 * when it is a pipe (a script's), without waiting for its end.
 */
async function readLine(question: string): Promise<string> {
  const input = process.stdin;
  if (input.isTTY) process.stderr.write(question);
  let text = '';
  for await (const chunk of input) {
    text += String(chunk);
    const end = text.search(/\r?\n/);
    if (end >= 0) {
      input.pause();
      return text.slice(0, end);
    }
  }
  return text;
}

function level(value: string): string {
  if (!(LEVELS as readonly string[]).includes(value)) throw new InvalidArgumentError(`must be one of ${LEVELS.join(', ')}`);
  return value;
}

function count(value: string): number {
  if (!/^\d{1,5}$/.test(value)) throw new InvalidArgumentError('must be a number from 0 to 10000');
  return Math.min(Number(value), 10_000);
}

/**
 * Streams the dashboard's log lines (GET /api/logs/{service}) with a session made for the command
 * (openCommandSession), printing each; without `follow`, stops after the recent lines.
 */
async function printLogs(config: Config, options: { service: string; level: string; tail: number; follow?: boolean; json?: boolean }): Promise<void> {
  if (!config.admin.enabled)
    throw new CommandError('the admin dashboard is disabled (PLATFORM_ADMIN_ENABLED): turn it on with `plinth admin enable` and restart the server');
  const logger = createLogger({ ...config, logLevel: 'warn' }, pino.destination(2));
  await withDatabase(config, logger, async (dataSource) => {
    if (await pendingMigrations(dataSource)) throw new CommandError('the database has pending migrations: start the server (or run "plinth migrate") first');
    const session = await openCommandSession(dataSource, config.admin.user);
    const stop = new AbortController();
    const interrupt = () => stop.abort();
    process.once('SIGINT', interrupt);
    process.once('SIGTERM', interrupt);
    try {
      const url = `${config.admin.url}/api/logs/${encodeURIComponent(options.service)}?level=${options.level}&tail=${options.tail}`;
      const connecting = AbortSignal.timeout(CONNECT_TIMEOUT_MS);
      const response = await fetch(url, {
        headers: { cookie: `${ADMIN_SESSION_COOKIE}=${session.token}`, accept: 'text/event-stream' },
        signal: AbortSignal.any([stop.signal, connecting]),
      }).catch((error: unknown) => {
        if (stop.signal.aborted) return undefined;
        throw new CommandError(
          `the dashboard does not answer at ${config.admin.url} (${(error as Error).message}): is the server running with the dashboard on?`,
        );
      });
      if (!response) return;
      if (response.status !== 200) {
        const body = (await response.json().catch(() => ({}))) as { message?: string };
        throw new CommandError(`the dashboard refused the log stream (${response.status}): ${body.message ?? response.statusText}`);
      }
      await readStream(response, stop, options);
    } finally {
      process.off('SIGINT', interrupt);
      process.off('SIGTERM', interrupt);
      await session.end().catch(() => undefined);
    }
  });
}

/** Prints the `log` events of a Server-Sent Events answer until it ends, `stop` aborts, or (without follow) the recent lines are out. */
async function readStream(response: Response, stop: AbortController, options: { follow?: boolean; json?: boolean }): Promise<void> {
  const decoder = new TextDecoder();
  let pending = '';
  try {
    for await (const chunk of response.body as unknown as AsyncIterable<Uint8Array>) {
      pending += decoder.decode(chunk, { stream: true });
      let end: number;
      while ((end = pending.indexOf('\n\n')) >= 0) {
        const event = pending.slice(0, end);
        pending = pending.slice(end + 2);
        // The server says when the recent lines are out and new ones follow.
        if (event.startsWith(': following') && !options.follow) {
          stop.abort();
          return;
        }
        const data = event
          .split('\n')
          .filter((line) => line.startsWith('data: '))
          .map((line) => line.slice('data: '.length))
          .join('\n');
        if (data) process.stdout.write(`${options.json ? data : formatLogLine(data)}\n`);
      }
    }
  } catch (error) {
    if (!stop.signal.aborted) throw error;
  }
}

/** Adds `plinth admin logs` and `plinth admin totp enable|disable` to the admin command. */
export function registerAdminOpsCommands(
  admin: Command,
  configuration: () => Config,
  settings: { file: () => string; write: (file: string, values: Record<string, string>) => Config },
): void {
  const fail = (error: unknown) => {
    if (!(error instanceof CommandError)) throw error;
    process.stderr.write(`plinth: ${error.message}\n`);
    process.exitCode = 1;
  };

  admin
    .command('logs')
    .description("print the dashboard's recent log lines (and, with --follow, new ones as they come); the command makes its own admin session in the database")
    .option('-s, --service <service>', 'a part (http, auth, events, scheduler, mailer, jobs.<queue>, ...) or all', 'all')
    .option('-l, --level <level>', `the lowest level printed (${LEVELS.join(', ')})`, level, 'info')
    .option('-n, --tail <lines>', 'how many recent lines come first', count, 200)
    .option('-f, --follow', 'keep printing new lines until interrupted')
    .option('--json', 'print the JSON lines as logged')
    .action(async (options: { service: string; level: string; tail: number; follow?: boolean; json?: boolean }) => {
      if (!/^[a-z][a-z0-9._-]{0,80}$/.test(options.service)) throw new InvalidArgumentError(`--service ${options.service}: not a service name`);
      await printLogs(configuration(), options).catch(fail);
    });

  const totp = new Command('totp').description('a second factor for the admin login: a TOTP secret for an authenticator app');
  totp
    .command('enable')
    .description('make a new TOTP secret, show it (otpauth:// URI and QR code), and write it to the settings file once a code from the app matches')
    .action(async () => {
      const config = configuration();
      const secret = generateTotpSecret(TOTP_SECRET_BYTES);
      const uri = totpUri(secret, `${config.projectName} admin`, config.admin.user);
      const qr = await (require('qrcode') as typeof import('qrcode')).toString(uri, { type: 'terminal', small: true });
      process.stdout.write(`${qr}\nscan the QR code with an authenticator app, or add this URI (or the secret) by hand:\n${uri}\nsecret: ${secret}\n`);
      if (config.admin.totpSecret) process.stdout.write('this replaces the current TOTP secret once the code matches\n');
      const code = (await readLine('the 6-digit code the app shows: ')).trim();
      if ((await acceptedTotpStep(secret, code, undefined)) === undefined) {
        return fail(new CommandError('the code does not match the new secret: nothing was written (run the command again)'));
      }
      const file = settings.file();
      settings.write(file, { PLATFORM_ADMIN_TOTP_SECRET: secret });
      process.stdout.write(`TOTP is on in ${file}: from the next start, the admin login also asks for the app's code\n`);
      if (process.env.PLATFORM_ADMIN_TOTP_SECRET)
        process.stderr.write('note: PLATFORM_ADMIN_TOTP_SECRET is set in the environment, which wins over the settings file\n');
    });
  totp
    .command('disable')
    .description('remove the TOTP secret from the settings file: the admin login asks for the password only (from the next start)')
    .action(() => {
      const file = settings.file();
      settings.write(file, { PLATFORM_ADMIN_TOTP_SECRET: '' });
      process.stdout.write(`TOTP is off in ${file} from the next start\n`);
      if (process.env.PLATFORM_ADMIN_TOTP_SECRET)
        process.stderr.write('note: PLATFORM_ADMIN_TOTP_SECRET is set in the environment, which wins over the settings file\n');
    });
  admin.addCommand(totp);
}
