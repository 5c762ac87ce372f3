import { Refusal } from './refusal';

/** A page of a Relay connection as a service answers it: each node with its cursor. */
export interface Page<T> {
  nodes: { node: T; cursor: string }[];
  hasNextPage: boolean;
  endCursor: string | null;
}

/** Opaque cursors: the position in a stable order, encoded so that clients do not build them. */
export function encodeCursor(kind: string, position: string): string {
  return Buffer.from(`${kind}:${position}`, 'utf8').toString('base64url');
}

/** The position an `after` cursor names, or null without one; a cursor no connection gave is refused. */
export function decodeCursor(kind: string, cursor: string | null | undefined, pattern: RegExp): string | null {
  if (cursor === null || cursor === undefined) return null;
  const text = Buffer.from(cursor, 'base64url').toString('utf8');
  const position = text.startsWith(`${kind}:`) ? text.slice(kind.length + 1) : '';
  if (!pattern.test(position) || Buffer.from(text, 'utf8').toString('base64url') !== cursor) {
    throw new Refusal('BAD_USER_INPUT', 'after is not a cursor this connection gave', 400, { field: 'after' });
  }
  return position;
}
