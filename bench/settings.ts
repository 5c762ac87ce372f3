/** A whole number from the environment variable `name`, at least 1, or `fallback` when unset. */
export function positiveInteger(name: string, fallback: number): number {
  const text = process.env[name];
  if (text === undefined || text === '') return fallback;
  const value = Number(text);
  if (!Number.isInteger(value) || value < 1) throw new Error(`${name} must be a positive whole number (got "${text}")`);
  return value;
}
