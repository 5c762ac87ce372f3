import { sha256 } from '../../common/sha256';

/** A stack frame as grouping sees it (oldest first, the frame that raised last, as Sentry orders them). */
export interface GroupingFrame {
  filename: string | null;
  module: string | null;
  function: string | null;
  inApp: boolean;
}

export interface GroupingException {
  type: string | null;
  value: string | null;
  frames: GroupingFrame[];
}

export interface GroupingInput {
  /** The event's own `fingerprint`, when it gave one. */
  fingerprint: string[] | null;
  exceptions: GroupingException[];
  /** The message's template when the SDK sent one (logentry.message), else its text. */
  message: string | null;
}

/**
 * The variable parts of a message, replaced before grouping, in Sentry's order (most specific
 * first, so an e-mail's digits do not become <int>).
 */
const PARAMETERS: [RegExp, string][] = [
  [/\b[a-z][a-z0-9+.-]*:\/\/[^\s'"<>]+/gi, '<url>'],
  [/\b[\w.+-]+@[\w-]+(?:\.[\w-]+)+\b/g, '<email>'],
  [/\b[0-9a-f]{8}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{12}\b/gi, '<uuid>'],
  [/\b\d{4}-\d{2}-\d{2}(?:[T ]\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?:Z|[+-]\d{2}:?\d{2})?)?\b/g, '<date>'],
  [/\b(?:\d{1,3}\.){3}\d{1,3}\b/g, '<ip>'],
  [/\b0x[0-9a-f]+\b/gi, '<hex>'],
  [/\b(?=[0-9a-f]*\d)(?=[0-9a-f]*[a-f])[0-9a-f]{8,}\b/gi, '<hex>'],
  [/-?\b\d+(?:\.\d+)?\b/g, '<int>'],
];

export function parameterize(text: string): string {
  let result = text;
  for (const [pattern, placeholder] of PARAMETERS) result = result.replace(pattern, placeholder);
  return result;
}

/** `{{ default }}` in a custom fingerprint stands for what grouping would have used. */
const DEFAULT_PLACEHOLDER = /^\{\{\s*default\s*\}\}$/;

/**
 * File names lose what changes between deployments but not between code paths: scheme and host
 * of a URL, query and fragment, and cache-busting hashes (`app.3f2a91c0.js`).
 */
export function normalizeFilename(filename: string): string {
  return filename
    .replace(/\\/g, '/')
    .replace(/^[a-z][a-z0-9+.-]*:\/\/[^/]*/i, '')
    .replace(/[?#].*$/, '')
    .replace(/([./-])[0-9a-f]{7,}(?=[./-])/gi, '$1<hash>');
}

/** Function names lose decorations that vary for one function (`async `, `new `, ` [as alias]`). */
function normalizeFunction(name: string): string {
  return name
    .replace(/^(?:async|new)\s+/, '')
    .replace(/\s*\[as [^\]]+\]$/, '')
    .trim();
}

/**
 * The components an event's default grouping uses, as Sentry does: the in-app frames of its
 * exceptions' stack traces (module, else the normalised file name, and function; never line
 * numbers); without any, each exception's type and parameterised value; else the message with
 * its variable parts replaced.
 */
export function defaultComponents(input: GroupingInput): string[] {
  const framed: string[] = [];
  for (const exception of input.exceptions) {
    const inApp = exception.frames.filter((frame) => frame.inApp);
    const parts = inApp
      .map((frame) => {
        const where = frame.module ?? (frame.filename ? normalizeFilename(frame.filename) : '');
        const what = frame.function ? normalizeFunction(frame.function) : '';
        return where || what ? `frame:${where}|${what}` : '';
      })
      .filter(Boolean);
    if (parts.length > 0) framed.push(`type:${exception.type ?? ''}`, ...parts);
  }
  if (framed.length > 0) return ['stack', ...framed];
  const typed = input.exceptions.flatMap((exception) =>
    exception.type || exception.value ? [`exception:${exception.type ?? ''}|${parameterize(exception.value ?? '')}`] : [],
  );
  if (typed.length > 0) return ['exception', ...typed];
  return ['message', parameterize(input.message ?? '')];
}

/** The 16-byte fingerprint of an event: its own `fingerprint` (with `{{ default }}` expanded), else the default grouping. */
export function fingerprintOf(input: GroupingInput): Buffer {
  const components = input.fingerprint
    ? ['custom', ...input.fingerprint.flatMap((part) => (DEFAULT_PLACEHOLDER.test(part) ? defaultComponents(input) : [part]))]
    : defaultComponents(input);
  return sha256(JSON.stringify(components)).subarray(0, 16);
}
