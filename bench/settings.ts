/** A whole number from the environment variable `name`, at least 1, or `fallback` when unset. */
export function positiveInteger(name: string, fallback: number): number {
  const text = process.env[name];
  if (text === undefined || text === '') return fallback;
  const value = Number(text);
  if (!Number.isInteger(value) || value < 1) throw new Error(`${name} must be a positive whole number (got "${text}")`);
  return value;
}

/** A comma list of names from the environment variable `name`, each one of `known`, or `fallback` when unset. */
export function nameList<T extends string>(name: string, known: readonly T[], fallback: readonly T[]): T[] {
  const text = process.env[name];
  if (text === undefined || text.trim() === '') return [...fallback];
  const names = text.split(',').map((item) => item.trim());
  const unknown = names.filter((item) => !(known as readonly string[]).includes(item));
  if (unknown.length > 0) throw new Error(`${name}: unknown name(s) ${unknown.join(', ')}; use ${known.join(', ')}`);
  return names as T[];
}
