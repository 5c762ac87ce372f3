/**
 * Text PostgreSQL cannot store (NUL) or that is not Unicode (a UTF-16 surrogate without its
 * pair, which JSON and GraphQL escapes can still produce).
 */
const UNSTORABLE_TEXT = /\u0000|[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

export const UNSTORABLE_TEXT_MESSAGE = 'contains characters that cannot be stored (NUL or invalid Unicode)';

export function isUnstorableText(value: string): boolean {
  return UNSTORABLE_TEXT.test(value);
}

/** Most paths reported for one input; a huge list of bad strings needs no more than this. */
const MAX_PATHS = 20;

/**
 * Dotted paths (`users.3.email`) of every string in a JSON-like value that cannot be stored;
 * object keys are checked too. Empty when all text is fine.
 */
export function unstorableTextPaths(value: unknown, prefix = ''): string[] {
  const found: string[] = [];
  const visit = (node: unknown, path: string) => {
    if (found.length >= MAX_PATHS) return;
    if (typeof node === 'string') {
      if (isUnstorableText(node)) found.push(path);
    } else if (Array.isArray(node)) {
      node.forEach((item, index) => visit(item, join(path, String(index))));
    } else if (node !== null && typeof node === 'object') {
      for (const [key, item] of Object.entries(node)) {
        if (isUnstorableText(key)) found.push(join(path, key.replace(UNSTORABLE_TEXT, '\uFFFD')));
        else visit(item, join(path, key));
      }
    }
  };
  visit(value, prefix);
  return found;
}

function join(path: string, key: string): string {
  return path ? `${path}.${key}` : key;
}
