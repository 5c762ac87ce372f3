import { randomUUID } from 'node:crypto';
import { Refusal } from '../../common/refusal';
import { fingerprintOf, type GroupingException, type GroupingFrame } from './grouping';

/** Sentry's levels, most severe first; `critical`, `warn` and `log` are aliases SDKs send. */
export const LEVELS = ['fatal', 'error', 'warning', 'info', 'debug'] as const;
export type Level = (typeof LEVELS)[number];
const LEVEL_ALIASES: Record<string, Level> = { critical: 'fatal', warn: 'warning', log: 'info' };

/** A frame as stored with an event and shown as an error's stack trace. */
export interface StoredFrame {
  filename: string | null;
  function: string | null;
  module: string | null;
  lineno: number | null;
  colno: number | null;
  inApp: boolean;
  /** The frame's source context (the spec's `source`, or Sentry's pre/context/post lines). */
  source: string | null;
}

/** An event ready to be written: checked, trimmed, fingerprinted. */
export interface NormalizedEvent {
  eventId: string;
  occurredAt: Date;
  level: Level;
  /** What the error is called: `Type: value` for an exception, else the message. */
  message: string;
  type: string | null;
  environment: string | null;
  release: string | null;
  /** The stack of the exception that was raised last (Sentry lists it last). */
  frames: StoredFrame[];
  fingerprint: Buffer;
}

/** An event or envelope that cannot be stored: 400 INVALID_EVENT with the reason. */
export const invalidEvent = (message: string) => new Refusal('INVALID_EVENT', message, 400);

const MAX_MESSAGE = 8192;
const MAX_SHORT = 256;
const MAX_FRAMES = 250;
const MAX_EXCEPTIONS = 25;
const MAX_SOURCE = 4096;
/** Events stamped further than this in the future are taken as received now (clock drift). */
const MAX_FUTURE_MS = 60_000;
/** And events older than this, as Sentry's ingestion does. */
const MAX_PAST_MS = 30 * 86_400_000;

const UNSTORABLE = /\u0000|[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/g;

/** Text as stored: what PostgreSQL cannot keep becomes U+FFFD, and long text is cut. */
function clean(text: string, max: number): string {
  const storable = text.replace(UNSTORABLE, '\uFFFD');
  return storable.length > max ? storable.slice(0, max) : storable;
}

const isObject = (value: unknown): value is Record<string, unknown> => typeof value === 'object' && value !== null && !Array.isArray(value);

function optionalString(object: Record<string, unknown>, key: string, path: string, max = MAX_SHORT): string | null {
  const value = object[key];
  if (value === undefined || value === null) return null;
  if (typeof value !== 'string') throw invalidEvent(`${path}${key} must be a string`);
  return clean(value, max);
}

function optionalInteger(object: Record<string, unknown>, key: string, path: string): number | null {
  const value = object[key];
  if (value === undefined || value === null) return null;
  if (typeof value !== 'number' || !Number.isInteger(value) || value < 0 || value > 2 ** 31 - 1) {
    throw invalidEvent(`${path}${key} must be a non-negative integer`);
  }
  return value;
}

function eventIdOf(value: unknown): string {
  if (value === undefined || value === null) return randomUUID();
  if (typeof value !== 'string' || !/^[0-9a-f]{32}$|^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i.test(value)) {
    throw invalidEvent('event_id must be 32 hexadecimal digits (a UUID, with or without hyphens)');
  }
  const hex = value.replace(/-/g, '').toLowerCase();
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}

function levelOf(value: unknown): Level {
  if (value === undefined || value === null) return 'error';
  if (typeof value !== 'string') throw invalidEvent('level must be a string');
  const level = value.toLowerCase();
  if ((LEVELS as readonly string[]).includes(level)) return level as Level;
  if (LEVEL_ALIASES[level]) return LEVEL_ALIASES[level];
  throw invalidEvent(`level must be one of ${LEVELS.join(', ')}`);
}

/** ISO 8601 text (the spec's form) or seconds since the epoch (Sentry's SDKs' form). */
function timestampOf(value: unknown, received: number): Date {
  if (value === undefined || value === null) return new Date(received);
  let ms: number;
  if (typeof value === 'number' && Number.isFinite(value)) ms = value * 1000;
  else if (typeof value === 'string' && /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2}(\.\d+)?)?(Z|[+-]\d{2}:?\d{2})?$/.test(value)) ms = Date.parse(value);
  else throw invalidEvent('timestamp must be an ISO 8601 date-time or a number of seconds since the epoch');
  if (!Number.isFinite(ms)) throw invalidEvent('timestamp must be an ISO 8601 date-time or a number of seconds since the epoch');
  if (ms > received + MAX_FUTURE_MS || ms < received - MAX_PAST_MS) return new Date(received);
  return new Date(ms);
}

function frameOf(value: unknown, path: string): StoredFrame {
  if (!isObject(value)) throw invalidEvent(`${path} must be an object`);
  const filename = optionalString(value, 'filename', `${path}.`, 1024) ?? optionalString(value, 'abs_path', `${path}.`, 1024);
  const module = optionalString(value, 'module', `${path}.`, 512);
  const inApp = value.in_app;
  if (inApp !== undefined && inApp !== null && typeof inApp !== 'boolean') throw invalidEvent(`${path}.in_app must be a boolean`);
  // SDKs mark library frames; a frame they did not mark is the application's unless it is a
  // dependency's or the runtime's.
  const ownCode = typeof inApp === 'boolean' ? inApp : !(filename && (/[/\\]node_modules[/\\]/.test(filename) || /^(node|internal)[:/]/.test(filename)));
  // Source lines are kept for the application's own frames only, which is where people read
  // them (Sentry folds library frames away): the others' would be much of what an event stores.
  let source: string | null = null;
  if (ownCode) {
    source = optionalString(value, 'source', `${path}.`, MAX_SOURCE);
    if (source === null && typeof value.context_line === 'string') {
      const lines = (key: string) => (Array.isArray(value[key]) ? (value[key] as unknown[]).filter((line) => typeof line === 'string') : []) as string[];
      source = clean([...lines('pre_context'), value.context_line, ...lines('post_context')].join('\n'), MAX_SOURCE);
    }
  }
  return {
    filename,
    function: optionalString(value, 'function', `${path}.`, 512),
    module,
    lineno: optionalInteger(value, 'lineno', `${path}.`),
    colno: optionalInteger(value, 'colno', `${path}.`),
    inApp: ownCode,
    source,
  };
}

interface ParsedException extends GroupingException {
  storedFrames: StoredFrame[];
}

function exceptionsOf(value: unknown): ParsedException[] {
  if (value === undefined || value === null) return [];
  // Sentry takes `exception: {values: [...]}` and, from older SDKs, a bare list.
  const values = Array.isArray(value) ? value : isObject(value) ? value.values : undefined;
  if (values === undefined || values === null) return [];
  if (!Array.isArray(values)) throw invalidEvent('exception.values must be a list');
  return values.slice(-MAX_EXCEPTIONS).map((item, index) => {
    const path = `exception.values.${index}`;
    if (!isObject(item)) throw invalidEvent(`${path} must be an object`);
    const stacktrace = item.stacktrace;
    let frames: StoredFrame[] = [];
    if (stacktrace !== undefined && stacktrace !== null) {
      if (!isObject(stacktrace)) throw invalidEvent(`${path}.stacktrace must be an object`);
      if (stacktrace.frames !== undefined && stacktrace.frames !== null) {
        if (!Array.isArray(stacktrace.frames)) throw invalidEvent(`${path}.stacktrace.frames must be a list`);
        frames = stacktrace.frames.slice(-MAX_FRAMES).map((frame, at) => frameOf(frame, `${path}.stacktrace.frames.${at}`));
      }
    }
    const grouping: GroupingFrame[] = frames;
    return {
      type: optionalString(item, 'type', `${path}.`),
      value: optionalString(item, 'value', `${path}.`, MAX_MESSAGE),
      frames: grouping,
      storedFrames: frames,
    };
  });
}

/** The message's text and, when the SDK sent one, its template (`logentry.message` with `%s` parameters). */
function messageOf(event: Record<string, unknown>): { text: string | null; template: string | null } {
  for (const key of ['logentry', 'message']) {
    const value = event[key];
    if (value === undefined || value === null) continue;
    if (typeof value === 'string') return { text: clean(value, MAX_MESSAGE), template: null };
    if (!isObject(value)) throw invalidEvent(`${key} must be a string or an object`);
    const template = optionalString(value, 'message', `${key}.`, MAX_MESSAGE);
    const formatted = optionalString(value, 'formatted', `${key}.`, MAX_MESSAGE);
    if (template !== null || formatted !== null) return { text: formatted ?? template, template };
  }
  return { text: null, template: null };
}

function fingerprintList(value: unknown): string[] | null {
  if (value === undefined || value === null) return null;
  if (!Array.isArray(value) || value.length === 0 || value.length > 50) throw invalidEvent('fingerprint must be a list of 1 to 50 strings');
  return value.map((part) => {
    if (typeof part === 'string') return clean(part, 512);
    if (typeof part === 'number' || typeof part === 'boolean') return String(part);
    throw invalidEvent('fingerprint must be a list of strings');
  });
}

/**
 * Checks an event (spec 2 §2.5, and Sentry's event payload) and reduces it to what is stored.
 * Refuses an invalid event (invalidEvent) with the reason; text PostgreSQL cannot store is replaced, not refused.
 */
export function normalizeEvent(body: unknown, received = Date.now()): NormalizedEvent {
  if (!isObject(body)) throw invalidEvent('the event must be a JSON object');
  const exceptions = exceptionsOf(body.exception);
  const message = messageOf(body);
  const raised = exceptions[exceptions.length - 1];
  if (!raised && message.text === null) throw invalidEvent('the event must have a message or an exception');
  const title = raised
    ? raised.type && raised.value
      ? `${raised.type}: ${raised.value}`
      : (raised.type ?? raised.value ?? message.text ?? '<unknown error>')
    : message.text!;
  return {
    eventId: eventIdOf(body.event_id),
    occurredAt: timestampOf(body.timestamp, received),
    level: levelOf(body.level),
    message: clean(title, MAX_MESSAGE),
    type: raised?.type ?? null,
    environment: optionalString(body, 'environment', ''),
    release: optionalString(body, 'release', ''),
    frames: raised?.storedFrames ?? [],
    fingerprint: fingerprintOf({
      fingerprint: fingerprintList(body.fingerprint),
      exceptions,
      message: message.template ?? message.text,
    }),
  };
}
