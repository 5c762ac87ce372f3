/**
 * A small deterministic generator (mulberry32) for generated tests, so that a failure names a
 * seed that reproduces it.
 */
export function generator(seed: number) {
  let state = seed;
  const next = () => {
    state = (state + 0x6d2b79f5) | 0;
    let t = Math.imul(state ^ (state >>> 15), 1 | state);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  const pick = <T>(items: readonly T[]): T => items[Math.floor(next() * items.length)];
  const chance = (p: number) => next() < p;
  /** One to `most` distinct items, in a random order. */
  const some = <T>(items: readonly T[], most: number): T[] => {
    const count = 1 + Math.floor(next() * Math.min(most, items.length));
    const left = [...items];
    return Array.from({ length: count }, () => left.splice(Math.floor(next() * left.length), 1)[0]);
  };
  return { pick, chance, some };
}

export type Random = ReturnType<typeof generator>;
