import pino, { type DestinationStream, type Logger } from 'pino';
import type { Config } from '../config';
import { keepRecentLogs, RecentLogs } from './recent-logs';

/**
 * The process logger (with the admin dashboard on, its recent lines kept: recentLogsOf). No secret may reach a log line: request lines carry the path without its
 * query string (a GET's variables may hold anything), and logged database errors lose the
 * statement's parameters and PostgreSQL's `detail` ("Failing row contains (...)"), which hold
 * row values such as password hashes.
 */
export function createLogger(config: Config, destination?: DestinationStream): Logger {
  // The admin dashboard streams recent lines (after redaction: they are the lines as written).
  const recent = config.admin.enabled ? new RecentLogs(config.admin.logLines) : undefined;
  const logger = pino(
    {
      level: config.logLevel,
      ...(recent
        ? {
            hooks: {
              streamWrite: (line: string) => {
                recent.add(line);
                return line;
              },
            },
          }
        : {}),
      serializers: {
        req: (request: { method: string; url: string; id: string; ip?: string }) => ({
          method: request.method,
          path: request.url.split('?')[0],
          remoteAddress: request.ip,
        }),
      },
      redact: {
        paths: ['err.parameters', 'err.detail', 'err.driverError.parameters', 'err.driverError.detail', 'req.headers', 'headers.authorization', 'password'],
        censor: '[redacted]',
      },
    },
    // pino-pretty (megabytes resident) is loaded only where logs are pretty, never by a server logging JSON.
    destination ?? (prettyLogs(config) ? (require('pino-pretty') as typeof import('pino-pretty'))({ colorize: process.stdout.isTTY, sync: true }) : undefined),
  );
  if (recent) keepRecentLogs(logger, recent);
  return logger;
}

/** LOG_FORMAT: `auto` is pretty for a person at a terminal in development, JSON for machines. */
function prettyLogs(config: Config): boolean {
  if (config.logFormat !== 'auto') return config.logFormat === 'pretty';
  return config.env === 'development' && process.stdout.isTTY === true;
}
