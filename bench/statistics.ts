/** The middle value of `values` (the mean of the two middle ones when their number is even). */
export function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const middle = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1 ? sorted[middle] : (sorted[middle - 1] + sorted[middle]) / 2;
}

/** The index of the value nearest the median: the round whose figures stand for a run of several. */
export function medianIndex(values: readonly number[]): number {
  const middle = median(values);
  let nearest = 0;
  values.forEach((value, index) => {
    if (Math.abs(value - middle) < Math.abs(values[nearest] - middle)) nearest = index;
  });
  return nearest;
}

/** The value below which `fraction` of the sorted samples fall (nearest rank). */
export function percentile(sorted: Float64Array, fraction: number): number {
  if (sorted.length === 0) return Number.NaN;
  return sorted[Math.min(sorted.length - 1, Math.ceil(fraction * sorted.length) - 1)];
}
