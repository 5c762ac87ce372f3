import type { DocumentNode } from 'graphql';

/**
 * What a parsed document takes on the heap per character of its source (tokens, nodes and
 * locations), as measured (docs/decisions.md, "Memory under hostile input"): about four times the
 * JSON length Apollo counts by default.
 */
const HEAP_BYTES_PER_SOURCE_CHARACTER = 70;

export function documentHeapBytes(document: DocumentNode): number {
  return Math.max(1, (document.loc?.end ?? 0) * HEAP_BYTES_PER_SOURCE_CHARACTER);
}
