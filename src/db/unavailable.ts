/** SQLSTATEs of a lost or refused connection: class 08, shutdowns, too many connections. */
const UNAVAILABLE_STATES = new Set(['57P01', '57P02', '57P03', '53300']);
const SOCKET_CODES = new Set(['ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'EPIPE', 'EHOSTUNREACH', 'ENOTFOUND']);
/** node-postgres' own messages for a dead connection or an exhausted pool wait (they carry no code). */
const DRIVER_MESSAGES = [
  'Connection terminated',
  'timeout exceeded when trying to connect',
  'Client has encountered a connection error and is not queryable',
  'Cannot use a pool after calling end on the pool',
];

/**
 * Whether an error means the database cannot be reached or used right now (so the request may
 * succeed if retried later), as opposed to a fault in the request or in our code.
 */
export function isDatabaseUnavailable(error: unknown): boolean {
  // TypeORM wraps the driver's error (QueryFailedError.driverError); follow causes a few levels.
  for (let current = error, depth = 0; current && typeof current === 'object' && depth < 4; depth += 1) {
    const { code, severity, message } = current as { code?: unknown; severity?: unknown; message?: unknown };
    if (typeof code === 'string' && (code.startsWith('08') || UNAVAILABLE_STATES.has(code) || SOCKET_CODES.has(code))) return true;
    // FATAL: PostgreSQL ended the session (at connect, or under the query).
    if (severity === 'FATAL' || severity === 'PANIC') return true;
    if (typeof message === 'string' && DRIVER_MESSAGES.some((text) => message.includes(text))) return true;
    const next = current as { driverError?: unknown; cause?: unknown };
    current = next.driverError ?? next.cause;
  }
  return false;
}
