import pino, { type DestinationStream, type Logger } from 'pino';
import type { Config } from '../config';

/**
 * The process logger. No secret may reach a log line: request lines carry the path without its
 * query string (a GET's variables may hold anything), and logged database errors lose the
 * statement's parameters and PostgreSQL's `detail` ("Failing row contains (...)"), which hold
 * row values such as password hashes.
 */
export function createLogger(config: Config, destination?: DestinationStream): Logger {
  return pino(
    {
      level: config.logLevel,
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
}

/** LOG_FORMAT: `auto` is pretty for a person at a terminal in development, JSON for machines. */
function prettyLogs(config: Config): boolean {
  if (config.logFormat !== 'auto') return config.logFormat === 'pretty';
  return config.env === 'development' && process.stdout.isTTY === true;
}
