import { invalidEvent } from './event';

/** One item of an envelope: its type and its payload's bytes. */
export interface EnvelopeItem {
  type: string;
  payload: Buffer;
}

export interface Envelope {
  header: Record<string, unknown>;
  items: EnvelopeItem[];
}

const NEWLINE = 0x0a;

function jsonLine(bytes: Buffer, what: string): Record<string, unknown> {
  let value: unknown;
  try {
    value = JSON.parse(bytes.toString('utf8'));
  } catch {
    throw invalidEvent(`invalid envelope: the ${what} is not JSON`);
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) throw invalidEvent(`invalid envelope: the ${what} must be a JSON object`);
  return value as Record<string, unknown>;
}

/**
 * Sentry's envelope format: a JSON header line, then items, each a JSON header line and a
 * payload of `length` bytes (or, without a length, up to the next newline).
 */
export function parseEnvelope(body: Buffer): Envelope {
  let position = body.indexOf(NEWLINE);
  const header = jsonLine(body.subarray(0, position === -1 ? body.length : position), 'envelope header');
  const items: EnvelopeItem[] = [];
  position = position === -1 ? body.length : position + 1;
  while (position < body.length) {
    const headerEnd = body.indexOf(NEWLINE, position);
    const line = body.subarray(position, headerEnd === -1 ? body.length : headerEnd);
    // Trailing newlines and empty lines between items carry nothing.
    if (line.length === 0 || (line.length === 1 && line[0] === 0x0d)) {
      position += line.length + 1;
      continue;
    }
    const itemHeader = jsonLine(line, 'item header');
    if (typeof itemHeader.type !== 'string') throw invalidEvent('invalid envelope: an item header has no type');
    const start = headerEnd === -1 ? body.length : headerEnd + 1;
    let end: number;
    if (itemHeader.length !== undefined && itemHeader.length !== null) {
      const length = itemHeader.length;
      if (typeof length !== 'number' || !Number.isInteger(length) || length < 0 || start + length > body.length) {
        throw invalidEvent('invalid envelope: an item length is not the number of bytes that follow');
      }
      end = start + length;
      position = end < body.length && body[end] === NEWLINE ? end + 1 : end;
    } else {
      const newline = body.indexOf(NEWLINE, start);
      end = newline === -1 ? body.length : newline;
      position = end + 1;
    }
    items.push({ type: itemHeader.type, payload: body.subarray(start, end) });
  }
  return { header, items };
}

/** The item types that hold an error event; every other type (sessions, transactions, client reports, attachments...) is accepted and skipped. */
export const EVENT_ITEM_TYPE = 'event';

/** `Sentry sentry_key=..., sentry_version=7, ...` (X-Sentry-Auth, or Authorization from some SDKs). */
export function keyFromSentryAuth(header: string | undefined): string | undefined {
  if (!header) return undefined;
  const match = /^\s*Sentry\s+(.*)$/is.exec(header);
  if (!match) return undefined;
  for (const pair of match[1].split(',')) {
    const [name, ...value] = pair.split('=');
    if (name.trim() === 'sentry_key') return value.join('=').trim();
  }
  return undefined;
}

/** The public key of a DSN (`scheme://<key>@host/<project>`), and its project id. */
export function keyFromDsn(dsn: unknown): { key: string; projectId: string } | undefined {
  if (typeof dsn !== 'string' || !URL.canParse(dsn)) return undefined;
  const url = new URL(dsn);
  const projectId = url.pathname.split('/').filter(Boolean).pop() ?? '';
  return url.username ? { key: decodeURIComponent(url.username), projectId } : undefined;
}

/** X-Sentry-Rate-Limits for a refused key: `<seconds>:<categories>:<scope>`; no categories means all. */
export function sentryRateLimitsHeader(retryAfterSeconds: number): string {
  return `${retryAfterSeconds}::key`;
}
