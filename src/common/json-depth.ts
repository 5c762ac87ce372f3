/**
 * Whether a value parsed from JSON nests objects and arrays more than `maxDepth` deep (a scalar is
 * 0 deep, `{}` and `[]` are 1, `{"a":[]}` is 2). It walks with a list of its own rather than the
 * call stack, so any depth is safe to ask about, and stops at the first level past the limit.
 * Anything but plain objects and arrays (a Buffer body, say) counts as a scalar.
 */
export function jsonDeeperThan(value: unknown, maxDepth: number): boolean {
  if (!isContainer(value)) return false;
  const nodes: object[] = [value];
  const depths: number[] = [1];
  while (nodes.length > 0) {
    const node = nodes.pop()!;
    const depth = depths.pop()!;
    if (depth > maxDepth) return true;
    for (const child of Array.isArray(node) ? node : Object.values(node)) {
      if (!isContainer(child)) continue;
      nodes.push(child);
      depths.push(depth + 1);
    }
  }
  return false;
}

function isContainer(value: unknown): value is object {
  if (value === null || typeof value !== 'object') return false;
  if (Array.isArray(value)) return true;
  const prototype = Object.getPrototypeOf(value) as unknown;
  return prototype === Object.prototype || prototype === null;
}
